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
/// or by its full identifier: `AppExtensionPoint(identifier: "com.example.editor.text-filters")`.
public struct AppExtensionPoint: Sendable, Hashable, CustomStringConvertible {
    /// The short name given with `Name(_:)`, if the point was declared that way.
    public let name: String?
    private let explicitIdentifier: String?
    /// Which plugins may serve the point: any approved plugin (`.none`) or only those shipped
    /// with the host (`.application`).
    public internal(set) var scopeRestriction: Scope.Restriction = .none
    /// Whether plugins of this point present user interface. Recorded for compatibility; plugind
    /// plugins have none.
    public internal(set) var presentsUserInterface = false
    /// Whether plugins of this point must run with every confinement layer applied, regardless
    /// of the host's `confinement` setting.
    public internal(set) var requiresEnhancedSecurity = false

    /// A point known by its full identifier.
    public init(identifier: String) {
        self.name = nil
        self.explicitIdentifier = identifier
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

    public var description: String {
        identifier
    }
}
