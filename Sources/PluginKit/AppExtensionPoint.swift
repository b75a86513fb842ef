/// The extension point an extension binds to, written as on Apple platforms:
///
///     @AppExtensionPoint.Bind
///     var extensionPoint: AppExtensionPoint {
///         AppExtensionPoint.Identifier(host: "com.example.editor", name: "text-filters")
///     }
///
/// and, with what the extension implements within the point (26.2):
///
///     @AppExtensionPoint.Bind
///     var extensionPoint: AppExtensionPoint {
///         Identifier(host: "com.example.editor", name: "text-filters")
///         Implementing {
///             AppExtensionPoint.Supports("text/markdown")
///             AppExtensionPoint.Supports("text/plain")
///         }
///     }
///
/// The extension side's counterpart of the host's `AppExtensionPoint` (ExtensionFoundation).
public struct AppExtensionPoint: ExtensionPointDefining, Sendable, Hashable, CustomStringConvertible {
    /// The full identifier, "<host identifier>.<name>", as a manifest's `extensionPoint`.
    public let identifier: String

    /// What the extension implements within the point, as `Implementing { … }` states it.
    public let capabilities: [String]

    public init(identifier: String, capabilities: [String] = []) {
        self.identifier = identifier
        self.capabilities = capabilities
    }

    public var description: String { identifier }

    /// Names a host's extension point.
    public struct Identifier: Sendable, Hashable {
        public let value: String

        /// The point `name` of the host application `host` (its identifier, reverse-DNS).
        public init(host: StaticString, name: StaticString) {
            value = "\(host).\(name)"
        }

        /// A point known by its full identifier.
        public init(_ value: StaticString) {
            self.value = "\(value)"
        }
    }

    /// Binds an extension to the point its body names, and to the capabilities it implements.
    @resultBuilder
    public enum Bind {
        public static func buildBlock(_ identifier: Identifier) -> AppExtensionPoint {
            AppExtensionPoint(identifier: identifier.value)
        }

        public static func buildBlock(_ identifier: Identifier, _ capabilities: Capabilities) -> AppExtensionPoint {
            AppExtensionPoint(identifier: identifier.value, capabilities: capabilities.identifiers)
        }
    }

    /// A type that names something an extension implements within its point: a media type it
    /// handles, a file format, a feature. Hosts see the `id`s without running the extension
    /// (`plugind bind` records them in the manifest and the library), so `id` must be a string
    /// literal in the type (`var id: String { "text/markdown" }`), or the extension states it with
    /// `Supports("…")`.
    public protocol Capability: Identifiable where ID == String {}

    /// A capability named where it is stated: `Supports("text/markdown")`. Linux addition: Apple
    /// has only types of the extension's own; a name is what most extensions need.
    public struct Supports: Capability, Sendable {
        public let id: String

        public init(_ id: StaticString) {
            self.id = "\(id)"
        }
    }

    /// The capabilities an extension implements, in `Bind` (also spelled `Implementing`).
    public struct Capabilities: Sendable {
        /// Their identifiers, in the order stated.
        public let identifiers: [String]

        public init(@Builder _ builder: () -> Capabilities) {
            self = builder()
        }

        init(identifiers: [String]) {
            self.identifiers = identifiers
        }

        @resultBuilder
        public struct Builder {
            public static func buildBlock<each T: Capability>(_ capability: repeat each T) -> Capabilities {
                var identifiers: [String] = []
                for capability in repeat each capability { identifiers.append(capability.id) }
                return Capabilities(identifiers: identifiers)
            }
        }
    }
}
