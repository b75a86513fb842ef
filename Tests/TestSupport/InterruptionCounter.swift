import PlugindSystem

/// Counts `onInterruption` calls and lets a test await the first one.
package final class InterruptionCounter: Sendable {
    private let state = Locked<(count: Int, waiters: [(Int, CheckedContinuation<Void, Never>)])>((0, []))

    package init() {}

    package var handler: @Sendable () -> Void {
        { [self] in
            let waiters = state.withLock { state in
                state.count += 1
                let count = state.count
                defer { state.waiters.removeAll { $0.0 <= count } }
                return state.waiters.filter { $0.0 <= count }.map(\.1)
            }
            for waiter in waiters { waiter.resume() }
        }
    }

    package var count: Int { state.withLock { $0.count } }

    /// Returns once the handler has been called at least once.
    package func firstCall() async {
        await calls(1)
    }

    /// Returns once the handler has been called at least `count` times.
    package func calls(_ count: Int) async {
        await withCheckedContinuation { continuation in
            let already = state.withLock { state -> Bool in
                if state.count >= count { return true }
                state.waiters.append((count, continuation))
                return false
            }
            if already { continuation.resume() }
        }
    }
}
