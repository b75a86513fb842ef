import Foundation
import Glibc
import PlugindSystem
import PlugindWire
import TestSupport
import Testing

@Suite("Pipe transport over the rings: the worker's side", .tags(.unit))
struct PipeTransportRingTests {
    private struct Setup {
        let toWorker: PlugindSystem.Pipe
        let toHost: PlugindSystem.Pipe
        let workerView: SharedMemory
        let hostView: SharedMemory
        let transport: PipeTransport

        func close() {
            toWorker.close()
            toHost.close()
        }
    }

    private func setup(agreed: Bool = true) throws -> Setup {
        let toWorker = try PlugindSystem.Pipe()
        let toHost = try PlugindSystem.Pipe()
        let layout = SharedMemoryLayout(regionSize: 16 << 10)
        let (hostView, descriptor) = try SharedMemory.create(size: layout.totalSize)
        defer { descriptor.close() }
        let workerView = try SharedMemory.map(descriptor)
        let transport = PipeTransport(input: toWorker.readEnd, output: toHost.writeEnd, maximumPayload: 1 << 20)
        if agreed {
            try transport.sendReady(Self.ready, thenUseRings: workerView)
            // The frame that went out before the switch, read off the pipe.
            #expect(pipeFrames(toHost.readEnd).map(\.header.kind) == [.ready])
        }
        return Setup(toWorker: toWorker, toHost: toHost, workerView: workerView, hostView: hostView, transport: transport)
    }

    private static let ready = Ready(
        protocolVersion: ProtocolVersion.current, pluginABIVersion: 2, features: [ProtocolFeature.ring], pluginName: "ring test",
        pluginVersion: "1", hasRequestHandler: true, confinement: [], workerProcessIdentifier: getpid())

    /// The frames waiting in the worker → host pipe.
    private func pipeFrames(_ descriptor: FileDescriptor) -> [Frame] {
        var decoder = FrameDecoder(direction: .workerToHost, maximumPayload: 1 << 20)
        var frames: [Frame] = []
        while true {
            var readable = pollfd(fd: descriptor.rawValue, events: Int16(POLLIN), revents: 0)
            guard poll(&readable, 1, 0) > 0 else { break }
            let count = decoder.receive { Glibc.read(descriptor.rawValue, $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            while let frame = try? decoder.nextFrame() { frames.append(frame) }
        }
        return frames
    }

    @Test(
        "the ready and the switch to the ring are one step: what other threads send meanwhile is on the pipe before it or in the ring after it"
    )
    func readyIsThePipesLastFrame() throws {
        let setup = try setup(agreed: false)
        defer { setup.close() }
        // 300 logs of about 27 bytes: the ring (16 KiB) holds them all, nobody needs to read it.
        let count = 300
        let logging = DispatchGroup()
        let underWay = DispatchSemaphore(value: 0)
        DispatchQueue.global().async(group: logging) {
            for index in 0..<count {
                try? setup.transport.send(.log(level: .info, message: "\(index)"))
                if index == 20 { underWay.signal() }
            }
        }
        // The switch while the logs go out.
        underWay.wait()
        try setup.transport.sendReady(Self.ready, thenUseRings: setup.workerView)
        logging.wait()
        // The ring's wake-ups travel on the pipe too, after the switch.
        let onThePipe = pipeFrames(setup.toHost.readEnd).filter { $0.header.kind != .wakeHost }
        #expect(onThePipe.last?.header.kind == .ready)
        var ring = SharedRingConsumer(memory: setup.hostView, layout: SharedMemoryLayout.toHostRing)
        var decoder = FrameDecoder(direction: .workerToHost, maximumPayload: 1 << 20)
        _ = decoder.receive { buffer in (try? ring.read(into: buffer)) ?? 0 }
        var inTheRing: [Frame] = []
        while let frame = try decoder.nextFrame() { inTheRing.append(frame) }
        // Every log, in the order sent: those before the ready on the pipe, the rest in the ring.
        let messages = try (onThePipe.dropLast() + inTheRing).map { frame -> String in
            guard case .log(_, let message) = try WorkerMessage(frame) else { return "not a log" }
            return message
        }
        #expect(messages == (0..<count).map { "\($0)" })
    }

    private func write(_ bytes: [UInt8], to descriptor: FileDescriptor) {
        let written = bytes.withUnsafeBytes { Glibc.write(descriptor.rawValue, $0.baseAddress, $0.count) }
        #expect(written == bytes.count)
    }

    private func frameBytes(_ message: HostMessage) -> [UInt8] {
        let frame = message.encode()
        return frame.header.bytes + frame.payload
    }

    @Test("after the host's switch, frames come from the ring, woken through the pipe or found while polling")
    func receivesFromTheRing() throws {
        let setup = try setup()
        defer {
            setup.toWorker.readEnd.close()
            setup.toHost.close()
        }
        var host = SharedRingProducer(memory: setup.hostView, layout: SharedMemoryLayout.toWorkerRing)
        let first = HostMessage.request(id: 1, connection: 0, bytes: [9, 8, 7])
        write(frameBytes(.cancel(id: 5)) + FrameHeader(kind: .switchToRing, payloadLength: 0).bytes, to: setup.toWorker.writeEnd)
        _ = try frameBytes(first).withUnsafeBytes { try host.append($0) }
        host.publish()
        #expect(host.consumerNeedsWake())
        write(FrameHeader(kind: .wake, payloadLength: 0).bytes, to: setup.toWorker.writeEnd)
        // The frame before the switch, then the ring's.
        #expect(try HostMessage(try #require(try setup.transport.receive())) == .cancel(id: 5))
        #expect(try HostMessage(try #require(try setup.transport.receive())) == first)
        // Nothing waits: a short wait says so, and leaves the reader ready to be woken again.
        #expect(!setup.transport.awaitFrame(waitingMilliseconds: 1, pollingUntil: nil))
        let second = HostMessage.shutdown
        _ = try frameBytes(second).withUnsafeBytes { try host.append($0) }
        host.publish()
        #expect(host.consumerNeedsWake())
        write(FrameHeader(kind: .wake, payloadLength: 0).bytes, to: setup.toWorker.writeEnd)
        #expect(setup.transport.awaitFrame(waitingMilliseconds: 1000, pollingUntil: nil))
        #expect(try HostMessage(try #require(try setup.transport.receive())) == second)
        // The host closes its end: the end of the stream.
        setup.toWorker.writeEnd.close()
        #expect(try setup.transport.receive() == nil)
    }

    @Test("a switch the worker did not agree to, or anything but a wake-up on the pipe after the switch, breaks the protocol")
    func refusesWhatTheProtocolForbids() throws {
        let unagreed = try setup(agreed: false)
        defer { unagreed.close() }
        write(FrameHeader(kind: .switchToRing, payloadLength: 0).bytes, to: unagreed.toWorker.writeEnd)
        #expect(throws: WireError.self) { try unagreed.transport.receive() }

        let agreed = try setup()
        defer { agreed.close() }
        write(FrameHeader(kind: .switchToRing, payloadLength: 0).bytes + frameBytes(.shutdown), to: agreed.toWorker.writeEnd)
        #expect(throws: WireError.self) { try agreed.transport.receive() }

        let early = try setup()
        defer { early.close() }
        write(FrameHeader(kind: .wake, payloadLength: 0).bytes, to: early.toWorker.writeEnd)
        #expect(throws: WireError.self) { try early.transport.receive() }
    }

    @Test("the worker's frames go into the ring, with a wake-up only when the host does not poll, and wait for room when it is full")
    func sendsThroughTheRing() async throws {
        let setup = try setup()
        defer { setup.close() }
        var host = SharedRingConsumer(memory: setup.hostView, layout: SharedMemoryLayout.toHostRing)
        try setup.transport.send(.cancelled(id: 3))
        var pipeBytes = [UInt8](repeating: 0, count: 256)
        let woken = pipeBytes.withUnsafeMutableBytes { Glibc.read(setup.toHost.readEnd.rawValue, $0.baseAddress, $0.count) }
        #expect(woken == FrameHeader.size && pipeBytes[5] == FrameKind.wakeHost.rawValue)
        var decoder = FrameDecoder(direction: .workerToHost, maximumPayload: 1 << 20)
        host.wakeTaken()
        _ = try decoder.receive { try host.read(into: $0) }
        #expect(try WorkerMessage(try #require(try decoder.nextFrame())) == .cancelled(id: 3))
        // The host polls: no wake-up.
        host.setPolling(true)
        try setup.transport.send(.cancelled(id: 4))
        try setup.toHost.readEnd.setNonBlocking()
        #expect(pipeBytes.withUnsafeMutableBytes { Glibc.read(setup.toHost.readEnd.rawValue, $0.baseAddress, $0.count) } == -1)
        _ = try decoder.receive { try host.read(into: $0) }
        #expect(try WorkerMessage(try #require(try decoder.nextFrame())) == .cancelled(id: 4))

        // An event three times the ring: the sender waits for room, woken by the host's reads.
        let event = [UInt8]((0..<(3 * SharedMemoryLayout.ringSize)).map { UInt8(truncatingIfNeeded: $0 / 7) })
        let transport = setup.transport
        let sent = DispatchSemaphore(value: 0)
        let failure = Locked<SystemError?>(nil)
        Thread {
            do throws(SystemError) {
                try transport.send(.event(requestID: 9, bytes: event))
            } catch {
                failure.withLock { $0 = error }
            }
            sent.signal()
        }.start()
        let (reader, frames) = (host, decoder)
        let frame = try await Deadline.wait("the event through the ring") {
            var (host, decoder) = (reader, frames)
            while true {
                let count = try decoder.receive { try host.read(into: $0) }
                if host.producerNeedsWake() { host.wakeProducer() }
                if let frame = try decoder.nextFrame() { return frame }
                if count == 0 { await Task.yield() }
            }
        }
        #expect(sent.wait(timeout: .now() + 60) == .success)
        #expect(failure.withLock { $0 } == nil)
        #expect(try WorkerMessage(frame) == .event(requestID: 9, bytes: event))
    }
}
