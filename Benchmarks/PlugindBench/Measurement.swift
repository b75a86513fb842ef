import ExtensionFoundation
import Foundation
import PlugindEngine

/// Samples of one figure, in microseconds, and their summary.
struct Measurement: Codable {
    var name: String
    var unit: String
    var samples: Int
    var median: Double
    var p10: Double
    var p90: Double
    var extra: [String: Double] = [:]

    init(name: String, unit: String = "us", values: [Double], extra: [String: Double] = [:]) {
        let sorted = values.sorted()
        self.name = name
        self.unit = unit
        self.samples = sorted.count
        self.median = sorted.isEmpty ? 0 : sorted[sorted.count / 2]
        self.p10 = sorted.isEmpty ? 0 : sorted[sorted.count / 10]
        self.p90 = sorted.isEmpty ? 0 : sorted[sorted.count * 9 / 10]
        self.extra = extra
    }

    /// The 99th percentile of `values`: the sample 99 % of the way up the sorted list; 0 for none.
    static func p99(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        return sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, sorted.count * 99 / 100)]
    }

    /// Prints the measurement as one JSON line for Scripts/bench.sh.
    func report() {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        if let data = try? encoder.encode(self) {
            print(String(decoding: data, as: UTF8.self))
        }
    }
}

/// Microseconds elapsed while `body` runs.
func microseconds(_ body: () async throws -> Void) async rethrows -> Double {
    let start = ContinuousClock.now
    try await body()
    let (seconds, attoseconds) = start.duration(to: .now).components
    return Double(seconds) * 1e6 + Double(attoseconds) / 1e12
}

/// The round trips of `payload` on `connection`, in microseconds: `iterations` of them, after a
/// tenth as many to warm up.
/// With `idle`, the caller sleeps that long before each round trip (a request after a quiet moment).
func roundTripSamples(
    _ connection: AppExtensionConnection, _ payload: [UInt8], iterations: Int, idle: Duration? = nil
) async throws -> [Double] {
    var samples: [Double] = []
    samples.reserveCapacity(iterations)
    for index in 0..<(iterations + iterations / 10) {
        if let idle { try await Task.sleep(for: idle) }
        let elapsed = try await microseconds { _ = try await connection.send(payload) }
        if index >= iterations / 10 { samples.append(elapsed) }
    }
    return samples
}

/// A benchmark that could not measure what it is for (so that it fails instead of reporting a
/// figure of something else).
struct BenchError: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) {
        self.description = description
    }
}
