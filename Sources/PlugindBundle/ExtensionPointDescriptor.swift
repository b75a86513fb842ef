import Foundation
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
        if FileManager.default.contents(atPath: path).map({ [UInt8]($0) == bytes }) == true { return path }
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw Problem(path: directory, reason: "cannot be created: \(error.localizedDescription)")
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
        guard let handle = FileHandle(forReadingAtPath: path) else { throw Problem(path: path, reason: "cannot be opened") }
        defer { try? handle.close() }
        let data: Data
        do {
            data = try handle.read(upToCount: maximumFileBytes + 1) ?? Data()
        } catch {
            throw Problem(path: path, reason: error.localizedDescription)
        }
        guard data.count <= maximumFileBytes else { throw Problem(path: path, reason: "is larger than \(maximumFileBytes) bytes") }
        let descriptor: ExtensionPointDescriptor
        do {
            descriptor = try StrictJSONDecoder().decode(ExtensionPointDescriptor.self, from: data)
        } catch {
            throw Problem(path: path, reason: "is not an extension-point descriptor (\(error))")
        }
        let validated = try descriptor.validated(at: path)
        guard (path as NSString).lastPathComponent == fileName(of: validated.identifier) else {
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

    /// Reads every `*.json` of `directories`; a missing directory is no problem.
    package static func load(from directories: [String]) -> DeclaredExtensionPoints {
        var declared = DeclaredExtensionPoints()
        for directory in directories {
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { continue }
            for name in names.sorted() where name.hasSuffix(".json") && !name.hasPrefix(".") {
                let path = directory + "/" + name
                do {
                    let descriptor = try ExtensionPointDescriptor.read(atPath: path)
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
