import ExtensionFoundation
import Foundation
import Glibc
import PlugindEngine
import Synchronization

/// Callbacks of typed calls: the library's call of a host handler, against a plugin's ask (the
/// other way a worker waits for the host), and libc's `qsort` of 100,000 int64s with the host's
/// comparator, against the same sort in this process.
enum CallbackBenchmarks {
    /// The comparator `qsort` calls: the two int64 elements as bytes.
    static let ascending: FunctionCallbackHandler = { arguments in
        guard arguments.count == 2, case .bytes(let a) = arguments[0], case .bytes(let b) = arguments[1], a.count == 8, b.count == 8
        else { return .int32(0) }
        let left = a.withUnsafeBytes { $0.loadUnaligned(as: Int64.self) }
        let right = b.withUnsafeBytes { $0.loadUnaligned(as: Int64.self) }
        return .int32(left < right ? -1 : left > right ? 1 : 0)
    }

    static func bytes(_ values: [Int64]) -> [UInt8] {
        values.flatMap { value in withUnsafeBytes(of: value.littleEndian) { Array($0) } }
    }

    /// Alternating samples: a `qsort` of 256 int64s with the host's comparator, its time per
    /// comparison (each one callback round trip, the call's own cost spread over them); and a
    /// batch of 256 plugin asks of the probe, its time per ask.
    static func roundTrip(_ bench: BenchHost, iterations: Int) async throws {
        let qsort = try await AppExtensionProcess(
            configuration: try bench.configuration(
                try OneShotBenchmarks.installExample(bench, "Qsort", identifier: "org.plugind.examples.qsort")))
        let sorter = try await qsort.makeConnection()
        let probe = try await AppExtensionProcess(configuration: try bench.configuration(try bench.installProbe(concurrency: 1)))
        let answer = [UInt8](repeating: 0x61, count: 8)
        let asker = try await probe.makeConnection(requestHandler: { _ in answer })
        var generator = SystemRandomNumberGenerator()
        let values = (0..<256).map { _ in Int64.random(in: .min ... .max, using: &generator) }
        let expected = bytes(values.sorted())
        let comparisons = Mutex(0)
        let counting: FunctionCallbackHandler = { arguments in
            comparisons.withLock { $0 += 1 }
            return try await ascending(arguments)
        }
        let batch = 256
        var callbacks: [Double] = []
        var asks: [Double] = []
        for index in 0..<(iterations + iterations / 10) {
            comparisons.withLock { $0 = 0 }
            let sorting = try await microseconds {
                let sorted = try await sorter.callWithOutputs(
                    "qsort", arguments: [.bytes(bytes(values)), .uint64(8)], callbacks: ["compar": counting])
                guard case .bytes(let base)? = sorted[output: "base"], base == expected else { throw BenchError("qsort: \(sorted)") }
            }
            let asking = try await microseconds { _ = try await asker.send(Array("ask-loop:\(batch)".utf8)) }
            guard index >= iterations / 10 else { continue }
            callbacks.append(sorting / Double(max(comparisons.withLock { $0 }, 1)))
            asks.append(asking / Double(batch))
        }
        await qsort.invalidateAndWait()
        await probe.invalidateAndWait()
        Measurement(name: "typed-call-callback", values: callbacks).report()
        Measurement(name: "host-ask-in-request", values: asks).report()
    }

    /// `qsort` of 100,000 random int64s with the host's comparator, confined, checked against
    /// Swift's sort; beside it the same `qsort` with a C comparator in this process.
    static func qsortLarge(_ bench: BenchHost, iterations: Int) async throws {
        typealias Compare = @convention(c) (UnsafeRawPointer?, UnsafeRawPointer?) -> Int32
        typealias QsortFunction = @convention(c) (UnsafeMutableRawPointer?, Int, Int, Compare?) -> Void
        // The C library's own qsort, called through its address as the worker's libffi does.
        guard let libc = dlopen("libc.so.6", RTLD_NOW), let symbol = dlsym(libc, "qsort") else {
            throw BenchError("cannot find libc's qsort")
        }
        let cQsort = unsafeBitCast(symbol, to: QsortFunction.self)
        let qsort = try await AppExtensionProcess(
            configuration: try bench.configuration(
                try OneShotBenchmarks.installExample(bench, "Qsort", identifier: "org.plugind.examples.qsort")))
        let sorter = try await qsort.makeConnection()
        var generator = SystemRandomNumberGenerator()
        var confined: [Double] = []
        var local: [Double] = []
        for _ in 0..<iterations {
            let values = (0..<100_000).map { _ in Int64.random(in: .min ... .max, using: &generator) }
            let expected = values.sorted()
            confined.append(
                try await microseconds {
                    let sorted = try await sorter.callWithOutputs(
                        "qsort", arguments: [.bytes(bytes(values)), .uint64(8)], callbacks: ["compar": ascending], timeout: .seconds(600))
                    guard case .bytes(let base)? = sorted[output: "base"], base == bytes(expected) else {
                        throw BenchError("qsort of 100,000 did not give Swift's order")
                    }
                })
            var copy = values
            let compare: Compare = { a, b in
                let left = a?.loadUnaligned(as: Int64.self) ?? 0
                let right = b?.loadUnaligned(as: Int64.self) ?? 0
                return left < right ? -1 : left > right ? 1 : 0
            }
            local.append(
                try await microseconds {
                    copy.withUnsafeMutableBytes { cQsort($0.baseAddress, 100_000, 8, compare) }
                    guard copy == expected else { throw BenchError("qsort in process") }
                })
        }
        await qsort.invalidateAndWait()
        Measurement(name: "qsort-100k-confined", values: confined).report()
        Measurement(name: "qsort-100k-in-process", values: local).report()
    }
}
