/// Why a plugin that plugind found is not available to the host. `Monitor.diagnostics` and
/// `plugind list --all` list one per candidate, so a missing plugin always has an explanation.
public struct AppExtensionDiagnostic: Sendable, Hashable, CustomStringConvertible {
    /// A stable code for scripts (`plugind list --all --json` prints it).
    public struct Kind: Sendable, Hashable, CustomStringConvertible {
        public let code: String

        private init(_ code: String) {
            self.code = code
        }

        public var description: String { code }

        /// The owner has not approved the plugin yet.
        public static let unapproved = Kind("unapproved")
        /// The owner (or the administrator) disabled the plugin.
        public static let disabled = Kind("disabled")
        /// Refused by the administrator's rules; the message names the rule.
        public static let denied = Kind("denied")
        /// The plugin was approved, but its library, manifest or requested permissions changed.
        public static let approvalOutdated = Kind("approval-outdated")
        /// The plugin crashed repeatedly and is held back until its bytes change or the owner
        /// clears it.
        public static let quarantined = Kind("quarantined")
        /// `manifest.json` is missing, not JSON, or does not follow the schema.
        public static let invalidManifest = Kind("invalid-manifest")
        /// The library named by the manifest does not exist.
        public static let libraryMissing = Kind("library-missing")
        /// The library resolves (through symlinks or `..`) to a file outside the bundle.
        public static let libraryOutsideBundle = Kind("library-outside-bundle")
        /// The library is not an ELF shared object.
        public static let notALibrary = Kind("not-a-library")
        /// The library is built for another machine or word size.
        public static let wrongArchitecture = Kind("wrong-architecture")
        /// The bundle, manifest or library can be modified by other users.
        public static let insecurePermissions = Kind("insecure-permissions")
        /// The bundle holds what a bundle may not: a hard link, a symlink leading out, a device
        /// file, too many or too large files.
        public static let invalidContents = Kind("invalid-contents")
        /// Another bundle with the same identifier in an earlier search root wins.
        public static let shadowed = Kind("shadowed")
        /// The manifest asks for a newer host than this one.
        public static let requiresNewerHost = Kind("requires-newer-host")
        /// The plugin supports versions of its extension point that do not include the one the
        /// host declares (`AppExtensionPoint.Version`).
        public static let incompatiblePointVersion = Kind("incompatible-point-version")
        /// The plugin serves a point restricted to the host's own plugins.
        public static let outsideScope = Kind("outside-scope")
        /// A policy file cannot be read; nothing external is approved until it is fixed.
        public static let policyUnreadable = Kind("policy-unreadable")
    }

    public let kind: Kind
    /// The bundle directory (or policy file) concerned.
    public let path: String
    /// The plugin's identifier, when the manifest could be read.
    public let bundleIdentifier: String?
    /// The extension point the plugin serves, when known.
    public let extensionPointIdentifier: String?
    /// One sentence: what is wrong and, where there is one, the command that fixes it.
    public let message: String

    package init(kind: Kind, path: String, bundleIdentifier: String?, extensionPointIdentifier: String?, message: String) {
        self.kind = kind
        self.path = path
        self.bundleIdentifier = bundleIdentifier
        self.extensionPointIdentifier = extensionPointIdentifier
        self.message = message
    }

    public var description: String {
        "\(bundleIdentifier ?? path): \(kind): \(message)"
    }
}
