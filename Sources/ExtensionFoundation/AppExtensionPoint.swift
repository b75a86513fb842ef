import PlugindBundle
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

    /// A point known by its full identifier, such as "com.example.editor.text-filters".
    /// `scope` and `version` are Linux additions (a point found by identifier has no definition
    /// to carry them);
    /// it defaults to `.application`, as a definition without `Scope` does.
    ///
    /// - Throws: `AppExtensionPoint.Error.invalidAppExtensionPoint` when `identifier` cannot name
    ///   a point: plugins declare points as reverse-DNS names (letters, digits, "-" and "_"
    ///   between dots), so no plugin could ever serve it. A well-formed point that no plugin
    ///   serves yet is not an error: plugins may be installed while the host runs.
    public init(identifier: String, scope: Scope.Restriction = .application, version: String? = nil) throws(AppExtensionPoint.Error) {
        guard ManifestParser.isReverseDNS(identifier) else { throw .invalidAppExtensionPoint }
        guard version.map({ HostVersion($0) != nil }) ?? true else { throw .invalidAppExtensionPoint }
        self.version = version
        self.name = nil
        self.explicitIdentifier = identifier
        self.scopeRestriction = scope
    }

    init(name: String) {
        self.name = name
        self.explicitIdentifier = nil
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
