import PlugindBundle

/// Whether a plugin may serve a host of its version: a manifest's `minimumHostVersion` is
/// compared with `AppExtensionHost.version`, so a plugin written against a newer release of a
/// host's SDK stays unused (with the reason) by older releases of that host.
enum HostCompatibility {
    /// Why `entry` cannot serve `host`, or nil when it can.
    static func problem(_ entry: CatalogEntry, host: AppExtensionHost) -> String? {
        guard let required = entry.manifest.minimumHostVersion, let minimum = HostVersion(required) else { return nil }
        guard let version = HostVersion(host.version) else {
            return "needs host version \(minimum) or later; the host's version '\(host.version)' is not a version such as 1.2.0"
        }
        guard version < minimum else { return nil }
        return "needs host version \(minimum) or later; \(host.identifier) is \(version)"
    }
}
