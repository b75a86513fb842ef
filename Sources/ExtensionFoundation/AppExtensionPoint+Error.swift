import PlugindBundle
import PlugindEngine
import PlugindSystem

extension AppExtensionPoint {
    /// Why a point cannot be used, with Apple's cases. plugind throws three of them: from
    /// `init(identifier:)`, and when a monitor is given a point (`Monitor(appExtensionPoint:)`,
    /// `addAppExtensionPoint(_:)`). The two about the kind of process that declares a point are
    /// never thrown here: on Linux any process may host plugins, so there is no target kind to
    /// check; they exist so that host code catching them compiles.
    public enum Error: Swift.Error, Sendable, Hashable, CustomStringConvertible {
        /// Apple: a point defined in a target that is neither an application nor an extension.
        /// Not thrown by plugind.
        case hostMustBeApplicationOrAppExtension
        /// Apple: a point defined outside an application. Not thrown by plugind.
        case hostMustDefineAppExtensionPoint(String)
        /// The host has no usable identifier (`AppExtensionHost.identifier` is not a reverse-DNS
        /// name), so a point defined with `Name(_:)` has no full identifier.
        case hostMustHaveBundleIdentifier
        /// The identifier is not one a plugin could declare: plugins name points in reverse DNS
        /// (letters, digits, "-" and "_" between dots); or its `Version` is not a version.
        case invalidAppExtensionPoint
        /// A point defined without `Name(_:)`, or with an empty one.
        case unspecifiedAppExtensionPointName

        public var description: String {
            switch self {
            case .hostMustBeApplicationOrAppExtension:
                "the extension point is defined in a target that is neither an application nor an app extension"
            case .hostMustDefineAppExtensionPoint(let name):
                "the extension point '\(InertText.escape(name))' must be defined by the host application"
            case .hostMustHaveBundleIdentifier:
                "the host has no reverse-DNS identifier (set AppExtensionHost.identifier): a point defined with Name(_:) needs one"
            case .invalidAppExtensionPoint:
                "not an extension point identifier: use a reverse-DNS name such as com.example.app.filters"
            case .unspecifiedAppExtensionPointName:
                "the extension point's definition has no Name(_:)"
            }
        }
    }

    /// Checks that the point names something a plugin of `host` could serve.
    func validated(in host: AppExtensionHost) throws(AppExtensionPoint.Error) {
        guard version.map({ HostVersion($0) != nil }) ?? true else { throw .invalidAppExtensionPoint }
        guard let name else { return }  // made from an identifier, checked then
        guard !name.isEmpty else { throw .unspecifiedAppExtensionPointName }
        guard ManifestParser.isReverseDNS(host.identifier) else { throw .hostMustHaveBundleIdentifier }
        guard ManifestParser.isReverseDNS(identifier(in: host)) else { throw .invalidAppExtensionPoint }
    }
}
