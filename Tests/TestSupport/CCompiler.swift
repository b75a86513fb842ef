import Foundation

/// Builds small C libraries at test time with the system's C compiler (`cc`), for bundles the
/// example products cannot provide: a library with a dependency of its own, one with a
/// constructor that phones home.
package enum CCompiler {
    package struct Failure: Error, CustomStringConvertible {
        package var description: String
    }

    /// Compiles `source` into the shared library `output` with `flags` (e.g. "-L…", "-lname",
    /// "-Wl,-rpath,$ORIGIN"). The plugin header's directory is on the include path.
    /// Compiles `source` into the program `output`.
    package static func executable(_ source: String, output: String, flags: [String] = []) async throws {
        let sourcePath = output + ".c"
        try Data(source.utf8).write(to: URL(fileURLWithPath: sourcePath))
        defer { try? FileManager.default.removeItem(atPath: sourcePath) }
        let result = try await CommandRunner.run(
            "/usr/bin/env", ["cc", "-O1", "-o", output, sourcePath] + flags, environment: ProcessInfo.processInfo.environment)
        guard result.status == 0 else { throw Failure(description: "cc failed: \(result.stderr)") }
    }

    package static func sharedLibrary(_ source: String, output: String, flags: [String] = []) async throws {
        let sourcePath = output + ".c"
        try Data(source.utf8).write(to: URL(fileURLWithPath: sourcePath))
        defer { try? FileManager.default.removeItem(atPath: sourcePath) }
        let include = BuiltProducts.packageRoot + "/Sources/PlugindPluginABI/include"
        let result = try await CommandRunner.run(
            "/usr/bin/env", ["cc", "-shared", "-fPIC", "-O1", "-I", include, "-o", output, sourcePath] + flags,
            environment: ProcessInfo.processInfo.environment)
        guard result.status == 0 else { throw Failure(description: "cc failed: \(result.stderr)") }
    }
}
