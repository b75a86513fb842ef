import Glibc
import PlugindPluginABI
import PlugindSystem
import PlugindWire
import Synchronization

/// Serves one loaded plugin: runs requests one at a time on the main thread, answers typed calls,
/// honours cancellation, and forwards what the plugin sends unprompted.
final class PluginServer {
    private let plugin: LoadedPlugin
    private let load: LoadConfiguration
    private let transport: PipeTransport
    private var state: UnsafeMutableRawPointer?
    private var hostInterface: UnsafeMutablePointer<plugind_host>?
    private let response: ResponseBuffer
    private var sharedMemory: WorkerSharedMemory?

    /// Frames read while looking for cancellations during a request, handled afterwards in order.
    private var backlog: [Frame] = []
    private var backlogStart = 0
    private var runningRequest: UInt64 = 0
    private var runningRequestCancelled = false
    /// Set when a write to the host failed or the host closed its end; plugin threads set it too
    /// (through `log` and `post_message`), hence atomic.
    private let hostHungUp = Atomic(false)

    init(plugin: LoadedPlugin, load: LoadConfiguration, transport: PipeTransport, sharedMemory: WorkerSharedMemory?) {
        self.plugin = plugin
        self.load = load
        self.transport = transport
        self.sharedMemory = sharedMemory
        self.response = ResponseBuffer(limit: Int(load.limits.maxMessageBytes))
    }

    static func from(_ context: UnsafeMutableRawPointer?) -> PluginServer? {
        context.map { Unmanaged<PluginServer>.fromOpaque($0).takeUnretainedValue() }
    }

    /// Calls the plugin's `init`.
    func start() throws(LoadFailure) {
        guard let descriptor = plugin.descriptor else { return }
        let interface = PluginHostInterface.make(for: self)
        hostInterface = interface
        guard let initialize = descriptor.pointee.`init` else { return }
        response.reset()
        var pluginState: UnsafeMutableRawPointer?
        let status = initialize(interface, &pluginState, response.opaque)
        guard status == PLUGIND_PLUGIN_OK else {
            let message = response.errorMessage ?? "init returned \(status) without a message"
            throw LoadFailure(kind: .initializationFailed, message: message, pluginCode: status)
        }
        state = pluginState
    }

    /// Serves until the host closes the channel or asks to shut down. Returns the exit status.
    func serve() -> Int32 {
        while true {
            let frame: Frame
            if let queued = dequeueBacklog() {
                frame = queued
            } else {
                if hostHungUp.load(ordering: .acquiring) { return finish() }
                do {
                    guard let received = try transport.receive() else { return finish() }
                    frame = received
                } catch {
                    PluginServerLog.protocolError(error)
                    return 2
                }
            }
            let message: HostMessage
            do {
                message = try HostMessage(frame)
            } catch {
                PluginServerLog.protocolError(error)
                return 2
            }
            switch message {
            case .request(let id, let bytes):
                bytes.withUnsafeBytes { handleRequest(id: id, bytes: $0) }
            case .sharedRequest(let id, let location):
                guard let bytes = sharedMemory?.request(at: location) else {
                    PluginServerLog.protocolError(WireError.malformedPayload("request \(id) lies outside the shared-memory region"))
                    return 2
                }
                handleRequest(id: id, bytes: bytes)
            case .call(let id, let function, let arguments):
                handleCall(id: id, function: function, arguments: arguments)
            case .cancel(let id):
                cancelQueued(id)
            case .shutdown:
                let status = finish()
                try? transport.send(.goodbye)
                return status
            case .hello:
                PluginServerLog.protocolError(WireError.unexpectedMessage("second hello"))
                return 2
            }
        }
    }

    private func finish() -> Int32 {
        if let deinitialize = plugin.descriptor?.pointee.deinit {
            deinitialize(state)
            state = nil
        }
        return 0
    }

    // MARK: Requests

    /// `bytes` may lie in shared memory: valid until the answer is sent, like the plugin's view.
    private func handleRequest(id: UInt64, bytes: UnsafeRawBufferPointer) {
        guard let descriptor = plugin.descriptor else {
            send(
                .failure(
                    id: id,
                    PluginFailure(
                        code: ReservedFailureCode.noRequestHandler, message: "the plugin is function-only; it has no request handler")))
            return
        }
        response.reset(sharedRegion: sharedMemory?.freeResponseRegion)
        runningRequest = id
        runningRequestCancelled = false
        var empty: UInt8 = 0
        let status = withUnsafePointer(to: &empty) { emptyPointer -> Int32 in
            var request = plugind_plugin_request(
                identifier: id,
                bytes: bytes.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? emptyPointer,
                length: bytes.count
            )
            return descriptor.pointee.handle(state, &request, response.opaque)
        }
        runningRequest = 0
        if runningRequestCancelled {
            send(.cancelled(id: id))
        } else if let attempted = response.attemptedSize {
            let message = "response of \(attempted) bytes exceeds the message limit of \(response.limit) bytes"
            send(.failure(id: id, PluginFailure(code: ReservedFailureCode.responseTooLarge, message: message)))
        } else if status == PLUGIND_PLUGIN_OK {
            if response.isInSharedRegion && response.count >= SharedMemoryLayout.threshold,
                let location = sharedMemory?.placedResponse(length: response.count)
            {
                send(.sharedResponse(id: id, location))
            } else {
                let header = FrameHeader(kind: .response, requestID: id, payloadLength: response.count)
                sendChecked { () throws(SystemError) in try transport.send(header, payload: response.bytes) }
            }
        } else {
            var message = response.errorMessage ?? "the plugin returned error \(status) without a message"
            if let note = DescriptorLimitNote.current(limit: load.limits.openFiles) { message += " (\(note))" }
            send(.failure(id: id, PluginFailure(code: status, message: message)))
        }
    }

    private func handleCall(id: UInt64, function: UInt32, arguments: [FunctionValue]) {
        switch plugin.functions.call(function, arguments: arguments) {
        case .success(let value): send(.callResult(id: id, value))
        case .failure(let refusal): send(.callFailed(id: id, message: refusal.message))
        }
    }

    // MARK: Cancellation

    /// Called by the plugin (through `is_cancelled`) while it handles `id`: reads whatever the
    /// host has sent meanwhile, without blocking, so a cancel can reach a running request.
    func isCancelled(_ id: UInt64) -> Bool {
        pollForCancellations()
        return hostHungUp.load(ordering: .acquiring) || (id == runningRequest && runningRequestCancelled)
    }

    private func pollForCancellations() {
        while !hostHungUp.load(ordering: .acquiring) {
            var descriptor = pollfd(fd: transport.input.rawValue, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, 0) > 0 else { return }
            do {
                guard let frame = try transport.receive() else {
                    hostHungUp.store(true, ordering: .releasing)
                    return
                }
                if frame.header.kind == .cancel {
                    if frame.header.requestID == runningRequest {
                        runningRequestCancelled = true
                    } else {
                        cancelQueued(frame.header.requestID)
                    }
                } else {
                    backlog.append(frame)
                }
            } catch {
                PluginServerLog.protocolError(error)
                hostHungUp.store(true, ordering: .releasing)
                return
            }
        }
    }

    /// Drops a request that has not started yet and confirms it to the host.
    private func cancelQueued(_ id: UInt64) {
        let pending = backlog[backlogStart...]
        if let index = pending.firstIndex(where: { $0.header.requestID == id && $0.header.kind != .cancel }) {
            backlog.remove(at: index)
            send(.cancelled(id: id))
        }
    }

    private func dequeueBacklog() -> Frame? {
        guard backlogStart < backlog.count else {
            backlog.removeAll(keepingCapacity: true)
            backlogStart = 0
            return nil
        }
        defer { backlogStart += 1 }
        return backlog[backlogStart]
    }

    // MARK: Messages to the host (thread-safe: the transport serialises writes)

    func sendLog(_ level: PluginLogLevel, _ message: String) {
        send(.log(level: level, message: message))
    }

    func sendEvent(requestID: UInt64, bytes: UnsafeRawBufferPointer) -> Int32 {
        guard bytes.count <= Int(load.limits.maxMessageBytes) else { return EMSGSIZE }
        do {
            try transport.send(FrameHeader(kind: .event, requestID: requestID, payloadLength: bytes.count), payload: bytes)
            return 0
        } catch {
            return error.errno.rawValue
        }
    }

    func sendProgress(requestID: UInt64, completed: UInt64, total: UInt64) -> Int32 {
        do {
            try transport.send(.progress(requestID: requestID, completed: completed, total: total))
            return 0
        } catch {
            return error.errno.rawValue
        }
    }

    private func send(_ message: WorkerMessage) {
        sendChecked { () throws(SystemError) in try transport.send(message) }
    }

    /// A failed write means the host is gone; the worker stops at the next read.
    private func sendChecked(_ body: () throws(SystemError) -> Void) {
        do {
            try body()
        } catch {
            hostHungUp.store(true, ordering: .releasing)
        }
    }
}

enum PluginServerLog {
    static func protocolError(_ error: any Error) {
        WorkerMain.report("protocol error: \(error)")
    }
}
