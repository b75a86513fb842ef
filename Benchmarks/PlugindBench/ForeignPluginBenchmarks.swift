import CPlugindShims
import ExtensionFoundation
import Foundation
import Glibc
import PlugindEngine

/// LADSPA and frei0r plugins, confined against in-process: a chain of eight LADSPA effects on
/// 64-frame blocks at 48 kHz (time per block; the same chain paced in real time, its missed
/// blocks), a 1920×1080 frame through frei0r's invert0r, and discovery of every installed plugin.
enum ForeignPluginBenchmarks {
    static let sampleRate = 48_000
    static let block = 64
    static let chainLength = 8
    /// cmt's one-pole low-pass filter: cheap, so that the chain's time is mostly plugind's.
    static let ladspaLibrary = "/usr/lib/ladspa/cmt.so"
    static let ladspaLabel = "lpf"

    /// Writes the bundle of a foreign plugin into the bench host's bundled root (no approval).
    static func install(_ bench: BenchHost, identifier: String, library: String, adapter: [String: Any]) throws -> String {
        let bundle = bench.directory + "/bundled/\(identifier).appex"
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        let manifest: [String: Any] = [
            "manifestVersion": 1, "identifier": identifier, "name": identifier, "version": "1", "extensionPoint": "org.plugind.bench",
            "library": library, "adapter": adapter,
        ]
        try JSONSerialization.data(withJSONObject: manifest).write(to: URL(fileURLWithPath: bundle + "/manifest.json"))
        return identifier
    }

    static func input(frames: Int) -> [Float] {
        (0..<frames).map { (index: Int) -> Float in
            let time = Double(index)
            return Float(sin(time * 0.05) * 0.5 + sin(time * 0.71) * 0.2)
        }
    }

    /// The same chain in this process, through the library's own descriptor.
    final class InProcessChain {
        let descriptor: UnsafePointer<plugind_ladspa_descriptor>
        var instances: [UnsafeMutableRawPointer] = []
        var buffers: [UnsafeMutablePointer<Float>] = []
        var controls: [UnsafeMutablePointer<Float>] = []

        init(length: Int) throws {
            guard let library = dlopen(ForeignPluginBenchmarks.ladspaLibrary, RTLD_NOW),
                let symbol = dlsym(library, "ladspa_descriptor")
            else { throw BenchError("cannot load \(ForeignPluginBenchmarks.ladspaLibrary)") }
            let entry = unsafeBitCast(symbol, to: plugind_ladspa_descriptor_function.self)
            var index: UInt = 0
            var found: UnsafePointer<plugind_ladspa_descriptor>?
            while let candidate = entry(index) {
                if String(cString: candidate.pointee.label!) == ForeignPluginBenchmarks.ladspaLabel { found = candidate }
                index += 1
            }
            guard let found, let instantiate = found.pointee.instantiate, let connect = found.pointee.connect_port else {
                throw BenchError("no \(ForeignPluginBenchmarks.ladspaLabel)")
            }
            descriptor = found
            // Buffers 0…length: the chain's input, then each plugin's output.
            for _ in 0...length {
                let buffer = UnsafeMutablePointer<Float>.allocate(capacity: ForeignPluginBenchmarks.block)
                buffer.initialize(repeating: 0, count: ForeignPluginBenchmarks.block)
                buffers.append(buffer)
            }
            for position in 0..<length {
                guard let instance = instantiate(found, UInt(ForeignPluginBenchmarks.sampleRate)) else { throw BenchError("instantiate") }
                let control = UnsafeMutablePointer<Float>.allocate(capacity: 1)
                control.initialize(to: 1000)
                controls.append(control)
                // lpf's ports: 0 cutoff (control), 1 input, 2 output.
                connect(instance, 0, control)
                connect(instance, 1, buffers[position])
                connect(instance, 2, buffers[position + 1])
                found.pointee.activate?(instance)
                instances.append(instance)
            }
        }

        func run(_ samples: ArraySlice<Float>) {
            for (offset, sample) in samples.enumerated() { buffers[0][offset] = sample }
            for instance in instances { descriptor.pointee.run?(instance, UInt(samples.count)) }
        }
    }

    /// Per block: the chain confined (each effect in its worker; the host moves each block from
    /// one effect's output to the next's input) and in-process; alternating, `blocks` of each.
    static func chain(_ bench: BenchHost, blocks: Int, pacedSeconds: Int, length chainLength: Int = chainLength) async throws {
        let identifier = try install(
            bench, identifier: "ladspa.cmt.lpf", library: ladspaLibrary, adapter: ["abi": "ladspa", "plugin": ladspaLabel, "buffers": 3])
        var processes: [AppExtensionProcess] = []
        var effects: [AudioEffect] = []
        for _ in 0..<chainLength {
            let process = try await AppExtensionProcess(configuration: try bench.configuration(identifier))
            processes.append(process)
            let effect = try await AudioEffect(process: process, sampleRate: sampleRate, maximumFrames: block)
            try effect.setControl(0, to: 1000)
            effects.append(effect)
        }
        let local = try InProcessChain(length: chainLength)
        let signal = input(frames: block * 64)
        let chain = try AudioEffectChain(effects)
        // A real-time audio thread's way: each block rung through the effects' doorbells on this
        // thread (`render`); beside it, the same chain run as requests from a task (`run`).
        func renderConfined(_ samples: ArraySlice<Float>) throws {
            try chain.withInput(0) { _ = $0.update(fromContentsOf: samples) }
            try chain.render(frames: samples.count)
        }
        var confined: [Double] = []
        var requests: [Double] = []
        var inProcess: [Double] = []
        for index in 0..<(blocks + blocks / 10) {
            let start = (index % 64) * block
            let samples = signal[start..<start + block]
            let ours = try await microseconds { try renderConfined(samples) }
            let asRequests = try await microseconds {
                try chain.withInput(0) { _ = $0.update(fromContentsOf: samples) }
                try await chain.run(frames: samples.count)
            }
            let theirs = await microseconds { local.run(samples) }
            guard index >= blocks / 10 else { continue }
            confined.append(ours)
            requests.append(asRequests)
            inProcess.append(theirs)
        }
        let name = "ladspa-chain-\(chainLength)"
        Measurement(name: name + "-confined", values: confined, extra: ["p99": Measurement.p99(confined)]).report()
        Measurement(name: name + "-in-process", values: inProcess).report()
        Measurement(name: name + "-requests", values: requests, extra: ["p99": Measurement.p99(requests)]).report()
        let extra = zip(confined, inProcess).map { ($0 - $1) / Double(chainLength) }
        Measurement(name: name + "-extra-per-plugin", values: extra).report()

        // Paced: each block started at its time in the stream, due by the next one's.
        if pacedSeconds > 0 {
            let count = pacedSeconds * sampleRate / block
            let (missed, times) = try await paced(chain, signal: signal, count: count)
            Measurement(
                name: name + "-paced", values: times,
                extra: [
                    "missed": Double(missed), "blocks": Double(count), "p99": Measurement.p99(times),
                ]
            ).report()
        }
        for process in processes { await process.invalidateAndWait() }
    }

    /// `count` blocks through `chain`, each started at its time in the stream on a thread of its
    /// own that `clock_nanosleep` wakes, as an audio device wakes its thread (a task's sleep would
    /// add the concurrency runtime's timers to every block, the bench's lateness, not plugind's,
    /// and `Benchmarks/Baselines/process_chain.c` paces the same way): the blocks that ended after
    /// the next one was due, and each block's end measured from its due time, in microseconds.
    static func paced(_ chain: AudioEffectChain, signal: [Float], count: Int) async throws -> (missed: Int, times: [Double]) {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<(Int, [Double]), any Error>, Never>) in
            Thread.detachNewThread {
                continuation.resume(
                    returning: Result {
                        let period = Int64(block) * 1_000_000_000 / Int64(sampleRate)
                        func now() -> Int64 {
                            var time = timespec()
                            clock_gettime(CLOCK_MONOTONIC, &time)
                            return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
                        }
                        let origin = now() + 10_000_000
                        var missed = 0
                        var times: [Double] = []
                        times.reserveCapacity(count)
                        for index in 0..<count {
                            let due = origin + period * Int64(index)
                            var wake = timespec(tv_sec: Int(due / 1_000_000_000), tv_nsec: Int(due % 1_000_000_000))
                            while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &wake, nil) != 0 {}
                            let start = (index % 64) * block
                            try chain.withInput(0) { _ = $0.update(fromContentsOf: signal[start..<start + block]) }
                            try chain.render(frames: block)
                            let finished = now()
                            if finished > due + period { missed += 1 }
                            times.append(Double(finished - due) / 1000)
                        }
                        return (missed, times)
                    })
            }
        }
        return try result.get()
    }

    /// A 1920×1080 frame through invert0r, confined (the host writes the frame into the shared
    /// input and reads the output back) and in-process (the same copies around the update).
    static func invert(_ bench: BenchHost, iterations: Int) async throws {
        let library = "/usr/lib/frei0r-1/invert0r.so"
        let identifier = try install(bench, identifier: "frei0r.invert0r", library: library, adapter: ["abi": "frei0r", "buffers": 2])
        let (width, height) = (1920, 1080)
        let frame = (0..<width * height * 4).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let process = try await AppExtensionProcess(configuration: try bench.configuration(identifier))
        let filter = try await VideoFilter(process: process, width: width, height: height)

        typealias Construct = @convention(c) (UInt32, UInt32) -> UnsafeMutableRawPointer?
        typealias Update = @convention(c) (UnsafeMutableRawPointer?, Double, UnsafePointer<UInt32>?, UnsafeMutablePointer<UInt32>?) -> Void
        guard let handle = dlopen(library, RTLD_NOW), let initSymbol = dlsym(handle, "f0r_init"),
            let constructSymbol = dlsym(handle, "f0r_construct"), let updateSymbol = dlsym(handle, "f0r_update")
        else { throw BenchError("cannot load \(library)") }
        _ = unsafeBitCast(initSymbol, to: (@convention(c) () -> Int32).self)()
        guard let instance = unsafeBitCast(constructSymbol, to: Construct.self)(UInt32(width), UInt32(height)) else {
            throw BenchError("f0r_construct")
        }
        let update = unsafeBitCast(updateSymbol, to: Update.self)
        let bytes = width * height * 4
        let localInput = UnsafeMutableRawPointer.allocate(byteCount: bytes, alignment: 64)
        let localOutput = UnsafeMutableRawPointer.allocate(byteCount: bytes, alignment: 64)
        var result = [UInt8](repeating: 0, count: bytes)
        var confined: [Double] = []
        var inProcess: [Double] = []
        for index in 0..<(iterations + iterations / 10) {
            let ours = try await microseconds {
                try filter.withInput(0) { $0.copyBytes(from: frame) }
                try await filter.update(time: Double(index) * 0.04)
                filter.withOutput { output in result.withUnsafeMutableBytes { $0.copyMemory(from: output) } }
            }
            let theirs = await microseconds {
                frame.withUnsafeBytes { localInput.copyMemory(from: $0.baseAddress!, byteCount: bytes) }
                update(
                    instance, Double(index) * 0.04, localInput.assumingMemoryBound(to: UInt32.self),
                    localOutput.assumingMemoryBound(to: UInt32.self))
                result.withUnsafeMutableBytes { $0.baseAddress!.copyMemory(from: localOutput, byteCount: bytes) }
            }
            guard index >= iterations / 10 else { continue }
            confined.append(ours)
            inProcess.append(theirs)
        }
        await process.invalidateAndWait()
        Measurement(name: "invert0r-1080p-confined", values: confined).report()
        Measurement(name: "invert0r-1080p-in-process", values: inProcess).report()
    }

    /// Discovery of every installed LADSPA and frei0r plugin: a first scan into an empty state
    /// directory (every library described by a scanning worker), then warm rescans.
    static func discovery(_ bench: BenchHost, rescans: Int) async throws {
        let directories = ForeignPluginDirectory.defaults(environment: [
            "LADSPA_PATH": "/usr/lib/ladspa", "FREI0R_PATH": "/usr/lib/frei0r-1",
        ])
        let started = ContinuousClock.now
        let report = try await ForeignPluginDiscovery.refresh(host: bench.host, directories: directories)
        let (seconds, attoseconds) = (ContinuousClock.now - started).components
        let first = Double(seconds) * 1e6 + Double(attoseconds) / 1e12
        var warm: [Double] = []
        for _ in 0..<rescans {
            warm.append(try await microseconds { _ = try await ForeignPluginDiscovery.refresh(host: bench.host, directories: directories) })
        }
        Measurement(name: "foreign-discovery-first", values: [first], extra: ["plugins": Double(report.plugins.count)]).report()
        Measurement(name: "foreign-discovery-warm", values: warm).report()
    }
}
