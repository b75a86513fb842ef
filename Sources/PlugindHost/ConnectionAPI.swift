public import CPlugindHostAPI
import ExtensionFoundation
import PlugindEngine
import PlugindSystem

/// A `plugind_connection`, and the gate its ask handler and send completions pass.
final class HostConnection: Sendable {
    let connection: AppExtensionConnection
    let callbacks: CallbackGate

    init(_ connection: AppExtensionConnection, callbacks: CallbackGate) {
        self.connection = connection
        self.callbacks = callbacks
    }
}

/// The deadline a C caller asked for: 0 is the plugin's own.
func requestTimeout(_ milliseconds: UInt32) -> Duration? {
    milliseconds == 0 ? nil : .milliseconds(Int64(milliseconds))
}

@_cdecl("plugind_connection_open")
public func plugindConnectionOpen(
    _ process: OpaquePointer?, _ askHandler: plugind_ask_handler?, _ context: UnsafeMutableRawPointer?,
    _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> OpaquePointer? {
    guard let process = HandleRegistry.shared.object(process, as: HostProcess.self) else {
        HostError.invalidArgument("not a plugind process (NULL, or already released)").report(to: error)
        return nil
    }
    let callback = CallbackContext(context: context)
    let callbacks = CallbackGate()
    let opened = BlockingCall.run { () async throws -> AppExtensionConnection in
        guard let askHandler else { return try await process.process.makeConnection() }
        return try await process.process.makeConnection(blockingRequestHandler: { question in
            try await HostAsk.answer(question) { ask, bytes, length in
                let called = callbacks.run { askHandler(callback.context, ask, bytes, length) }
                // The connection is closing: the ask fails as every unanswered one does.
                if !called { HostAsk.cancel(ask) }
            }
        })
    }
    switch opened {
    case .success(let connection): return HandleRegistry.shared.insert(HostConnection(connection, callbacks: callbacks))
    case .failure(let failure):
        HostError(failure).report(to: error)
        return nil
    }
}

@_cdecl("plugind_connection_send")
public func plugindConnectionSend(
    _ connection: OpaquePointer?, _ bytes: UnsafePointer<UInt8>?, _ length: Int, _ timeout: UInt32,
    _ reply: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>?, _ replyLength: UnsafeMutablePointer<Int>?,
    _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> CInt {
    guard let connection = HandleRegistry.shared.object(connection, as: HostConnection.self) else {
        HostError.invalidArgument("not a plugind connection (NULL, or already closed)").report(to: error)
        return -1
    }
    guard let reply, let replyLength else {
        HostError.invalidArgument("reply and reply_length must not be NULL").report(to: error)
        return -1
    }
    guard let request = copiedBytes(bytes, length) else {
        HostError.invalidArgument("the request is NULL with a length of \(length)").report(to: error)
        return -1
    }
    let sent = BlockingCall.wait { finish in
        connection.connection.send(request, timeout: requestTimeout(timeout)) { finish($0.mapError { $0 as any Error }) }
    }
    switch sent {
    case .success(let answer):
        guard let copy = mallocCopy(answer) else {
            HostError.invalidArgument("no memory for a reply of \(answer.count) bytes").report(to: error)
            return -1
        }
        reply.pointee = copy
        replyLength.pointee = answer.count
        return 0
    case .failure(let failure):
        HostError(failure).report(to: error)
        return -1
    }
}

@_cdecl("plugind_connection_send_async")
public func plugindConnectionSendAsync(
    _ connection: OpaquePointer?, _ bytes: UnsafePointer<UInt8>?, _ length: Int, _ timeout: UInt32,
    _ completion: plugind_send_completion?, _ context: UnsafeMutableRawPointer?, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> CInt {
    guard let connection = HandleRegistry.shared.object(connection, as: HostConnection.self) else {
        HostError.invalidArgument("not a plugind connection (NULL, or already closed)").report(to: error)
        return -1
    }
    guard let completion else {
        HostError.invalidArgument("the completion must not be NULL").report(to: error)
        return -1
    }
    guard let request = copiedBytes(bytes, length) else {
        HostError.invalidArgument("the request is NULL with a length of \(length)").report(to: error)
        return -1
    }
    // Admitted now, so that a close that returns first waits for this completion.
    guard connection.callbacks.admit() else {
        HostError.invalidArgument("the connection is closing").report(to: error)
        return -1
    }
    let callback = CallbackContext(context: context)
    Task {
        let result: Result<[UInt8], any Error>
        do {
            result = .success(try await connection.connection.send(request, timeout: requestTimeout(timeout)))
        } catch {
            result = .failure(error)
        }
        connection.callbacks.runAdmitted {
            switch result {
            case .success(let answer):
                answer.withUnsafeBufferPointer { buffer in completion(callback.context, buffer.baseAddress, buffer.count, nil) }
            case .failure(let failure):
                completion(callback.context, nil, 0, HandleRegistry.shared.insert(HostError(failure)))
            }
        }
    }
    return 0
}

/// Returns only when no ask handler or send completion of the connection runs or can start
/// (plugind.h promises it beside the function): the host frees their context next.
@_cdecl("plugind_connection_close")
public func plugindConnectionClose(_ connection: OpaquePointer?) {
    guard let connection = HandleRegistry.shared.remove(connection, as: HostConnection.self) else { return }
    connection.callbacks.close()
    connection.connection.close()
    connection.callbacks.waitUntilIdle()
}
