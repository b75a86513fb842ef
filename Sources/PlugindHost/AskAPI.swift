import CPlugindHostAPI
import ExtensionFoundation
import PlugindEngine
import PlugindSystem

/// A `plugind_ask`: one question of the plugin, answered exactly once, from the handler or later
/// from any thread. The request handler's task waits on it; cancelling that task (the connection
/// closed, the process ended) fails it.
final class HostAsk: Sendable {
    private let waiter = Locked<CheckedContinuation<[UInt8], any Error>?>(nil)

    /// Resumes the waiting handler once; false when it was answered (or cancelled) already.
    func finish(_ result: Result<[UInt8], any Error>) -> Bool {
        guard
            let continuation = waiter.withLock({ current -> CheckedContinuation<[UInt8], any Error>? in
                defer { current = nil }
                return current
            })
        else { return false }
        continuation.resume(with: result)
        return true
    }

    /// Fails the ask of `handle` as a closed connection fails those it leaves unanswered.
    static func cancel(_ handle: OpaquePointer?) {
        _ = HandleRegistry.shared.remove(handle, as: HostAsk.self)?.finish(.failure(CancellationError()))
    }

    /// Hands `question` to the C handler and waits for its answer.
    static func answer(
        _ question: [UInt8], _ handler: @Sendable (OpaquePointer?, UnsafePointer<UInt8>?, Int) -> Void
    ) async throws -> [UInt8] {
        let ask = HostAsk()
        let handle = HandleRegistry.shared.insert(ask)
        // The handle as its number: a pointer type does not cross into the cancellation handler.
        let number = handle.map { UInt(bitPattern: $0) } ?? 0
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                ask.waiter.withLock { $0 = continuation }
                if Task.isCancelled {
                    _ = ask.finish(.failure(CancellationError()))
                    return
                }
                question.withUnsafeBufferPointer { buffer in handler(handle, buffer.baseAddress, buffer.count) }
            }
        } onCancel: {
            // An answer that comes later finds the handle gone.
            _ = HandleRegistry.shared.remove(OpaquePointer(bitPattern: number), as: HostAsk.self)
            _ = ask.finish(.failure(CancellationError()))
        }
    }
}

@_cdecl("plugind_ask_respond")
public func plugindAskRespond(_ ask: OpaquePointer?, _ bytes: UnsafePointer<UInt8>?, _ length: Int) -> CInt {
    guard let answer = copiedBytes(bytes, length), let ask = HandleRegistry.shared.remove(ask, as: HostAsk.self) else { return -1 }
    return ask.finish(.success(answer)) ? 0 : -1
}

@_cdecl("plugind_ask_fail")
public func plugindAskFail(_ ask: OpaquePointer?, _ code: Int32, _ message: UnsafePointer<CChar>?) -> CInt {
    guard let ask = HandleRegistry.shared.remove(ask, as: HostAsk.self) else { return -1 }
    let failure = AppExtensionConnection.RequestFailure(code: code == 0 ? 1 : code, text(message) ?? "the host failed the ask")
    return ask.finish(.failure(failure)) ? 0 : -1
}
