extension AppExtensionPoint {
    /// Builds an extension point from its parts (`Name`, `Scope`, `UserInterface`,
    /// `EnhancedSecurity`). Use it as an attribute on a static property.
    @resultBuilder
    public enum Definition {
        public static func buildExpression(_ part: some DefinitionPart) -> any DefinitionPart {
            part
        }

        public static func buildBlock(_ parts: any DefinitionPart...) -> [any DefinitionPart] {
            parts
        }

        public static func buildFinalResult(_ parts: [any DefinitionPart]) -> AppExtensionPoint {
            var name: String?
            for case let part as Name in parts { name = part.value }
            var point = AppExtensionPoint(name: name ?? "")
            for part in parts { part.apply(to: &point) }
            return point
        }
    }

    /// One piece of an extension point definition.
    public protocol DefinitionPart: Sendable {
        func apply(to point: inout AppExtensionPoint)
    }

    /// The point's short name; its full identifier is "<host identifier>.<name>".
    public struct Name: DefinitionPart {
        public let value: String

        public init(_ value: String) {
            self.value = value
        }

        public func apply(to point: inout AppExtensionPoint) {}
    }

    /// Which plugins may serve the point.
    public struct Scope: DefinitionPart {
        public enum Restriction: Sendable, Hashable {
            /// Any plugin the owner approved.
            case none
            /// Only plugins shipped with the host (its bundled plugins directory).
            case application
        }

        public let restriction: Restriction

        public init(restriction: Restriction) {
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

    /// Whether the point's plugins present user interface (recorded; plugind plugins have none).
    public struct UserInterface: DefinitionPart {
        public let presentsUserInterface: Bool

        public init(_ presentsUserInterface: Bool = true) {
            self.presentsUserInterface = presentsUserInterface
        }

        public func apply(to point: inout AppExtensionPoint) {
            point.presentsUserInterface = presentsUserInterface
        }
    }

    /// Requires every confinement layer for the point's plugins, whatever the host allows.
    public struct EnhancedSecurity: DefinitionPart {
        public init() {}

        public func apply(to point: inout AppExtensionPoint) {
            point.requiresEnhancedSecurity = true
        }
    }
}
