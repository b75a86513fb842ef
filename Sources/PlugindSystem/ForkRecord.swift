import CPlugindShims
import Glibc

/// A page the host shares with one launcher, where the kernel writes the pid of each child the
/// launcher forks for a request, as it creates it (clone's CLONE_PARENT_SETTID: stored before
/// clone returns, so no signal falls between the fork and the record).
///
/// Why: launchers fork workers and spares as the host's children (CLONE_PARENT), so the host
/// reaps them. A launcher killed between its fork and its answer cannot say which child it made;
/// that child, once it ends, would stay the host's zombie for good (the chaos soak found them).
/// The host, its parent, reads the pid here instead, and kills and reaps it.
///
/// Slots are 8 bytes, indexed by request id modulo `slotCount`: the id, written by the host
/// before it sends the request, and the pid, written by the kernel in the launcher's fork. The
/// launcher maps the page for its whole life and out of its children (MADV_DONTFORK, see
/// `plugind_shim_fork_record_map`): no worker or spare, so no plugin, ever holds it, and a pid
/// read here can only have come from the launcher's own fork.
package struct ForkRecord: @unchecked Sendable {
    package static let slotCount: UInt32 = 512
    private static let pageBytes = Int(slotCount) * 8

    /// The host's mapping, unmapped with the last copy; nil in the launcher, whose mapping is
    /// never unmapped (a Swift object's release in a forked child must not unmap anything).
    private let owner: SharedMemory?
    /// `@unchecked Sendable`: the page's address, fixed for the record's life.
    private let base: UnsafeMutableRawPointer

    /// The host's side: a new page, and the descriptor to hand to the launcher (close-on-exec;
    /// the caller closes it once the launcher has it).
    package static func create() throws(SystemError) -> (ForkRecord, FileDescriptor) {
        let (memory, descriptor) = try SharedMemory.create(size: pageBytes)
        guard let page = memory.bytes(at: 0, count: pageBytes)?.baseAddress else {
            descriptor.close()
            throw SystemError("fork record", .invalidArgument)
        }
        return (ForkRecord(owner: memory, base: page), descriptor)
    }

    /// The launcher's side: maps the page it was given (closing the descriptor), for good and
    /// kept out of its children.
    package static func mapInLauncher(_ descriptor: FileDescriptor) throws(SystemError) -> ForkRecord {
        var address: UnsafeMutableRawPointer?
        try checkShim("map the fork record", plugind_shim_fork_record_map(descriptor.rawValue, pageBytes, &address))
        guard let address else { throw SystemError("map the fork record", .invalidArgument) }
        return ForkRecord(owner: nil, base: address)
    }

    private static func offset(of request: UInt32) -> Int { Int(request % slotCount) * 8 }

    /// The host, before it sends `request`: its slot names it and holds no pid yet.
    package func expect(request: UInt32) {
        let slot = base + Self.offset(of: request)
        slot.storeBytes(of: request, as: UInt32.self)
        slot.storeBytes(of: 0, toByteOffset: 4, as: Int32.self)
    }

    /// The launcher: where the kernel is to store the pid of the child it forks for `request`.
    package func childPIDAddress(for request: UInt32) -> Int {
        Int(bitPattern: base + Self.offset(of: request) + 4)
    }

    /// The host, once the launcher has ended: the pid of the child it forked for `request`, if it
    /// forked one and its slot still names that request.
    package func recordedChild(of request: UInt32) -> Int32? {
        let slot = base + Self.offset(of: request)
        let (named, pid) = (slot.load(as: UInt32.self), slot.load(fromByteOffset: 4, as: Int32.self))
        return named == request && pid > 0 ? pid : nil
    }
}
