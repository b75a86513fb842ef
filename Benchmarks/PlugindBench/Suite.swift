import Foundation

/// `plugind-bench suite`: runs every figure of Scripts/bench.sh, each in a process of its own,
/// next to the raw C baselines measured in the same run, and prints one table of ratios against
/// the goals. Writes the same as JSON for machines.
struct Suite {
    /// Where the compiled C baselines (pingpong, spawn, first_byte) are.
    let baselines: String
    let output: String
    let quick: Bool

    private var measurements: [String: Measurement] = [:]
    private let executable = BenchHost.productsDirectory + "/plugind-bench"

    init(baselines: String, output: String, quick: Bool) {
        self.baselines = baselines
        self.output = output
        self.quick = quick
    }

    /// Iterations, fewer with --quick (a smoke run of the script itself).
    private func count(_ full: Int) -> Int { quick ? max(3, full / 50) : full }

    mutating func run() throws {
        let started = ContinuousClock.now
        let scratch = NSTemporaryDirectory() + "plugind-bench-suite-\(getpid())"
        defer { try? FileManager.default.removeItem(atPath: scratch) }

        section("raw baselines")
        baseline("pipe-64-same-core", ["pipe", "64", "\(count(20000))", "0", "0"])
        baseline("pipe-64-cross-core", ["pipe", "64", "\(count(20000))", "0", "1"])
        baseline("pipe-64-unpinned", ["pipe", "64", "\(count(20000))", "-1", "-1"])
        // After a quiet moment (30 ms asleep): what a host's occasional request costs.
        baseline("pipe-64-after-idle", ["pipe", "64", "\(count(100))", "-1", "-1", "0", "30"])
        baseline("pipe-1MiB", ["pipe", "1048576", "\(count(500))", "-1", "-1"])
        baseline("pipe-1MiB-1MiB-buffers", ["pipe", "1048576", "\(count(500))", "-1", "-1", "1048576"])
        baseline("socketpair-1MiB", ["socketpair", "1048576", "\(count(500))", "-1", "-1"])
        spawnBaseline("spawn-c-first-byte-unpinned", cpu: nil)
        spawnBaseline("spawn-c-first-byte-same-core", cpu: 0)
        peers()

        section("plugind")
        bench(["round-trip", "--size", "64", "--iterations", "\(count(20000))", "--name", "round-trip-64-same-core"], cpu: 0)
        bench(
            ["round-trip", "--size", "64", "--iterations", "\(count(20000))", "--worker-cpu", "1", "--name", "round-trip-64-cross-core"],
            cpu: 0)
        bench(["round-trip", "--size", "64", "--iterations", "\(count(20000))", "--name", "round-trip-64-unpinned"])
        bench(["round-trip", "--size", "64", "--iterations", "\(count(100))", "--idle-ms", "30", "--name", "round-trip-64-after-idle"])
        // The same over the pipes alone (the host offers no rings), for the rings' gain and cost.
        bench(["round-trip", "--size", "64", "--iterations", "\(count(20000))", "--pipes", "--name", "round-trip-64-unpinned-pipes"])
        // The same from a task that prefers the process's task executor, and from the main actor.
        for (caller, suffix) in [("task-executor", "task-executor"), ("main-actor", "main-actor")] {
            bench(
                [
                    "round-trip", "--size", "64", "--iterations", "\(count(20000))", "--caller", caller, "--name",
                    "round-trip-64-same-core-\(suffix)",
                ],
                cpu: 0)
            bench(
                [
                    "round-trip", "--size", "64", "--iterations", "\(count(20000))", "--caller", caller, "--name",
                    "round-trip-64-unpinned-\(suffix)",
                ])
        }
        bench(["round-trip", "--size", "1048576", "--iterations", "\(count(500))", "--name", "echo-1MiB"])
        // The same 64 B round trip from a C host and a Python host through libplugind.
        bench(["foreign-round-trip", "--language", "c", "--program", baselines + "/host_round_trip", "--iterations", "\(count(20000))"])
        bench(
            [
                "foreign-round-trip", "--language", "c", "--program", baselines + "/host_round_trip", "--iterations", "\(count(20000))",
                "--pipes",
            ],
            rename: ["round-trip-64-c-host": "round-trip-64-c-host-pipes"])
        bench(["foreign-round-trip", "--language", "python", "--iterations", "\(count(5000))"])
        // The empty-request round trip of the C echo and of the C++, Rust and Go kits' probes, each
        // with the concurrency the probes declare (4; see `KitBenchmarks`).
        for (name, library, memory, concurrency) in [
            ("kit-c", BenchHost.productsDirectory + "/libEcho.so", 0, 4),
            ("kit-cpp", BenchHost.productsDirectory + "/libCppKitProbe.so", 0, 0),
            ("kit-rust", baselines + "/rust/release/libkit_probe.so", 0, 0), ("kit-go", baselines + "/go/libKitProbe.so", 3 << 30, 0),
        ] where FileManager.default.fileExists(atPath: library) {
            bench([
                "kit-round-trip", "--library", library, "--memory-bytes", "\(memory)", "--concurrency", "\(concurrency)",
                "--iterations", "\(count(20000))", "--name", name,
            ])
        }
        // What the owner's view of running plugins costs a request.
        bench(["log-cost", "--iterations", "\(count(20000))"])
        bench(["statistics-cost", "--iterations", "\(count(20000))"])
        bench(["dev-change-to-answer", "--iterations", "\(count(20))"])
        bench(["launch-c", "--iterations", "\(count(300))"], rename: ["launch-c": "launch-c-unpinned"])
        bench(["launch-c", "--iterations", "\(count(300))"], cpu: 0, rename: ["launch-c": "launch-c-same-core"])
        bench(["launch-c", "--unprimed", "--iterations", "\(count(300))"])
        bench(["launch-c", "--back-to-back", "--iterations", "\(count(300))"])
        bench(["launch-c", "--back-to-back", "--sharing-layout", "--iterations", "\(count(300))"])
        bench(["launch-c", "--spawn", "--iterations", "\(count(100))"])
        bench(["launch-swift", "--iterations", "\(count(300))"], rename: ["launch-swift": "launch-swift-unpinned"])
        bench(["launch-swift", "--iterations", "\(count(300))"], cpu: 0, rename: ["launch-swift": "launch-swift-same-core"])
        bench(["first-response", "--iterations", "\(count(200))"])
        bench(["swift-plugin-server", "--iterations", "\(count(30))"])
        bench(["typed-call", "--iterations", "\(count(10000))"])
        bench(["typed-call-out-buffer", "--iterations", "\(count(5000))"])
        bench(["typed-call-handle", "--iterations", "\(count(10000))"])
        bench(["zlib-compress", "--iterations", "\(count(200))"])
        bench(["typed-call-callback", "--iterations", "\(count(200))"])
        bench(["qsort-100k", "--iterations", quick ? "1" : "3"], times: 1)
        section("LADSPA and frei0r plugins")
        bench(["ladspa-chain", "--iterations", "\(count(5000))", "--paced-seconds", quick ? "1" : "60"], times: 1)
        processChainBaseline(blocks: count(5000), pacedSeconds: quick ? 1 : 60)
        bench(["invert0r-1080p", "--iterations", "\(count(100))"])
        bench(["foreign-discovery", "--rescans", quick ? "1" : "5"], times: 1)
        // The shell's `plugind run`, end to end, against bubblewrap's one-shot sandbox.
        bench(["one-shot-run", "--pairs", quick ? "3" : "10"], times: 1)
        section("load")
        let loadShapes = quick ? [(1, 1), (8, 4)] : [(1, 1), (1, 4), (1, 16), (8, 1), (8, 4), (8, 16), (64, 1), (64, 4), (64, 16)]
        for (tasks, workers) in loadShapes {
            loadBaseline(tasks: tasks, workers: workers, requests: quick ? 2000 : 20000)
            bench(["load", "--tasks", "\(tasks)", "--workers", "\(workers)", "--requests", quick ? "2000" : "20000"])
            // The same tasks preferring the loop's executor: each resumes on the thread that read
            // its answer, and no pool thread is woken per request.
            if tasks > 1 {
                bench([
                    "load", "--tasks", "\(tasks)", "--workers", "\(workers)", "--requests", quick ? "2000" : "20000", "--caller",
                    "task-executor",
                ])
            }
        }
        bench(["cycles", "--count", quick ? "200" : "10000"], times: 1)
        section("launch with one confinement layer off (the cost of each)")
        for layer in ["filesystem-view", "system-calls", "filesystem"] {
            bench(["launch-c", "--skip", layer, "--iterations", "\(count(300))"], rename: ["launch-c": "launch-c-without-\(layer)"])
        }
        section("connections")
        bench(["host-request", "--iterations", "\(count(20000))"])
        bench(["attach", "--iterations", "\(count(1000))"])
        bench(["policy-to-termination", "--iterations", "\(count(50))"])
        bench(["concurrent-requests", "--concurrency", "1", "--iterations", "\(count(20))"])
        bench(["concurrent-requests", "--concurrency", "2", "--iterations", "\(count(20))"])
        // Discovery before the 1000 workers, whose teardown would still be going on.
        let bundles = scratch + "/bundles"
        bench(["populate", "--root", bundles, "--count", quick ? "500" : "10000"], times: 1)
        // The first scan writes the store; each later process starts from it.
        bench(["scan", "--root", bundles, "--state", scratch + "/state", "--name", "discovery-first", "--rescans", "5"], times: 1)
        bench(
            ["scan", "--root", bundles, "--state", scratch + "/state", "--name", "discovery-warm", "--rescans", "5"], times: quick ? 1 : 5)
        bench(["monitor-latency", "--iterations", "\(count(100))"], times: 1)
        bench(["scans-per-install", "--iterations", quick ? "3" : "20"], times: 1)
        bench(["idle-monitor", "--seconds", quick ? "1" : "3"], times: quick ? 1 : 3)
        bench(["idle-monitor", "--seconds", quick ? "1" : "3", "--baseline"], times: quick ? 1 : 3)
        bench(["idle-connections", "--workers", "4", "--seconds", quick ? "1" : "3"])
        bench(["live-workers", "--count", quick ? "50" : "1000"], times: 1)
        bench(["live-workers", "--count", quick ? "50" : "1000", "--sharing-layout"], times: 1)
        section("packages")
        bench(["install-package", "--iterations", quick ? "3" : "20"], times: 1)

        let rows = goals()
        printTable(rows)
        try writeJSON(rows, seconds: started.duration(to: .now))
    }

    // MARK: Running

    private func section(_ title: String) {
        FileHandle.standardError.write(Data("== \(title)\n".utf8))
    }

    /// Each figure is measured in `repetitions` processes and reported as the median of their
    /// medians: on a shared machine one process can land on a bad moment.
    private var repetitions: Int { quick ? 1 : 3 }

    private mutating func baseline(_ name: String, _ arguments: [String]) {
        record(name, outputs: (0..<repetitions).map { _ in runProcess(baselines + "/pingpong", arguments) })
    }

    /// The raw load baseline prints throughput, median and 99th percentile.
    private mutating func loadBaseline(tasks: Int, workers: Int, requests: Int) {
        var runs: [Measurement] = []
        for _ in 0..<repetitions {
            let fields = runProcess(baselines + "/load", ["\(tasks)", "\(workers)", "\(requests)"])
                .split(whereSeparator: \.isWhitespace).compactMap { Double($0) }
            guard fields.count == 3 else { continue }
            var measurement = Measurement(name: "raw-load-\(tasks)-\(workers)", values: [fields[1]])
            measurement.extra = ["throughput": fields[0], "p99": fields[2]]
            runs.append(measurement)
        }
        guard !runs.isEmpty else { return }
        let chosen = runs.sorted { $0.median < $1.median }[runs.count / 2]
        measurements[chosen.name] = chosen
        FileHandle.standardError.write(Data("   \(chosen.name): \(format(chosen.median, "us")) median\n".utf8))
    }

    /// The raw chain baseline (Benchmarks/Baselines/process_chain.c): 8 processes handing a block
    /// through words in shared memory, back to back and paced, with the LADSPA chain's block.
    private mutating func processChainBaseline(blocks: Int, pacedSeconds: Int) {
        let fields = runProcess(
            baselines + "/process_chain",
            [
                "\(ForeignPluginBenchmarks.chainLength)", "\(blocks)", "\(pacedSeconds)", "\(ForeignPluginBenchmarks.block)",
                "\(ForeignPluginBenchmarks.sampleRate)",
            ]
        ).split(whereSeparator: \.isWhitespace).compactMap { Double($0) }
        guard fields.count == 5 else {
            FileHandle.standardError.write(Data("   process-chain: no figure\n".utf8))
            return
        }
        var backToBack = Measurement(name: "c-process-chain-8", values: [fields[0]])
        backToBack.extra = ["p99": fields[1]]
        var paced = Measurement(name: "c-process-chain-8-paced", values: [fields[4]])
        paced.extra = ["missed": fields[2], "blocks": fields[3], "p99": fields[4]]
        measurements[backToBack.name] = backToBack
        measurements[paced.name] = paced
        FileHandle.standardError.write(
            Data(
                "   c-process-chain-8: \(format(fields[0], "us")) median, p99 \(format(fields[1], "us")); paced \(Int(fields[2])) of \(Int(fields[3])) late\n"
                    .utf8))
    }

    private mutating func spawnBaseline(_ name: String, cpu: Int?) {
        var arguments = [baselines + "/first_byte", "\(count(500))"]
        if let cpu { arguments.append("\(cpu)") }
        record(name, outputs: (0..<repetitions).map { _ in runProcess(baselines + "/spawn", arguments) })
    }

    /// The peers a user would pick instead, measured in the same run (Scripts/bench.sh installs
    /// and builds them; a peer it could not provide is left out, and its rows say "missing"):
    /// bubblewrap's sandboxed launch of the same trivial program to its first byte, every
    /// namespace bubblewrap knows unshared; an Extism echo call from C and a new Extism instance
    /// with its first call.
    private mutating func peers() {
        section("peers")
        let bubblewrap = "/usr/bin/bwrap"
        if FileManager.default.isExecutableFile(atPath: bubblewrap) {
            var arguments = [bubblewrap, "\(count(300))", "-1", "--unshare-all", "--die-with-parent", "--new-session"]
            // As root bubblewrap would keep the capabilities it has; a plugind worker has none.
            if geteuid() == 0 { arguments += ["--cap-drop", "ALL"] }
            arguments += [
                "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/bin",
                "/bin", "--proc", "/proc", "--dev", "/dev", "--ro-bind", baselines + "/first_byte", "/first_byte", "/first_byte",
            ]
            record("bubblewrap-first-byte", outputs: (0..<repetitions).map { _ in runProcess(baselines + "/spawn", arguments) })
            // 32 sandboxes asked for at once, against 32 plugins' first launches at once.
            let burst = runProcess(baselines + "/burst", ["32", "\(count(10))", bubblewrap] + arguments.dropFirst(3))
            let times = burst.split(separator: "\n").compactMap { Double($0) }.sorted()
            if times.isEmpty {
                FileHandle.standardError.write(Data("   bubblewrap-burst-32: no figure (\(burst.prefix(200)))\n".utf8))
            } else {
                measurements["bubblewrap-burst-32"] = Measurement(
                    name: "bubblewrap-burst-32", values: times, extra: ["p99": Measurement.p99(times)])
                FileHandle.standardError.write(Data("   bubblewrap-burst-32: \(format(times[times.count / 2], "us")) median\n".utf8))
            }
            bench(["burst", "--count", "32", "--rounds", "\(count(10))"])
            bench(["burst", "--count", "32", "--rounds", "\(count(10))", "--sharing-layout"])
        } else {
            FileHandle.standardError.write(Data("   bubblewrap: not installed (Debian's bubblewrap), left out\n".utf8))
        }
        let caller = baselines + "/extism_caller"
        let library = baselines + "/libextism.so"
        let module = baselines + "/echo.wasm"
        if [caller, library, module].allSatisfy(FileManager.default.fileExists(atPath:)) {
            bench([library, module, "\(count(20000))"], program: caller)
        } else {
            FileHandle.standardError.write(Data("   extism: not provided by Scripts/bench.sh (PyPI's extism-sys), left out\n".utf8))
        }
    }

    /// A baseline prints its median alone.
    private mutating func record(_ name: String, outputs: [String]) {
        let values = outputs.compactMap { Double($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        guard !values.isEmpty else {
            FileHandle.standardError.write(Data("   \(name): no figure (\(outputs.first ?? ""))\n".utf8))
            return
        }
        let measurement = Measurement(name: name, values: values)
        measurements[name] = measurement
        FileHandle.standardError.write(Data("   \(name): \(format(measurement.median, "us"))\n".utf8))
    }

    /// Runs a subcommand of this executable (pinned to `cpu` with its workers) in `times`
    /// processes (default `repetitions`) and keeps, for every measurement it prints, the run
    /// with the median of the medians.
    private mutating func bench(
        _ arguments: [String], program: String? = nil, cpu: Int? = nil, times: Int? = nil, rename: [String: String] = [:]
    ) {
        let program = program ?? executable
        var runs: [String: [Measurement]] = [:]
        for _ in 0..<(times ?? repetitions) {
            let output =
                cpu.map { runProcess("/usr/bin/taskset", ["-c", "\($0)", program] + arguments) } ?? runProcess(program, arguments)
            for line in output.split(separator: "\n") {
                guard var measurement = try? JSONDecoder().decode(Measurement.self, from: Data(line.utf8)) else {
                    if line.contains("error") { FileHandle.standardError.write(Data("   \(arguments[0]): \(line)\n".utf8)) }
                    continue
                }
                measurement.name = rename[measurement.name] ?? measurement.name
                runs[measurement.name, default: []].append(measurement)
            }
        }
        for (name, candidates) in runs {
            let sorted = candidates.sorted { $0.median < $1.median }
            var chosen = sorted[sorted.count / 2]
            if sorted.count > 1 { chosen.extra["runs"] = Double(sorted.count) }
            measurements[name] = chosen
            FileHandle.standardError.write(Data("   \(name): \(format(chosen.median, chosen.unit))\n".utf8))
        }
    }

    private func runProcess(_ path: String, _ arguments: [String]) -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        do {
            try process.run()
        } catch {
            return "error: \(error)"
        }
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }

    // MARK: Goals

    struct Row: Encodable {
        var figure: String
        var value: String
        var baseline: String
        /// plugind / baseline (or baseline / plugind for "faster than" goals).
        var ratio: Double?
        var goal: String
        var met: Bool?
    }

    private func median(_ name: String) -> Double? { measurements[name]?.median }

    private func goals() -> [Row] {
        var rows: [Row] = []
        /// `limit` nil: a figure reported beside its baseline, with no goal.
        func ratioRow(_ figure: String, _ ours: String, _ base: String, atMost limit: Double?) {
            let goal = limit.map { "≤ \($0)×" } ?? "reported"
            guard let value = median(ours), let reference = median(base), reference > 0 else {
                rows.append(Row(figure: figure, value: "missing", baseline: "missing", goal: goal))
                return
            }
            let ratio = value / reference
            rows.append(
                Row(
                    figure: figure, value: format(value, "us"), baseline: "\(format(reference, "us")) (\(base))", ratio: ratio,
                    goal: goal, met: limit.map { ratio <= $0 }))
        }
        func burstP99Row(_ figure: String, _ ours: String) {
            guard let value = measurements[ours]?.extra["p99"], let peer = measurements["bubblewrap-burst-32"]?.extra["p99"], peer > 0
            else {
                rows.append(Row(figure: figure, value: "missing", baseline: "missing", goal: "≤ 0.5×"))
                return
            }
            rows.append(
                Row(
                    figure: figure, value: format(value, "us"), baseline: "\(format(peer, "us")) (bubblewrap-burst-32 p99)",
                    ratio: value / peer, goal: "≤ 0.5×", met: value / peer <= 0.5))
        }
        func absoluteRow(_ figure: String, _ name: String, atMost limit: Double, unit: String, note: String = "") {
            guard let value = median(name) else {
                rows.append(Row(figure: figure, value: "missing", baseline: "", goal: "≤ \(format(limit, unit))"))
                return
            }
            rows.append(
                Row(figure: figure, value: format(value, unit) + note, baseline: "", goal: "≤ \(format(limit, unit))", met: value <= limit))
        }
        ratioRow("64 B round trip, same core", "round-trip-64-same-core", "pipe-64-same-core", atMost: 1.5)
        ratioRow("64 B round trip, cross core", "round-trip-64-cross-core", "pipe-64-cross-core", atMost: 1.5)
        ratioRow("64 B round trip, unpinned", "round-trip-64-unpinned", "pipe-64-unpinned", atMost: 1.5)
        ratioRow(
            "64 B round trip, same core, task preferring process.taskExecutor", "round-trip-64-same-core-task-executor",
            "pipe-64-same-core",
            atMost: 1.5)
        ratioRow(
            "64 B round trip, unpinned, task preferring process.taskExecutor", "round-trip-64-unpinned-task-executor", "pipe-64-unpinned",
            atMost: 1.5)
        ratioRow("1 MiB echo round trip", "echo-1MiB", "socketpair-1MiB", atMost: 0.5)
        absoluteRow(
            "plugind dev: a saved change of a C plugin to its new answer (make alone beside it)", "dev-change-to-answer", atMost: 1_000_000,
            unit: "us", note: " (make alone: \(median("dev-make-alone").map { format($0, "us") } ?? "missing"))")
        ratioRow(
            "64 B round trip with a log line per request, recorded, vs a 64 B echo without one", "log-per-request", "echo-64-no-log",
            atMost: 1.2)
        ratioRow(
            "64 B round trip with a log line per request, recorded, vs the log off", "log-per-request", "log-per-request-off", atMost: 1.2)
        if let published = median("statistics-published"), let again = median("statistics-published-again"),
            let unpublished = median("statistics-private"), unpublished > 0, again > 0
        {
            let spread = abs(published - again) / again
            let ratio = published / unpublished
            rows.append(
                Row(
                    figure:
                        "empty request with the statistics page published, vs kept private (spread of two same runs: \(String(format: "%.1f", spread * 100)) %)",
                    value: format(published, "us"), baseline: "\(format(unpublished, "us")) (statistics-private)", ratio: ratio,
                    // Slower by no more than two runs of the same differ (faster is noise too).
                    goal: "within the spread", met: ratio <= 1 + max(spread, 0.02)))
        }
        ratioRow("empty round trip, a C++ kit plugin, vs the C echo's (both concurrency 4)", "kit-cpp", "kit-c", atMost: 1.1)
        ratioRow("empty round trip, a Rust kit plugin, vs the C echo's (both concurrency 4)", "kit-rust", "kit-c", atMost: 1.1)
        // Issue 27 set the goal for C++ and Rust; a Go plugin's request crosses cgo twice and
        // wakes a goroutine, and its figure is reported.
        ratioRow("empty round trip, a Go kit plugin, vs the C echo's (both concurrency 4)", "kit-go", "kit-c", atMost: nil)
        ratioRow(
            "64 B round trip from C (libplugind), unpinned, vs the Swift API's", "round-trip-64-c-host", "round-trip-64-unpinned",
            atMost: 1.2)
        if let python = median("round-trip-64-python-host"), let swift = median("round-trip-64-unpinned"),
            let empty = median("ctypes-empty-call")
        {
            rows.append(
                Row(
                    figure: "64 B round trip from Python (ctypes), unpinned; an empty ctypes call costs \(format(empty, "us"))",
                    value: format(python, "us"), baseline: "\(format(swift, "us")) (round-trip-64-unpinned)", ratio: python / swift,
                    goal: "reported", met: nil))
        }
        ratioRow("launch until ready, C plugin, unpinned", "launch-c-unpinned", "spawn-c-first-byte-unpinned", atMost: 0.75)
        ratioRow("launch until ready, C plugin, same core", "launch-c-same-core", "spawn-c-first-byte-same-core", atMost: 0.75)
        ratioRow(
            "launch until ready, C plugin, first launch (spares ready, no primed worker)", "launch-c-unprimed",
            "spawn-c-first-byte-unpinned",
            atMost: 0.75)
        ratioRow(
            "launch until ready, C plugin, back to back (each launch pays for the next spare)", "launch-c-back-to-back",
            "spawn-c-first-byte-unpinned", atMost: 1.0)
        ratioRow(
            "… back to back, the workers sharing a layout (preforkedSharingLayout)", "launch-c-back-to-back-sharing-layout",
            "spawn-c-first-byte-unpinned", atMost: 1.0)
        ratioRow("launch until ready, Swift plugin, unpinned", "launch-swift-unpinned", "spawn-c-first-byte-unpinned", atMost: 1.0)
        ratioRow("launch until ready, Swift plugin, same core", "launch-swift-same-core", "spawn-c-first-byte-same-core", atMost: 1.0)
        if let ours = median("first-response"), let peer = median("swift-plugin-server-first-response") {
            let speedup = peer / ours
            rows.append(
                Row(
                    figure: "launch to first response vs swift-plugin-server", value: format(ours, "us"),
                    baseline: "\(format(peer, "us")) (swift-plugin-server)", ratio: speedup, goal: "≥ 10× faster", met: speedup >= 10))
        }
        ratioRow("typed call through libffi vs empty request", "typed-call", "empty-request", atMost: 1.1)
        ratioRow("typed call, 64 KiB out buffer vs 64 KiB in", "typed-call-out-64KiB", "typed-call-in-64KiB", atMost: 1.2)
        ratioRow("typed call with a handle vs a scalar call, same worker", "typed-call-handle", "typed-call-scalars", atMost: 1.1)
        ratioRow(
            "a callback round trip (qsort's comparator answered by the host) vs a plugin's ask inside a request", "typed-call-callback",
            "host-ask-in-request", atMost: 1.5)
        ratioRow(
            "qsort of 100,000 int64s with the host's comparator vs libc's qsort in process", "qsort-100k-confined",
            "qsort-100k-in-process", atMost: nil)
        ratioRow(
            "1 MiB through confined zlib compress vs in-process", "zlib-compress-1MiB-confined", "zlib-compress-1MiB-in-process",
            atMost: 1.2)
        ratioRow(
            "a chain of 8 confined LADSPA effects, 64-frame block, vs in-process", "ladspa-chain-8-confined", "ladspa-chain-8-in-process",
            atMost: nil)
        absoluteRow("… its time beyond in-process, per plugin, median", "ladspa-chain-8-extra-per-plugin", atMost: 25, unit: "us")
        ratioRow(
            "… the same chain run as requests from a task, vs rung from the thread", "ladspa-chain-8-requests", "ladspa-chain-8-confined",
            atMost: nil)
        let floor = measurements["c-process-chain-8"]
        if let p99 = measurements["ladspa-chain-8-confined"]?.extra["p99"] {
            // 10 % of the block's period (64 frames at 48 kHz: 1,333 µs); beside it, the same
            // block handed through 8 bare C processes on this machine.
            rows.append(
                Row(
                    figure: "… p99 per block, against the block's period", value: format(p99, "us"),
                    baseline:
                        "period 1.33 ms; 8 C processes \(floor?.extra["p99"].map { format($0, "us") } ?? "missing") (c-process-chain-8 p99)",
                    ratio: p99 / 1333.3, goal: "≤ 0.1×", met: p99 <= 133.3))
        }
        if let paced = measurements["ladspa-chain-8-paced"], let missed = paced.extra["missed"], let blocks = paced.extra["blocks"] {
            let bare = measurements["c-process-chain-8-paced"]
            rows.append(
                Row(
                    figure: "… paced in real time: blocks missed",
                    value: "\(Int(missed)) of \(Int(blocks)) (p99 \(format(paced.extra["p99"] ?? 0, "us")) from due)",
                    baseline: bare.flatMap { bare in
                        bare.extra["missed"].map {
                            "8 C processes: \(Int($0)) of \(Int(bare.extra["blocks"] ?? 0)) (p99 \(format(bare.extra["p99"] ?? 0, "us")))"
                        }
                    } ?? "missing", goal: "0", met: missed == 0))
        }
        ratioRow(
            "a 1920×1080 frame through confined invert0r vs in-process", "invert0r-1080p-confined", "invert0r-1080p-in-process", atMost: 1.2
        )
        absoluteRow("discovery of every LADSPA and frei0r plugin, first scan", "foreign-discovery-first", atMost: 60_000_000, unit: "us")
        absoluteRow("… warm", "foreign-discovery-warm", atMost: 300_000, unit: "us")
        ratioRow("plugind run at the shell vs bwrap --unshare-all printf, wall", "one-shot-run", "bubblewrap-one-shot", atMost: 2.0)
        absoluteRow(
            "plugind run at the shell, CPU (bwrap's beside it)", "one-shot-run-cpu", atMost: 20_000, unit: "us",
            note: " (bwrap: \(median("bubblewrap-one-shot-cpu").map { format($0, "us") } ?? "missing"))")
        // Against the peers (see `peers()`).
        ratioRow("launch until ready, primed, vs bubblewrap's sandboxed launch", "launch-c-unpinned", "bubblewrap-first-byte", atMost: 0.1)
        ratioRow(
            "on-demand launch (no spare ready) vs bubblewrap's sandboxed launch", "launch-c-spawn", "bubblewrap-first-byte", atMost: 0.5)
        ratioRow(
            "a burst of 32 first launches of different plugins vs 32 bubblewrap launches at once, median", "burst-32-first-launches",
            "bubblewrap-burst-32", atMost: 0.5)
        burstP99Row("… p99", "burst-32-first-launches")
        ratioRow(
            "… the workers sharing a layout (preforkedSharingLayout), median", "burst-32-first-launches-sharing-layout",
            "bubblewrap-burst-32", atMost: 0.5)
        burstP99Row("… sharing a layout, p99", "burst-32-first-launches-sharing-layout")
        ratioRow(
            "launch to first answer vs an Extism instance and its first call", "first-response", "extism-instance-first-call", atMost: 3)
        ratioRow(
            "first request after a launch (a connection and a request) vs a later 64 B round trip", "first-request-after-launch",
            "round-trip-64-unpinned", atMost: 2)
        // The later round trip above runs back to back; after a pause a raw pipe pays several
        // times its own back-to-back figure too (this machine: both sides' processors asleep).
        ratioRow(
            "first request after a launch vs a round trip after 30 ms asleep", "first-request-after-launch", "round-trip-64-after-idle",
            atMost: nil)
        ratioRow(
            "64 B round trip after 30 ms asleep vs a raw pipe's after the same pause", "round-trip-64-after-idle", "pipe-64-after-idle",
            atMost: nil)
        ratioRow(
            "a raw pipe's round trip after 30 ms asleep vs back to back", "pipe-64-after-idle", "pipe-64-unpinned", atMost: nil)
        // Small messages: the goal is half an Extism call, not parity.
        ratioRow("64 B round trip, unpinned, vs an Extism call from C", "round-trip-64-unpinned", "extism-call-64", atMost: 0.5)
        ratioRow("64 B round trip from C (libplugind) vs an Extism call from C", "round-trip-64-c-host", "extism-call-64", atMost: 1.0)
        ratioRow(
            "64 B round trip, unpinned, through the shared rings vs over the pipes alone (same build, PLUGIND_SHARED_RINGS=0)",
            "round-trip-64-unpinned", "round-trip-64-unpinned-pipes", atMost: 1.0)
        ratioRow(
            "64 B round trip from C, through the shared rings vs over the pipes alone", "round-trip-64-c-host",
            "round-trip-64-c-host-pipes",
            atMost: 1.0)
        for (name, layout, goal) in [
            ("live-workers-uss", "a layout each", 512.0), ("live-workers-uss-sharing-layout", "sharing a layout", 256.0),
        ] {
            guard let workers = measurements[name] else { continue }
            let maximum = workers.extra["maxKiB"] ?? 0
            let count = Int(workers.extra["workers"] ?? 0)
            // Where one worker's pages are, largest first (the benchmark's "KiB <mapping>" figures).
            let largest = workers.extra.filter { $0.key.hasPrefix("KiB ") }.sorted { $0.value > $1.value }.prefix(4)
                .map { "\($0.key.dropFirst(4)) \(Int($0.value))" }.joined(separator: ", ")
            rows.append(
                Row(
                    figure: "live C workers at once (\(layout)), unique memory each",
                    value: "\(count) workers, median \(format(workers.median, "KiB")), max \(format(maximum, "KiB"))"
                        + (largest.isEmpty ? "" : " (KiB: \(largest))"),
                    baseline: "", goal: "1000, each ≤ \(Int(goal)) KiB", met: count >= (quick ? 50 : 1000) && maximum <= goal))
        }
        for (tasks, suffix, callers) in [
            (1, "", "task(s)"), (8, "", "task(s)"), (64, "", "task(s)"), (8, "-task-executor", "tasks preferring process.taskExecutor"),
            (64, "-task-executor", "tasks preferring process.taskExecutor"),
        ] {
            for workers in [1, 4, 16] {
                guard let ours = measurements["load-\(tasks)-\(workers)\(suffix)"], let raw = measurements["raw-load-\(tasks)-\(workers)"],
                    let throughput = ours.extra["throughput"], let rawThroughput = raw.extra["throughput"],
                    let p99 = ours.extra["p99"], let rawP99 = raw.extra["p99"], rawThroughput > 0, rawP99 > 0
                else { continue }
                let share = throughput / rawThroughput
                rows.append(
                    Row(
                        figure: "load: \(tasks) \(callers) over \(workers) worker(s), 64 B, throughput",
                        value: String(format: "%.0f/s", throughput), baseline: String(format: "%.0f/s (C pipes)", rawThroughput),
                        ratio: share, goal: "≥ 1.0×", met: share >= 1.0))
                rows.append(
                    Row(
                        figure:
                            "load: \(tasks) \(callers) over \(workers) worker(s), 64 B, p99 latency (host CPU \(format(ours.extra["hostCPUPerRequest"] ?? 0, "us"))/request)",
                        value: format(p99, "us"), baseline: "\(format(rawP99, "us")) (C pipes)", ratio: p99 / rawP99, goal: "≤ 2×",
                        met: p99 / rawP99 <= 2))
            }
        }
        if let cycles = measurements["launch-cycles"] {
            let descriptors = cycles.extra["descriptorGrowth"] ?? .nan
            let threads = cycles.extra["threadGrowth"] ?? .nan
            let anonymous = cycles.extra["anonymousGrowthKiB"] ?? .nan
            let resident = cycles.extra["rssGrowthKiB"] ?? .nan
            // The goal is on the host's own memory; all of RSS also counts library code paged in
            // the first time a path runs, shared and given back under pressure.
            rows.append(
                Row(
                    figure: "\(Int(cycles.extra["cycles"] ?? 0)) launch-request-invalidate cycles: host growth",
                    value: String(
                        format: "descriptors %+.0f, threads %+.0f, own memory (RssAnon) %+.0f KiB (all RSS %+.0f KiB)", descriptors,
                        threads, anonymous, resident),
                    baseline: "", goal: "0, 0, ≤ 1 MiB", met: descriptors <= 0 && threads <= 0 && anonymous <= 1024))
        }
        for layer in ["filesystem-view", "system-calls", "filesystem"] {
            guard let without = median("launch-c-without-\(layer)"), let with = median("launch-c-unpinned") else { continue }
            // Without the system-call layer no spare may be used (a spare installs the filter's first
            // stage ahead): that launch forks on the spot and is slower, not faster.
            // Spares restrict themselves and move into their view ahead: a launch without either
            // layer forks its worker on the spot, so the row shows that, not the layer's cost.
            let note = layer == "filesystem" ? "" : "; without it no spare can be used"
            rows.append(
                Row(
                    figure: "launch cost of the \(layer) layer (every layer vs without it\(note))", value: format(with, "us"),
                    baseline: "\(format(without, "us")) (without)", ratio: with / without, goal: "shown", met: nil))
        }
        ratioRow("plugin → host ask and answer, 64 B", "host-request-64", "round-trip-64-unpinned", atMost: 1.5)
        ratioRow("attach to a running worker vs launch", "attach", "launch-c-unpinned", atMost: 0.1)
        absoluteRow("owner disables → worker ended and onInterruption fired", "policy-to-termination", atMost: 100_000, unit: "us")
        if let one = median("concurrent-requests-1"), let two = median("concurrent-requests-2"), two > 0 {
            let speedup = one / two
            rows.append(
                Row(
                    figure: "CPU-bound requests, concurrency 2 vs 1 (throughput)", value: format(two, "us"),
                    baseline: "\(format(one, "us")) (concurrency 1)", ratio: speedup, goal: "≥ 1.7×", met: speedup >= 1.7))
        } else {
            rows.append(Row(figure: "CPU-bound requests, concurrency 2 vs 1 (throughput)", value: "missing", baseline: "", goal: "≥ 1.7×"))
        }
        absoluteRow("discovery of 10,000 bundles, first scan", "discovery-first", atMost: 300_000, unit: "us")
        absoluteRow("discovery of 10,000 bundles, new process with warm cache", "discovery-warm", atMost: 60_000, unit: "us")
        absoluteRow("approve → Monitor update seen by Observations", "approve-to-observation", atMost: 20_000, unit: "us")
        absoluteRow(
            "install (rename into place) → Monitor update seen by Observations", "install-to-observation", atMost: 20_000, unit: "us")
        absoluteRow("removal → Monitor update seen by Observations", "remove-to-observation", atMost: 20_000, unit: "us")
        absoluteRow("scans per install (plugind install's staging and rename)", "scans-per-install", atMost: 1, unit: "scans")
        ratioRow("verify and install of a signed 10 MiB package vs sha256sum + tar -x", "install-10MiB", "sha256sum-tar-10MiB", atMost: 2.0)
        if let monitor = median("idle-monitor-cpu"), let baseline = median("idle-baseline-cpu") {
            // What the Monitor adds to the same program idle without it.
            let added = max(monitor - baseline, 0)
            rows.append(
                Row(
                    figure: "idle Monitor CPU time over 3 s, beyond the same program without it", value: format(added, "us"),
                    baseline: "\(format(monitor, "us")) with, \(format(baseline, "us")) without", goal: "≤ 500 µs", met: added <= 500))
        } else {
            absoluteRow("idle Monitor CPU time over 3 s", "idle-monitor-cpu", atMost: 500, unit: "us")
        }
        // What polling costs with connections open and nothing asked: reported.
        if let idle = measurements["idle-connections-host-cpu"] {
            let workers = idle.extra["workersCPU"].map { format($0, "us") } ?? "not readable"
            let baseline = median("idle-baseline-cpu").map { "\(format($0, "us")) a program with nothing open (idle-baseline-cpu)" }
            rows.append(
                Row(
                    figure: "CPU with 4 connections open to 4 workers and nothing sent, over \(Int(idle.extra["seconds"] ?? 0)) s",
                    value: "host \(format(idle.median, "us")), workers \(workers)", baseline: baseline ?? "", goal: "reported", met: nil))
        }
        // What polling the rings costs a small request on each side, beside the pipes (reported).
        for (name, label) in [("round-trip-64-unpinned", "through the rings"), ("round-trip-64-unpinned-pipes", "over the pipes alone")] {
            guard let trip = measurements[name], let host = trip.extra["hostCPUPerRequest"] else { continue }
            let worker = trip.extra["workerCPUPerRequest"].map { format($0, "us") } ?? "not readable"
            rows.append(
                Row(
                    figure: "CPU per 64 B round trip, unpinned, one at a time, \(label)",
                    value: "host \(format(host, "us")), worker \(worker)", baseline: "", goal: "reported", met: nil))
        }
        // The worker's side of a request under load, beside the host's (reported).
        for (tasks, workers) in [(1, 1), (8, 1), (64, 4)] {
            guard let load = measurements["load-\(tasks)-\(workers)"], let host = load.extra["hostCPUPerRequest"] else { continue }
            let worker = load.extra["workerCPUPerRequest"].map { format($0, "us") } ?? "not readable"
            rows.append(
                Row(
                    figure: "CPU per request, \(tasks) task(s) over \(workers) worker(s), 64 B",
                    value: "host \(format(host, "us")), workers \(worker)", baseline: "", goal: "reported", met: nil))
        }
        return rows
    }

    // MARK: Output

    private func printTable(_ rows: [Row]) {
        var lines = ["| figure | plugind | baseline (same run) | ratio | goal | met |", "|---|---|---|---|---|---|"]
        for row in rows {
            let ratio = row.ratio.map { String(format: "%.2f×", $0) } ?? ""
            let met = row.met.map { $0 ? "yes" : "NO" } ?? ""
            lines.append("| \(row.figure) | \(row.value) | \(row.baseline) | \(ratio) | \(row.goal) | \(met) |")
        }
        lines.append("")
        lines.append("Other figures (medians):")
        for name in measurements.keys.sorted() {
            guard let measurement = measurements[name] else { continue }
            lines.append("  \(name): \(format(measurement.median, measurement.unit))")
        }
        // Written at once, not through print's buffer: the results line on stderr comes after it.
        FileHandle.standardOutput.write(Data((lines.joined(separator: "\n") + "\n").utf8))
    }

    private func writeJSON(_ rows: [Row], seconds: Duration) throws {
        struct Report: Encodable {
            var date: String
            var machine: String
            var quick: Bool
            var seconds: Double
            var goals: [Row]
            var measurements: [Measurement]
        }
        let report = Report(
            date: ISO8601DateFormatter().string(from: Date()),
            machine: "\(ProcessInfo.processInfo.activeProcessorCount) CPUs, \(ProcessInfo.processInfo.physicalMemory >> 30) GiB",
            quick: quick,
            seconds: Double(seconds.components.seconds),
            goals: rows,
            measurements: measurements.keys.sorted().compactMap { measurements[$0] }
        )
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try FileManager.default.createDirectory(
            atPath: (output as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try encoder.encode(report).write(to: URL(fileURLWithPath: output))
        FileHandle.standardError.write(Data("results written to \(output)\n".utf8))
    }

    private func format(_ value: Double, _ unit: String) -> String {
        switch unit {
        case "us" where value >= 1_000_000: String(format: "%.2f s", value / 1_000_000)
        case "us" where value >= 1000: String(format: "%.2f ms", value / 1000)
        case "us": String(format: "%.1f µs", value)
        case "KiB" where value >= 1024: String(format: "%.2f MiB", value / 1024)
        default: String(format: "%.0f %@", value, unit)
        }
    }
}
