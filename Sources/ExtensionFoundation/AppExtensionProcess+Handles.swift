import PlugindWire
import Synchronization

/// The handles a process received from its calls (`FunctionHandle`): one object per number
/// while any is alive, so that dropping one of two copies of a handle (a library that returns a
/// pointer it gave out before gets the same number) does not release the other; and the
/// releases of dropped handles, each a call of the kind's release function started without
/// waiting.
final class ProcessHandles: FunctionHandleReleasing {
    private let channel: WorkerChannel
    private let pluginIdentifier: String
    /// Kind → the index of its release function in the manifest's functions.
    private let releaseFunctions: [String: UInt32]
    private let timeout: Duration

    private struct Weak {
        weak var handle: FunctionHandle?
    }

    private struct State {
        var live: [UInt64: Weak] = [:]
        /// The releases of dropped handles still running, by a number of their own.
        var releasing: [UInt64: Task<Void, Never>] = [:]
        var nextRelease: UInt64 = 0
    }

    private let state = Mutex(State())

    init(channel: WorkerChannel, pluginIdentifier: String, functions: [FunctionSignature], timeout: Duration) {
        self.channel = channel
        self.pluginIdentifier = pluginIdentifier
        var releaseFunctions: [String: UInt32] = [:]
        for (index, function) in functions.enumerated() {
            if let kind = function.releases { releaseFunctions[kind] = UInt32(index) }
        }
        self.releaseFunctions = releaseFunctions
        self.timeout = timeout
    }

    var worker: ObjectIdentifier { ObjectIdentifier(channel) }

    /// `value` with each handle the worker numbered as this process's object for the number.
    func adopt(_ value: FunctionValue) -> FunctionValue {
        guard case .handle(let handle) = value, !handle.isNull else { return value }
        return state.withLock { state -> FunctionValue in
            if let live = state.live[handle.id]?.handle, live.kind == handle.kind { return .handle(live) }
            let adopted = FunctionHandle(kind: handle.kind, id: handle.id, owner: self)
            state.live[handle.id] = Weak(handle: adopted)
            return .handle(adopted)
        }
    }

    func adopt(_ result: FunctionResult) -> FunctionResult {
        FunctionResult(
            value: adopt(result.value), outputs: result.outputs.map { FunctionOutput(name: $0.name, value: adopt($0.value)) },
            errorNumber: result.errorNumber)
    }

    func release(kind: String, id: UInt64) async throws {
        guard let index = releaseFunctions[kind] else {
            throw AppExtensionError(.invalidArguments, plugin: pluginIdentifier, "declares no release function for handle kind \(kind)")
        }
        _ = try await channel.call(function: index, arguments: [.handle(FunctionHandle(kind: kind, id: id))], timeout: timeout)
    }

    func dropped(kind: String, id: UInt64, needsRelease: Bool) {
        state.withLock { state in
            // A newer object for the number (adopted as this one was going away) keeps it.
            guard state.live[id]?.handle == nil else { return }
            state.live[id] = nil
            guard needsRelease else { return }
            let number = state.nextRelease
            state.nextRelease += 1
            state.releasing[number] = Task.detached { [self] in
                // Fire and forget: a worker that ended, or a number it no longer knows, is no
                // failure of anything the host still holds.
                try? await release(kind: kind, id: id)
                _ = self.state.withLock { $0.releasing.removeValue(forKey: number) }
            }
        }
    }

    /// Waits until the releases of the handles dropped so far have been answered.
    func settle() async {
        while let running = state.withLock({ $0.releasing.isEmpty ? nil : Array($0.releasing.values) }) {
            for task in running { await task.value }
        }
    }
}

extension AppExtensionProcess {
    /// Waits until the release of every handle of this process dropped so far has been answered
    /// by the worker: for tests that watch a handle go when its last reference does.
    package func settleHandleReleases() async {
        await handles.settle()
    }
}
