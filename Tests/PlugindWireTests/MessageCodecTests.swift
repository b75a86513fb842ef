import TestSupport
import Testing

@testable import PlugindWire

@Suite("Message codec", .tags(.unit))
struct MessageCodecTests {
    static let load = LoadConfiguration(
        pluginIdentifier: "org.example.plugin",
        libraryPath: "/bundles/x/libX.so",
        libraryDescriptor: 6,
        bundlePath: "/bundles/x",
        view: [
            .bind(source: "/bundles/x", path: "/.plugind/bundle", writable: false), .directory(path: "/bundles/x"),
            .sealed(path: "/bundles/x/libX.so", descriptor: 6), .symlink(path: "/bundles/x/data", target: "/.plugind/bundle/data"),
            .bind(source: "/tmp/x", path: "/tmp/x", writable: true), .scratch(path: "/tmp", bytes: 1 << 20),
        ],
        functions: [FunctionSignature(name: "f", arguments: [.int8, .bytes, .string], returns: .double)],
        requiresEntryPoint: false,
        limits: ResourceLimits(addressSpaceBytes: 1 << 28, cpuSeconds: 2, openFiles: 64, tasks: 32, maxMessageBytes: 1 << 20),
        confinement: ConfinementRequest(
            allowsNetwork: true, allowsProcesses: true, readablePaths: ["/srv"], writablePaths: ["/tmp/x"], requiresEveryLayer: false,
            disabled: false, skippedLayers: ["system-calls"])
    )

    static let preloading = {
        var load = MessageCodecTests.load
        load.preloadLibraries = ["/usr/lib/x86_64-linux-gnu/libarchive.so.13.6.2", "/usr/lib/x86_64-linux-gnu/libz.so.1.2.13"]
        return load
    }()

    static let hostMessages: [HostMessage] = [
        .hello(Hello(load: load)),
        .hello(Hello(load: preloading)),
        .request(id: 7, connection: 3, bytes: [1, 2, 3]),
        .request(id: 8, connection: 0, bytes: []),
        .openConnection(3, hostIdentifier: "org.example.host"),
        .closeConnection(3),
        .answer(ask: 4, bytes: [9, 8]),
        .askFailed(ask: 5, AskFailure(reason: .handlerFailed, code: 42, message: "no such document")),
        .nestedRequest(id: 11, connection: 3, ask: 4, bytes: [1, 2]),
        .call(
            id: 9, function: 3,
            arguments: [.int64(.min), .uint64(.max), .double(-0.0), .string("héllo"), .bytes([0, 255]), .bool(true), .float(1.5)]),
        .cancel(id: 10),
        .shutdown,
    ]

    static let workerMessages: [WorkerMessage] = [
        .ready(
            Ready(
                protocolVersion: 2,
                pluginABIVersion: 1,
                features: ["cancel"],
                pluginName: "X",
                pluginVersion: "1.0",
                hasRequestHandler: true,
                confinement: [ConfinementLayerReport(layer: "network", state: .applied, detail: "seccomp")],
                workerProcessIdentifier: 1,
                concurrency: 4
            )
        ),
        .connectionAccepted(3),
        .connectionRefused(4, reason: "only one editor at a time"),
        .ask(id: 5, connection: 3, bytes: Array("which document?".utf8)),
        .askCancelled(id: 5),
        .loadFailed(LoadFailure(kind: .abiMismatch, message: "built for ABI 999", pluginCode: 0)),
        .response(id: 1, bytes: Array("answer".utf8)),
        .failure(id: 2, PluginFailure(code: 42, message: "no")),
        .callResult(id: 3, FunctionCallReply(.int16(-3))),
        .callFailed(id: 4, message: "wrong count"),
        .cancelled(id: 5),
        .event(requestID: 6, bytes: [9]),
        .progress(requestID: 7, completed: 3, total: 10),
        .log(level: .warning, message: "careful"),
        .fatalSignal(FatalSignalReport(signal: 11, code: 1, faultAddress: 0, addressSpaceBytes: 1 << 20, openDescriptors: 5)),
        .goodbye,
    ]

    @Test("every value type has its own wire code, and the code reads back as the type")
    func valueTypeCodes() throws {
        let codes = FunctionValueType.allCases.map(\.wireCode)
        #expect(Set(codes).count == FunctionValueType.allCases.count)
        for type in FunctionValueType.allCases {
            #expect(try FunctionValueType(wireCode: type.wireCode) == type)
        }
        #expect(throws: WireError.self) { try FunctionValueType(wireCode: UInt8(FunctionValueType.allCases.count)) }
    }

    @Test("host messages round-trip", arguments: hostMessages)
    func hostRoundTrip(message: HostMessage) throws {
        #expect(try HostMessage(message.encode()) == message)
    }

    @Test("worker messages round-trip", arguments: workerMessages)
    func workerRoundTrip(message: WorkerMessage) throws {
        #expect(try WorkerMessage(message.encode()) == message)
    }

    @Test("a hello preloads libraries only when it names some: without, it ends where it ended before the field existed")
    func helloPreloadField() throws {
        let plain = HostMessage.hello(Hello(load: Self.load)).encode().payload
        var timeout = PayloadWriter()
        timeout.write(Self.load.askTimeoutMilliseconds)
        #expect(Array(plain.suffix(4)) == timeout.bytes)
        var frame = HostMessage.hello(Hello(load: Self.preloading)).encode()
        #expect(frame.payload.count > plain.count)
        // Cut inside the list: refused, not read as a hello without it.
        frame.payload.removeLast(3)
        frame.header.payloadLength = frame.payload.count
        #expect(throws: WireError.self) { try HostMessage(frame) }
    }

    @Test("data payloads travel as raw bytes, not re-encoded")
    func rawPayload() {
        let bytes: [UInt8] = [0x7B, 0x22, 0x00, 0xFF]
        #expect(HostMessage.request(id: 1, connection: 2, bytes: bytes).encode().payload == bytes)
        #expect(HostMessage.answer(ask: 1, bytes: bytes).encode().payload == bytes)
        #expect(WorkerMessage.ask(id: 1, connection: 2, bytes: bytes).encode().payload == bytes)
        #expect(WorkerMessage.response(id: 1, bytes: bytes).encode().payload == bytes)
    }

    @Test("a truncated structured payload is malformed, not a crash")
    func truncatedStructuredPayload() {
        var frame = WorkerMessage.failure(id: 1, PluginFailure(code: 1, message: "message")).encode()
        frame.payload.removeLast(3)
        frame.header.payloadLength = frame.payload.count
        #expect(throws: WireError.self) { try WorkerMessage(frame) }
    }

    @Test("an array count larger than the payload is refused before allocating")
    func hostileArrayCount() {
        var writer = PayloadWriter()
        writer.write(UInt32(3))  // function index
        writer.write(UInt32.max)  // argument count
        let frame = Frame(header: FrameHeader(kind: .call, requestID: 1, payloadLength: writer.bytes.count), payload: writer.bytes)
        #expect(throws: WireError.malformedPayload("array of 4294967295 elements in 0 bytes")) { try HostMessage(frame) }
    }

    @Test("trailing bytes after a message are rejected")
    func trailingBytes() {
        var frame = WorkerMessage.cancelled(id: 1).encode()
        frame.payload = [1]
        frame.header.payloadLength = 1
        #expect(throws: WireError.malformedPayload("1 unexpected bytes after cancelled message")) { try WorkerMessage(frame) }
    }

    @Test("invalid UTF-8 in a string is rejected")
    func invalidUTF8() {
        var writer = PayloadWriter()
        writer.write(UInt8(PluginLogLevel.info.rawValue))
        writer.write(bytes: [0xC3, 0x28])
        let frame = Frame(header: FrameHeader(kind: .log, payloadLength: writer.bytes.count), payload: writer.bytes)
        #expect(throws: WireError.malformedPayload("string is not valid UTF-8")) { try WorkerMessage(frame) }
    }

    @Test("the poll-for-next mark travels on requests and calls, and is refused on any other message")
    func pollForNextMark() throws {
        for message in [HostMessage.request(id: 7, connection: 1, bytes: [1, 2]), .call(id: 8, function: 0, arguments: [.int32(3)])] {
            var frame = message.encode()
            frame.header.flags.insert(.pollForNext)
            let bytes = frame.header.bytes
            let decodedHeader = try bytes.withUnsafeBytes {
                try FrameHeader.decode($0, direction: .hostToWorker, maximumPayload: 1 << 20)
            }
            #expect(decodedHeader.flags.contains(.pollForNext))
            #expect(try HostMessage(frame) == message)
        }
        var cancel = HostMessage.cancel(id: 9).encode()
        cancel.header.flags.insert(.pollForNext)
        #expect(throws: WireError.invalidHeader("the poll-for-next flag is only allowed on requests and calls, found it on cancel")) {
            try HostMessage(cancel)
        }
        // A bit no version knows is still refused.
        var unknown = HostMessage.request(id: 1, connection: 0, bytes: []).encode().header.bytes
        unknown[6] |= 1 << 2
        #expect(throws: WireError.self) {
            try unknown.withUnsafeBytes { try FrameHeader.decode($0, direction: .hostToWorker, maximumPayload: 1 << 20) }
        }
    }

    /// Strings are decoded with repair and compared with their bytes; each case here repairs to
    /// something else, one of them (a four-byte sequence cut after three) to as many bytes.
    @Test(
        "a string is read only when its bytes are exactly valid UTF-8",
        arguments: [
            ([0xF0, 0x9F, 0x98, 0x41], false), ([0xED, 0xA0, 0x80], false), ([0xC0, 0xAF], false), ([0xFF], false),
            ([0xEF, 0xBF, 0xBD], true), ([0xF0, 0x9F, 0x98, 0x80], true), ([], true), ([0x41, 0x00, 0x42], true),
        ] as [([UInt8], Bool)])
    func stringValidity(bytes: [UInt8], isValid: Bool) throws {
        var writer = PayloadWriter()
        writer.write(bytes: bytes)
        var reader = PayloadReader(writer.bytes)
        if isValid {
            #expect(Array(try reader.readString().utf8) == bytes)
        } else {
            #expect(throws: WireError.malformedPayload("string is not valid UTF-8")) { try reader.readString() }
        }
    }
}
