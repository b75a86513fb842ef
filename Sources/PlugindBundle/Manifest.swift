package import PlugindWire

/// A plugin bundle's `manifest.json`, version 1, after validation.
package struct Manifest: Equatable, Sendable {
    package static let fileName = "manifest.json"
    package static let currentVersion = 1

    package var manifestVersion: Int
    /// Reverse-DNS identifier, unique per plugin.
    package var identifier: String
    package var name: String
    package var version: String
    /// Full identifier of the extension point the plugin serves.
    package var extensionPoint: String
    /// The library: a path relative to the bundle, or (for function-only bundles) a bare soname
    /// found on the system library path.
    package var library: String
    package var description: String?
    package var functions: [FunctionSignature]
    package var limits: Limits
    package var permissions: Permissions
    package var minimumHostVersion: String?

    /// Resource limits the plugin asks for; the host caps each one.
    package struct Limits: Equatable, Sendable, Hashable {
        package var memoryBytes: UInt64?
        package var cpuSeconds: UInt64?
        package var openFiles: UInt64?
        package var requestTimeoutMilliseconds: UInt64?
        package var maxMessageBytes: UInt64?

        package init(
            memoryBytes: UInt64? = nil,
            cpuSeconds: UInt64? = nil,
            openFiles: UInt64? = nil,
            requestTimeoutMilliseconds: UInt64? = nil,
            maxMessageBytes: UInt64? = nil
        ) {
            self.memoryBytes = memoryBytes
            self.cpuSeconds = cpuSeconds
            self.openFiles = openFiles
            self.requestTimeoutMilliseconds = requestTimeoutMilliseconds
            self.maxMessageBytes = maxMessageBytes
        }
    }

    /// What the plugin asks to be allowed beyond the default confinement. Part of what the owner
    /// approves: a change needs a new approval.
    package struct Permissions: Equatable, Sendable, Hashable, Codable {
        package var network: Bool
        package var read: [String]
        package var write: [String]

        package init(network: Bool = false, read: [String] = [], write: [String] = []) {
            self.network = network
            self.read = read
            self.write = write
        }

        package var isEmpty: Bool { !network && read.isEmpty && write.isEmpty }

        /// "network, read /srv/data, write /tmp/out" or "none".
        package var summary: String {
            var parts: [String] = []
            if network { parts.append("network") }
            parts += read.map { "read \($0)" }
            parts += write.map { "write \($0)" }
            return parts.isEmpty ? "none" : parts.joined(separator: ", ")
        }
    }

    package init(
        manifestVersion: Int = Manifest.currentVersion,
        identifier: String,
        name: String,
        version: String,
        extensionPoint: String,
        library: String,
        description: String? = nil,
        functions: [FunctionSignature] = [],
        limits: Limits = Limits(),
        permissions: Permissions = Permissions(),
        minimumHostVersion: String? = nil
    ) {
        self.manifestVersion = manifestVersion
        self.identifier = identifier
        self.name = name
        self.version = version
        self.extensionPoint = extensionPoint
        self.library = library
        self.description = description
        self.functions = functions
        self.limits = limits
        self.permissions = permissions
        self.minimumHostVersion = minimumHostVersion
    }

    /// Whether `library` names a system library by soname rather than a file in the bundle.
    package var librarySonameCandidate: Bool {
        !library.contains("/")
    }
}
