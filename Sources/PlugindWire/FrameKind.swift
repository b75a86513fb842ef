/// What a frame carries. Host-to-worker kinds are below 0x80, worker-to-host kinds above; a
/// receiver rejects a kind meant for the other direction.
package enum FrameKind: UInt8, CaseIterable, Sendable {
    // Host → worker
    /// Opens the conversation: protocol versions, features and what to load (`Hello`).
    case hello = 0x01
    /// Raw request bytes for the plugin's handler.
    case request = 0x02
    /// A typed call of a manifest-declared function (`FunctionCall`).
    case call = 0x03
    /// The host no longer wants the answer to the request with this identifier.
    case cancel = 0x04
    /// Orderly shutdown: the worker calls the plugin's deinit, answers `goodbye` and exits.
    case shutdown = 0x05
    /// Opens the connection named in the header (payload: the host's identifier); the worker
    /// answers `connectionAccepted` or `connectionRefused`.
    case openConnection = 0x06
    /// Closes the connection named in the header; the plugin's asks on it fail.
    case closeConnection = 0x07
    /// The answer to the plugin's ask with this identifier: raw bytes.
    case answer = 0x08
    /// The host could not answer the ask with this identifier (`AskFailure`).
    case askFailed = 0x09
    /// A request the host's handler of an ask sends while the plugin waits for its answer:
    /// the ask's identifier (8 bytes), then the request bytes. The thread that asked runs it.
    case nestedRequest = 0x0A
    /// The last frame the host writes to the pipe once both sides agreed to `ProtocolFeature.ring`:
    /// its later frames travel through the shared ring, and the pipe carries only `wake`.
    case switchToRing = 0x0B
    /// The host wrote to the ring while the worker was not polling it: look at it. Only on the
    /// pipe, after `switchToRing`.
    case wake = 0x0C
    /// A typed call the host's handler of a callback makes while the library waits for the
    /// handler's answer: the callback's ask identifier (8 bytes), then the call (`call`'s
    /// payload). The thread that waits for the answer runs it.
    case nestedCall = 0x0D

    // Worker → host
    /// The plugin is loaded and the worker is serving (`Ready`).
    case ready = 0x81
    /// Loading failed; the worker exits after sending it (`LoadFailure`).
    case loadFailed = 0x82
    /// Raw response bytes.
    case response = 0x83
    /// The plugin answered with an error code and message (`PluginFailure`).
    case failure = 0x84
    /// What a typed call returned (`FunctionCallReply`: its value, outputs and errno).
    case callResult = 0x85
    /// A typed call was refused before the function ran (message string).
    case callFailed = 0x86
    /// The request with this identifier was dropped after a cancel; no other answer follows.
    case cancelled = 0x87
    /// Raw bytes the plugin sent unprompted; the identifier ties them to a request, or is 0.
    case event = 0x88
    /// Progress of a request: completed and total units.
    case progress = 0x89
    /// A log line from the plugin or the worker: level and text.
    case log = 0x8A
    /// Written from the worker's fatal-signal handler just before it dies (`FatalSignalReport`).
    case fatalSignal = 0x8B
    /// Answer to `shutdown`; the worker exits next.
    case goodbye = 0x8C
    /// The plugin accepted the connection named in the header.
    case connectionAccepted = 0x8D
    /// The plugin refused the connection named in the header (payload: its reason).
    case connectionRefused = 0x8E
    /// The plugin asks the host, on the connection named in the header: raw bytes.
    case ask = 0x8F
    /// The plugin stopped waiting for the answer to this ask (its deadline passed).
    case askCancelled = 0x90
    /// A thread's stack (`StackReport`): the faulting thread's, after `fatalSignal`; or the one
    /// serving the request in the header, which the host asked for with the worker's stack
    /// signal (`PLUGIND_SHIM_STACK_SIGNAL`) when the request's deadline passed.
    case stackReport = 0x91
    /// A call of the plugin's that a confinement layer refused (`SandboxRefusal`).
    case sandboxRefusal = 0x92
    /// The worker wrote to the ring while the host was not polling it: look at it. Only on the
    /// pipe, after the worker's `ready` listed `ProtocolFeature.ring` (from then on the worker's
    /// frames travel through the ring, except those its signal handlers write: `fatalSignal`,
    /// `stackReport`, `sandboxRefusal`).
    case wakeHost = 0x93
    /// The library called a callback of the typed call in the payload (its identifier, 8 bytes),
    /// then the callback's parameter index (4 bytes) and its arguments: the host's handler
    /// answers with `answer` (the returned value) or `askFailed`, as for an ask with the
    /// identifier in the header.
    case callback = 0x94
    /// A typed call with callbacks ended, but a callback failed (message string): the library
    /// got zero from it from then on.
    case callbackFailed = 0x95

    package enum Direction: Sendable {
        case hostToWorker
        case workerToHost
    }

    package var direction: Direction {
        rawValue < 0x80 ? .hostToWorker : .workerToHost
    }

    /// Whether frames of this kind carry a request identifier. Those that do not must carry 0, so
    /// that every message has exactly one encoding. (Events and progress may carry 0: "no
    /// request".)
    package var carriesRequestID: Bool {
        switch self {
        case .request, .call, .cancel, .response, .failure, .callResult, .callFailed, .cancelled, .event, .progress, .answer,
            .askFailed, .nestedRequest, .ask, .askCancelled, .stackReport, .nestedCall, .callback, .callbackFailed:
            true
        case .hello, .shutdown, .ready, .loadFailed, .log, .fatalSignal, .goodbye, .openConnection, .closeConnection,
            .connectionAccepted, .connectionRefused, .sandboxRefusal, .switchToRing, .wake, .wakeHost:
            false
        }
    }

    /// Whether frames of this kind may name a connection; the others carry 0. A request names
    /// the connection it was sent on (0 for a process-wide one, such as a typed call).
    package var carriesConnection: Bool {
        switch self {
        case .request, .nestedRequest, .openConnection, .closeConnection, .connectionAccepted, .connectionRefused, .ask:
            true
        case .hello, .call, .cancel, .shutdown, .answer, .askFailed, .ready, .loadFailed, .response, .failure, .callResult,
            .callFailed, .cancelled, .event, .progress, .log, .fatalSignal, .goodbye, .askCancelled, .stackReport,
            .sandboxRefusal, .switchToRing, .wake, .wakeHost, .nestedCall, .callback, .callbackFailed:
            false
        }
    }
}
