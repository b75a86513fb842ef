import Foundation
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
    /// Bumped whenever the layout of a stored bundle changes.
    private static let formatVersion: UInt32 = 7
    /// A store larger than this is not read (10,000 bundles take about 4 MB).
    private static let maximumSize = 256 << 20
    /// Names resolved by soname depend on the loader's cache: a new one invalidates everything.
    private static let loaderCachePath = "/etc/ld.so.cache"

    let path: String
    /// The plugind that wrote the store; a store written by another one is not read.
    let writerVersion: HostVersion

    init(directory: String, writerVersion: HostVersion) {
        path = directory + "/" + Self.fileName
        self.writerVersion = writerVersion
    }

    /// The stored bundles with the paths they were found at; empty when there is no usable file
    /// (a damaged one is ignored as a whole). Only a regular file this user owns and nobody else
    /// can write is read, and only when it was written by this user: inspections depend on who
    /// looks (a bundle another user may write is refused).
    func load() -> [(foundAt: String, bundle: InspectedBundle)] {
        guard let file = try? FileDescriptor.open(path, O_RDONLY | O_NOFOLLOW) else { return [] }
        defer { file.close() }
        var status = stat()
        guard fstat(file.rawValue, &status) == 0, status.st_mode & S_IFMT == S_IFREG, status.st_uid == geteuid(),
            status.st_mode & (S_IWGRP | S_IWOTH) == 0, let bytes = try? file.readToEnd(limit: Self.maximumSize)
        else { return [] }
        var reader = PayloadReader(bytes)
        do throws(WireError) {
            guard try (0..<Self.magic.count).map({ _ throws(WireError) in try reader.readUInt8() }) == Self.magic,
                try reader.readUInt32() == Self.formatVersion,
                try reader.readString() == writerVersion.description,
                try reader.readUInt32() == geteuid(),
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
            try reader.finish("the catalog store")
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
        writer.write(writerVersion.description)
        writer.write(UInt32(geteuid()))
        writer.write(FileStatus(path: Self.loaderCachePath)?.identity)
        writer.write(UInt32(bundles.count))
        for (foundAt, bundle) in bundles.sorted(by: { $0.key < $1.key }) {
            writer.write(foundAt == bundle.bundlePath ? "" : foundAt)
            writer.write(bundle)
        }
        let directory = (path as NSString).deletingLastPathComponent
        try? FileManager.default.createDirectory(
            atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        // A unique temporary file, synced, then renamed over the store: concurrent savers never
        // share a file, and a reader sees the old store or the new one, never a mix.
        try? LockedFileUpdate.replace(path, with: Data(writer.bytes))
    }
}
