import PlugindWire
import Synchronization

/// The opaque pointers the library gave out, each under a number the host holds instead: a
/// call passes the number, and the pointer reaches the library only when this table holds it
/// for the declared kind. A forged number, a released one or one of another kind is refused
/// before the call, so the library never sees a pointer it did not give out (or took back).
///
/// Numbers start at 1 and are never reused while the worker runs, so a number the host kept too
/// long names nothing rather than a later object. Request threads call concurrently: the table
/// is under a `Mutex`, never held across a call into the library. A handle in use by a call is
/// counted (in its entry, which the call holds); its release function is refused while another
/// call uses it, and once a release has begun the handle is gone for every other call.
///
/// A handle of a struct kind is a struct the worker made (`WorkerStruct`): the table owns it,
/// a call that sets or reads its fields holds it alone, and its release frees it after the
/// library's release function ran.
final class HandleTable: Sendable {
    /// An object, so that a call holds its entry and gives it back without the table's lock or
    /// a second lookup: this runs for every handle of every call.
    fileprivate final class Entry: Sendable {
        let kind: String
        let pointer: UInt
        /// Calls running with it: raised under the table's lock (where a release checks it),
        /// lowered by a call's end without it.
        let uses = Atomic(0)
        /// The struct, for a struct kind.
        let resident: WorkerStruct?

        init(kind: String, pointer: UInt, resident: WorkerStruct?) {
            self.kind = kind
            self.pointer = pointer
            self.resident = resident
        }
    }

    private struct State {
        var entries: [UInt64: Entry] = [:]
        /// The number of each pointer, by kind: a pointer the library gives out again (say
        /// `sqlite3_db_handle`) keeps its number.
        var numbers: [String: [UInt: UInt64]] = [:]
        var next: UInt64 = 1
    }

    private let state = Mutex(State())

    /// A handle a call holds: its pointer, and whether the call releases it.
    struct Use {
        let id: UInt64
        let pointer: UnsafeMutableRawPointer
        let releasing: Bool
        /// The struct, for a struct kind: the call's alone until `end`; freed by the caller
        /// after the release function ran, when `releasing`.
        var resident: WorkerStruct? { entry.resident }
        fileprivate let entry: Entry
    }

    /// Takes the handle numbered `id` for a call that passes it as a `kind` (and, when
    /// `releasing`, consumes it); nil with why not. `end(_:)` gives it back.
    func begin(_ id: UInt64, kind: String, releasing: Bool) -> Result<Use, HandleRefusal> {
        state.withLock { state -> Result<Use, HandleRefusal> in
            // Found once and counted in place: this runs for every handle of every call.
            guard let position = state.entries.index(forKey: id) else {
                return .failure(id > 0 && id < state.next ? .released : .unknown)
            }
            let entry = state.entries.values[position]
            guard entry.kind == kind else { return .failure(.wrongKind(entry.kind)) }
            guard let pointer = UnsafeMutableRawPointer(bitPattern: entry.pointer) else { return .failure(.unknown) }
            let uses = entry.uses.load(ordering: .acquiring)
            // A struct's fields are set before the call and read after it: one call at a time.
            if entry.resident != nil, uses > 0 { return .failure(.structInUse) }
            if releasing {
                guard uses == 0 else { return .failure(.inUse) }
                // Gone for every other call from now on: the library is about to free it.
                state.entries.remove(at: position)
                state.numbers[kind]?[entry.pointer] = nil
            } else {
                entry.uses.add(1, ordering: .relaxed)
            }
            return .success(Use(id: id, pointer: pointer, releasing: releasing, entry: entry))
        }
    }

    /// Gives back what `begin` took, after the call. Released, the entry holds the call's end
    /// until `begin` under the lock sees it: a release that comes before is refused as in use.
    func end(_ use: Use) {
        guard !use.releasing else { return }
        use.entry.uses.subtract(1, ordering: .releasing)
    }

    /// Gives back what `begin` took for a call that did not happen: a handle taken for its
    /// release is the table's again, under its number.
    func abandon(_ use: Use, kind: String) {
        guard use.releasing else { return end(use) }
        let address = UInt(bitPattern: use.pointer)
        state.withLock { state in
            state.entries[use.id] = use.entry
            state.numbers[kind, default: [:]][address] = use.id
        }
    }

    /// The number of `pointer`, a `kind` the library gave out: the one it already has, or a new
    /// one. 0 for NULL.
    func number(of pointer: UnsafeMutableRawPointer?, kind: String) -> UInt64 {
        guard let pointer else { return 0 }
        return number(of: pointer, kind: kind, resident: nil)
    }

    /// A new number for `resident`, a struct of a struct kind the worker made for an out
    /// handle: the table owns it from now on.
    func register(_ resident: WorkerStruct, kind: String) -> UInt64 {
        number(of: resident.memory, kind: kind, resident: resident)
    }

    private func number(of pointer: UnsafeMutableRawPointer, kind: String, resident: WorkerStruct?) -> UInt64 {
        let address = UInt(bitPattern: pointer)
        return state.withLock { state in
            if let id = state.numbers[kind]?[address] { return id }
            let id = state.next
            state.next += 1
            state.entries[id] = Entry(kind: kind, pointer: address, resident: resident)
            state.numbers[kind, default: [:]][address] = id
            return id
        }
    }
}

/// Why the handle table would not give a call a handle's pointer.
enum HandleRefusal: Error, Equatable {
    /// The number was never given out.
    case unknown
    /// It was, and its release function has been called.
    case released
    /// It names a handle of this other kind.
    case wrongKind(String)
    /// A call of its release function while another call uses it.
    case inUse
    /// A struct handle another call is using.
    case structInUse

    /// Follows "argument 1 ('db') of f(…) is handle sqlite3#7".
    var reason: String {
        switch self {
        case .unknown: "which this worker never gave out"
        case .released: "which was released"
        case .wrongKind(let kind): "which is a \(kind) handle"
        case .inUse: "which another call is using; its release function must wait for that call"
        case .structInUse: "a struct another call is using; a struct handle serves one call at a time"
        }
    }
}
