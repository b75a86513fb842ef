import PlugindSystem
import PlugindWire

/// What a worker is started with: its three pipes, /dev/null, the shared memory for large
/// messages when its limits make it worthwhile, and its `hello`, written into the pipe before
/// the worker exists so that it reads it the moment it starts.
struct WorkerResources {
    let toWorker: PlugindSystem.Pipe
    let fromWorker: PlugindSystem.Pipe
    let output: PlugindSystem.Pipe
    let null: FileDescriptor
    let sharedMemory: (memory: SharedMemory, layout: SharedMemoryLayout, descriptor: FileDescriptor)?
    /// The part of the hello the pipe did not take without blocking (nobody reads it yet): written
    /// as the worker reads.
    let pending: [UInt8]

    init(load: LoadConfiguration) throws(SystemError) {
        var made: [PlugindSystem.Pipe] = []
        do throws(SystemError) {
            for _ in 0..<3 { made.append(try PlugindSystem.Pipe()) }
            null = try FileDescriptor.openNullDevice(writable: false)
        } catch {
            for pipe in made { pipe.close() }
            throw error
        }
        (toWorker, fromWorker, output) = (made[0], made[1], made[2])
        // Without shared memory every message takes the pipe.
        sharedMemory = SharedMemoryLayout(limits: load.limits, dataBytes: load.adapter?.dataBytes ?? 0).flatMap { layout in
            guard let (memory, descriptor) = try? SharedMemory.create(size: layout.totalSize) else { return nil }
            // Read by the worker before anything else: where its regions end and the data begins.
            memory.storeCounter(UInt64(layout.dataSize), at: SharedMemoryLayout.dataSizeOffset)
            return (memory: memory, layout: layout, descriptor: descriptor)
        }
        do {
            pending = try WorkerResources.writeHello(load: load, sharedMemory: sharedMemory != nil, to: toWorker.writeEnd)
        } catch {
            for pipe in [toWorker, fromWorker, output] { pipe.close() }
            null.close()
            sharedMemory?.descriptor.close()
            throw error
        }
    }

    /// The worker's descriptors before its sealed files: output, protocol in, protocol out, and
    /// the shared memory or /dev/null in its place.
    var childDescriptors: [FileDescriptor] {
        [output.writeEnd, toWorker.readEnd, fromWorker.writeEnd, sharedMemory?.descriptor ?? null]
    }

    /// What this side keeps once the worker has its descriptors.
    var hostEnds: WorkerHostEnds {
        WorkerHostEnds(
            toWorker: toWorker.writeEnd, fromWorker: fromWorker.readEnd, diagnostics: output.readEnd,
            sharedMemory: sharedMemory.map { ($0.memory, $0.layout) })
    }

    /// Closes what the worker was given (its copies live on in the worker).
    func closeChildEnds() {
        for descriptor in [output.writeEnd, toWorker.readEnd, fromWorker.writeEnd, null] { descriptor.close() }
        sharedMemory?.descriptor.close()
    }

    /// Closes everything, for a worker that was not started.
    func closeAll() {
        closeChildEnds()
        hostEnds.close()
    }

    /// Writes the `hello` for `load` (offering shared memory only when there is some) into the
    /// worker's pipe and returns what the pipe did not take without blocking.
    static func writeHello(load: LoadConfiguration, sharedMemory: Bool, to descriptor: FileDescriptor) throws(SystemError) -> [UInt8] {
        var offer = Hello(load: load)
        if !sharedMemory { offer.features.removeAll { $0 == ProtocolFeature.sharedMemory } }
        if !sharedMemory || !SharedRings.areOffered { offer.features.removeAll { $0 == ProtocolFeature.ring } }
        let hello = HostMessage.hello(offer).encode()
        return try writeWithoutBlocking(hello.header.bytes + hello.payload, to: descriptor)
    }

    /// Writes what `descriptor` takes without blocking and returns the rest.
    private static func writeWithoutBlocking(_ bytes: [UInt8], to descriptor: FileDescriptor) throws(SystemError) -> [UInt8] {
        try descriptor.setNonBlocking()
        var written = 0
        while written < bytes.count {
            let rest = bytes.withUnsafeBytes { descriptor.writeAvailable(UnsafeRawBufferPointer(rebasing: $0[written...])) }
            switch rest {
            case .transferred(let count): written += count
            case .wouldBlock, .endOfFile: return Array(bytes[written...])
            case .failed(let error): throw SystemError("write hello", error)
            }
        }
        return Array(bytes[written...])
    }
}

/// This side's ends of a started worker's pipes, and the shared memory.
struct WorkerHostEnds: Sendable {
    let toWorker: FileDescriptor
    let fromWorker: FileDescriptor
    let diagnostics: FileDescriptor
    let sharedMemory: (SharedMemory, SharedMemoryLayout)?

    func close() {
        for descriptor in [toWorker, fromWorker, diagnostics] { descriptor.close() }
    }
}
