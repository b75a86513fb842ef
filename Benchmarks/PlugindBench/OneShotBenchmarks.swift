import CPlugindShims  // timeval's fields: the shims' headers include <sys/time.h>, and the compiler may take the struct from them
import ExtensionFoundation
import Foundation
import PlugindSystem

/// A command that launches one plugin once (`plugind run`) against bubblewrap, and typed calls
/// that move buffers and handles against their plain counterparts, each beside its baseline in
/// the same process, the two alternating.
enum OneShotBenchmarks {
    // MARK: plugind run at the shell

    /// `plugind run ECHO hello` end to end, as a shell runs it, against `bwrap --unshare-all
    /// --ro-bind / / printf hello`, in `pairs` alternating pairs: wall time from spawn to reap,
    /// and CPU time (the command's and every child it reaped: a process it left behind is not
    /// counted, and plugind leaves none).
    static func run(pairs: Int) throws {
        let bubblewrap = "/usr/bin/bwrap"
        guard FileManager.default.isExecutableFile(atPath: bubblewrap) else {
            print("{\"name\":\"one-shot-run\",\"error\":\"\(bubblewrap) not installed (Debian's bubblewrap)\"}")
            return
        }
        let bench = try BenchHost()
        defer { bench.remove() }
        let plugind = BenchHost.productsDirectory + "/plugind"
        // The user's host of the shell, confined to the benchmark's directory.
        let environment = [
            "HOME=\(bench.directory)", "PATH=/usr/bin:/bin", "PLUGIND_PATH=\(bench.directory)/bundled",
            "XDG_CONFIG_HOME=\(bench.directory)/config", "XDG_STATE_HOME=\(bench.directory)/state",
            "XDG_DATA_HOME=\(bench.directory)/data", "PLUGIND_ADMIN_POLICY_DIR=\(bench.directory)/admin",
            "PLUGIND_RUNTIME_DIR=\(bench.directory)/run", "PLUGIND_LOG=file",
            "PLUGIND_WORKER=\(BenchHost.productsDirectory)/plugind-worker",
        ]
        let approve = try timed(plugind, ["approve", Benchmarks.echo, "--yes"], environment: environment)
        guard approve.status == 0 else { throw BenchError("plugind approve \(Benchmarks.echo) failed (\(approve.status))") }
        let shell = [plugind, "run", Benchmarks.echo, "hello"]
        var bubblewrapArguments = [bubblewrap, "--unshare-all", "--die-with-parent", "--new-session"]
        // As root bubblewrap would keep the capabilities it has; a plugind worker has none.
        if geteuid() == 0 { bubblewrapArguments += ["--cap-drop", "ALL"] }
        bubblewrapArguments += ["--ro-bind", "/", "/", "/usr/bin/printf", "hello"]
        var ours: [(wall: Double, cpu: Double)] = []
        var theirs: [(wall: Double, cpu: Double)] = []
        // One of each first, unmeasured: the page cache and the catalog's store.
        for index in 0..<(pairs + 1) {
            let order = index % 2 == 0 ? [true, false] : [false, true]
            for isOurs in order {
                let result = try timed(
                    isOurs ? shell[0] : bubblewrap, Array((isOurs ? shell : bubblewrapArguments).dropFirst()), environment: environment)
                guard result.status == 0 else { throw BenchError("\(isOurs ? "plugind run" : "bwrap") failed (\(result.status))") }
                guard index > 0 else { continue }
                if isOurs { ours.append((result.wall, result.cpu)) } else { theirs.append((result.wall, result.cpu)) }
            }
        }
        Measurement(name: "one-shot-run", values: ours.map(\.wall), extra: ["cpu": median(ours.map(\.cpu))]).report()
        Measurement(name: "bubblewrap-one-shot", values: theirs.map(\.wall), extra: ["cpu": median(theirs.map(\.cpu))]).report()
        Measurement(name: "one-shot-run-cpu", values: ours.map(\.cpu)).report()
        Measurement(name: "bubblewrap-one-shot-cpu", values: theirs.map(\.cpu)).report()
    }

    private static func median(_ values: [Double]) -> Double {
        values.isEmpty ? 0 : values.sorted()[values.count / 2]
    }

    /// Runs `program` with its output to /dev/null: its exit status, the wall time from spawn to
    /// reap and the CPU time of it and the children it reaped, in microseconds.
    private static func timed(_ program: String, _ arguments: [String], environment: [String]) throws -> (
        status: Int32, wall: Double, cpu: Double
    ) {
        var actions: posix_spawn_file_actions_t = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        let argv = ([program] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup($0) } + [nil]
        defer {
            for pointer in argv + envp { free(pointer) }
        }
        var pid: pid_t = 0
        let start = ContinuousClock.now
        let spawned = posix_spawn(&pid, program, &actions, nil, argv, envp)
        guard spawned == 0 else { throw BenchError("posix_spawn \(program): \(String(cString: strerror(spawned)))") }
        var status: Int32 = 0
        var usage = rusage()
        while wait4(pid, &status, 0, &usage) < 0 && errno == EINTR {}
        let (seconds, attoseconds) = start.duration(to: .now).components
        let wall = Double(seconds) * 1e6 + Double(attoseconds) / 1e12
        func microseconds(_ time: timeval) -> Double { Double(time.tv_sec) * 1e6 + Double(time.tv_usec) }
        let exitStatus: Int32 = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        return (exitStatus, wall, microseconds(usage.ru_utime) + microseconds(usage.ru_stime))
    }

    // MARK: Typed calls with buffers and handles

    /// The suite's typed-buffer library (`Tests/Fixtures/TypedBuffers/typed_buffers.c`), compiled
    /// now as its authors would (`cc -O2 -shared`), in a function-only bundle declaring
    /// `fill_bytes` (an out buffer counted by an argument).
    private static func installTypedBuffers(_ bench: BenchHost) throws -> String {
        let identifier = "org.plugind.bench.typed-buffers"
        let bundle = bench.directory + "/bundled/typed-buffers.appex"
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        let compiler = Process()
        compiler.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        compiler.arguments = [
            "cc", "-O2", "-shared", "-fPIC", "-o", bundle + "/libTypedBuffers.so",
            BenchHost.packageRoot + "/Tests/Fixtures/TypedBuffers/typed_buffers.c",
        ]
        try compiler.run()
        compiler.waitUntilExit()
        guard compiler.terminationStatus == 0 else { throw BenchError("cc typed_buffers.c failed") }
        let manifest: [String: Any] = [
            "manifestVersion": 1, "identifier": identifier, "name": "Typed buffers", "version": "1.0.0",
            "extensionPoint": "org.plugind.bench.functions", "library": "libTypedBuffers.so",
            "functions": [
                [
                    "name": "fill_bytes", "returns": "void",
                    "arguments": [
                        ["name": "out", "type": "buffer", "direction": "out", "count": "count"], ["name": "count", "type": "uint64"],
                        "uint8",
                    ],
                ]
            ],
        ]
        try JSONSerialization.data(withJSONObject: manifest).write(to: URL(fileURLWithPath: bundle + "/manifest.json"))
        return identifier
    }

    /// An example bundle that names a library of the machine's (`ExamplePlugins/NAME`), as a
    /// bundled plugin; its identifier.
    static func installExample(_ bench: BenchHost, _ name: String, identifier: String) throws -> String {
        let bundle = bench.directory + "/bundled/\(name).appex"
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        try FileManager.default.copyItem(
            atPath: BenchHost.packageRoot + "/ExamplePlugins/\(name)/manifest.json", toPath: bundle + "/manifest.json")
        return identifier
    }

    /// Alternates `ours` and `theirs`, `iterations` of each after a tenth as many to warm up;
    /// their samples in microseconds.
    static func alternate(
        iterations: Int, _ ours: () async throws -> Void, _ theirs: () async throws -> Void
    ) async throws -> ([Double], [Double]) {
        var first: [Double] = []
        var second: [Double] = []
        for index in 0..<(iterations + iterations / 10) {
            // Each goes first every other time, so that neither is always the one that follows
            // the other.
            var one = 0.0
            var other = 0.0
            if index % 2 == 0 {
                one = try await microseconds(ours)
                other = try await microseconds(theirs)
            } else {
                other = try await microseconds(theirs)
                one = try await microseconds(ours)
            }
            if index >= iterations / 10 {
                first.append(one)
                second.append(other)
            }
        }
        return (first, second)
    }

    /// A typed call whose out buffer brings 64 KiB back against a call that sends 64 KiB in: what
    /// plugind adds to each, so the library does as little as it can on both sides — `fill_bytes`
    /// memsets its buffer, `bytes_length` of the C function library ignores its bytes — and the
    /// ratio is plugind's, not the two libraries' different work.
    static func outBuffer(_ bench: BenchHost, iterations: Int) async throws {
        let size = 64 << 10
        let typedBuffers = try await AppExtensionProcess(configuration: try bench.configuration(try installTypedBuffers(bench)))
        let library = try await AppExtensionProcess(configuration: try bench.configuration(Benchmarks.functions))
        let out = try await typedBuffers.makeConnection()
        let into = try await library.makeConnection()
        let payload = FunctionValue.bytes([UInt8](repeating: 7, count: size))
        let (outs, ins) = try await alternate(iterations: iterations) {
            let result = try await out.callWithOutputs("fill_bytes", arguments: [.uint64(UInt64(size)), .uint8(7)])
            guard case .bytes(let bytes)? = result[output: "out"], bytes.count == size, bytes.last == 7 else {
                throw BenchError("fill_bytes: \(result)")
            }
        } _: {
            guard try await into.call("bytes_length", arguments: [payload]) == .uint64(UInt64(size)) else {
                throw BenchError("bytes_length")
            }
        }
        await typedBuffers.invalidateAndWait()
        await library.invalidateAndWait()
        Measurement(name: "typed-call-out-64KiB", values: outs).report()
        Measurement(name: "typed-call-in-64KiB", values: ins).report()
    }

    /// A call with a handle argument (`sqlite3_column_count` of a prepared `SELECT 42` in the
    /// system's SQLite, `ExamplePlugins/Sqlite`) against a call with a scalar argument
    /// (`sqlite3_memory_highwater(0)`) on the same connection: one argument each, and one worker
    /// serves both, so neither waits while another worker runs, and the difference is the
    /// handle's checks and lookup, not a second argument.
    static func handleCall(_ bench: BenchHost, iterations: Int) async throws {
        let sqlite = try await AppExtensionProcess(
            configuration: try bench.configuration(try installExample(bench, "Sqlite", identifier: "org.plugind.examples.sqlite")))
        let database = try await sqlite.makeConnection()
        let opened = try await database.callWithOutputs("sqlite3_open", arguments: [.string(":memory:")])
        guard case .handle(let db)? = opened[output: "ppDb"] else { throw BenchError("sqlite3_open: \(opened)") }
        let prepared = try await database.callWithOutputs("sqlite3_prepare_v2", arguments: [.handle(db), .string("SELECT 42"), .int32(-1)])
        guard case .handle(let statement)? = prepared[output: "ppStmt"], !statement.isNull else {
            throw BenchError("sqlite3_prepare_v2: \(prepared)")
        }
        let (handles, plain) = try await alternate(iterations: iterations) {
            guard try await database.call("sqlite3_column_count", arguments: [.handle(statement)]) == .int32(1) else {
                throw BenchError("sqlite3_column_count")
            }
        } _: {
            guard case .int64(let highest) = try await database.call("sqlite3_memory_highwater", arguments: [.int32(0)]), highest >= 0
            else { throw BenchError("sqlite3_memory_highwater") }
        }
        await sqlite.invalidateAndWait()
        Measurement(name: "typed-call-handle", values: handles).report()
        Measurement(name: "typed-call-scalars", values: plain).report()
    }

    /// 1 MiB through the system's zlib `compress`, confined (`ExamplePlugins/Zlib`, a typed call
    /// with an in and an out buffer) against the same library called in this process.
    static func zlibCompress(_ bench: BenchHost, iterations: Int) async throws {
        typealias Compress =
            @convention(c) (
                UnsafeMutablePointer<UInt8>?, UnsafeMutablePointer<UInt>?, UnsafePointer<UInt8>?, UInt
            ) -> Int32
        guard let zlib = dlopen("libz.so.1", RTLD_NOW), let symbol = dlsym(zlib, "compress") else {
            throw BenchError("cannot load the system's libz.so.1")
        }
        let compress = unsafeBitCast(symbol, to: Compress.self)
        // Text-like bytes that compress as a log or a document would, the same every run.
        var source: [UInt8] = []
        source.reserveCapacity(1 << 20)
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        let words = ["plugin", "worker", "host", "launch", "policy", "request", "answer", "the", "of", "a"].map { Array($0.utf8) }
        while source.count < 1 << 20 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            source += words[Int(state >> 60) % words.count]
            source.append(state >> 59 & 1 == 0 ? 0x20 : 0x0A)
        }
        source.removeLast(source.count - (1 << 20))
        let capacity = source.count + source.count / 1000 + 64
        let process = try await AppExtensionProcess(
            configuration: try bench.configuration(try installExample(bench, "Zlib", identifier: "org.plugind.examples.zlib")))
        let connection = try await process.makeConnection()
        var destination = [UInt8](repeating: 0, count: capacity)
        let argument = FunctionValue.bytes(source)
        let (confined, local) = try await alternate(iterations: iterations) {
            let result = try await connection.callWithOutputs("compress", arguments: [.uint64(UInt64(capacity)), argument])
            guard result.value == .int32(0), case .bytes(let bytes)? = result[output: "dest"], !bytes.isEmpty else {
                throw BenchError("compress: \(result.value)")
            }
        } _: {
            var length = UInt(capacity)
            let status = destination.withUnsafeMutableBufferPointer { out in
                source.withUnsafeBufferPointer { compress(out.baseAddress, &length, $0.baseAddress, UInt($0.count)) }
            }
            guard status == 0 else { throw BenchError("in-process compress: \(status)") }
        }
        await process.invalidateAndWait()
        Measurement(name: "zlib-compress-1MiB-confined", values: confined).report()
        Measurement(name: "zlib-compress-1MiB-in-process", values: local).report()
    }
}
