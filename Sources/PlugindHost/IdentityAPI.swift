import ExtensionFoundation

/// A `plugind_identity`: the identity and the C strings its accessors hand out.
final class HostIdentity: Sendable {
    let identity: AppExtensionIdentity
    let bundleIdentifier: OwnedCString
    let name: OwnedCString
    let extensionPoint: OwnedCString

    init(_ identity: AppExtensionIdentity) {
        self.identity = identity
        bundleIdentifier = OwnedCString(identity.bundleIdentifier)
        name = OwnedCString(identity.localizedName)
        extensionPoint = OwnedCString(identity.extensionPointIdentifier)
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

@_cdecl("plugind_identity_release")
public func plugindIdentityRelease(_ identity: OpaquePointer?) {
    _ = HandleRegistry.shared.remove(identity, as: HostIdentity.self)
}
