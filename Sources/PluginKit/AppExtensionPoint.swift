/// The extension point an extension binds to, written as on Apple platforms:
///
///     @AppExtensionPoint.Bind
///     var extensionPoint: AppExtensionPoint {
///         AppExtensionPoint.Identifier(host: "com.example.editor", name: "text-filters")
///     }
///
/// The extension side's counterpart of the host's `AppExtensionPoint` (ExtensionFoundation).
public struct AppExtensionPoint: ExtensionPointDefining, Sendable, Hashable, CustomStringConvertible {
    /// The full identifier, "<host identifier>.<name>", as a manifest's `extensionPoint`.
    public let identifier: String

    public init(identifier: String) {
        self.identifier = identifier
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

    /// Binds an extension to the point its body names.
    @resultBuilder
    public enum Bind {
        public static func buildBlock(_ identifier: Identifier) -> AppExtensionPoint {
            AppExtensionPoint(identifier: identifier.value)
        }
    }
}
