import CPlugindCallbacks
import Glibc
import PlugindWire
import Synchronization

/// The worker's callback stubs (`CPlugindCallbacks`): which typed call's callback each one
/// serves while that call runs. A call takes a stub for each callback argument and gives it back
/// when the library returns; the stub's address is the function pointer the library gets.
///
/// Every stub calls `dispatch`, which finds the callback by slot and has `CallbackCall` decode
/// its arguments and forward them to the host. A stub the library calls after its call ended
/// (it kept the pointer) belongs to nobody: the worker can no longer trust the library, says so
/// and exits rather than guess.
final class CallbackPool: Sendable {
    static let shared = CallbackPool()

    private struct Binding {
        let call: CallbackCall
        let parameter: Int
    }

    private let bindings: Mutex<[Binding?]>

    private init() {
        bindings = Mutex(Array(repeating: nil, count: Int(plugind_callback_slot_count())))
        plugind_callbacks_set_dispatcher(dispatch)
    }

    /// The stubs of `call`'s callbacks, by parameter index; nil when the pool has too few free
    /// (then none is taken).
    func acquire(for call: CallbackCall) -> [Int: (slot: UInt32, pointer: UnsafeMutableRawPointer)]? {
        let wanted = call.signature.callbacks.map(\.parameter)
        let slots = bindings.withLock { bindings -> [Int: UInt32]? in
            let free = bindings.indices.filter { bindings[$0] == nil }
            guard free.count >= wanted.count else { return nil }
            var taken: [Int: UInt32] = [:]
            for (parameter, slot) in zip(wanted, free) {
                bindings[slot] = Binding(call: call, parameter: parameter)
                taken[parameter] = UInt32(slot)
            }
            return taken
        }
        guard let slots else { return nil }
        var stubs: [Int: (slot: UInt32, pointer: UnsafeMutableRawPointer)] = [:]
        for (parameter, slot) in slots {
            guard let pointer = plugind_callback_stub(slot) else {
                release(Array(slots.values))
                return nil
            }
            stubs[parameter] = (slot, pointer)
        }
        return stubs
    }

    /// Gives the slots back once the library returned.
    func release(_ slots: [UInt32]) {
        bindings.withLock { bindings in
            for slot in slots where Int(slot) < bindings.count { bindings[Int(slot)] = nil }
        }
    }

    /// How many stubs this architecture has: 0 where there are none (not x86-64 or AArch64).
    static var capacity: Int { Int(plugind_callback_slot_count()) }

    fileprivate func binding(_ slot: UInt32) -> (call: CallbackCall, parameter: Int)? {
        bindings.withLock { bindings in
            guard Int(slot) < bindings.count, let binding = bindings[Int(slot)] else { return nil }
            return (binding.call, binding.parameter)
        }
    }
}

/// Every stub's entry into Swift: the lock is not held while the callback runs.
private let dispatch: plugind_callback_dispatcher = { slot, integers, floats in
    guard let (call, parameter) = CallbackPool.shared.binding(slot) else {
        WorkerMain.report("the library called callback stub \(slot) after the typed call it was given for returned; the worker ends")
        _exit(70)
    }
    return call.invoke(parameter: parameter, integers: integers, floats: floats)
}
