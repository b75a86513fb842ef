import PlugindSystem

/// The C API's handles: numbers, not pointers to memory. A handle is looked up in this table on
/// every call, so a NULL, released or foreign handle is found out and answered with an error
/// instead of touching freed memory. Numbers are never reused, so a stale copy of a released
/// handle cannot reach an object made later.
final class HandleRegistry: Sendable {
    static let shared = HandleRegistry()

    private struct Table {
        var objects: [UInt: any AnyObject & Sendable] = [:]
        // Well away from 0, and odd values only: no small integer or aligned pointer a caller
        // passes by mistake names a live handle.
        var next: UInt = 0x5000_0001
    }

    private let table = Locked(Table())

    /// Registers `object` and returns its handle (never nil: the numbers start far from 0 and
    /// only grow; optional only because a pointer made from a number is).
    func insert(_ object: some AnyObject & Sendable) -> OpaquePointer? {
        let number = table.withLock { table -> UInt in
            let number = table.next
            table.next += 2
            table.objects[number] = object
            return number
        }
        return OpaquePointer(bitPattern: number)
    }

    /// The live object of `handle`, when it is one of type `Object`.
    func object<Object>(_ handle: OpaquePointer?, as type: Object.Type) -> Object? {
        guard let handle else { return nil }
        let number = UInt(bitPattern: handle)
        return table.withLock { $0.objects[number] } as? Object
    }

    /// Unregisters `handle` and returns its object, when it is one of type `Object`; a second
    /// removal finds nothing.
    func remove<Object>(_ handle: OpaquePointer?, as type: Object.Type) -> Object? {
        guard let handle else { return nil }
        let number = UInt(bitPattern: handle)
        return table.withLock { table -> (any AnyObject & Sendable)? in
            guard table.objects[number] is Object else { return nil }
            return table.objects.removeValue(forKey: number)
        } as? Object
    }
}
