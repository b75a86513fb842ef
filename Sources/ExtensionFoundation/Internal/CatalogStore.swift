import Foundation
import Glibc
import PlugindBundle
import PlugindWire

/// The catalog's cache kept on disk in the host's state directory, so that a new process finds
/// unchanged bundles without parsing their manifests or reading their libraries again. It can
/// only make a scan faster, never change what it finds: every stored result is used only when
/// the identities of the bundle's directory, manifest and library still match, and a missing,
/// damaged or foreign file is ignored and replaced by the next save.
struct CatalogStore {
    static let fileName = "catalog.cache"
    private static let magic = Array("PLGDCAT".utf8) + [0]
    /// Bumped whenever the layout of a stored bundle changes.
    private static let formatVersion: UInt32 = 3
    /// Names resolved by soname depend on the loader's cache: a new one invalidates everything.
    private static let loaderCachePath = "/etc/ld.so.cache"

    let path: String
    let hostVersion: HostVersion

    init(directory: String, hostVersion: HostVersion) {
        path = directory + "/" + Self.fileName
        self.hostVersion = hostVersion
    }

    /// The stored bundles with the paths they were found at; empty when there is no usable file
    /// (a damaged one is ignored as a whole).
    func load() -> [(foundAt: String, bundle: InspectedBundle)] {
        guard let data = FileManager.default.contents(atPath: path) else { return [] }
        var reader = PayloadReader([UInt8](data))
        do throws(WireError) {
            guard try (0..<Self.magic.count).map({ _ throws(WireError) in try reader.readUInt8() }) == Self.magic,
                try reader.readUInt32() == Self.formatVersion,
                try reader.readString() == hostVersion.description,
                try reader.readFileIdentity() == FileStatus(path: Self.loaderCachePath)?.identity
            else { return [] }
            let count = try reader.readUInt32()
            var bundles: [(foundAt: String, bundle: InspectedBundle)] = []
            bundles.reserveCapacity(Int(min(count, 1 << 20)))
            for _ in 0..<count {
                let foundAt = try reader.readString()
                let bundle = try reader.readInspectedBundle()
                // Empty: found at its canonical path, the usual case.
                bundles.append((foundAt.isEmpty ? bundle.bundlePath : foundAt, bundle))
            }
            return bundles
        } catch {
            return []
        }
    }

    /// Replaces the file with `bundles`, atomically, readable by the owner only. Failures are
    /// ignored: the next scan simply reads bundles in full.
    func save(_ bundles: [String: InspectedBundle]) {
        var writer = PayloadWriter(capacity: 256 * bundles.count + 64)
        for byte in Self.magic { writer.write(byte) }
        writer.write(Self.formatVersion)
        writer.write(hostVersion.description)
        writer.write(FileStatus(path: Self.loaderCachePath)?.identity)
        writer.write(UInt32(bundles.count))
        for (foundAt, bundle) in bundles.sorted(by: { $0.key < $1.key }) {
            writer.write(foundAt == bundle.bundlePath ? "" : foundAt)
            writer.write(bundle)
        }
        let directory = (path as NSString).deletingLastPathComponent
        try? FileManager.default.createDirectory(
            atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let temporary = path + ".\(getpid()).tmp"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard descriptor >= 0 else { return }
        let written = writer.bytes.withUnsafeBytes { bytes -> Bool in
            var offset = 0
            while offset < bytes.count {
                let count = write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { return false }
                offset += count
            }
            return true
        }
        close(descriptor)
        if !written || rename(temporary, path) != 0 { unlink(temporary) }
    }
}
