import Foundation
import PlugindSystem

/// The lines of standard input as they arrive, for `plugind dev`, which serves each as a request:
/// read by a thread of their own, taken one at a time by whichever task asks next. A task that is
/// cancelled while it waits gets nil and leaves the lines that follow to the next one.
final class StandardInputLines: Sendable {
    private struct State {
        var lines: [String] = []
        var ended = false
        var waiter: CheckedContinuation<String?, Never>?
    }

    private let state = Locked(State())

    init() {
        Thread { [state] in
            var pending: [UInt8] = []
            while true {
                let data = FileHandle.standardInput.availableData
                if data.isEmpty { break }
                pending += data
                while let newline = pending.firstIndex(of: 0x0A) {
                    let line = String(decoding: pending[..<newline], as: UTF8.self)
                    pending.removeSubrange(...newline)
                    Self.deliver(line, to: state)
                }
            }
            if !pending.isEmpty { Self.deliver(String(decoding: pending, as: UTF8.self), to: state) }
            let waiter = state.withLock { state -> CheckedContinuation<String?, Never>? in
                state.ended = true
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume(returning: nil)
        }.start()
    }

    private static func deliver(_ line: String, to state: Locked<State>) {
        let waiter = state.withLock { state -> CheckedContinuation<String?, Never>? in
            guard let waiter = state.waiter else {
                state.lines.append(line)
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.resume(returning: line)
    }

    /// The next line; nil when standard input ended or the task was cancelled.
    func next() async -> String? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<String?, Never>) in
                let immediate: String?? = state.withLock { state in
                    if !state.lines.isEmpty { return .some(state.lines.removeFirst()) }
                    if state.ended || Task.isCancelled { return .some(nil) }
                    state.waiter = continuation
                    return nil
                }
                if let immediate { continuation.resume(returning: immediate) }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<String?, Never>? in
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume(returning: nil)
        }
    }
}
