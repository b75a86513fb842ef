import Foundation
import Glibc

/// Finds a plugind executable: an explicit path, then the variable that names it, then beside the
/// running executable, then on `PATH`.
struct ExecutableLocator {
    /// Why nothing was found, naming every place that was looked at.
    struct NotFound: Error {
        var message: String
    }

    var name: String
    var variable: String

    static let worker = ExecutableLocator(name: "plugind-worker", variable: "PLUGIND_WORKER")
    static let tool = ExecutableLocator(name: "plugind", variable: "PLUGIND_TOOL")

    func locate(explicit: URL? = nil, environment: [String: String]? = nil) throws(NotFound) -> String {
        // Read per variable: the whole environment as a dictionary cost every launch ~15 µs.
        func value(_ name: String) -> String? {
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
                throw NotFound(message: "the configured \(name) \(explicit.path) is missing or not executable")
            }
            return explicit.path
        }
        if let fromEnvironment = value(variable), !fromEnvironment.isEmpty {
            guard usable(fromEnvironment) else {
                throw NotFound(message: "\(variable) names \(fromEnvironment), which is missing or not executable")
            }
            return fromEnvironment
        }
        if let executable = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            let sibling = (executable as NSString).deletingLastPathComponent + "/" + name
            if usable(sibling) { return sibling }
        }
        for directory in (value("PATH") ?? "").split(separator: ":") {
            let candidate = "\(directory)/\(name)"
            if usable(candidate) { return candidate }
        }
        throw NotFound(
            message: "\(name) not found (looked at \(tried.joined(separator: ", "))); build it with 'swift build' or set \(variable)")
    }
}
