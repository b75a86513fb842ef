import Dispatch
import FoundationEssentials
import Glibc
import PlugindBundle
import PlugindSystem
import PlugindWire

/// The catalog's cache kept on disk in the host's state directory, so that a new process finds
/// unchanged bundles without parsing their manifests or reading their libraries again. It can
/// only make a scan faster, never change what it finds: every stored result is used only when
/// the identities of the bundle's directory, manifest and library still match, and a missing,
/// damaged or foreign file is ignored and replaced by the next save.
struct CatalogStore {
    static let fileName = "catalog.cache"
    private static let magic = Array("PLGDCAT".utf8) + [0]
    /// Bumped whenever the layout of a stored bundle changes. 8: bundles in chunks, each decoded
    /// on its own (a new process decodes them on every processor). 11: function declarations with
    /// pointers, buffers, NULL and errno.
    private static let formatVersion: UInt32 = 12
    /// Bundles per chunk.
    static let defaultChunkSize = 512
    /// A store larger than this is not read: far larger than the store of any catalog of bundles.
    private static let maximumSize = 256 << 20
    /// Names resolved by soname depend on the loader's cache: a new one invalidates everything.
    private static let loaderCachePath = "/etc/ld.so.cache"

    let path: String
    /// The plugind that wrote the store; a store written by another one is not read.
    let writerVersion: HostVersion

    /// Bundles per chunk this store writes (any size is read).
    let chunkSize: Int

    init(directory: String, writerVersion: HostVersion, chunkSize: Int = CatalogStore.defaultChunkSize) {
        path = directory + "/" + Self.fileName
        self.writerVersion = writerVersion
        self.chunkSize = max(1, chunkSize)
    }

    /// The store opened for reading; nil when there is no usable file. Only a regular file this
    /// user owns and nobody else can write is read, and only when it was written by this user:
    /// inspections depend on who looks (a bundle another user may write is refused).
    func open() -> Opened? {
        guard let file = try? FileDescriptor.open(path, [.readOnly, .noFollow]) else { return nil }
        guard let status = FileStatus(descriptor: file), status.isRegularFile, status.owner == effectiveUserID,
            status.mode & 0o022 == 0, status.identity.size <= Self.maximumSize,
            let chunks = readChunkTable(file, size: Int(status.identity.size))
        else {
            file.close()
            return nil
        }
        return Opened(file: file, chunks: chunks)
    }

    /// A store open for reading. Its chunks are read and decoded independently, so that a new
    /// process can spread them over its processors (and do with each what it must while the
    /// next is read). A damaged chunk spoils the whole store: the reader ignores all of it, and
    /// the next save replaces it.
    struct Opened: Sendable {
        let file: FileDescriptor
        /// Byte ranges of the chunks, in the order they were saved.
        let chunks: [Range<Int>]

        /// The bundles of chunk `index` with the paths they were found at; nil when it is damaged.
        func bundles(inChunk index: Int) -> [(foundAt: String, bundle: InspectedBundle)]? {
            let range = chunks[index]
            guard let bytes = try? file.read(count: range.count, at: range.lowerBound), bytes.count == range.count else { return nil }
            return CatalogStore.decodeChunk(bytes)
        }

        func close() {
            file.close()
        }
    }

    /// The byte ranges of the store's chunks, after checking its header; nil when the header is
    /// not this plugind's and this user's, or the chunks do not fill the rest of the file exactly.
    private func readChunkTable(_ file: FileDescriptor, size: Int) -> [Range<Int>]? {
        // The header is small; its chunk table (4 bytes a chunk) is read once its length is known.
        guard let head = try? file.read(count: min(size, 4096), at: 0) else { return nil }
        var reader = PayloadReader(head)
        do throws(WireError) {
            guard try (0..<Self.magic.count).map({ _ throws(WireError) in try reader.readUInt8() }) == Self.magic,
                try reader.readUInt32() == Self.formatVersion,
                try reader.readString() == writerVersion.description,
                try reader.readUInt32() == effectiveUserID,
                try reader.readFileIdentity() == FileStatus(path: Self.loaderCachePath)?.identity
            else { return nil }
            let chunkCount = Int(try reader.readUInt32())
            guard chunkCount <= 1 << 16 else { return nil }
            let tableStart = head.count - reader.remaining
            guard let table = try? file.read(count: 4 * chunkCount, at: tableStart), table.count == 4 * chunkCount else {
                return nil
            }
            var lengths = PayloadReader(table)
            var offset = tableStart + table.count
            var ranges: [Range<Int>] = []
            for _ in 0..<chunkCount {
                let length = Int(try lengths.readUInt32())
                ranges.append(offset..<offset + length)
                offset += length
            }
            return offset == size ? ranges : nil
        } catch {
            return nil
        }
    }

    /// One chunk's bundles with the paths they were found at; nil when it is damaged.
    private static func decodeChunk(_ bytes: [UInt8]) -> [(foundAt: String, bundle: InspectedBundle)]? {
        var reader = PayloadReader(bytes)
        do throws(WireError) {
            let count = try reader.readUInt32()
            var bundles: [(foundAt: String, bundle: InspectedBundle)] = []
            bundles.reserveCapacity(Int(min(count, 1 << 16)))
            for _ in 0..<count {
                let foundAt = try reader.readString()
                let bundle = try reader.readInspectedBundle()
                // Empty: found at its canonical path, the usual case.
                bundles.append((foundAt.isEmpty ? bundle.bundlePath : foundAt, bundle))
            }
            try reader.finish("the catalog store")
            return bundles
        } catch {
            return nil
        }
    }

    /// Replaces the file with `bundles` (each with the path it was found at, in the order a scan
    /// found them), atomically, readable by the owner only. Failures are ignored: the next scan
    /// simply reads bundles in full. Chunks are encoded on every processor, as `load` decodes
    /// them: a first scan of a large root waits for its save.
    func save(_ bundles: [(foundAt: String, bundle: InspectedBundle)]) {
        var writer = PayloadWriter(capacity: 64)
        for byte in Self.magic { writer.write(byte) }
        writer.write(Self.formatVersion)
        writer.write(writerVersion.description)
        writer.write(effectiveUserID)
        writer.write(FileStatus(path: Self.loaderCachePath)?.identity)
        let chunkCount = (bundles.count + chunkSize - 1) / chunkSize
        let encoded = Locked<[Int: [UInt8]]>([:])
        DispatchQueue.concurrentPerform(iterations: chunkCount) { index in
            let slice = bundles[index * chunkSize..<min((index + 1) * chunkSize, bundles.count)]
            var chunk = PayloadWriter(capacity: 640 * slice.count)
            chunk.write(UInt32(slice.count))
            for (foundAt, bundle) in slice {
                chunk.write(foundAt == bundle.bundlePath ? "" : foundAt)
                chunk.write(bundle)
            }
            let bytes = chunk.bytes
            encoded.withLock { $0[index] = bytes }
        }
        let chunks = encoded.withLock { encoded in (0..<chunkCount).map { encoded[$0] ?? [] } }
        writer.write(UInt32(chunks.count))
        for chunk in chunks { writer.write(UInt32(chunk.count)) }
        var file = writer.bytes
        file.reserveCapacity(file.count + chunks.reduce(0) { $0 + $1.count })
        for chunk in chunks { file += chunk }
        let directory = path.deletingLastPathComponent
        try? FileManager.default.createDirectory(
            atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        // A unique temporary file, synced, then renamed over the store: concurrent savers never
        // share a file, and a reader sees the old store or the new one, never a mix.
        try? AtomicFile.replace(path, with: file)
    }
}
