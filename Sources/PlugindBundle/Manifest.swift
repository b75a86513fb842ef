package import PlugindTypes

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
    /// Translations of `name` and `description`, by language tag as the manifest gives it
    /// ("de", "pt_BR", "pt-BR"); `localizedName(for:)` picks one.
    package var localizedNames: [String: String] = [:]
    package var localizedDescriptions: [String: String] = [:]
    package var functions: [FunctionSignature]
    package var limits: Limits
    package var permissions: Permissions
    package var minimumHostVersion: String?
    /// The versions of `extensionPoint` the plugin supports; nil: every version.
    package var extensionPointVersions: PointVersionRange?
    /// What the plugin implements within its point (`AppExtensionPoint.Capabilities` in Swift),
    /// such as the media types it handles: identifiers of printable ASCII without spaces, each
    /// once, in the order the manifest gives them.
    package var capabilities: [String] = []
    /// How many requests the plugin handles at once, each on a thread of its own; nil: what its
    /// descriptor says, else 1.
    package var concurrency: Int?
    /// Set when `library` is a plugin of a foreign ABI (LADSPA, frei0r) hosted through the
    /// worker's adapter: then `library` is an absolute path outside the bundle.
    package var adapter: ForeignPluginDeclaration?

    package static let maximumConcurrency: UInt64 = 64

    /// Resource limits the plugin asks for; the host caps each one.
    package struct Limits: Equatable, Sendable, Hashable {
        package var memoryBytes: UInt64?
        package var cpuSeconds: UInt64?
        package var openFiles: UInt64?
        package var requestTimeoutMilliseconds: UInt64?
        package var maxMessageBytes: UInt64?
        /// Threads of the plugin (and its processes, with the `processes` permission).
        package var threads: UInt64?
        /// A private scratch directory (/tmp in the plugin's view) of at most this many bytes.
        package var scratchBytes: UInt64?

        package init(
            memoryBytes: UInt64? = nil,
            cpuSeconds: UInt64? = nil,
            openFiles: UInt64? = nil,
            requestTimeoutMilliseconds: UInt64? = nil,
            maxMessageBytes: UInt64? = nil,
            threads: UInt64? = nil,
            scratchBytes: UInt64? = nil
        ) {
            self.memoryBytes = memoryBytes
            self.cpuSeconds = cpuSeconds
            self.openFiles = openFiles
            self.requestTimeoutMilliseconds = requestTimeoutMilliseconds
            self.maxMessageBytes = maxMessageBytes
            self.threads = threads
            self.scratchBytes = scratchBytes
        }
    }

    /// What the plugin asks to be allowed beyond the default confinement. Part of what the owner
    /// approves: a change needs a new approval.
    package struct Permissions: Equatable, Sendable, Hashable, Codable {
        package var network: Bool
        /// Start processes and create memfds. Without a usable cgroup, children escape the
        /// per-process memory and CPU limits, which the owner is told before approving.
        package var processes: Bool
        package var read: [String]
        package var write: [String]
        /// Create symlinks in the write grants. Without it a plugin cannot plant a link there
        /// for the owner or the host application to follow.
        package var symlinks: Bool

        package init(
            network: Bool = false, processes: Bool = false, read: [String] = [], write: [String] = [], symlinks: Bool = false
        ) {
            self.network = network
            self.processes = processes
            self.read = read
            self.write = write
            self.symlinks = symlinks
        }

        package init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            network = try container.decode(Bool.self, forKey: .network)
            // Approvals written before the permission existed asked for none.
            processes = try container.decodeIfPresent(Bool.self, forKey: .processes) ?? false
            read = try container.decode([String].self, forKey: .read)
            write = try container.decode([String].self, forKey: .write)
            symlinks = try container.decodeIfPresent(Bool.self, forKey: .symlinks) ?? false
        }

        package var isEmpty: Bool { !network && !processes && read.isEmpty && write.isEmpty && !symlinks }

        /// "network, processes, read /srv/data, write /tmp/out" or "none".
        package var summary: String {
            var parts: [String] = []
            if network { parts.append("network") }
            if processes { parts.append("processes") }
            parts += read.map { "read \($0)" }
            parts += write.map { "write \($0)" }
            if symlinks { parts.append("symlinks in its write grants") }
            return parts.isEmpty ? "none" : parts.joined(separator: ", ")
        }

        /// What these permissions ask for beyond `approved`, one phrase each; empty when nothing.
        package func additions(beyond approved: Permissions) -> [String] {
            var added: [String] = []
            if network && !approved.network { added.append("network") }
            if processes && !approved.processes { added.append("processes") }
            added += read.filter { !approved.read.contains($0) && !approved.write.contains($0) }.map { "read \($0)" }
            added += write.filter { !approved.write.contains($0) }.map { "write \($0)" }
            if symlinks && !approved.symlinks { added.append("symlinks in its write grants") }
            return added
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

    /// Whether `library` is a foreign plugin's absolute path (only with `adapter`).
    package var usesForeignLibrary: Bool { adapter != nil }
}
