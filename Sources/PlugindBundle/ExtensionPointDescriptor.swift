import FoundationEssentials
import Glibc
import PlugindSystem

/// What a host declares about one of its extension points, installed where plugind reads it
/// without running the host (`<identifier>.json` in an extension-points directory): the
/// counterpart of the `.appext` descriptions Apple's build puts in an app. `plugind list --all`,
/// `verify`, `info` and `browse` use them to say which host a plugin is for, what the point is,
/// and when no installed host declares a plugin's point.
package struct ExtensionPointDescriptor: Codable, Equatable, Sendable {
    package static let currentVersion = 1
    /// Larger files are not read: a descriptor is a few hundred bytes.
    package static let maximumFileBytes = 64 << 10

    package var descriptorVersion: Int
    /// The point's full identifier, as plugins' manifests name it.
    package var identifier: String
    /// The identifier of the host that declares it.
    package var host: String
    /// "application" (only the host's own plugins, Apple's default) or "none".
    package var scope: String
    package var enhancedSecurity: Bool
    /// What plugins of the point do, for the owner.
    package var description: String?
    /// The version of the point's interface, compared with plugins' `extensionPointVersions`.
    package var version: String?

    package init(identifier: String, host: String, scope: String, enhancedSecurity: Bool, description: String?, version: String?) {
        self.descriptorVersion = Self.currentVersion
        self.identifier = identifier
        self.host = host
        self.scope = scope
        self.enhancedSecurity = enhancedSecurity
        self.description = description
        self.version = version
    }

    /// The file name of the descriptor of `identifier`.
    package static func fileName(of identifier: String) -> String { identifier + ".json" }

    /// Why a descriptor cannot be written or read.
    package struct Problem: Error, CustomStringConvertible, Equatable, Sendable {
        package var path: String
        package var reason: String
        package var description: String { "\(path): \(reason)" }
    }

    /// Checks what a reader relies on.
    package func validated(at path: String) throws(Problem) -> ExtensionPointDescriptor {
        func problem(_ reason: String) -> Problem { Problem(path: path, reason: reason) }
        guard descriptorVersion == Self.currentVersion else {
            throw problem("descriptorVersion \(descriptorVersion) is not supported (this plugind reads \(Self.currentVersion))")
        }
        guard ManifestParser.isReverseDNS(identifier) else {
            throw problem("'\(InertText.escape(identifier))' is not a reverse-DNS point identifier")
        }
        guard ManifestParser.isReverseDNS(host) else { throw problem("host '\(InertText.escape(host))' is not a reverse-DNS identifier") }
        guard scope == "application" || scope == "none" else {
            throw problem("scope must be \"application\" or \"none\", found '\(InertText.escape(scope))'")
        }
        if let version, HostVersion(version) == nil {
            throw problem("version must be a version such as 2.1, found '\(InertText.escape(version))'")
        }
        if let description, description.utf8.count > 4096 { throw problem("description is longer than 4096 bytes") }
        return self
    }

    /// The JSON text of the descriptor, keys sorted.
    package func encoded() -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return ((try? encoder.encode(self)) ?? Data()).map { $0 } + [0x0A]
    }

    /// Validates the descriptor and writes it into `directory` (created when missing) as
    /// `<identifier>.json`, mode 0644 — other users' plugind reads what a system host declares —
    /// unless the file holds these bytes already. Returns the file's path.
    @discardableResult
    package func install(in directory: String) throws(Problem) -> String {
        let path = directory + "/" + Self.fileName(of: identifier)
        let bytes = try validated(at: path).encoded()
        if (try? FileDescriptor.readRegularFile(path, limit: Self.maximumFileBytes)) == bytes { return path }
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw Problem(path: directory, reason: "cannot be created: \(ErrorText.describe(error))")
        }
        do {
            try AtomicFile.replace(path, with: bytes, mode: 0o644)
        } catch {
            throw Problem(path: path, reason: "cannot be written: \(error)")
        }
        return path
    }

    /// Reads the descriptor at `path`.
    package static func read(atPath path: String) throws(Problem) -> ExtensionPointDescriptor {
        try read(path, in: AT_FDCWD, named: path)
    }

    /// Reads the descriptor `file`, relative to the directory open as `directory` (`AT_FDCWD`:
    /// none), which problems call `path`. A descriptor's directory is its installer's: a regular
    /// file of at most `maximumFileBytes` is read, never through a link, never waiting on a FIFO.
    static func read(_ file: String, in directory: CInt, named path: String) throws(Problem) -> ExtensionPointDescriptor {
        let bytes: [UInt8]
        do throws(RegularFileReadError) {
            bytes = try FileDescriptor.readRegularFile(file, in: directory, limit: maximumFileBytes)
        } catch {
            throw Problem(path: path, reason: error.description)
        }
        let descriptor: ExtensionPointDescriptor
        do {
            descriptor = try StrictJSONDecoder().decode(ExtensionPointDescriptor.self, from: Data(bytes))
        } catch {
            throw Problem(path: path, reason: "is not an extension-point descriptor (\(error))")
        }
        let validated = try descriptor.validated(at: path)
        guard path.lastPathComponent == fileName(of: validated.identifier) else {
            throw Problem(
                path: path, reason: "declares '\(validated.identifier)', so its name must be \(fileName(of: validated.identifier))")
        }
        return validated
    }
}

/// The extension points the installed hosts declare, read from extension-points directories in
/// precedence order (the first declaration of an identifier wins).
package struct DeclaredExtensionPoints: Sendable {
    package struct Declaration: Sendable, Equatable {
        package var descriptor: ExtensionPointDescriptor
        package var path: String
    }

    package var declarations: [String: Declaration] = [:]
    /// Files that could not be read, each with the reason.
    package var problems: [ExtensionPointDescriptor.Problem] = []

    package init() {}

    package subscript(identifier: String) -> Declaration? { declarations[identifier] }

    /// The most entries of one extension-points directory looked at: a host installs one file per
    /// point, and a directory of more is not read (its installer is told), so that a directory
    /// grown without end costs a listing nothing.
    package static let maximumDirectoryEntries = 4096

    /// Reads every `*.json` of `directories`; a missing directory is no problem.
    package static func load(from directories: [String]) -> DeclaredExtensionPoints {
        var declared = DeclaredExtensionPoints()
        for directory in directories {
            // Following a link to the directory is the installer's choice; O_DIRECTORY refuses a
            // FIFO without waiting on it.
            let opened = open(directory, O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC)
            guard opened >= 0 else { continue }
            defer { close(opened) }
            let listing = DirectoryNames.list(opened, limit: maximumDirectoryEntries)
            guard !listing.isTruncated else {
                declared.problems.append(
                    ExtensionPointDescriptor.Problem(
                        path: directory,
                        reason: "holds more than \(maximumDirectoryEntries) entries, so none of its descriptors were read; "
                            + "a host installs one file per point"))
                continue
            }
            for name in listing.names.sorted() where name.hasSuffix(".json") && !name.hasPrefix(".") {
                let path = directory + "/" + name
                do {
                    let descriptor = try ExtensionPointDescriptor.read(name, in: opened, named: path)
                    if declared.declarations[descriptor.identifier] == nil {
                        declared.declarations[descriptor.identifier] = Declaration(descriptor: descriptor, path: path)
                    }
                } catch {
                    declared.problems.append(error)
                }
            }
        }
        return declared
    }
}
