import PlugindSystem
import PlugindWire
import TestSupport
import Testing

@Suite("Protocol versions: a host and a worker of different plugind versions", .tags(.process))
struct ProtocolVersionTests {
    @Test("a worker offered only protocols it does not speak refuses, naming both ranges, and exits")
    func workerRefusesAnotherProtocol() async throws {
        let toWorker = try PlugindSystem.Pipe()
        let fromWorker = try PlugindSystem.Pipe()
        let null = try FileDescriptor.openNullDevice(writable: true)
        defer { null.close() }
        // Descriptors 3 and 4 are the protocol pipes, as the host library passes them.
        let worker = try spawnProcess(
            SpawnRequest(
                executablePath: try BuiltProducts.worker(), arguments: ["plugind-worker"], environment: [],
                descriptors: [null, null, null, toWorker.readEnd, fromWorker.writeEnd], options: []))
        toWorker.readEnd.close()
        fromWorker.writeEnd.close()
        defer { worker.processDescriptor.killAndReap() }

        let offered: UInt16 = ProtocolVersion.current + 50
        var hello = Hello(load: ForeignProtocolFixture.load)
        hello.minimumProtocolVersion = offered
        hello.maximumProtocolVersion = offered
        let frame = HostMessage.hello(hello).encode()
        try toWorker.writeEnd.writeAll(frame.header.bytes + frame.payload)

        let reply = try await Deadline.wait("the worker's answer to a foreign protocol") {
            var decoder = FrameDecoder(direction: .workerToHost, maximumPayload: 1 << 20)
            decoder.append(try fromWorker.readEnd.readToEnd(limit: 1 << 20))
            return try decoder.nextFrame().map(WorkerMessage.init)
        }
        toWorker.writeEnd.close()
        fromWorker.readEnd.close()
        guard case .loadFailed(let failure)? = reply else {
            Issue.record("the worker answered \(String(describing: reply)), not loadFailed")
            return
        }
        #expect(failure.kind == .incompatibleProtocol)
        #expect(failure.message.contains("host speaks protocol \(offered)–\(offered)"))
        #expect(failure.message.contains("worker speaks \(ProtocolVersion.minimum)–\(ProtocolVersion.current)"))
        let exit = try worker.processDescriptor.waitForProcessExit()
        #expect(exit?.reason == .exited(status: 3))
    }
}

/// A load configuration the worker never gets to use: it refuses at the version.
enum ForeignProtocolFixture {
    static let load = LoadConfiguration(
        pluginIdentifier: "org.example.never-loaded", libraryPath: "/nonexistent/libX.so", libraryDescriptor: -1,
        bundlePath: "/nonexistent", view: [], functions: [], requiresEntryPoint: true,
        limits: ResourceLimits(addressSpaceBytes: 1 << 28, cpuSeconds: 2, openFiles: 64, tasks: 32, maxMessageBytes: 1 << 20),
        confinement: ConfinementRequest(
            allowsNetwork: false, allowsProcesses: false, readablePaths: [], writablePaths: [], requiresEveryLayer: false,
            disabled: false, skippedLayers: []))
}
