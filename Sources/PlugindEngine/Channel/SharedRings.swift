import Glibc

/// Whether the host offers its workers the shared rings (`ProtocolFeature.ring`): yes, unless
/// the environment says `PLUGIND_SHARED_RINGS=0` — for a machine where a ring's pages in every
/// worker count more than latency, and for measuring the pipes beside the rings in one run.
enum SharedRings {
    static let areOffered = getenv(switchName).map { String(cString: $0) != "0" } ?? true

    /// The environment variable that turns the rings off with "0".
    static let switchName = "PLUGIND_SHARED_RINGS"
}
