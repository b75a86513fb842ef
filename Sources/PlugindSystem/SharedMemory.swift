import CPlugindShims
import Glibc

/// A sealed memfd mapped into this process: the memory large messages travel through between
/// host and worker. Every access is bounds-checked against the mapping, since offsets come from
/// the other process. Unmapped when the last reference goes away.
///
/// `@unchecked Sendable`: the pointer and size never change; who may touch which bytes when is
/// decided by the protocol (`SharedMemoryLayout`), and each side copies what it reads from the
/// other before trusting it.
package final class SharedMemory: @unchecked Sendable {
    private let base: UnsafeMutableRawPointer
    package let size: Int

    private init(base: UnsafeMutableRawPointer, size: Int) {
        self.base = base
        self.size = size
    }

    deinit {
        plugind_shim_shared_memory_unmap(base, size)
    }

    /// Creates a memfd of `size` bytes and maps it. Returns the mapping and the descriptor to
    /// hand to the other process (close-on-exec; the caller closes it).
    package static func create(size: Int) throws(SystemError) -> (SharedMemory, FileDescriptor) {
        var raw: CInt = -1
        try checkShim("memfd_create", plugind_shim_shared_memory_create(size, &raw))
        let descriptor = FileDescriptor(rawValue: raw)
        do {
            return (try map(descriptor), descriptor)
        } catch {
            descriptor.close()
            throw error
        }
    }

    /// Maps the memfd `descriptor` (which must be sealed against shrinking) in full.
    package static func map(_ descriptor: FileDescriptor) throws(SystemError) -> SharedMemory {
        var address: UnsafeMutableRawPointer?
        var size = 0
        try checkShim("mmap shared memory", plugind_shim_shared_memory_map(descriptor.rawValue, &address, &size))
        guard let address else { throw SystemError("mmap shared memory", .invalidArgument) }
        return SharedMemory(base: address, size: size)
    }

    /// The `count` bytes at `offset`, or nil when they are not all inside the mapping.
    package func bytes(at offset: Int, count: Int) -> UnsafeMutableRawBufferPointer? {
        guard offset >= 0, count >= 0, offset <= size, count <= size - offset else { return nil }
        return UnsafeMutableRawBufferPointer(start: base + offset, count: count)
    }

    /// A copy of the `count` bytes at `offset`, or nil when they are not all inside the mapping.
    package func copyBytes(at offset: Int, count: Int) -> [UInt8]? {
        guard let source = bytes(at: offset, count: count) else { return nil }
        return [UInt8](UnsafeRawBufferPointer(source))
    }

    /// Copies `source` to `offset`; false when it does not fit inside the mapping.
    package func copy(_ source: UnsafeRawBufferPointer, to offset: Int) -> Bool {
        guard let destination = bytes(at: offset, count: source.count) else { return false }
        if let address = source.baseAddress, !source.isEmpty {
            destination.baseAddress!.copyMemory(from: address, byteCount: source.count)
        }
        return true
    }

    /// The 64-bit counter at `offset` (8-byte aligned), read with acquire ordering; 0 when out of
    /// bounds.
    package func loadCounter(at offset: Int) -> UInt64 {
        guard offset % 8 == 0, let slot = bytes(at: offset, count: 8) else { return 0 }
        return plugind_shim_shared_counter_load(slot.baseAddress!)
    }

    /// Stores the 64-bit counter at `offset` (8-byte aligned) with release ordering.
    package func storeCounter(_ value: UInt64, at offset: Int) {
        guard offset % 8 == 0, let slot = bytes(at: offset, count: 8) else { return }
        plugind_shim_shared_counter_store(slot.baseAddress!, value)
    }

    /// The 32-bit word at `offset` (4-byte aligned), read with acquire ordering; 0 when out of
    /// bounds.
    package func loadWord(at offset: Int) -> UInt32 {
        guard let slot = word(at: offset) else { return 0 }
        return plugind_shim_shared_word_load(slot)
    }

    /// Stores the 32-bit word at `offset` (4-byte aligned), sequentially consistent.
    package func storeWord(_ value: UInt32, at offset: Int) {
        guard let slot = word(at: offset) else { return }
        plugind_shim_shared_word_store(slot, value)
    }

    /// Stores `value` in the 32-bit word at `offset` and returns what it held (0 when out of
    /// bounds), sequentially consistent.
    package func exchangeWord(_ value: UInt32, at offset: Int) -> UInt32 {
        guard let slot = word(at: offset) else { return 0 }
        return plugind_shim_shared_word_exchange(slot, value)
    }

    /// Sleeps while the word at `offset` holds `expected`, at most `timeout` (a futex shared
    /// with the other process); returns at once when out of bounds.
    package func waitWhileWord(at offset: Int, is expected: UInt32, timeoutMicroseconds: UInt32) {
        guard let slot = word(at: offset) else { return }
        _ = plugind_shim_shared_word_wait(slot, expected, timeoutMicroseconds)
    }

    /// Wakes whoever sleeps on the word at `offset` in `waitWhileWord`, in either process.
    package func wakeWord(at offset: Int) {
        guard let slot = word(at: offset) else { return }
        plugind_shim_shared_word_wake(slot)
    }

    /// A full fence: this side's stores before it are seen before its loads after it.
    package static func fence() {
        plugind_shim_shared_fence()
    }

    private func word(at offset: Int) -> UnsafeMutableRawPointer? {
        guard offset % 4 == 0, let slot = bytes(at: offset, count: 4) else { return nil }
        return slot.baseAddress
    }
}
