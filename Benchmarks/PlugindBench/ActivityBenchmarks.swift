import ExtensionFoundation
import Foundation
import PlugindEngine

/// What the owner's view of running plugins costs a request: a log line per request recorded in
/// the plugin log (vs the same requests with the log off, and a 64 B echo without a log line),
/// and the statistics page (`plugind top`) on an empty request (published vs kept in private
/// memory, beside the spread of two runs of the same).
enum ActivityBenchmarks {
    static let probe = "org.plugind.bench.hostile-probe"

    static func installProbe(_ bench: BenchHost) throws {
        let bundle = bench.directory + "/bundled/probe.appex"
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        let manifest: [String: Any] = [
            "manifestVersion": 1, "identifier": probe, "name": "Probe", "version": "1.0.0",
            "extensionPoint": "org.plugind.bench.point", "library": "libFaultyHostileProbe.so",
        ]
        try JSONSerialization.data(withJSONObject: manifest).write(to: URL(fileURLWithPath: bundle + "/manifest.json"))
        try FileManager.default.copyItem(
            atPath: BenchHost.productsDirectory + "/libFaultyHostileProbe.so", toPath: bundle + "/libFaultyHostileProbe.so")
    }

    static func logging(iterations: Int) async throws {
        // A 64-byte request that makes the plugin log its 60 bytes.
        let line = Array(("log " + String(repeating: "x", count: 60)).utf8)
        var results: [String: [Double]] = [:]
        for (name, destination) in [("log-per-request-off", AppExtensionHost.PluginLogDestination.off), ("log-per-request", .file)] {
            var bench = try BenchHost()
            defer { bench.remove() }
            try installProbe(bench)
            bench.host.pluginLog = destination
            let process = try await AppExtensionProcess(configuration: try bench.configuration(probe))
            let connection = try await process.makeConnection()
            results[name] = try await roundTripSamples(connection, line, iterations: iterations)
            await process.invalidateAndWait()
        }
        let bench = try BenchHost()
        defer { bench.remove() }
        let echo = try await AppExtensionProcess(configuration: try bench.configuration(Benchmarks.echo))
        results["echo-64-no-log"] = try await roundTripSamples(
            try await echo.makeConnection(), [UInt8](repeating: 0x61, count: 64), iterations: iterations)
        await echo.invalidateAndWait()
        for (name, values) in results.sorted(by: { $0.key < $1.key }) { Measurement(name: name, values: values).report() }
    }

    static func statistics(iterations: Int) async throws {
        var results: [String: [Double]] = [:]
        for (name, published) in [("statistics-published", true), ("statistics-private", false), ("statistics-published-again", true)] {
            var bench = try BenchHost()
            defer { bench.remove() }
            // A runtime directory that cannot be made: the counters stay in private memory.
            if !published { bench.host.runtimeDirectory = URL(fileURLWithPath: "/proc/plugind-bench-no-runtime") }
            let process = try await AppExtensionProcess(configuration: try bench.configuration(Benchmarks.echo))
            results[name] = try await roundTripSamples(try await process.makeConnection(), [], iterations: iterations)
            await process.invalidateAndWait()
        }
        for (name, values) in results.sorted(by: { $0.key < $1.key }) { Measurement(name: name, values: values).report() }
    }
}
