/// plugind's release, the one version of every part of it (the CLI's `--version`, the worker's,
/// the host version plugins compare `minimumHostVersion` with by default).
package enum PlugindRelease {
    package static let version = "0.1.0"
}
