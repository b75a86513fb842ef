import CFFI
import PlugindSystem
import PlugindWire

/// Work the pre-forked launcher does once before it forks, so that every worker inherits its
/// results: the Swift runtime's metadata and protocol-conformance caches for the message types,
/// string formatting, libffi's call preparation, the dynamic loader. Without it each forked worker
/// would pay for them again, on its launch's path. A spare runs it again after its fork: the
/// page tables of the files it touches are not inherited.
enum LauncherWarmUp {
    static func run() {
        let load = LoadConfiguration(
            pluginIdentifier: "org.plugind.warm-up",
            libraryPath: "/nonexistent/libWarmUp.so",
            libraryDescriptor: 6,
            bundlePath: "/nonexistent",
            view: [
                .bind(source: "/a", path: "/a", writable: false), .symlink(path: "/b", target: "c"), .directory(path: "/d"),
                .sealed(path: "/nonexistent/libWarmUp.so", descriptor: 6), .scratch(path: "/tmp", bytes: 1),
            ],
            functions: [FunctionSignature(name: "f", arguments: [.int32, .bytes, .string], returns: .double)],
            limits: ResourceLimits(addressSpaceBytes: 1 << 30, cpuSeconds: 60, openFiles: 64, tasks: 64, maxMessageBytes: 1 << 20),
            confinement: ConfinementRequest(readablePaths: ["/a"], writablePaths: ["/b"])
        )
        let hello = HostMessage.hello(Hello(load: load)).encode()
        _ = try? HostMessage(hello)
        let requests: [HostMessage] = [
            .request(id: 1, connection: 1, bytes: [1]), .sharedRequest(id: 1, connection: 1, SharedMemoryLocation(offset: 0, length: 1)),
            .openConnection(1, hostIdentifier: "h"), .answer(ask: 1, bytes: [1]), .nestedRequest(id: 2, connection: 1, ask: 1, bytes: [1]),
            .call(id: 2, function: 0, arguments: [.int32(1), .bytes([1]), .string("s")]), .cancel(id: 3),
            .shutdown,
        ]
        for message in requests { _ = try? HostMessage(message.encode()) }
        let report = ConfinementLayerReport(layer: "network", state: .applied, detail: "memory \(ByteCount(UInt64(1) << 30)), CPU \(60) s")
        let answers: [WorkerMessage] = [
            .ready(
                Ready(
                    protocolVersion: 1,
                    pluginABIVersion: 1,
                    features: ProtocolFeature.all,
                    pluginName: "n",
                    pluginVersion: "v",
                    hasRequestHandler: true,
                    confinement: [report],
                    workerProcessIdentifier: 1
                )
            ),
            .response(id: 1, bytes: [1]), .sharedResponse(id: 1, SharedMemoryLocation(offset: 0, length: 1)),
            .failure(id: 1, PluginFailure(code: 1, message: "m")), .callResult(id: 2, FunctionCallReply(.double(1))),
            .cancelled(id: 3), .progress(requestID: 1, completed: 1, total: 2), .log(level: .info, message: "l"),
            .loadFailed(LoadFailure(kind: .symbolMissing, message: "m")),
            .connectionAccepted(1), .ask(id: 1, connection: 1, bytes: [1]),
        ]
        for message in answers { _ = message.encode() }
        _ = Errno(rawValue: 2).description
        _ = FrameHeader(kind: .response, payloadLength: 1).bytes
        _ = Confinement.describedLimits(load.limits).map(\.text).joinedSpecialized(separator: ", ")
        // The transport's send path, through a pipe of its own.
        if let pipe = try? PlugindSystem.Pipe() {
            let transport = PipeTransport(input: pipe.readEnd, output: pipe.writeEnd, maximumPayload: 1 << 16)
            for message in answers.prefix(3) { try? transport.send(message) }
            pipe.close()
        }
        // libffi: prepare (not call) an interface of every type.
        var types = FunctionValueType.allCases.filter(\.isValidArgument).map { _ in
            plugind_ffi_type_sint32() as UnsafeMutablePointer<ffi_type>?
        }
        var interface = ffi_cif()
        _ = types.withUnsafeMutableBufferPointer { buffer in
            ffi_prep_cif(&interface, FFI_DEFAULT_ABI, UInt32(buffer.count), plugind_ffi_type_double(), buffer.baseAddress)
        }
        PluginLoader.warmUpDynamicLoader()
    }
}
