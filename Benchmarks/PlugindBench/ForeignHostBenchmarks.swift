import ExtensionFoundation
import Foundation
import PlugindEngine
import PlugindPolicyEditing

/// The 64 B round trip from hosts in other languages through libplugind: the C program and the
/// Python script under Benchmarks/Baselines, run against the echo plugin installed as the owner's
/// (approved) plugin, so that a process of their own finds it through the environment.
enum ForeignHostBenchmarks {
    static let point = "org.plugind.bench.foreign"

    static func roundTrip(language: String, program: String?, iterations: Int) async throws {
        let bench = try BenchHost()
        defer { bench.remove() }
        let root = bench.directory + "/external"
        let bundle = root + "/Echo.appex"
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        let manifest: [String: Any] = [
            "manifestVersion": 1, "identifier": "org.plugind.bench.foreign-echo", "name": "Echo", "version": "1.0.0",
            "extensionPoint": point, "library": "libEcho.so",
        ]
        try JSONSerialization.data(withJSONObject: manifest).write(to: URL(fileURLWithPath: bundle + "/manifest.json"))
        try FileManager.default.copyItem(atPath: BenchHost.productsDirectory + "/libEcho.so", toPath: bundle + "/libEcho.so")
        var host = bench.host
        host.searchPaths = [URL(fileURLWithPath: root)]
        guard let entry = Inventory.take(host: host).item("org.plugind.bench.foreign-echo")?.entry else {
            throw BenchError("the echo bundle for the foreign hosts was not discovered")
        }
        // Approved where a host reading XDG_CONFIG_HOME looks for the owner's policy.
        let configHome = bench.directory + "/config-home"
        try PolicyEditor(directory: URL(fileURLWithPath: configHome + "/plugind")).approve(entry)

        var environment = ProcessInfo.processInfo.environment
        environment["PLUGIND_PATH"] = root
        environment["XDG_CONFIG_HOME"] = configHome
        environment["XDG_STATE_HOME"] = bench.directory + "/state-home"
        environment["PLUGIND_ADMIN_POLICY_DIR"] = bench.directory + "/admin"
        environment["PLUGIND_WORKER"] = BenchHost.productsDirectory + "/plugind-worker"

        let executable: String
        let arguments: [String]
        switch language {
        case "c":
            guard let program else { throw BenchError("foreign-round-trip --language c needs --program") }
            (executable, arguments) = (program, [point, "\(iterations)"])
        default:
            environment["PYTHONPATH"] = BenchHost.packageRoot + "/Bindings/Python/src"
            environment["PLUGIND_LIBRARY"] = BenchHost.productsDirectory + "/libPlugindHost.so"
            let script = BenchHost.packageRoot + "/Benchmarks/Baselines/host_round_trip.py"
            (executable, arguments) = ("/usr/bin/python3", [script, point, "\(iterations)"])
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw BenchError("the \(language) host exited with \(process.terminationStatus)") }
        var samples: [String: [Double]] = [:]
        for line in String(decoding: data, as: UTF8.self).split(separator: "\n") {
            let fields = line.split(separator: " ")
            let (kind, value) = fields.count == 2 ? (String(fields[0]), fields[1]) : ("round-trip", fields[0])
            if let number = Double(value) { samples[kind, default: []].append(number) }
        }
        Measurement(name: "round-trip-64-\(language)-host", values: samples["round-trip"] ?? []).report()
        if let empty = samples["ctypes"] { Measurement(name: "ctypes-empty-call", values: empty).report() }
    }
}
