import ExtensionFoundation
import Foundation
import PlugindEngine

/// A host for benchmarks: the example plugins installed as bundled plugins in a temporary
/// directory, so no approval is involved, and the worker beside this executable.
struct BenchHost {
    let directory: String
    var host: AppExtensionHost

    static var productsDirectory: String {
        let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        return (executable as NSString).deletingLastPathComponent
    }

    static var packageRoot: String {
        var directory = productsDirectory
        while directory != "/" {
            if FileManager.default.fileExists(atPath: directory + "/Package.swift") { return directory }
            directory = (directory as NSString).deletingLastPathComponent
        }
        return FileManager.default.currentDirectoryPath
    }

    /// The example plugin `name`'s library. SwiftPM links every library it builds with the Swift
    /// runtime, which a C plugin built as its authors build it (`cc -shared`) does not map:
    /// `Scripts/bench.sh` builds the C examples that way into `PLUGIND_BENCH_C_PLUGINS`, so that
    /// a C worker's figures are a C plugin's.
    static func library(_ name: String) -> String {
        if let directory = ProcessInfo.processInfo.environment["PLUGIND_BENCH_C_PLUGINS"],
            FileManager.default.fileExists(atPath: directory + "/lib\(name).so")
        {
            return directory + "/lib\(name).so"
        }
        return productsDirectory + "/lib\(name).so"
    }

    init() throws {
        var template = Array("/tmp/plugind-bench.XXXXXX".utf8CString)
        guard let created = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw CocoaError(.fileWriteUnknown)
        }
        directory = String(cString: created)
        // Readable by the worker's unprivileged user, which sees it directly when the benchmark
        // turns the filesystem view off.
        chmod(directory, 0o755)
        let bundled = directory + "/bundled"
        try FileManager.default.createDirectory(atPath: bundled, withIntermediateDirectories: true)
        for name in ["Echo", "CTextFilter", "SwiftTextFilter", "FunctionLibrary"] {
            let bundle = bundled + "/\(name).appex"
            try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
            try FileManager.default.copyItem(
                atPath: Self.packageRoot + "/ExamplePlugins/\(name)/manifest.json",
                toPath: bundle + "/manifest.json"
            )
            try FileManager.default.copyItem(atPath: Self.library(name), toPath: bundle + "/lib\(name).so")
        }
        host = AppExtensionHost(identifier: "org.plugind.examples", environment: ["HOME": directory])
        host.bundledPluginsDirectory = URL(fileURLWithPath: bundled)
        host.searchPaths = []
        host.policyDirectory = URL(fileURLWithPath: directory + "/config")
        host.administratorPolicyDirectory = URL(fileURLWithPath: directory + "/admin")
        host.stateDirectory = URL(fileURLWithPath: directory + "/state")
        host.runtimeDirectory = URL(fileURLWithPath: directory + "/run")
        host.pluginLog = .file
        host.workerExecutable = URL(fileURLWithPath: Self.productsDirectory + "/plugind-worker")
    }

    /// Installs the test suite's conversation probe as a bundled plugin declaring `concurrency`;
    /// returns its identifier.
    func installProbe(concurrency: Int) throws -> String {
        let identifier = "org.plugind.bench.probe\(concurrency)"
        let bundle = directory + "/bundled/probe\(concurrency).appex"
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        let manifest: [String: Any] = [
            "manifestVersion": 1, "identifier": identifier, "name": "Probe \(concurrency)", "version": "1.0.0",
            "extensionPoint": "org.plugind.bench.point", "library": "libConversationProbe.so", "concurrency": concurrency,
        ]
        try JSONSerialization.data(withJSONObject: manifest).write(to: URL(fileURLWithPath: bundle + "/manifest.json"))
        try FileManager.default.copyItem(
            atPath: Self.productsDirectory + "/libConversationProbe.so", toPath: bundle + "/libConversationProbe.so")
        return identifier
    }

    /// Installs `count` copies of the C echo plugin under identifiers of their own, as bundled
    /// plugins; returns the identifiers.
    func installEchoCopies(count: Int) throws -> [String] {
        let original = try JSONSerialization.jsonObject(
            with: Data(contentsOf: URL(fileURLWithPath: directory + "/bundled/Echo.appex/manifest.json")))
        guard var manifest = original as? [String: Any] else { throw BenchError("the echo's manifest is not a JSON object") }
        return try (0..<count).map { index in
            let identifier = "org.plugind.bench.echo\(index)"
            let bundle = directory + "/bundled/echo\(index).appex"
            try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
            manifest["identifier"] = identifier
            try JSONSerialization.data(withJSONObject: manifest).write(to: URL(fileURLWithPath: bundle + "/manifest.json"))
            try FileManager.default.copyItem(atPath: directory + "/bundled/Echo.appex/libEcho.so", toPath: bundle + "/libEcho.so")
            return identifier
        }
    }

    func configuration(_ identifier: String) throws -> AppExtensionProcess.Configuration {
        guard let item = Inventory.take(host: host).item(identifier) else {
            throw CocoaError(.fileNoSuchFile, userInfo: [NSFilePathErrorKey: identifier])
        }
        var configuration = AppExtensionProcess.Configuration(appExtensionIdentity: item.identity(host: host), onInterruption: {})
        configuration.host = host
        return configuration
    }

    func remove() {
        try? FileManager.default.removeItem(atPath: directory)
    }
}
