import ExtensionFoundation
import Foundation
import PlugindEngine

/// The empty-request round trip of a plugin written on a kit (C++, Rust, Go), next to the C
/// echo's measured the same way in the same run: what a kit's layer costs per request. The kits'
/// probes declare a concurrency of 4, and a worker of concurrency above 1 hands the reader's turn
/// to another thread for every request, which one request thread never does; the C echo declares
/// none (1), so it is measured with `concurrency` 4 in its manifest: the same worker either way,
/// the kit's layer the only difference.
enum KitBenchmarks {
    static func emptyRoundTrip(library: String, memoryBytes: UInt64?, concurrency: Int?, iterations: Int, name: String) async throws {
        var bench = try BenchHost()
        defer { bench.remove() }
        let identifier = "org.plugind.bench.kit"
        let bundle = bench.directory + "/bundled/kit.appex"
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        var manifest: [String: Any] = [
            "manifestVersion": 1, "identifier": identifier, "name": name, "version": "1.0.0",
            "extensionPoint": "org.plugind.bench.point", "library": "libKit.so",
        ]
        if let concurrency { manifest["concurrency"] = concurrency }
        if let memoryBytes {
            manifest["limits"] = ["memoryBytes": memoryBytes]
            bench.host.limits.memoryBytes = memoryBytes
        }
        try JSONSerialization.data(withJSONObject: manifest).write(to: URL(fileURLWithPath: bundle + "/manifest.json"))
        try FileManager.default.copyItem(atPath: library, toPath: bundle + "/libKit.so")
        let process = try await AppExtensionProcess(configuration: try bench.configuration(identifier))
        let connection = try await process.makeConnection()
        let samples = try await roundTripSamples(connection, [], iterations: iterations)
        await process.invalidateAndWait()
        Measurement(name: name, values: samples).report()
    }
}
