import PlugindSystem

/// Counts `onInterruption` calls and lets a test await the first one.
package final class InterruptionCounter: Sendable {
    private let state = Locked<(count: Int, waiters: [CheckedContinuation<Void, Never>])>((0, []))

    package init() {}

    package var handler: @Sendable () -> Void {
        { [self] in
            let waiters = state.withLock { state in
                state.count += 1
                defer { state.waiters.removeAll() }
                return state.waiters
            }
            for waiter in waiters { waiter.resume() }
        }
    }

    package var count: Int { state.withLock { $0.count } }

    /// Returns once the handler has been called at least once.
    package func firstCall() async {
        await withCheckedContinuation { continuation in
            let already = state.withLock { state -> Bool in
                if state.count > 0 { return true }
                state.waiters.append(continuation)
                return false
            }
            if already { continuation.resume() }
        }
    }
}
