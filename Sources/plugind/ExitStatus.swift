import ExtensionFoundation
import PlugindEngine

/// Exit statuses of `plugind`, after sysexits(3), one per kind of outcome a script may need to
/// tell apart.
enum ExitStatus: Int32, CaseIterable {
    case success = 0
    /// The plugin answered with an error, or a check (verify) found problems.
    case failure = 1
    /// Bad command line.
    case usage = 64
    /// An input file could not be read.
    case noInput = 66
    /// No such plugin, or no worker executable.
    case unavailable = 69
    /// The worker crashed, exited, broke the protocol, hit a resource limit or was killed from outside.
    case workerFailed = 70
    /// The request or the launch timed out.
    case timedOut = 75
    /// The plugin is not approved, disabled or quarantined.
    case notPermitted = 77
    /// The plugin could not be loaded: dlopen, missing symbol, ABI, confinement.
    case loadFailed = 78

    /// One line for `plugind help`.
    var meaning: String {
        switch self {
        case .success: "success"
        case .failure: "the plugin answered with an error, or problems were found"
        case .usage: "invalid command line"
        case .noInput: "an input file could not be read"
        case .unavailable: "plugin (or plugind-worker) not found"
        case .workerFailed: "the plugin crashed, exited, broke the protocol, exceeded a limit, or its worker was killed"
        case .timedOut: "the plugin did not answer (or load) in time"
        case .notPermitted: "the plugin is not approved, is disabled, or is quarantined"
        case .loadFailed: "the plugin could not be loaded (library, symbol, ABI, confinement)"
        }
    }

    init(for error: AppExtensionError) {
        switch error.code {
        case .pluginError, .invalidArguments, .unknownFunction, .unsupported, .callbackFailed: self = .failure
        case .notFound, .workerNotFound: self = .unavailable
        case .notApproved, .quarantined: self = .notPermitted
        case .timedOut: self = .timedOut
        case .pluginLoadFailed, .symbolMissing, .abiMismatch, .confinementUnavailable, .incompatibleProtocol,
            .configurationError:
            self = .loadFailed
        default: self = .workerFailed
        }
    }
}
