import PlugindEngine

extension AppExtensionPoint {
    /// Builds an extension point from its attributes (`Name`, `Scope`, `UserInterface`,
    /// `EnhancedSecurity`). Use it as an attribute on a static property.
    @resultBuilder
    public enum Definition {
        public static func buildExpression(_ part: some Attribute) -> any Attribute {
            part
        }

        public static func buildBlock(_ parts: any Attribute...) -> [any Attribute] {
            parts
        }

        public static func buildFinalResult(_ parts: [any Attribute]) -> AppExtensionPoint {
            var name: String?
            for case let part as Name in parts { name = part.value }
            var point = AppExtensionPoint(name: name ?? "")
            for part in parts { part.apply(to: &point) }
            return point
        }
    }

    /// One attribute of an extension point definition.
    public protocol Attribute: Sendable {
        func apply(to point: inout AppExtensionPoint)
    }

    /// The point's short name; its full identifier is "<host identifier>.<name>".
    public struct Name: Attribute {
        public let value: String

        public init(_ value: String) {
            self.value = value
        }

        public func apply(to point: inout AppExtensionPoint) {}
    }

    /// Which plugins may serve the point.
    public struct Scope: Attribute {
        public enum Restriction: Sendable, Hashable {
            /// Any plugin the owner approved.
            case none
            /// Only plugins shipped with the host (its bundled plugins directory).
            case application
        }

        public let restriction: Restriction

        /// `.application` when omitted, as on Apple platforms: only plugins shipped with the host.
        public init(restriction: Restriction = .application) {
            self.restriction = restriction
        }

        /// The unlabeled form some of Apple's samples use.
        public init(_ restriction: Restriction) {
            self.restriction = restriction
        }

        public func apply(to point: inout AppExtensionPoint) {
            point.scopeRestriction = restriction
        }
    }

    /// The version of the point's interface ("2.1"): plugins declare the versions they support
    /// in their manifest's `extensionPointVersions`. Linux addition.
    public struct Version: Attribute {
        public let value: String

        public init(_ value: String) {
            self.value = value
        }

        public func apply(to point: inout AppExtensionPoint) {
            point.version = value
        }
    }

    /// What the point's plugins do, for the owner: written into the point's installed descriptor
    /// (`AppExtensionHost.installExtensionPointDescriptors(_:)`), where `plugind info` and
    /// `browse` show it beside each plugin of the point. Linux addition.
    public struct Description: Attribute {
        public let text: String

        public init(_ text: String) {
            self.text = text
        }

        public func apply(to point: inout AppExtensionPoint) {
            point.pointDescription = text
        }
    }

    /// Whether the point's plugins present user interface (recorded; plugind plugins have none).
    public struct UserInterface: Attribute {
        public let presentsUserInterface: Bool

        public init(_ presentsUserInterface: Bool = true) {
            self.presentsUserInterface = presentsUserInterface
        }

        public func apply(to point: inout AppExtensionPoint) {
            point.presentsUserInterface = presentsUserInterface
        }
    }

    /// Whether the point's plugins must run with every confinement layer applied, whatever the
    /// host's `confinement` allows: a process of such a plugin fails with
    /// `confinementUnavailable` rather than run with less.
    public struct EnhancedSecurity: Attribute {
        public let isEnabled: Bool

        public init(_ isEnabled: Bool) {
            self.isEnabled = isEnabled
        }

        public func apply(to point: inout AppExtensionPoint) {
            point.requiresEnhancedSecurity = isEnabled
        }
    }
}
