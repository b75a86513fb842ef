import Synchronization

/// An opaque pointer a library gave out (a `sqlite3 *`, a `sqlite3_stmt *`), as the host holds
/// it: the kind the manifest names in `"handles"` and the number the worker's handle table gave
/// it. The pointer itself never leaves the worker; a call that takes a handle passes the number,
/// and the worker refuses one it did not give out, one already released, or one of another kind,
/// before the library is called.
///
/// A handle from a call is owned by the process it came from: `release()` calls the kind's
/// declared release function, and dropping the last reference to it does the same in a detached
/// task. A handle lives only as long as its worker; a handle made with `init(kind:id:)` has no
/// process, so that only an explicit call of the release function releases it.
///
/// Two handles are equal when their kind and number are: the same object in the worker.
public final class FunctionHandle: Hashable, Sendable, CustomStringConvertible {
    /// The kind, as the manifest names it (a C identifier).
    public let kind: String
    /// The number the worker gave it: from 1, never reused while the worker runs; 0 for NULL.
    public let id: UInt64
    /// What releases it (`FunctionHandle.release()`, which the host API adds); nil for a handle
    /// made by hand.
    package let owner: (any FunctionHandleOwner)?
    /// The worker whose table numbered it (`FunctionHandleOwner.worker`); nil for a handle made
    /// by hand. Kept, not asked of the owner: every call that passes the handle checks it.
    package let worker: ObjectIdentifier?
    private let released = Atomic(false)

    /// A handle by its kind and number, with no process to release it: one a worker returns
    /// before the host adopts it, or one named by hand. A number the worker did not give out is
    /// refused by the worker before any call.
    public init(kind: String, id: UInt64) {
        self.kind = kind
        self.id = id
        self.owner = nil
        self.worker = nil
    }

    /// A handle the host received from a call: `owner` releases it.
    package init(kind: String, id: UInt64, owner: any FunctionHandleOwner) {
        self.kind = kind
        self.id = id
        self.owner = owner
        self.worker = owner.worker
    }

    /// The NULL handle of `kind`: what a function returned or wrote when it gave out no object.
    /// Passing it to a function is refused before the call.
    public static func null(kind: String) -> FunctionHandle {
        FunctionHandle(kind: kind, id: 0)
    }

    /// Whether this is the NULL handle.
    public var isNull: Bool { id == 0 }

    /// Whether this host released it: through `release()`, or by passing it to its kind's
    /// release function. Passing a released handle is refused before the call.
    public var isReleased: Bool { released.load(ordering: .acquiring) }

    /// Marks it released without calling anything: after a call of the release function that
    /// consumed it. True the first time.
    @discardableResult
    package func markReleased() -> Bool {
        !released.exchange(true, ordering: .acquiringAndReleasing)
    }

    deinit {
        guard let owner, !isNull else { return }
        owner.dropped(kind: kind, id: id, needsRelease: markReleased())
    }

    /// `kind#id`, `kind#null` for NULL.
    public var description: String { "\(kind)#\(isNull ? "null" : String(id))" }

    public static func == (left: FunctionHandle, right: FunctionHandle) -> Bool {
        left.kind == right.kind && left.id == right.id
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(kind)
        hasher.combine(id)
    }

    /// `kind#id` or `kind#null` read back; nil for other text.
    public static func parse(_ text: String) -> FunctionHandle? {
        guard let hash = text.firstIndex(of: "#") else { return nil }
        let kind = String(text[..<hash])
        let number = text[text.index(after: hash)...]
        guard FunctionSignature.isCIdentifier(kind) else { return nil }
        if number == "null" { return .null(kind: kind) }
        guard let id = UInt64(number), id > 0 else { return nil }
        return FunctionHandle(kind: kind, id: id)
    }
}

/// What releases the handles a process received: the host's side of a worker's handle table.
/// Nothing here is `async`, since the worker links this module and must not link Swift's
/// concurrency runtime; the host API's `FunctionHandle.release()` adds the awaited release.
package protocol FunctionHandleOwner: AnyObject, Sendable {
    /// The worker whose handle table numbers the handles.
    var worker: ObjectIdentifier { get }
    /// The last reference to the handle is gone; when `needsRelease` (it was not released),
    /// release it without waiting (a refusal, say of a handle the worker no longer knows, is
    /// ignored).
    func dropped(kind: String, id: UInt64, needsRelease: Bool)
}
