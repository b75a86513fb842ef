import Foundation

/// `install-package`: verify and install of a signed 10 MiB package by `plugind install`,
/// against `sha256sum` of its files plus `tar -xzf` of the same package, in the same run. Both
/// sides are whole processes, as an owner runs them.
enum PackageBenchmarks {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    static func install(iterations: Int) throws {
        let bench = try BenchHost()
        defer { bench.remove() }
        let plugind = BenchHost.productsDirectory + "/plugind"
        let bundle = bench.directory + "/Echo.appex"
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: BenchHost.productsDirectory + "/libEcho.so", toPath: bundle + "/libEcho.so")
        let manifest =
            #"{"manifestVersion": 1, "identifier": "org.plugind.bench.package", "name": "Package", "version": "1.0.0", "extensionPoint": "org.plugind.bench.point", "library": "libEcho.so"}"#
        try Data(manifest.utf8).write(to: URL(fileURLWithPath: bundle + "/manifest.json"))
        // Random bytes: incompressible, as a real library mostly is.
        var generator = SystemRandomNumberGenerator()
        let data = Data((0..<(10 << 20) / 8).flatMap { _ in withUnsafeBytes(of: generator.next() as UInt64, Array.init) })
        try data.write(to: URL(fileURLWithPath: bundle + "/data.bin"))
        let key = bench.directory + "/key"
        let package = bench.directory + "/package.plugin"
        for arguments in [["keygen", "--output", key], ["sign", bundle, "--key", key], ["pack", bundle, "--output", package]] {
            guard try run(plugind, arguments, environment: [:]) == 0 else { throw Failure(description: "plugind \(arguments[0]) failed") }
        }

        var installs: [Double] = []
        var baselines: [Double] = []
        for index in 0..<iterations {
            let home = bench.directory + "/home-\(index)"
            let extract = bench.directory + "/extract-\(index)"
            try FileManager.default.createDirectory(atPath: extract, withIntermediateDirectories: true)
            let environment = [
                "XDG_DATA_HOME": home + "/data", "XDG_CONFIG_HOME": home + "/config", "XDG_STATE_HOME": home + "/state", "HOME": home,
            ]
            var status: Int32 = 0
            installs.append(try elapsed { status = try run(plugind, ["install", package], environment: environment) })
            guard status == 0 else { throw Failure(description: "plugind install failed") }
            baselines.append(
                try elapsed {
                    _ = try run(
                        "/usr/bin/sha256sum", ["libEcho.so", "manifest.json", "data.bin"].map { bundle + "/" + $0 }, environment: [:])
                    _ = try run("/bin/tar", ["-xzf", package, "-C", extract], environment: [:])
                })
            try? FileManager.default.removeItem(atPath: home)
            try? FileManager.default.removeItem(atPath: extract)
        }
        Measurement(name: "install-10MiB", values: installs).report()
        Measurement(name: "sha256sum-tar-10MiB", values: baselines).report()
    }

    private static func elapsed(_ body: () throws -> Void) throws -> Double {
        let start = ContinuousClock.now
        try body()
        let (seconds, attoseconds) = start.duration(to: .now).components
        return Double(seconds) * 1e6 + Double(attoseconds) / 1e12
    }

    /// Runs `path` with output discarded; returns its exit status.
    private static func run(_ path: String, _ arguments: [String], environment: [String: String]) throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        return process.terminationStatus
    }
}
