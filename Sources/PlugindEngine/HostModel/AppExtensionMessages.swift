import PlugindSystem

/// The messages a plugin sends unprompted, as an asynchronous sequence: what
/// `AppExtensionConnection.messages()` returns. Each sequence buffers what its reader has not
/// taken yet up to a budget (`bufferedBytes` and `bufferedMessages`); a reader that falls behind
/// loses the oldest messages first and is told how many with a `.dropped(count:)` message, so
/// that a plugin can never make its host hold more than the budget. The sequence ends when the
/// process ends.
public struct AppExtensionMessages: AsyncSequence, Sendable {
    public typealias Element = AppExtensionMessage

    /// The most bytes (of events and log text) one sequence holds for its reader.
    public static let bufferedBytes = 16 << 20
    /// The most messages one sequence holds for its reader.
    public static let bufferedMessages = 4096

    let buffer: Buffer

    public struct AsyncIterator: AsyncIteratorProtocol {
        let buffer: Buffer

        public mutating func next() async -> AppExtensionMessage? {
            await buffer.next()
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async -> AppExtensionMessage? {
            await buffer.next()
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(buffer: buffer)
    }

    /// The shared state of one sequence: what the plugin sent and the reader has not taken.
    final class Buffer: Sendable {
        private struct State {
            /// Messages before `head` are taken or dropped; `compact` releases them.
            var queue: [AppExtensionMessage] = []
            var head = 0
            var bytes = 0
            var dropped = 0
            var finished = false
            var waiter: CheckedContinuation<AppExtensionMessage?, Never>?

            /// Releases what was taken or dropped once it is at least half the queue: what the
            /// buffer holds in memory stays within twice its budget of messages, whether the
            /// reader is slow or absent, at an amortized constant cost a message.
            mutating func compact() {
                if head == queue.count {
                    queue.removeAll(keepingCapacity: queue.count <= 64)
                    head = 0
                } else if head >= 32, head * 2 >= queue.count {
                    queue.removeFirst(head)
                    head = 0
                }
            }
        }

        private let state = Locked(State())
        let byteBudget: Int
        let countBudget: Int

        init(byteBudget: Int = AppExtensionMessages.bufferedBytes, countBudget: Int = AppExtensionMessages.bufferedMessages) {
            self.byteBudget = byteBudget
            self.countBudget = countBudget
        }

        /// Hands `message` to a waiting reader, or keeps it, making room by dropping the oldest.
        func yield(_ message: AppExtensionMessage) {
            let size = message.bufferedSize
            let waiter = state.withLock { state -> CheckedContinuation<AppExtensionMessage?, Never>? in
                guard !state.finished else { return nil }
                if let waiter = state.waiter {
                    state.waiter = nil
                    return waiter
                }
                while state.head < state.queue.count,
                    state.bytes + size > byteBudget || state.queue.count - state.head >= countBudget
                {
                    state.bytes -= state.queue[state.head].bufferedSize
                    state.head += 1
                    state.dropped += 1
                }
                if size > byteBudget {
                    state.dropped += 1
                } else {
                    state.queue.append(message)
                    state.bytes += size
                }
                state.compact()
                return nil
            }
            waiter?.resume(returning: message)
        }

        /// Ends the sequence once the reader has taken what is buffered.
        func finish() {
            let waiter = state.withLock { state -> CheckedContinuation<AppExtensionMessage?, Never>? in
                state.finished = true
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume(returning: nil)
        }

        func next() async -> AppExtensionMessage? {
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<AppExtensionMessage?, Never>) in
                    let ready: AppExtensionMessage?? = state.withLock { state in
                        if state.dropped > 0 {
                            defer { state.dropped = 0 }
                            return .some(.dropped(count: state.dropped))
                        }
                        if state.head < state.queue.count {
                            let message = state.queue[state.head]
                            state.head += 1
                            state.bytes -= message.bufferedSize
                            state.compact()
                            return .some(message)
                        }
                        if state.finished || Task.isCancelled { return .some(nil) }
                        state.waiter = continuation
                        return .none
                    }
                    if let ready { continuation.resume(returning: ready) }
                }
            } onCancel: {
                let waiter = state.withLock { state -> CheckedContinuation<AppExtensionMessage?, Never>? in
                    defer { state.waiter = nil }
                    return state.waiter
                }
                waiter?.resume(returning: nil)
            }
        }
    }
}

extension AppExtensionMessage {
    /// What holding the message costs a buffer, roughly: its bytes and a fixed overhead.
    var bufferedSize: Int {
        switch self {
        case .event(_, let bytes): bytes.count + 64
        case .log(_, let message): message.utf8.count + 64
        case .sandboxRefusal(let refusal): refusal.call.utf8.count + refusal.detail.utf8.count + 64
        case .progress, .dropped: 64
        }
    }
}
