import Foundation
import Glibc

/// Finds the `plugind-worker` executable: the host configuration's explicit path, then
/// `$PLUGIND_WORKER`, then beside the running executable, then on `PATH`.
enum WorkerLocator {
    static let executableName = "plugind-worker"

    static func locate(explicit: URL?, environment: [String: String]? = nil) throws(AppExtensionError) -> String {
        // Read per variable: the whole environment as a dictionary cost every launch ~15 µs.
        func variable(_ name: String) -> String? {
            if let environment { return environment[name] }
            return getenv(name).map { String(cString: $0) }
        }
        var tried: [String] = []
        func usable(_ path: String) -> Bool {
            tried.append(path)
            return access(path, X_OK) == 0
        }
        if let explicit {
            guard usable(explicit.path) else {
                throw AppExtensionError(.workerNotFound, plugin: nil, "the configured worker \(explicit.path) is missing or not executable")
            }
            return explicit.path
        }
        if let fromEnvironment = variable("PLUGIND_WORKER"), !fromEnvironment.isEmpty {
            guard usable(fromEnvironment) else {
                throw AppExtensionError(
                    .workerNotFound, plugin: nil, "PLUGIND_WORKER names \(fromEnvironment), which is missing or not executable")
            }
            return fromEnvironment
        }
        if let executable = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            let sibling = (executable as NSString).deletingLastPathComponent + "/" + executableName
            if usable(sibling) { return sibling }
        }
        for directory in (variable("PATH") ?? "").split(separator: ":") {
            let candidate = "\(directory)/\(executableName)"
            if usable(candidate) { return candidate }
        }
        throw AppExtensionError(
            .workerNotFound,
            plugin: nil,
            "\(executableName) not found (looked at \(tried.joined(separator: ", "))); build it with 'swift build' or set PLUGIND_WORKER"
        )
    }
}
