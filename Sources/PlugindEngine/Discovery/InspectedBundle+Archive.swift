package import PlugindBundle
import PlugindSystem
package import PlugindWire

// The binary form of an inspected bundle, for the catalog cache kept on disk: reading it back is
// much cheaper than parsing a manifest and checking a library again. The layout is private to
// one plugind version; the cache file records the version and is ignored by any other.

extension PayloadWriter {
    package mutating func write(_ bundle: InspectedBundle) {
        write(bundle.manifest)
        write(bundle.warnings)
        write(bundle.bundlePath)
        // The usual paths are implied by the bundle's: an empty string stands for them, which
        // keeps a store of thousands of bundles small and quick to read.
        write(bundle.manifestPath == bundle.bundlePath + "/" + Manifest.fileName ? "" : bundle.manifestPath)
        write(bundle.libraryPath == bundle.bundlePath + "/" + bundle.manifest.library ? "" : bundle.libraryPath)
        for status in [bundle.libraryStatus, bundle.manifestStatus, bundle.bundleStatus] { write(status) }
        write(bundle.usesSystemLibrary)
        write(bundle.contents.entries) { writer, entry in
            writer.write(entry.path)
            switch entry.kind {
            case .directory: writer.write(UInt8(0))
            case .file(let isLoadable): writer.write(UInt8(isLoadable ? 2 : 1))
            case .symlink(let target):
                writer.write(UInt8(3))
                writer.write(target)
            }
            writer.write(entry.status)
        }
    }

    mutating func write(_ manifest: Manifest) {
        write(Int64(manifest.manifestVersion))
        for text in [manifest.identifier, manifest.name, manifest.version, manifest.extensionPoint, manifest.library] { write(text) }
        write(optional: manifest.description)
        write(optional: manifest.minimumHostVersion)
        write(UInt32(manifest.concurrency ?? 0))
        write(manifest.functions) { $0.write($1) }
        let limits = manifest.limits
        for limit in [
            limits.memoryBytes, limits.cpuSeconds, limits.openFiles, limits.requestTimeoutMilliseconds, limits.maxMessageBytes,
            limits.threads, limits.scratchBytes,
        ] {
            write(limit != nil)
            write(limit ?? 0)
        }
        write(manifest.permissions.network)
        write(manifest.permissions.processes)
        write(manifest.permissions.read)
        write(manifest.permissions.write)
        write(manifest.permissions.symlinks)
        for bound in [manifest.extensionPointVersions?.minimum, manifest.extensionPointVersions?.below] {
            write(optional: bound?.description)
        }
        write(manifest.capabilities)
        for translations in [manifest.localizedNames, manifest.localizedDescriptions] {
            write(translations.sorted { $0.key < $1.key }) { writer, translation in
                writer.write(translation.key)
                writer.write(translation.value)
            }
        }
        write(UInt8(manifest.adapter?.abi.rawValue ?? 0))
        if let adapter = manifest.adapter {
            write(adapter.plugin)
            write(adapter.buffers)
        }
    }

    mutating func write(_ status: FileStatus) {
        write(status.identity)
        write(status.mode)
        write(status.owner)
        write(status.group)
    }

    mutating func write(optional text: String?) {
        write(text != nil)
        write(text ?? "")
    }
}

extension PayloadReader {
    package mutating func readInspectedBundle() throws(WireError) -> InspectedBundle {
        let manifest = try readManifest()
        let warnings = try readStrings()
        let bundlePath = try readString()
        let manifestPath = try readString().nonEmpty ?? bundlePath + "/" + Manifest.fileName
        let libraryPath = try readString().nonEmpty ?? bundlePath + "/" + manifest.library
        let libraryStatus = try readFileStatus()
        let manifestStatus = try readFileStatus()
        let bundleStatus = try readFileStatus()
        let usesSystemLibrary = try readBool()
        // Arrays are read with `readCount` and a loop here, not `readArray`: see `readCount`.
        let entryCount = try readCount()
        var entries: [BundleContents.Entry] = []
        entries.reserveCapacity(entryCount)
        for _ in 0..<entryCount {
            let path = try readString()
            let kind: BundleContents.Entry.Kind
            switch try readUInt8() {
            case 0: kind = .directory
            case 1: kind = .file(isLoadable: false)
            case 2: kind = .file(isLoadable: true)
            case 3: kind = .symlink(target: try readString())
            case let other: throw .malformedPayload("unknown bundle entry kind \(other)")
            }
            entries.append(BundleContents.Entry(path: path, kind: kind, status: try readFileStatus()))
        }
        return InspectedBundle(
            manifest: manifest,
            warnings: warnings,
            bundlePath: bundlePath,
            manifestPath: manifestPath,
            libraryPath: libraryPath,
            libraryStatus: libraryStatus,
            manifestStatus: manifestStatus,
            bundleStatus: bundleStatus,
            usesSystemLibrary: usesSystemLibrary,
            contents: BundleContents(entries: entries, directory: bundleStatus)
        )
    }

    mutating func readManifest() throws(WireError) -> Manifest {
        let manifestVersion = try readInt64()
        var manifest = Manifest(
            manifestVersion: Int(truncatingIfNeeded: manifestVersion),
            identifier: try readString(),
            name: try readString(),
            version: try readString(),
            extensionPoint: try readString(),
            library: try readString()
        )
        manifest.description = try readOptionalString()
        manifest.minimumHostVersion = try readOptionalString()
        let concurrency = try readUInt32()
        manifest.concurrency = concurrency > 0 ? Int(concurrency) : nil
        let functionCount = try readCount()
        manifest.functions.reserveCapacity(functionCount)
        for _ in 0..<functionCount { manifest.functions.append(try readFunctionSignature()) }
        manifest.limits = Manifest.Limits(
            memoryBytes: try readLimit(), cpuSeconds: try readLimit(), openFiles: try readLimit(),
            requestTimeoutMilliseconds: try readLimit(), maxMessageBytes: try readLimit(), threads: try readLimit(),
            scratchBytes: try readLimit())
        manifest.permissions = Manifest.Permissions(
            network: try readBool(), processes: try readBool(), read: try readStrings(), write: try readStrings(),
            symlinks: try readBool())
        let minimum = try readOptionalString().flatMap(HostVersion.init)
        let below = try readOptionalString().flatMap(HostVersion.init)
        if minimum != nil || below != nil { manifest.extensionPointVersions = PointVersionRange(minimum: minimum, below: below) }
        manifest.capabilities = try readStrings()
        manifest.localizedNames = try readLocalizedTexts()
        manifest.localizedDescriptions = try readLocalizedTexts()
        let abi = try readUInt8()
        if abi != 0 {
            guard let known = ForeignABI(rawValue: abi) else { throw .malformedPayload("unknown foreign ABI \(abi)") }
            manifest.adapter = ForeignPluginDeclaration(abi: known, plugin: try readString(), buffers: try readUInt64())
        }
        return manifest
    }

    /// Language tag → text. Read into the field directly: a key path's write copied the whole
    /// manifest through its generic value witness (`perf`).
    private mutating func readLocalizedTexts() throws(WireError) -> [String: String] {
        let count = try readCount()
        var texts: [String: String] = [:]
        guard count > 0 else { return texts }  // reserving nothing still allocated storage
        texts.reserveCapacity(count)
        for _ in 0..<count {
            let language = try readString()
            texts[language] = try readString()  // a repeated tag: the last one holds, as it always did
        }
        return texts
    }

    /// One optional limit: whether it is set, then its value.
    private mutating func readLimit() throws(WireError) -> UInt64? {
        let present = try readBool()
        let value = try readUInt64()
        return present ? value : nil
    }

    mutating func readFileStatus() throws(WireError) -> FileStatus {
        guard let identity = try readFileIdentity() else { throw .malformedPayload("file status without identity") }
        return FileStatus(identity: identity, mode: try readUInt32(), owner: try readUInt32(), group: try readUInt32())
    }

    mutating func readOptionalString() throws(WireError) -> String? {
        let present = try readBool()
        let text = try readString()
        return present ? text : nil
    }
}

extension String {
    fileprivate var nonEmpty: String? { isEmpty ? nil : self }
}
