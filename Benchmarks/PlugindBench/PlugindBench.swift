import ExtensionFoundation
import Foundation
import PlugindEngine

/// plugind-bench: the measurements behind Scripts/bench.sh. Each subcommand prints one JSON line
/// per figure; the script runs them, adds the raw baselines and computes the ratios.
@main
enum PlugindBench {
    static func main() async {
        // Off the main actor, where a host's request code usually runs: on the main actor every
        // await would add a hop to the main thread (the round-trip benchmark measures that too).
        await Task.detached { await run() }.value
    }

    static func run() async {
        let arguments = Array(CommandLine.arguments.dropFirst())
        func option(_ name: String, _ fallback: Int) -> Int {
            guard let index = arguments.firstIndex(of: "--" + name), index + 1 < arguments.count else { return fallback }
            return Int(arguments[index + 1]) ?? fallback
        }
        func text(_ name: String) -> String? {
            guard let index = arguments.firstIndex(of: "--" + name), index + 1 < arguments.count else { return nil }
            return arguments[index + 1]
        }
        let iterations = option("iterations", 1000)
        do {
            switch arguments.first {
            case "launch-c":
                var bench = try BenchHost()
                defer { bench.remove() }
                // --sharing-layout: one launcher forks every worker (see LaunchStrategy).
                let sharing = arguments.contains("--sharing-layout")
                if sharing { bench.host.launchStrategy = .preforkedSharingLayout }
                // --spawn: without the pre-forked launcher, for comparison.
                let spawn = arguments.contains("--spawn")
                if spawn { bench.host.launchStrategy = .spawn }
                // --skip LAYER: that confinement layer off, to show what it costs.
                if let layer = text("skip") { bench.host.skippedConfinementLayers = [layer] }
                let backToBack = arguments.contains("--back-to-back")
                // --unprimed: no worker primed by the launch before (a plugin's first launch).
                let unprimed = arguments.contains("--unprimed")
                if unprimed { bench.host.primesWorkers = false }
                let name =
                    (spawn ? "launch-c-spawn" : backToBack ? "launch-c-back-to-back" : unprimed ? "launch-c-unprimed" : "launch-c")
                    + (sharing ? "-sharing-layout" : "")
                try await Benchmarks.launch(bench, identifier: Benchmarks.echo, name: name, iterations: iterations, backToBack: backToBack)
            case "burst":
                // A plugin's first launch each: no worker primed by a launch before.
                var bench = try BenchHost()
                defer { bench.remove() }
                bench.host.primesWorkers = false
                // --sharing-layout: one launcher forks every worker (no exec per worker).
                let sharing = arguments.contains("--sharing-layout")
                if sharing { bench.host.launchStrategy = .preforkedSharingLayout }
                try await Benchmarks.burst(
                    bench, count: option("count", 32), rounds: option("rounds", 10), name: sharing ? "-sharing-layout" : "")
            case "launch-swift":
                let bench = try BenchHost()
                defer { bench.remove() }
                try await Benchmarks.launch(bench, identifier: Benchmarks.swiftFilter, name: "launch-swift", iterations: iterations)
            case "first-response":
                var bench = try BenchHost()
                defer { bench.remove() }
                if let layer = text("skip") { bench.host.skippedConfinementLayers = [layer] }
                try await Benchmarks.firstResponse(bench, iterations: iterations)
            case "round-trip":
                // --pipes: without the shared rings, for the figure beside them in one run.
                if arguments.contains("--pipes") { setenv("PLUGIND_SHARED_RINGS", "0", 1) }
                let bench = try BenchHost()
                defer { bench.remove() }
                let cpu = option("worker-cpu", -1)
                // --idle-ms MS: a pause before each round trip (a request after a quiet moment).
                let idle = option("idle-ms", 0)
                try await Benchmarks.roundTrip(
                    bench,
                    size: option("size", 64),
                    iterations: iterations,
                    workerCPU: cpu < 0 ? nil : cpu,
                    caller: Benchmarks.Caller(rawValue: text("caller") ?? "task") ?? .task,
                    idle: idle > 0 ? .milliseconds(idle) : nil,
                    name: text("name") ?? "round-trip"
                )
            case "foreign-round-trip":
                if arguments.contains("--pipes") { setenv("PLUGIND_SHARED_RINGS", "0", 1) }
                try await ForeignHostBenchmarks.roundTrip(
                    language: text("language") ?? "c", program: text("program"), iterations: iterations)
            case "kit-round-trip":
                guard let library = text("library") else { throw CocoaError(.fileNoSuchFile, userInfo: [NSFilePathErrorKey: "--library"]) }
                let (memory, concurrency) = (option("memory-bytes", 0), option("concurrency", 0))
                try await KitBenchmarks.emptyRoundTrip(
                    library: library, memoryBytes: memory > 0 ? UInt64(memory) : nil, concurrency: concurrency > 0 ? concurrency : nil,
                    iterations: iterations, name: text("name") ?? "kit-round-trip")
            case "typed-call":
                let bench = try BenchHost()
                defer { bench.remove() }
                try await Benchmarks.typedCall(bench, iterations: iterations)
            case "one-shot-run":
                try OneShotBenchmarks.run(pairs: option("pairs", 10))
            case "typed-call-out-buffer":
                let bench = try BenchHost()
                defer { bench.remove() }
                try await OneShotBenchmarks.outBuffer(bench, iterations: iterations)
            case "typed-call-handle":
                let bench = try BenchHost()
                defer { bench.remove() }
                try await OneShotBenchmarks.handleCall(bench, iterations: iterations)
            case "zlib-compress":
                let bench = try BenchHost()
                defer { bench.remove() }
                try await OneShotBenchmarks.zlibCompress(bench, iterations: iterations)
            case "typed-call-callback":
                let bench = try BenchHost()
                defer { bench.remove() }
                try await CallbackBenchmarks.roundTrip(bench, iterations: iterations)
            case "qsort-100k":
                let bench = try BenchHost()
                defer { bench.remove() }
                try await CallbackBenchmarks.qsortLarge(bench, iterations: iterations)
            case "ladspa-chain":
                let bench = try BenchHost()
                defer { bench.remove() }
                try await ForeignPluginBenchmarks.chain(
                    bench, blocks: iterations, pacedSeconds: option("paced-seconds", 0),
                    length: option("length", ForeignPluginBenchmarks.chainLength))
            case "invert0r-1080p":
                let bench = try BenchHost()
                defer { bench.remove() }
                try await ForeignPluginBenchmarks.invert(bench, iterations: iterations)
            case "foreign-discovery":
                let bench = try BenchHost()
                defer { bench.remove() }
                try await ForeignPluginBenchmarks.discovery(bench, rescans: option("rescans", 5))
            case "host-request":
                let bench = try BenchHost()
                defer { bench.remove() }
                try await Benchmarks.hostRequest(bench, iterations: iterations)
            case "attach":
                let bench = try BenchHost()
                defer { bench.remove() }
                try await Benchmarks.attach(bench, iterations: iterations)
            case "policy-to-termination":
                let bench = try BenchHost()
                defer { bench.remove() }
                try await Benchmarks.policyToTermination(bench, iterations: iterations)
            case "concurrent-requests":
                let bench = try BenchHost()
                defer { bench.remove() }
                try await Benchmarks.concurrentRequests(bench, concurrency: option("concurrency", 1), iterations: iterations)
            case "swift-plugin-server":
                try await Benchmarks.swiftPluginServer(iterations: iterations)
            case "live-workers":
                var bench = try BenchHost()
                defer { bench.remove() }
                let sharing = arguments.contains("--sharing-layout")
                if sharing { bench.host.launchStrategy = .preforkedSharingLayout }
                try await Benchmarks.liveWorkers(bench, count: option("count", 1000), sharingLayout: sharing, hold: option("hold", 0))
            case "populate":
                try DiscoveryBenchmarks.populate(text("root") ?? "/tmp/plugind-bench-bundles", count: option("count", 10000))
            case "scan":
                try await DiscoveryBenchmarks.scan(
                    root: text("root") ?? "/tmp/plugind-bench-bundles",
                    state: text("state") ?? "/tmp/plugind-bench-state",
                    name: text("name") ?? "discovery",
                    rescanCount: option("rescans", 1)
                )
            case "load":
                let bench = try BenchHost()
                defer { bench.remove() }
                try await Benchmarks.load(
                    bench, tasks: option("tasks", 1), workers: option("workers", 1), requests: option("requests", 20000),
                    caller: Benchmarks.Caller(rawValue: text("caller") ?? "task") ?? .task)
            case "idle-connections":
                let bench = try BenchHost()
                defer { bench.remove() }
                try await Benchmarks.idleConnections(bench, workers: option("workers", 4), seconds: option("seconds", 3))
            case "cycles":
                let bench = try BenchHost()
                defer { bench.remove() }
                try await Benchmarks.cycles(bench, count: option("count", 10000))
            case "install-package":
                try PackageBenchmarks.install(iterations: iterations)
            case "scans-per-install":
                try await DiscoveryBenchmarks.scansPerInstall(iterations: iterations)
            case "monitor-latency":
                try await DiscoveryBenchmarks.monitorLatency(iterations: iterations)
            case "suite":
                var suite = Suite(
                    baselines: text("baselines") ?? ".build/bench",
                    output: text("output") ?? ".build/bench/results.json",
                    quick: arguments.contains("--quick")
                )
                try suite.run()
            case "dev-change-to-answer":
                try DevBenchmarks.changeToAnswer(iterations: iterations)
            case "idle-monitor":
                try await DiscoveryBenchmarks.idleMonitor(
                    seconds: option("seconds", 3), settle: option("settle", 6), withMonitor: !arguments.contains("--baseline"))
            case "log-cost":
                try await ActivityBenchmarks.logging(iterations: iterations)
            case "statistics-cost":
                try await ActivityBenchmarks.statistics(iterations: iterations)
            default:
                print(
                    "usage: plugind-bench launch-c|burst|launch-swift|first-response|round-trip|kit-round-trip|typed-call|typed-call-out-buffer|typed-call-handle|zlib-compress|typed-call-callback|qsort-100k|ladspa-chain|invert0r-1080p|foreign-discovery|one-shot-run|swift-plugin-server|live-workers|populate|scan|monitor-latency|idle-monitor|idle-connections|install-package|log-cost|statistics-cost [--iterations N] (round-trip, foreign-round-trip: [--pipes] without the shared rings; round-trip: [--idle-ms MS] a pause before each)"
                )
                exit(64)
            }
        } catch {
            print("{\"error\": \"\(error)\"}")
            if let failure = error as? AppExtensionError, !failure.standardErrorTail.isEmpty {
                FileHandle.standardError.write(Data(failure.standardErrorTail.utf8))
            }
            exit(1)
        }
    }
}
