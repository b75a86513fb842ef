import PlugindBundle
@_exported public import PlugindEngine
import PlugindSystem

/// A kind of plugin a host accepts, e.g. "text filters". Plugins declare in their manifest which
/// extension point they serve; a `Monitor` lists those installed and usable.
///
/// Declare one with a definition, as on Apple platforms:
///
///     extension AppExtensionPoint {
///         @Definition
///         static var textFilters: AppExtensionPoint {
///             Name("text-filters")
///             Scope(restriction: .none)
///         }
///     }
///
/// or by its full identifier: `try AppExtensionPoint(identifier: "com.example.editor.text-filters")`.
///
/// As on Apple platforms, a point without `Scope` accepts only the plugins shipped with the host
/// (its bundled plugins directory, `AppExtensionHost.bundledPluginsDirectory`), which need no
/// approval; `Scope(restriction: .none)` opens it to plugins installed by the owner.
public struct AppExtensionPoint: ExtensionPointDefining, Sendable, Hashable, Identifiable, CustomStringConvertible {
    /// The short name given with `Name(_:)`, if the point was declared that way.
    public let name: String?
    private let explicitIdentifier: String?
    /// Which plugins may serve the point: only those shipped with the host (`.application`, the
    /// default, as on Apple platforms) or also those the owner installed and approved (`.none`).
    public internal(set) var scopeRestriction: Scope.Restriction = .application
    /// Whether plugins of this point present user interface. Recorded for compatibility; plugind
    /// plugins have none.
    public internal(set) var presentsUserInterface = false
    /// Whether plugins of this point must run with every confinement layer applied, regardless
    /// of the host's `confinement` setting.
    public internal(set) var requiresEnhancedSecurity = false
    /// The version of the point's interface, such as "2.1", when the host declares one
    /// (`Version(_:)` in a definition, or `version:`): plugins whose manifest's
    /// `extensionPointVersions` leaves it out are not listed (`incompatible-point-version`).
    /// Linux addition.
    public internal(set) var version: String?
    /// What the point's plugins do, from `Description(_:)` in its definition, for its installed
    /// descriptor. Linux addition.
    public internal(set) var pointDescription: String?
    /// The capabilities a plugin must implement (all of them) to be listed for this point, set
    /// with `implementing(_:)`; empty: every plugin of the point. Linux addition.
    public internal(set) var requiredCapabilities: Set<String> = []

    /// A point known by its full identifier, such as "com.example.editor.text-filters".
    /// `scope` and `version` are Linux additions (a point found by identifier has no definition
    /// to carry them);
    /// it defaults to `.application`, as a definition without `Scope` does.
    ///
    /// - Throws: `AppExtensionPoint.Error.invalidAppExtensionPoint` when `identifier` cannot name
    ///   a point: plugins declare points as reverse-DNS names (letters, digits, "-" and "_"
    ///   between dots), so no plugin could ever serve it. A well-formed point that no plugin
    ///   serves yet is not an error: plugins may be installed while the host runs.
    ///
    /// Untyped `throws`, as Apple's: Swift 6.3 crashes compiling an async `main` that catches a
    /// typed error of this enum by pattern (`catch AppExtensionPoint.Error.invalidAppExtensionPoint`),
    /// which is exactly what code ported from Apple's documentation does.
    public init(identifier: String, scope: Scope.Restriction = .application, version: String? = nil) throws {
        guard ManifestParser.isReverseDNS(identifier) else { throw AppExtensionPoint.Error.invalidAppExtensionPoint }
        guard version.map({ HostVersion($0) != nil }) ?? true else { throw AppExtensionPoint.Error.invalidAppExtensionPoint }
        self.version = version
        self.name = nil
        self.explicitIdentifier = identifier
        self.scopeRestriction = scope
    }

    init(name: String) {
        self.name = name
        self.explicitIdentifier = nil
    }

    /// The same point, listing only the plugins that implement every one of `capabilities`
    /// (their manifest's `capabilities`; a Swift extension's `Implementing { … }`): the plugins
    /// an editor can open a Markdown file with, say, found without launching any:
    ///
    ///     let monitor = try await AppExtensionPoint.Monitor(appExtensionPoint: .textFilters.implementing("text/markdown"))
    ///
    /// Linux addition: Apple's hosts cannot see an extension's capabilities.
    public func implementing(_ capabilities: String...) -> AppExtensionPoint {
        var point = self
        point.requiredCapabilities.formUnion(capabilities)
        return point
    }

    /// Whether a plugin implementing `capabilities` is one this point lists.
    func admits(capabilities: [String]) -> Bool {
        requiredCapabilities.isSubset(of: capabilities)
    }

    /// The full identifier within `host`: the explicit identifier, or "<host>.<name>".
    public func identifier(in host: AppExtensionHost) -> String {
        explicitIdentifier ?? "\(host.identifier).\(name ?? "")"
    }

    /// The full identifier within `AppExtensionHost.current`.
    public var identifier: String {
        identifier(in: .current)
    }

    /// Stable whatever `AppExtensionHost.current` is: the identifier the point was made with, or
    /// the name its definition gave (a defined point's full identifier depends on the host:
    /// `identifier(in:)`).
    public var id: String {
        explicitIdentifier ?? name ?? ""
    }

    public var description: String {
        identifier
    }
}
