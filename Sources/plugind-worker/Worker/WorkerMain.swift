import CPlugindShims
import Glibc
import PlugindPluginABI
import PlugindSystem
import PlugindWire

/// The worker's life: take the protocol descriptors, read `Hello`, confine itself, load the
/// plugin, answer `Ready`, serve until the host hangs up.
enum WorkerMain {
    static let hostToWorker = FileDescriptor(rawValue: 3)
    static let workerToHost = FileDescriptor(rawValue: 4)
    /// Frames larger than this are refused before the plugin's own limit is known.
    static let handshakeLimit = 1 << 20

    /// `prepared`: the view and Landlock rulesets a spare began while it waited.
    static func run(prepared: Confinement.Prepared) -> Int32 {
        guard takeProtocolDescriptors() else {
            WorkerUsage.fail("descriptors 3 and 4 are not the protocol pipes; this program is started by the plugind host library")
        }
        let transport = PipeTransport(input: hostToWorker, output: workerToHost, maximumPayload: handshakeLimit)
        // Mapped before any plugin code runs, and its descriptor closed, so the plugin never holds it.
        let sharedMemory = WorkerSharedMemory.take()

        let hello: Hello
        switch receiveHello(transport) {
        case .received(let received): hello = received
        case .ended(let status): return status
        }

        guard
            let version = ProtocolVersion.negotiate(
                offeredMinimum: hello.minimumProtocolVersion,
                offeredMaximum: hello.maximumProtocolVersion
            )
        else {
            let failure = LoadFailure(
                kind: .incompatibleProtocol,
                message:
                    "host speaks protocol \(hello.minimumProtocolVersion)–\(hello.maximumProtocolVersion), worker speaks \(ProtocolVersion.minimum)–\(ProtocolVersion.current)"
            )
            try? transport.send(.loadFailed(failure))
            return 3
        }

        let confinement: [ConfinementLayerReport]
        do {
            confinement = try Confinement.apply(hello.load, prepared: prepared)
        } catch {
            try? transport.send(.loadFailed(error))
            return 3
        }
        // After the view is complete: the report reads /proc/self of the worker's own /proc,
        // and no descriptor of the host's /proc is left for plugin code to walk up from.
        installFatalSignalReport()
        // Before the next thread starts: one allocator arena for a worker whose manifest says it
        // serves one request at a time (or says nothing: a library that declares more then
        // shares the arena too); each arena a thread makes is memory of the worker's own.
        if hello.load.concurrency <= 1 { plugind_shim_share_allocator_arenas() }
        // `plugind debug` releases the worker with a signal to the process: every thread holds it.
        if hello.load.mode == .debug { _ = plugind_shim_debug_hold_release() }
        // The rest runs on a thread of the worker's own, confined as this one is (it starts
        // after every layer applied). This thread is a copy of the launcher's thread that forked
        // it, and Swift's locks (`Mutex`, the runtime's own) keep each thread's id in a
        // thread-local that the copy inherits stale: with plugin threads running (one that init
        // started, the serving threads), this thread's next contended lock crashed the worker.
        // From here it only waits.
        var status: Int32 = 2
        guard
            let thread = WorkerThread.start({
                _ = plugind_shim_install_alternate_signal_stack()
                status = loadAndServe(hello, version: version, confinement: confinement, transport: transport, sharedMemory: sharedMemory)
            })
        else {
            report("cannot start the thread that loads the plugin: \(Errno(rawValue: errno))")
            return 2
        }
        // The deepest part of this thread's stack, which setting up touched (the filters'
        // compilation above all) and waiting never uses again: a page of room is enough for
        // pthread_join's few frames (a signal handled here would touch released pages again,
        // as fresh ones, nothing more).
        _ = plugind_shim_release_unused_stack(1)
        WorkerThread.join(thread)
        return status
    }

    /// Everything after confinement, on a thread the worker started: the primed worker's wait for
    /// its launch, the plugin's load and `init`, `Ready`, and serving, on this thread too.
    private static func loadAndServe(
        _ received: Hello, version: UInt16, confinement: [ConfinementLayerReport], transport: PipeTransport,
        sharedMemory: WorkerSharedMemory?
    ) -> Int32 {
        let server: PluginServer
        switch load(received, version: version, confinement: confinement, transport: transport, sharedMemory: sharedMemory) {
        case .serving(let loaded): server = loaded
        case .ended(let status): return status
        }
        return server.serve {
            // What setting up needed is freed, but stays this worker's own memory until it is
            // given back: the heap setting up used, and the stack the plugin's load and init used.
            // While the other threads serve, so that neither the launch nor the first request waits.
            plugind_shim_release_free_memory()
            // Room for the serving calls (a request's decoding, the plugin's call, the answer).
            _ = plugind_shim_release_unused_stack(3)
        }
    }

    private enum Loaded {
        case serving(PluginServer)
        /// The exit status: a probe answered, or the load failed and the host was told.
        case ended(Int32)
    }

    /// The plugin loaded and its `init` run, `Ready` sent. Never inlined: its frame (and those of
    /// what it calls) is gone before this thread serves, so that serving touches a shallow stack.
    @inline(never)
    private static func load(
        _ received: Hello, version: UInt16, confinement: [ConfinementLayerReport], transport: PipeTransport,
        sharedMemory: WorkerSharedMemory?
    ) -> Loaded {
        var hello = received
        let server: PluginServer
        do {
            if hello.load.mode == .primed {
                // Confined ahead of the launch it was made for, which now says go.
                PluginLoader.preload(hello.load.preloadLibraries)
                guard case .received(let launch) = receiveHello(transport) else { return .ended(0) }
                var expected = hello.load
                expected.mode = .serve
                guard launch.load == expected else {
                    report("the launch's hello does not match the one this worker was confined for")
                    return .ended(2)
                }
                hello = launch
            }
            if hello.load.mode == .probeConfinement {
                try transport.send(.ready(ready(version: version, plugin: nil, confinement: confinement, features: [])))
                return .ended(0)
            }
            if hello.load.mode == .debug {
                // The one layer `plugind debug` relaxes, after all of them were applied: the
                // owner's debugger may trace this worker.
                let allowed = plugind_shim_debug_allow_tracer()
                guard allowed == 0 else {
                    throw LoadFailure(
                        kind: .confinementFailed, message: "cannot let the debugger trace the worker: \(Errno(rawValue: allowed))")
                }
                report("debug mode: traceable by the owner's debugger (pid \(getpid()) in the worker's namespace); waiting for it")
            }
            let inView = confinement.contains { $0.layer == Confinement.Layer.filesystemView && $0.state == .applied }
            if received.load.mode != .primed {
                // Loaded by their canonical paths as a primed worker does: a dependency the
                // linker would reach through a symlink outside the view (Debian's alternatives,
                // /etc/alternatives/liblapack.so.3) is then found loaded by its soname.
                PluginLoader.preload(hello.load.preloadLibraries)
            }
            let plugin = try PluginLoader.load(hello.load, inView: inView, dataArea: sharedMemory?.dataArea)
            if hello.load.mode == .inspectLibrary {
                try transport.send(.ready(ready(version: version, plugin: plugin, confinement: confinement, features: [])))
                return .ended(0)
            }
            transport.maximumPayload = Int(hello.load.limits.maxMessageBytes) + 4096
            RefusalReports.install(library: plugin.handle, transport: transport)
            let usesSharedMemory = sharedMemory != nil && hello.features.contains(ProtocolFeature.sharedMemory)
            server = PluginServer(
                plugin: plugin, load: hello.load, transport: transport, sharedMemory: usesSharedMemory ? sharedMemory : nil)
            try server.start()
            let usesRings = usesSharedMemory && hello.features.contains(ProtocolFeature.ring)
            let known = ProtocolFeature.all
            let features = hello.features.filter {
                known.contains($0) && ($0 != ProtocolFeature.sharedMemory || usesSharedMemory)
                    && ($0 != ProtocolFeature.ring || usesRings)
            }
            var answer = ready(version: version, plugin: plugin, confinement: confinement, features: features)
            answer.concurrency = UInt32(server.concurrency)
            // The host reads this side's frames from the ring from the `ready` on.
            if usesRings, let sharedMemory {
                try transport.sendReady(answer, thenUseRings: sharedMemory.memory)
            } else {
                try transport.send(.ready(answer))
            }
        } catch let failure as LoadFailure {
            try? transport.send(.loadFailed(failure))
            return .ended(3)
        } catch {
            report("could not answer the host: \(error)")
            return .ended(2)
        }
        return .serving(server)
    }

    private enum HelloReceipt {
        case received(Hello)
        /// The host hung up (0) or sent something else (2): the exit status.
        case ended(Int32)
    }

    private static func receiveHello(_ transport: PipeTransport) -> HelloReceipt {
        do {
            guard let frame = try transport.receive() else { return .ended(0) }
            guard case .hello(let received) = try HostMessage(frame) else {
                report("expected hello, received \(frame.header.kind)")
                return .ended(2)
            }
            return .received(received)
        } catch {
            report("handshake failed: \(error)")
            return .ended(2)
        }
    }

    private static func ready(
        version: UInt16,
        plugin: LoadedPlugin?,
        confinement: [ConfinementLayerReport],
        features: [String]
    ) -> Ready {
        Ready(
            protocolVersion: version,
            pluginABIVersion: plugin?.abiVersion ?? 0,
            features: features,
            pluginName: plugin?.name ?? "",
            pluginVersion: plugin?.version ?? "",
            hasRequestHandler: plugin?.hasRequestHandler ?? false,
            confinement: confinement,
            workerProcessIdentifier: getpid()
        )
    }

    /// Marks the protocol descriptors close-on-exec, so that programs the plugin starts do not
    /// inherit them. False when they are not pipes (the worker was started by hand).
    private static func takeProtocolDescriptors() -> Bool {
        for descriptor in [hostToWorker, workerToHost] {
            var status = stat()
            guard fstat(descriptor.rawValue, &status) == 0, (status.st_mode & S_IFMT) == S_IFIFO else { return false }
            guard (try? descriptor.setCloseOnExec()) != nil else { return false }
        }
        return true
    }

    private static func installFatalSignalReport() {
        let header = FrameHeader(kind: .fatalSignal, payloadLength: Int(PLUGIND_SHIM_FATAL_REPORT_PAYLOAD_SIZE)).bytes
        // Its request and payload length are filled in by the handler.
        let stackHeader = FrameHeader(kind: .stackReport, payloadLength: 0).bytes
        let prepared = stackHeader.withUnsafeBufferPointer { stack in
            plugind_shim_stack_capture_prepare(workerToHost.rawValue, stack.baseAddress!, stack.count)
        }
        if prepared != 0 { report("stack reports unavailable: \(Errno(rawValue: prepared))") }
        let result = header.withUnsafeBufferPointer { buffer in
            plugind_shim_install_fatal_signal_report(workerToHost.rawValue, buffer.baseAddress!, buffer.count)
        }
        if result != 0 { report("fatal-signal reports unavailable: \(Errno(rawValue: result))") }
    }

    /// Writes a diagnostic line to stderr, which the host keeps as the tail shown with errors.
    static func report(_ message: String) {
        let line = "plugind-worker: \(message)\n"
        _ = line.withCString { write(2, $0, strlen($0)) }
    }
}
