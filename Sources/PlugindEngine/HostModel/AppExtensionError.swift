public import FoundationEssentials
import Glibc
import PlugindSystem
package import PlugindWire

/// An error from ExtensionFoundation: a stable code to switch on, the plugin it concerns, and a
/// one-line description a person can act on.
///
/// When a worker process ended, `termination` says how, and `standardErrorTail` holds the last
/// bytes the plugin wrote to stdout and stderr.
public struct AppExtensionError: Error, Sendable, CustomStringConvertible, LocalizedError {
    /// What went wrong, as a value that new cases can be added to without breaking callers.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String

        private init(_ rawValue: String) {
            self.rawValue = rawValue
        }

        public var description: String { rawValue }

        /// The `plugind-worker` executable was not found.
        public static let workerNotFound = Code("workerNotFound")
        /// The worker process could not be started.
        public static let spawnFailed = Code("spawnFailed")
        /// Host and worker speak no common protocol version.
        public static let incompatibleProtocol = Code("incompatibleProtocol")
        /// `dlopen` failed, or the library changed after it was approved.
        public static let pluginLoadFailed = Code("pluginLoadFailed")
        /// The entry point or a declared function is missing from the library.
        public static let symbolMissing = Code("symbolMissing")
        /// The plugin was built for another plugin ABI.
        public static let abiMismatch = Code("abiMismatch")
        /// A confinement layer could not be applied and the host requires it.
        public static let confinementUnavailable = Code("confinementUnavailable")
        /// The worker died from a signal.
        public static let workerCrashed = Code("workerCrashed")
        /// The worker exited when it should not have.
        public static let workerExited = Code("workerExited")
        /// The worker was killed from outside (SIGKILL that neither the host sent nor a limit
        /// explains): by another process, the kernel's out-of-memory killer, or a failure of
        /// plugind's own processes. Nothing inside the worker can send it, so it is not the
        /// plugin's crash and never counts toward a quarantine.
        public static let workerKilled = Code("workerKilled")
        /// The plugin exceeded one of its resource limits (memory, CPU, message size).
        public static let limitExceeded = Code("limitExceeded")
        /// A request or the launch did not finish before its deadline.
        public static let timedOut = Code("timedOut")
        /// The request was cancelled, or the process was invalidated while it waited.
        public static let cancelled = Code("cancelled")
        /// The worker sent bytes that break the wire protocol; it was stopped.
        public static let protocolViolation = Code("protocolViolation")
        /// The plugin answered with its own error code and message.
        public static let pluginError = Code("pluginError")
        /// No plugin with this identity is installed, or it is not usable by this host.
        public static let notFound = Code("notFound")
        /// The plugin is installed but not approved, disabled, or its approval no longer matches.
        public static let notApproved = Code("notApproved")
        /// The plugin was quarantined after crashing repeatedly.
        public static let quarantined = Code("quarantined")
        /// A typed call named a function the manifest does not declare.
        public static let unknownFunction = Code("unknownFunction")
        /// A typed call's arguments do not match the declared signature.
        public static let invalidArguments = Code("invalidArguments")
        /// A callback of a typed call failed: the caller's handler threw or answered the wrong
        /// type, or the library passed what the callback's declaration rules out. The library got
        /// zero from the callback from then on; the call's result is this error.
        public static let callbackFailed = Code("callbackFailed")
        /// The operation needs something the plugin does not offer (e.g. a request handler).
        public static let unsupported = Code("unsupported")
        /// The process was already invalidated or has ended.
        public static let invalidated = Code("invalidated")
        /// The manifest, catalog or policy could not be read.
        public static let configurationError = Code("configurationError")
        /// The bundle's bytes, read for loading, are not the bytes the owner approved (they
        /// changed on disk since). Nothing was loaded; it does not count as a crash.
        public static let bundleChanged = Code("bundleChanged")
        /// The plugin refused the connection; the description carries its reason.
        public static let connectionRefused = Code("connectionRefused")
        /// The connection was closed (by the host, or because its process ended) while the
        /// request waited.
        public static let connectionClosed = Code("connectionClosed")
        /// The machine's owner (or administrator) disabled or revoked the plugin, or it was
        /// quarantined, while it ran: its process was ended.
        public static let disabledByOwner = Code("disabledByOwner")
    }

    /// How a worker process ended.
    public enum Termination: Sendable, Hashable, CustomStringConvertible {
        case exited(status: Int32)
        case signaled(signal: Int32, name: String)

        public var description: String {
            switch self {
            case .exited(let status): "exit status \(status)"
            case .signaled(_, let name): name
            }
        }
    }

    /// A resource limit the plugin ran into.
    public struct ExceededLimit: Sendable, Hashable, CustomStringConvertible {
        public enum Kind: String, Sendable, Hashable {
            case memory, cpu, openFiles, messageSize
        }

        public var kind: Kind
        /// The limit in its unit: bytes, seconds or descriptors.
        public var value: UInt64

        public init(kind: Kind, value: UInt64) {
            self.kind = kind
            self.value = value
        }

        /// "memory limit 256 MiB", "CPU limit 2 s", "open files limit 64", "message limit 1 MiB".
        public var description: String {
            switch kind {
            case .memory: "memory limit \(ByteCount(value))"
            case .cpu: "CPU limit \(value) s"
            case .openFiles: "open files limit \(value)"
            case .messageSize: "message limit \(ByteCount(value))"
            }
        }
    }

    public let code: Code
    /// The plugin's identifier, when the error concerns one.
    public let pluginIdentifier: String?
    /// What happened, without the plugin's name (see `description` for the whole sentence).
    public let reason: String
    /// How the worker ended, when it did.
    public let termination: Termination?
    /// The limit the plugin hit, for `limitExceeded`.
    public let exceededLimit: ExceededLimit?
    /// The plugin's own error code, for `pluginError`.
    public let pluginErrorCode: Int32?
    /// The last bytes (up to 16 KiB) the worker wrote to stdout and stderr.
    public let standardErrorTail: String
    /// The system error underneath, if any.
    public let underlying: (any Error & Sendable)?
    /// Where the plugin was, innermost frame first: the crashed thread's frames for
    /// `workerCrashed` (and a limit that ended the worker with a signal), the frames of the
    /// thread serving the request for a request's `timedOut`. Empty when the worker could not
    /// say (it blocks the signals, or an older worker). Linux addition.
    public package(set) var backtrace: [StackFrame] = []
    /// The stack as the worker sent it, until the channel has named its frames.
    package var unsymbolizedStack: StackReport?

    package init(
        _ code: Code,
        plugin: String?,
        _ reason: String,
        termination: Termination? = nil,
        exceededLimit: ExceededLimit? = nil,
        pluginErrorCode: Int32? = nil,
        standardErrorTail: String = "",
        underlying: (any Error & Sendable)? = nil
    ) {
        self.code = code
        self.pluginIdentifier = plugin
        self.reason = reason
        self.termination = termination
        self.exceededLimit = exceededLimit
        self.pluginErrorCode = pluginErrorCode
        self.standardErrorTail = standardErrorTail
        self.underlying = underlying
    }

    /// One line: "plugin com.example.x: crashed with SIGSEGV (segmentation fault at 0x0)". Text
    /// that came from the plugin (its identifier, messages) is shown inert: control characters,
    /// escape sequences and direction overrides appear escaped.
    public var description: String {
        guard let pluginIdentifier else { return InertText.escape(reason) }
        return "plugin \(InertText.escape(pluginIdentifier)): \(InertText.escape(reason))"
    }

    public var errorDescription: String? { description }
}

extension AppExtensionError {
    /// A launch whose files could not be sealed, or whose bytes are not the approved ones.
    package init(sealedFileFailure failure: SealedFileCache.Failure, plugin: String) {
        switch failure {
        case .changed(let path, let expected, let found):
            self.init(
                .bundleChanged, plugin: plugin,
                "\(path) changed since it was approved (SHA-256 \(found.prefix(16))…, approved \(expected.prefix(16))…); nothing was loaded. Review it and run 'plugind approve \(plugin)' again"
            )
        case .unreadable(let path, let reason):
            self.init(.pluginLoadFailed, plugin: plugin, "cannot read \(path) for loading: \(reason)")
        case .hostResourceExhausted(let path, let reason):
            self.init(.spawnFailed, plugin: plugin, "cannot read \(path) for loading: \(reason); the plugin is not at fault")
        case .untrusted(let refusal):
            self.init(.pluginLoadFailed, plugin: plugin, "system library \(refusal); nothing was loaded")
        }
    }
}
