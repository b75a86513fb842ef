import ExtensionFoundation
import PlugindBundle
import PlugindEngine

/// What the installed hosts' descriptors say about a plugin's extension point: which host
/// declares it, or that none does, or that the version the host declares is one the plugin
/// does not support. Shared by `list`, `info`, `verify` and `browse`.
enum PointDeclaration {
    case declared(DeclaredExtensionPoints.Declaration)
    case undeclared(point: String)
    case incompatible(DeclaredExtensionPoints.Declaration, supported: PointVersionRange)

    init(of manifest: Manifest, in declared: DeclaredExtensionPoints) {
        guard let declaration = declared[manifest.extensionPoint] else {
            self = .undeclared(point: manifest.extensionPoint)
            return
        }
        if let version = declaration.descriptor.version.flatMap(HostVersion.init), let supported = manifest.extensionPointVersions,
            !supported.contains(version)
        {
            self = .incompatible(declaration, supported: supported)
        } else {
            self = .declared(declaration)
        }
    }

    /// The host that declares the point, when one does.
    var host: String? {
        switch self {
        case .declared(let declaration), .incompatible(let declaration, _): declaration.descriptor.host
        case .undeclared: nil
        }
    }

    /// Whether a host of the point can use the plugin.
    var isCompatible: Bool {
        if case .incompatible = self { return false }
        return true
    }

    /// One sentence for the owner.
    var sentence: String {
        switch self {
        case .declared(let declaration):
            "declared by \(declaration.descriptor.host)" + (declaration.descriptor.description.map { ": \($0)" } ?? "")
        case .undeclared(let point):
            "no installed host declares \(point) (see 'plugind points list'; a host declares its points when it is installed)"
        case .incompatible(let declaration, let supported):
            "supports versions \(supported) of the extension point; \(declaration.descriptor.host) declares \(declaration.descriptor.version ?? "")"
        }
    }
}
