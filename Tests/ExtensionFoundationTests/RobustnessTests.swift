import CPlugindShims
import Foundation
import Glibc
import PlugindSystem
import Synchronization
import TestSupport
import Testing

@testable import ExtensionFoundation
@testable import PlugindEngine
@testable import PlugindPolicyEditing

/// Defects a code review found, each a crash, hang or silent loss; each test failed before its fix.
@Suite("Robustness: failures of the host's own machinery", .tags(.process), .timeLimit(.minutes(5)))
struct RobustnessTests {
    /// Records what the loop tells it.
    final class Recorder: EventLoopHandler {
        let events = Locked<[Int32]>([])
        let failures = Locked<[String]>([])
        let failed = AsyncStream<Void>.makeStream()

        func handleEvent(descriptor: Int32, events: UInt32) {
            self.events.withLock { $0.append(descriptor) }
        }

        func loopFailed(_ error: SystemError) {
            failures.withLock { $0.append("\(error)") }
            failed.continuation.yield()
        }
    }

    @Test("a wait that keeps failing does not spin: the loop pauses, gives up after a bounded number, and tells every handler")
    func failingWait() async throws {
        let calls = Atomic(0)
        let loop = try WorkerEventLoop(maximumConsecutiveFailures: 6, maximumBackoff: .milliseconds(4)) { _, _ in
            calls.add(1, ordering: .relaxed)
            throw SystemError("epoll_wait", .badFileDescriptor)
        }
        let pipe = try PlugindSystem.Pipe()
        defer { pipe.close() }
        let recorder = Recorder()
        try loop.register(pipe.readEnd, events: Epoll.readable, handler: recorder)
        try loop.start()
        try await Deadline.wait("the loop to give up") {
            for await _ in recorder.failed.stream { return }
        }
        #expect(calls.load(ordering: .relaxed) == 6)
        #expect(recorder.failures.withLock { $0.count } == 1)
        #expect(loop.hasFailed)
    }

    @Test("an event still queued for a descriptor that was deregistered never reaches the handler of its new owner")
    func staleEvent() async throws {
        let batches = Locked<[[UInt64]]>([])
        // Registration numbers start at 1 (0 is the loop's own notifier): the first pipe gets 1,
        // the second 2. The one batch carries an event for each.
        batches.withLock { $0 = [[1, 2]] }
        let loop = try WorkerEventLoop(maximumConsecutiveFailures: 1) { events, _ in
            guard let batch = batches.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) else {
                throw SystemError("epoll_wait", .badFileDescriptor)
            }
            for (index, token) in batch.enumerated() {
                events[index].events = Epoll.readable
                events[index].data.u64 = token
            }
            return batch.count
        }
        let first = try PlugindSystem.Pipe()
        let firstRecorder = Recorder()
        try loop.register(first.readEnd, events: Epoll.readable, handler: firstRecorder)
        loop.deregister(first.readEnd)
        first.close()
        let second = try PlugindSystem.Pipe()
        defer { second.close() }
        let secondRecorder = Recorder()
        try loop.register(second.readEnd, events: Epoll.readable, handler: secondRecorder)
        try loop.start()
        try await Deadline.wait("the batch to be handled") {
            for await _ in secondRecorder.failed.stream { return }
        }
        #expect(firstRecorder.events.withLock { $0 }.isEmpty)
        #expect(secondRecorder.events.withLock { $0 } == [second.readEnd.rawValue])
    }

    @Test("a point whose first refresh failed is not kept: adding it again refreshes and lists its plugins")
    func addPointAfterFailedRefresh() async throws {
        let test = try TestHost()
        defer { test.remove() }
        try test.install(PluginFixture(library: "Echo", extensionPoint: "org.plugind.tests.point"))
        let failures = Atomic(1)
        let engine = MonitorEngine(host: test.host) { onChange in
            if failures.subtract(1, ordering: .relaxed).oldValue > 0 {
                throw SystemError("inotify_init1", Errno(rawValue: EMFILE))
            }
            return try DirectoryWatcher(loop: try WorkerEventLoop.shared(), onChange: onChange)
        }
        let monitor = AppExtensionPoint.Monitor(host: test.host, engine: engine)
        let point = try AppExtensionPoint(identifier: "org.plugind.tests.point")
        await #expect(throws: AppExtensionError.self) { try await monitor.addAppExtensionPoint(point) }
        #expect(monitor.appExtensionPoints.isEmpty)
        try await monitor.addAppExtensionPoint(point)
        #expect(monitor.identities.map(\.bundleIdentifier) == ["org.plugind.tests.echo"])
    }

    @Test("bytes patched through a shared mapping after the approval are refused at launch, and do not count as a crash")
    func sharedMappingPatch() async throws {
        var test = try TestHost()
        defer { test.remove() }
        test.host.quarantine = .init(crashes: 1, window: .seconds(300))
        let fixture = PluginFixture(library: "Echo")
        let bundle = try test.install(fixture, bundled: false)
        // Bytes of its own (trailing bytes a loader ignores), so that no sealed copy another test
        // made is reused; and a writable shared mapping, opened before the approval.
        let library = bundle + "/libEcho.so"
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: library))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(UUID().uuidString.utf8))
        try handle.close()
        let file = open(library, O_RDWR)
        #expect(file >= 0)
        var status = stat()
        fstat(file, &status)
        let size = Int(status.st_size)
        let mapping = try #require(mmap(nil, size, PROT_READ | PROT_WRITE, MAP_SHARED, file, 0))
        close(file)
        defer { munmap(mapping, size) }
        // A store before the approval makes the page writable: later stores fault no more, and
        // the file's times stay as they are.
        let original = mapping.load(fromByteOffset: 1024, as: UInt32.self)
        mapping.storeBytes(of: original, toByteOffset: 1024, as: UInt32.self)
        try PolicyEditor(directory: test.host.policyDirectory).approve(
            try #require(Inventory.take(host: test.host).item(fixture.identifier)?.entry))
        // The listing still takes the file for the approved one: its identity did not change.
        #expect(Inventory.take(host: test.host).item(fixture.identifier)?.isAvailable == true)
        mapping.storeBytes(of: 0x5858_5858 as UInt32, toByteOffset: 1024, as: UInt32.self)
        let error = await #expect(throws: AppExtensionError.self) {
            _ = try await AppExtensionProcess(configuration: try test.configuration(fixture.identifier))
        }
        // Refused by the launch's check of its sealed copy (`bundleChanged`) — or, when the kernel
        // wrote the dirty page back in between (under load; the next store then faults and updates
        // the file's times), already by the listing, which re-hashes a file whose times changed
        // (`notApproved`). Both name the changed file; neither runs the patched bytes.
        #expect([.bundleChanged, .notApproved].contains(error?.code), "\(error.map { "\($0)" } ?? "")")
        #expect(error?.reason.contains("libEcho.so changed since it was approved") == true)
        await CrashRecorder.waitForPendingRecords()
        #expect((try CrashLog(host: test.host).read().get()).plugins.isEmpty)
    }
}
