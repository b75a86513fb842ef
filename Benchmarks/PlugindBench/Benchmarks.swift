import ExtensionFoundation
import Foundation
import Glibc
import Observation
import PlugindBundle
import PlugindEngine
import PlugindPolicyEditing
import PlugindSystem

/// The figures of Scripts/bench.sh, one subcommand each; every subcommand prints JSON lines.
enum Benchmarks {
    static let echo = "org.plugind.examples.echo"
    static let swiftFilter = "org.plugind.examples.text-filter-swift"
    static let functions = "org.plugind.examples.function-library"

    /// AppExtensionProcess(configuration:) until ready. Unless `backToBack`, each launch starts
    /// once the host's spares are ready (as for a host that launches now and then; untimed);
    /// back to back, each launch also competes with the making of the spare that replaces the
    /// one it took. Each launch finds a worker primed for it by the one before, unless the host
    /// primes none (`--unprimed`: a plugin's first launch).
    static func launch(_ bench: BenchHost, identifier: String, name: String, iterations: Int, backToBack: Bool = false) async throws {
        let configuration = try bench.configuration(identifier)
        var samples: [Double] = []
        for index in 0..<(iterations + 5) {
            if !backToBack { await LaunchPool.settleAll() }
            var process: AppExtensionProcess?
            let elapsed = try await microseconds { process = try await AppExtensionProcess(configuration: configuration) }
            await process?.invalidateAndWait()
            if index >= 5 { samples.append(elapsed) }
        }
        Measurement(name: name, values: samples).report()
    }

    /// `count` different plugins' first launches asked for at once (more than the host's spares),
    /// each timed from the burst's start until it is ready; `rounds` bursts, each once the spares
    /// of the one before are made again. Every sample is reported; `p99` is in `extra`.
    static func burst(_ bench: BenchHost, count: Int, rounds: Int, name suffix: String) async throws {
        let configurations = try bench.installEchoCopies(count: count).map { try bench.configuration($0) }
        var samples: [Double] = []
        for _ in 0..<rounds {
            await LaunchPool.settleAll()
            let start = ContinuousClock.now
            let launched = try await withThrowingTaskGroup(of: (AppExtensionProcess, Double).self) { group in
                for configuration in configurations {
                    group.addTask {
                        let process = try await AppExtensionProcess(configuration: configuration)
                        let (seconds, attoseconds) = start.duration(to: .now).components
                        return (process, Double(seconds) * 1e6 + Double(attoseconds) / 1e12)
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            samples += launched.map(\.1)
            for (process, _) in launched { process.invalidate() }
            for (process, _) in launched { _ = await process.waitForTermination() }
        }
        guard !samples.isEmpty else { throw BenchError("a burst needs at least one round") }
        Measurement(
            name: "burst-\(count)-first-launches" + suffix, values: samples,
            extra: ["p99": Measurement.p99(samples), "launches": Double(count)]
        ).report()
    }

    /// Launch, one request, answer.
    static func firstResponse(_ bench: BenchHost, iterations: Int) async throws {
        let configuration = try bench.configuration(echo)
        var samples: [Double] = []
        var firstRequests: [Double] = []
        var secondRequests: [Double] = []
        for index in 0..<(iterations + 5) {
            await LaunchPool.settleAll()
            var process: AppExtensionProcess?
            var firstRequest = 0.0
            let elapsed = try await microseconds {
                process = try await AppExtensionProcess(configuration: configuration)
                firstRequest = try await microseconds { _ = try await process?.makeConnection().send([1]) }
            }
            // A second connection and request at once: what the next caller pays.
            let secondRequest = try await microseconds { _ = try await process?.makeConnection().send([1]) }
            await process?.invalidateAndWait()
            if index >= 5 {
                samples.append(elapsed)
                firstRequests.append(firstRequest)
                secondRequests.append(secondRequest)
            }
        }
        Measurement(name: "first-response", values: samples).report()
        Measurement(name: "first-request-after-launch", values: firstRequests).report()
        Measurement(name: "second-request-after-launch", values: secondRequests).report()
    }

    /// Request/response of `size` bytes through the echo plugin, one at a time.
    /// Where the requesting code runs.
    enum Caller: String {
        /// A task on the global executor.
        case task
        /// A task preferring `AppExtensionProcess.taskExecutor`.
        case taskExecutor = "task-executor"
        /// The main actor.
        case mainActor = "main-actor"
    }

    static func roundTrip(
        _ bench: BenchHost, size: Int, iterations: Int, workerCPU: Int?, caller: Caller, idle: Duration? = nil, name: String
    ) async throws {
        let process = try await AppExtensionProcess(configuration: try bench.configuration(echo))
        if let workerCPU { pin(process: process.processIdentifier, to: workerCPU) }
        let connection = try await process.makeConnection()
        let payload = [UInt8](repeating: 0x61, count: size)
        @Sendable func loop() async throws -> [Double] {
            try await roundTripSamples(connection, payload, iterations: iterations, idle: idle)
        }
        // What polling costs: the CPU both sides use per request, beside the time it saves.
        let (hostBefore, workerBefore) = (DiscoveryBenchmarks.cpuMicroseconds(), workerCPUMicroseconds([process]))
        // `main` runs every benchmark in a task of its own, as a host's request code usually runs.
        let samples: [Double]
        switch caller {
        case .task: samples = try await loop()
        case .taskExecutor:
            samples = try await Task.detached { try await withTaskExecutorPreference(process.taskExecutor) { try await loop() } }.value
        case .mainActor: samples = try await Task { @MainActor in try await loop() }.value
        }
        let requests = Double(iterations + iterations / 10)
        var extra = ["hostCPUPerRequest": Double(DiscoveryBenchmarks.cpuMicroseconds() - hostBefore) / requests]
        if let workerBefore, let workerAfter = workerCPUMicroseconds([process]) {
            extra["workerCPUPerRequest"] = Double(workerAfter - workerBefore) / requests
        }
        await process.invalidateAndWait()
        Measurement(name: name, values: samples, extra: extra).report()
    }

    /// A typed call of a void function against an empty request.
    static func typedCall(_ bench: BenchHost, iterations: Int) async throws {
        let functions = try await AppExtensionProcess(configuration: try bench.configuration(Self.functions))
        let echoProcess = try await AppExtensionProcess(configuration: try bench.configuration(echo))
        let callConnection = try await functions.makeConnection()
        let requestConnection = try await echoProcess.makeConnection()
        var calls: [Double] = []
        var requests: [Double] = []
        for index in 0..<(iterations + iterations / 10) {
            let call = try await microseconds { _ = try await callConnection.call("count_call") }
            let request = try await microseconds { _ = try await requestConnection.send([]) }
            if index >= iterations / 10 {
                calls.append(call)
                requests.append(request)
            }
        }
        await functions.invalidateAndWait()
        await echoProcess.invalidateAndWait()
        Measurement(name: "typed-call", values: calls).report()
        Measurement(name: "empty-request", values: requests).report()
    }

    /// The toolchain's swift-plugin-server: launch until its first answer, and a round trip.
    static func swiftPluginServer(iterations: Int) async throws {
        let server = "/opt/swift/usr/bin/swift-plugin-server"
        guard FileManager.default.isExecutableFile(atPath: server) else {
            print("{\"name\":\"swift-plugin-server\",\"error\":\"\(server) not found\"}")
            return
        }
        let message = Array(#"{"getCapability":{"capability":{"protocolVersion":7}}}"#.utf8)
        var frame = withUnsafeBytes(of: UInt64(message.count).littleEndian) { Array($0) }
        frame += message
        var launches: [Double] = []
        var roundTrips: [Double] = []
        for index in 0..<(iterations + 3) {
            let input = try PlugindSystem.Pipe()
            let output = try PlugindSystem.Pipe()
            let null = try FileDescriptor.open("/dev/null", O_WRONLY)
            var child: SpawnedProcess?
            let launch = try await microseconds {
                child = try spawnProcess(
                    SpawnRequest(
                        executablePath: server,
                        arguments: [server],
                        environment: [],
                        descriptors: [input.readEnd, output.writeEnd, null],
                        options: []
                    )
                )
                input.readEnd.close()
                output.writeEnd.close()
                try input.writeEnd.writeAll(frame)
                try readAnswer(output.readEnd)
            }
            for _ in 0..<(index == 0 ? 200 : 0) {
                roundTrips.append(
                    try await microseconds {
                        try input.writeEnd.writeAll(frame)
                        try readAnswer(output.readEnd)
                    }
                )
            }
            input.writeEnd.close()
            output.readEnd.close()
            null.close()
            if let child { _ = try child.processDescriptor.waitForProcessExit() }
            child?.processDescriptor.close()
            if index >= 3 { launches.append(launch) }
        }
        Measurement(name: "swift-plugin-server-first-response", values: launches).report()
        Measurement(name: "swift-plugin-server-round-trip", values: roundTrips).report()
    }

    private static func readAnswer(_ descriptor: FileDescriptor) throws {
        var length = [UInt8](repeating: 0, count: 8)
        _ = try length.withUnsafeMutableBytes { try descriptor.readExactly(into: $0) }
        let count = length.withUnsafeBytes { Int(UInt64(littleEndian: $0.loadUnaligned(as: UInt64.self))) }
        var body = [UInt8](repeating: 0, count: count)
        _ = try body.withUnsafeMutableBytes { try descriptor.readExactly(into: $0) }
    }

    /// `count` live workers of the C echo plugin at once, and the unique memory of each.
    /// `hold`: seconds the workers stay alive after the report, their process IDs on standard
    /// error, for a look at their pages (`/proc/PID/smaps`, `pagemap`).
    static func liveWorkers(_ bench: BenchHost, count: Int, sharingLayout: Bool = false, hold: Int = 0) async throws {
        var configuration = try bench.configuration(echo)
        // A worker each: shared, they would all be one.
        configuration.sharing = .dedicated
        var processes: [AppExtensionProcess] = []
        let start = ContinuousClock.now
        for _ in 0..<count {
            processes.append(try await AppExtensionProcess(configuration: configuration))
        }
        let launched = start.duration(to: .now)
        // Every worker answers, so each has served a request when it is measured.
        for process in processes { _ = try await process.makeConnection().send([1]) }
        var unique: [Double] = []
        for process in processes {
            unique.append(Double(uniqueSetSize(process.processIdentifier)) / 1024)
        }
        // Where one worker's unique pages are, so that the report can say what each one is.
        var breakdown: [String: Double] = [:]
        if let first = processes.first {
            for (mapping, bytes) in uniqueMemoryByMapping(first.processIdentifier) {
                breakdown["KiB " + mapping] = Double(bytes) / 1024
            }
        }
        let (seconds, attoseconds) = launched.components
        Measurement(
            name: sharingLayout ? "live-workers-uss-sharing-layout" : "live-workers-uss",
            unit: "KiB",
            values: unique,
            extra: [
                "workers": Double(processes.count), "launchSeconds": Double(seconds) + Double(attoseconds) / 1e18,
                "maxKiB": unique.max() ?? 0,
            ].merging(breakdown) { first, _ in first }
        ).report()
        if hold > 0 {
            FileHandle.standardError.write(Data("workers: \(processes.map { String($0.processIdentifier) }.joined(separator: " "))\n".utf8))
            try await Task.sleep(for: .seconds(hold))
        }
        for process in processes { process.invalidate() }
        for process in processes { _ = await process.waitForTermination() }
    }

    /// Private_Clean + Private_Dirty of /proc/PID/smaps_rollup, in bytes.
    static func uniqueSetSize(_ pid: Int32) -> Int {
        guard let handle = FileHandle(forReadingAtPath: "/proc/\(pid)/smaps_rollup"),
            let data = try? handle.readToEnd()
        else { return 0 }
        var kilobytes = 0
        for line in String(decoding: data, as: UTF8.self).split(separator: "\n")
        where line.hasPrefix("Private_Clean:") || line.hasPrefix("Private_Dirty:") {
            kilobytes += Int(line.split(separator: " ", omittingEmptySubsequences: true)[1]) ?? 0
        }
        return kilobytes * 1024
    }

    /// Private_Clean + Private_Dirty of each mapping of /proc/PID/smaps, summed by what is mapped:
    /// a file's name (its data and its .bss, the anonymous mapping right after it), `[heap]`,
    /// `[stack]`, or `anonymous` (thread stacks, the message region, the allocator's arenas).
    static func uniqueMemoryByMapping(_ pid: Int32) -> [String: Int] {
        guard let handle = FileHandle(forReadingAtPath: "/proc/\(pid)/smaps"), let data = try? handle.readToEnd() else {
            return [:]
        }
        var totals: [String: Int] = [:]
        var current = "anonymous"
        var previousFile: String?
        var previousEnd = ""
        for line in String(decoding: data, as: UTF8.self).split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard let first = fields.first else { continue }
            if first.contains("-"), first.first?.isHexDigit == true, !first.hasSuffix(":") {
                let range = first.split(separator: "-")
                let name = fields.count >= 6 ? fields[5...].joined(separator: " ") : ""
                if name.isEmpty {
                    // An unnamed mapping that starts where a file's mapping ended is that file's .bss.
                    let follows = range.first.map(String.init) == previousEnd
                    current = follows ? previousFile.map { $0 + " (bss)" } ?? "anonymous" : "anonymous"
                    previousFile = nil
                } else {
                    current = name.split(separator: "/").last.map(String.init) ?? name
                    previousFile = name.hasPrefix("[") ? nil : current
                }
                previousEnd = range.count == 2 ? String(range[1]) : ""
            } else if first == "Private_Clean:" || first == "Private_Dirty:", fields.count >= 2 {
                totals[current, default: 0] += (Int(fields[1]) ?? 0) * 1024
            }
        }
        return totals.filter { $0.value > 0 }
    }

    // MARK: Connections

    /// The plugin asks the host (64 bytes each way) `iterations` times inside one request; each
    /// sample is one batch's time per ask.
    static func hostRequest(_ bench: BenchHost, iterations: Int) async throws {
        let process = try await AppExtensionProcess(configuration: try bench.configuration(try bench.installProbe(concurrency: 1)))
        let answer = [UInt8](repeating: 0x61, count: 64)
        let connection = try await process.makeConnection(requestHandler: { _ in answer })
        let batch = 200
        var samples: [Double] = []
        for index in 0..<(iterations / batch + 2) {
            let elapsed = try await microseconds { _ = try await connection.send(Array("ask-loop:\(batch)".utf8)) }
            if index >= 2 { samples.append(elapsed / Double(batch)) }
        }
        await process.invalidateAndWait()
        Measurement(name: "host-request-64", values: samples).report()
    }

    /// A second `AppExtensionProcess` for an identity whose worker runs: attach, and release.
    static func attach(_ bench: BenchHost, iterations: Int) async throws {
        let configuration = try bench.configuration(echo)
        let running = try await AppExtensionProcess(configuration: configuration)
        var samples: [Double] = []
        for index in 0..<(iterations + 10) {
            var attached: AppExtensionProcess?
            let elapsed = try await microseconds { attached = try await AppExtensionProcess(configuration: configuration) }
            guard attached?.processIdentifier == running.processIdentifier else { throw BenchError("the second process did not attach") }
            attached?.invalidate()
            if index >= 10 { samples.append(elapsed) }
        }
        await running.invalidateAndWait()
        Measurement(name: "attach", values: samples).report()
    }

    /// The owner disables a plugin whose worker runs: until the worker has ended and
    /// `onInterruption` fired.
    static func policyToTermination(_ bench: BenchHost, iterations: Int) async throws {
        let identifier = try bench.installProbe(concurrency: 1)
        let editor = PolicyEditor(directory: bench.host.policyDirectory)
        // Bundled plugins need no approval, but the owner disables one through an entry of its own.
        guard let entry = Inventory.take(host: bench.host).item(identifier)?.entry else {
            throw BenchError("\(identifier) is not installed")
        }
        _ = try editor.approve(entry)
        var samples: [Double] = []
        for _ in 0..<iterations {
            let interrupted = AsyncStream<Void>.makeStream()
            var configuration = try bench.configuration(identifier)
            configuration.onInterruption = { interrupted.continuation.yield() }
            let process = try await AppExtensionProcess(configuration: configuration)
            let elapsed = try await microseconds {
                try editor.disable(identifier)
                var iterator = interrupted.stream.makeAsyncIterator()
                await iterator.next()
                _ = await process.waitForTermination()
            }
            samples.append(elapsed)
            try editor.enable(identifier)
        }
        Measurement(name: "policy-to-termination", values: samples).report()
    }

    /// Eight requests of 20 ms of CPU each, all at once, to a plugin declaring `concurrency`:
    /// the time for all of them.
    static func concurrentRequests(_ bench: BenchHost, concurrency: Int, iterations: Int) async throws {
        let process = try await AppExtensionProcess(
            configuration: try bench.configuration(try bench.installProbe(concurrency: concurrency)))
        let connection = try await process.makeConnection()
        var samples: [Double] = []
        for _ in 0..<iterations {
            samples.append(
                try await microseconds {
                    try await withThrowingTaskGroup(of: [UInt8].self) { group in
                        for _ in 0..<8 { group.addTask { try await connection.send(Array("spin:20".utf8), timeout: .seconds(30)) } }
                        for try await _ in group {}
                    }
                })
        }
        await process.invalidateAndWait()
        Measurement(name: "concurrent-requests-\(concurrency)", values: samples).report()
    }

    // MARK: Load

    /// `tasks` host tasks send 64-byte requests to `workers` echo workers (task t to worker
    /// t % workers), `requests` in all. Each sample is one request's latency; the extras hold the
    /// throughput, the 99th percentile and the host's CPU time per request.
    static func load(_ bench: BenchHost, tasks: Int, workers: Int, requests: Int, caller: Caller = .task) async throws {
        // The main actor is a caller of the one-at-a-time round trip only, not of the load.
        guard caller != .mainActor else { throw BenchError("load runs its tasks as tasks or preferring the task executor") }
        let (processes, connections) = try await echoWorkers(bench, count: workers)
        let payload = [UInt8](repeating: 0x61, count: 64)
        let perTask = max(requests / tasks, 1)
        // Warm every connection first.
        for connection in connections { _ = try await connection.send(payload) }
        let workerCPUBefore = workerCPUMicroseconds(processes)
        let cpuBefore = DiscoveryBenchmarks.cpuMicroseconds()
        let started = ContinuousClock.now
        let latencies = try await withThrowingTaskGroup(of: [Double].self) { group in
            for task in 0..<tasks {
                let connection = connections[task % workers]
                @Sendable func loop() async throws -> [Double] {
                    var samples: [Double] = []
                    samples.reserveCapacity(perTask)
                    for _ in 0..<perTask { samples.append(try await microseconds { _ = try await connection.send(payload) }) }
                    return samples
                }
                if caller == .taskExecutor {
                    group.addTask(executorPreference: processes[0].taskExecutor) { try await loop() }
                } else {
                    group.addTask { try await loop() }
                }
            }
            var all: [Double] = []
            for try await samples in group { all += samples }
            return all
        }
        let (seconds, attoseconds) = started.duration(to: .now).components
        let elapsed = Double(seconds) + Double(attoseconds) / 1e18
        let cpu = Double(DiscoveryBenchmarks.cpuMicroseconds() - cpuBefore)
        let workerCPU = workerCPUBefore.flatMap { before in workerCPUMicroseconds(processes).map { Double($0 - before) } }
        var extra = [
            "throughput": Double(latencies.count) / elapsed, "p99": Measurement.p99(latencies),
            "hostCPUPerRequest": cpu / Double(latencies.count),
        ]
        if let workerCPU { extra["workerCPUPerRequest"] = workerCPU / Double(latencies.count) }
        let suffix = caller == .task ? "" : "-\(caller.rawValue)"
        Measurement(name: "load-\(tasks)-\(workers)\(suffix)", values: latencies, extra: extra).report()
        for process in processes { await process.invalidateAndWait() }
    }

    /// `count` echo workers of their own (not shared), each with a connection open.
    static func echoWorkers(_ bench: BenchHost, count: Int) async throws -> ([AppExtensionProcess], [AppExtensionConnection]) {
        var configuration = try bench.configuration(echo)
        configuration.sharing = .dedicated
        var processes: [AppExtensionProcess] = []
        var connections: [AppExtensionConnection] = []
        for _ in 0..<count {
            let process = try await AppExtensionProcess(configuration: configuration)
            processes.append(process)
            connections.append(try await process.makeConnection())
        }
        return (processes, connections)
    }

    /// The CPU time every thread of `processes` has used, in µs, from the scheduler's own count
    /// (`/proc/PID/task/*/schedstat`, nanoseconds); nil when one cannot be read.
    static func workerCPUMicroseconds(_ processes: [AppExtensionProcess]) -> Int? {
        var total = 0
        for process in processes {
            let tasks = "/proc/\(process.processIdentifier)/task"
            guard let threads = try? FileManager.default.contentsOfDirectory(atPath: tasks) else { return nil }
            for thread in threads {
                guard let text = try? String(contentsOfFile: "\(tasks)/\(thread)/schedstat", encoding: .utf8),
                    let field = text.split(separator: " ").first, let nanoseconds = Int(field)
                else { return nil }
                total += nanoseconds / 1000
            }
        }
        return total
    }

    /// The CPU the host and its workers use with `workers` connections open and nothing sent,
    /// over `seconds`, after a request on each and six seconds to settle (as `idle-monitor`: the
    /// global dispatch pool ends its idle threads after five): what polling costs when nobody
    /// asks anything.
    static func idleConnections(_ bench: BenchHost, workers: Int, seconds: Int) async throws {
        let (processes, connections) = try await echoWorkers(bench, count: workers)
        for connection in connections { _ = try await connection.send([1]) }
        await LaunchPool.settleAll()
        // Blocking sleeps: a timer of the measuring program would wake its own threads.
        sleep(6)
        // The workers' counts are read outside the host's window: reading them is the host's work.
        let workersBefore = workerCPUMicroseconds(processes)
        let hostBefore = DiscoveryBenchmarks.cpuMicroseconds()
        sleep(UInt32(seconds))
        let host = DiscoveryBenchmarks.cpuMicroseconds() - hostBefore
        let workersUsed = workersBefore.flatMap { before in workerCPUMicroseconds(processes).map { $0 - before } }
        var extra = ["seconds": Double(seconds), "workers": Double(workers)]
        if let workersUsed { extra["workersCPU"] = Double(workersUsed) }
        Measurement(name: "idle-connections-host-cpu", values: [Double(host)], extra: extra).report()
        _ = connections
        for process in processes { await process.invalidateAndWait() }
    }

    /// `count` cycles of launch, one request, invalidate: the host's descriptors, threads and
    /// resident memory after a warm-up and at the end.
    static func cycles(_ bench: BenchHost, count: Int) async throws {
        var configuration = try bench.configuration(echo)
        configuration.sharing = .dedicated
        func cycle() async throws {
            let process = try await AppExtensionProcess(configuration: configuration)
            _ = try await process.makeConnection().send([1])
            await process.invalidateAndWait()
        }
        // Counted with no worker primed for the next launch: one holds six of the host's
        // descriptors (its pipes, its process and its copies) and may or may not be there yet.
        func footprint() async -> HostFootprint {
            await LaunchPool.settleAll()
            LaunchPool.discardPrimedAndWait()
            return HostFootprint.current()
        }
        for _ in 0..<100 { try await cycle() }
        let before = await footprint()
        var samples: [Double] = []
        for _ in 0..<count { samples.append(try await microseconds { try await cycle() }) }
        let after = await footprint()
        Measurement(
            name: "launch-cycles",
            values: samples,
            extra: [
                "cycles": Double(count), "descriptorGrowth": Double(after.descriptors - before.descriptors),
                "threadGrowth": Double(after.threads - before.threads),
                "anonymousGrowthKiB": Double(after.anonymousKiB - before.anonymousKiB),
                "rssGrowthKiB": Double(after.residentKiB - before.residentKiB),
                "descriptorsAfter": Double(after.descriptors), "threadsAfter": Double(after.threads),
            ]
        ).report()
    }
}

/// This process's descriptors, threads and resident memory, from /proc.
struct HostFootprint {
    var descriptors: Int
    var threads: Int
    /// All resident pages, the libraries' code paged in as it is first run included.
    var residentKiB: Int
    /// The host's own memory (heap, stacks, anonymous mappings): what a leak would grow.
    var anonymousKiB: Int

    static func current() -> HostFootprint {
        let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? 0
        let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        func field(_ name: String) -> Int {
            guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(name + ":") }) else { return 0 }
            return Int(line.split(whereSeparator: { $0 == " " || $0 == "\t" }).dropFirst().first ?? "") ?? 0
        }
        return HostFootprint(
            descriptors: descriptors, threads: field("Threads"), residentKiB: field("VmRSS"), anonymousKiB: field("RssAnon"))
    }
}
