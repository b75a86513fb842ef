import ExtensionFoundation
import PlugindEngine

/// A `plugind_identity`: the identity and the C strings its accessors hand out.
final class HostIdentity: Sendable {
    let identity: AppExtensionIdentity
    let bundleIdentifier: OwnedCString
    let name: OwnedCString
    let extensionPoint: OwnedCString
    let capabilities: [OwnedCString]

    init(_ identity: AppExtensionIdentity) {
        self.identity = identity
        bundleIdentifier = OwnedCString(identity.bundleIdentifier)
        name = OwnedCString(identity.localizedName)
        extensionPoint = OwnedCString(identity.extensionPointIdentifier)
        capabilities = identity.capabilities.map(OwnedCString.init)
    }
}

@_cdecl("plugind_identity_bundle_identifier")
public func plugindIdentityBundleIdentifier(_ identity: OpaquePointer?) -> UnsafePointer<CChar>? {
    HandleRegistry.shared.object(identity, as: HostIdentity.self)?.bundleIdentifier.constPointer
}

@_cdecl("plugind_identity_name")
public func plugindIdentityName(_ identity: OpaquePointer?) -> UnsafePointer<CChar>? {
    HandleRegistry.shared.object(identity, as: HostIdentity.self)?.name.constPointer
}

@_cdecl("plugind_identity_extension_point")
public func plugindIdentityExtensionPoint(_ identity: OpaquePointer?) -> UnsafePointer<CChar>? {
    HandleRegistry.shared.object(identity, as: HostIdentity.self)?.extensionPoint.constPointer
}

@_cdecl("plugind_identity_capability_count")
public func plugindIdentityCapabilityCount(_ identity: OpaquePointer?) -> Int {
    HandleRegistry.shared.object(identity, as: HostIdentity.self)?.capabilities.count ?? 0
}

@_cdecl("plugind_identity_capability")
public func plugindIdentityCapability(_ identity: OpaquePointer?, _ index: Int) -> UnsafePointer<CChar>? {
    guard let capabilities = HandleRegistry.shared.object(identity, as: HostIdentity.self)?.capabilities,
        capabilities.indices.contains(index)
    else { return nil }
    return capabilities[index].constPointer
}

@_cdecl("plugind_identity_release")
public func plugindIdentityRelease(_ identity: OpaquePointer?) {
    _ = HandleRegistry.shared.remove(identity, as: HostIdentity.self)
}
