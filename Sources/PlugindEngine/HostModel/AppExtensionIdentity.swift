/// A plugin that is available to the host. Obtained from `AppExtensionPoint.Monitor`; pass it to
/// `AppExtensionProcess.Configuration` to run the plugin.
public struct AppExtensionIdentity: Sendable, Hashable, Identifiable, CustomStringConvertible {
    /// The plugin's identifier from its manifest.
    public let bundleIdentifier: String
    /// The full identifier of the extension point it serves.
    public let extensionPointIdentifier: String
    /// The display name from its manifest.
    public let localizedName: String
    /// What the plugin implements within its point, from its manifest's `capabilities` (for a
    /// Swift extension, its `Implementing { … }`), such as the media types it handles: read
    /// without running the plugin. Linux addition: Apple's hosts cannot see an extension's
    /// capabilities; `AppExtensionPoint.implementing(_:)` lists only the plugins that have some.
    public let capabilities: [String]
    /// The bundle directory the identity was found in.
    let bundlePath: String
    /// The host whose monitor found it: a process configured with the identity runs under this
    /// host's policy, search paths and limits (nil: `AppExtensionHost.current`).
    package let host: AppExtensionHost?
    /// Whether the point it was found for declared `EnhancedSecurity(true)`.
    package let requiresEnhancedSecurity: Bool

    package init(
        bundleIdentifier: String, extensionPointIdentifier: String, localizedName: String, bundlePath: String,
        capabilities: [String] = [], host: AppExtensionHost? = nil, requiresEnhancedSecurity: Bool = false
    ) {
        self.bundleIdentifier = bundleIdentifier
        self.extensionPointIdentifier = extensionPointIdentifier
        self.localizedName = localizedName
        self.capabilities = capabilities
        self.bundlePath = bundlePath
        self.host = host
        self.requiresEnhancedSecurity = requiresEnhancedSecurity
    }

    /// The identity itself: two identities are the same exactly when they are equal — the same
    /// plugin, found at the same place, under the same name, for the same host and point. An
    /// identifier alone would call a plugin moved to another root, or renamed, the same one,
    /// which a list that follows a monitor must see change.
    public var id: AppExtensionIdentity { self }

    public var description: String {
        "\(localizedName) (\(bundleIdentifier))"
    }
}
