import FoundationEssentials
import Glibc
import PlugindBundle
package import PlugindSystem
package import PlugindWire

/// What scanning found for each library, kept in the state directory: an answer is reused while
/// the file keeps its identity (device, inode, size, times), and when the identity changed but
/// the bytes did not (same SHA-256); a package update that changes the bytes is scanned again.
/// The file is the owner's and plugind's own, but read as untrusted all the same: bounded, and
/// thrown away whole when any part does not decode.
package struct ForeignPluginCache: Sendable {
    package struct Record: Sendable, Equatable {
        package var identity: FileIdentity
        package var digest: String
        package var result: Result<ForeignLibraryDescription, ForeignPluginScanFailure>
    }

    package private(set) var records: [String: Record] = [:]

    static let fileName = "foreign-plugins.cache"
    private static let magic: [UInt8] = Array("PDFP".utf8)
    private static let formatVersion: UInt32 = 1
    /// A cache larger than this is not read (thousands of libraries take a few MiB).
    private static let maximumBytes = 64 << 20

    package init() {}

    package static func path(stateDirectory: String) -> String { stateDirectory + "/" + fileName }

    package static func load(from path: String) -> ForeignPluginCache {
        var cache = ForeignPluginCache()
        guard let status = FileStatus(path: path), status.identity.size <= UInt64(maximumBytes),
            let data = FileManager.default.contents(atPath: path)
        else { return cache }
        var reader = PayloadReader([UInt8](data))
        do {
            for byte in magic where try reader.readUInt8() != byte { return cache }
            guard try reader.readUInt32() == formatVersion else { return cache }
            let count = try reader.readCount()
            for _ in 0..<count {
                let path = try reader.readString()
                guard let identity = try reader.readFileIdentity() else { return ForeignPluginCache() }
                let digest = try reader.readString()
                let result: Result<ForeignLibraryDescription, ForeignPluginScanFailure> =
                    try reader.readBool()
                    ? .success(try ForeignLibraryDescription(try reader.readBytes()))
                    : .failure(ForeignPluginScanFailure(message: try reader.readString()))
                cache.records[path] = Record(identity: identity, digest: digest, result: result)
            }
        } catch {
            return ForeignPluginCache()
        }
        return cache
    }

    package mutating func set(_ path: String, _ record: Record) { records[path] = record }

    /// Keeps only the records of `paths` (libraries that are gone are forgotten).
    package mutating func keep(only paths: Set<String>) {
        records = records.filter { paths.contains($0.key) }
    }

    package func save(to path: String) {
        var writer = PayloadWriter(capacity: 4096)
        for byte in Self.magic { writer.write(byte) }
        writer.write(Self.formatVersion)
        writer.write(UInt32(records.count))
        for (path, record) in records.sorted(by: { $0.key < $1.key }) {
            writer.write(path)
            writer.write(Optional(record.identity))
            writer.write(record.digest)
            switch record.result {
            case .success(let description):
                writer.write(true)
                writer.write(bytes: description.encoded)
            case .failure(let failure):
                writer.write(false)
                writer.write(failure.message)
            }
        }
        try? AtomicFile.replace(path, with: writer.bytes)
    }
}
