package import FoundationEssentials
import Glibc
import PlugindSystem

/// Finds a plugind executable, so that a host built anywhere runs without variables: an explicit
/// path, then the variable that names it, then beside the running executable (a build folder, or
/// a tool installed beside its worker), then where a package or `Scripts/install.sh` put it
/// (`<prefix>/libexec/plugind` beside the executable's `bin`, then `/usr/libexec/plugind` and
/// `/usr/local/libexec/plugind`), then `PATH`.
package struct ExecutableLocator {
    /// Why nothing was found, naming every place that was looked at.
    package struct NotFound: Error {
        package var message: String
    }

    var name: String
    var variable: String
    /// Whether installations keep it in `libexec/plugind` (the worker) rather than on `PATH`.
    var installedInLibexec: Bool

    static let worker = ExecutableLocator(name: "plugind-worker", variable: "PLUGIND_WORKER", installedInLibexec: true)
    package static let tool = ExecutableLocator(name: "plugind", variable: "PLUGIND_TOOL", installedInLibexec: false)

    /// The system-wide installations, in the order searched: Debian's package, then a local install.
    static let installedPrefixes = ["/usr", "/usr/local"]

    package func locate(
        explicit: URL? = nil,
        environment: [String: String]? = nil,
        executablePath: String? = ProcessEnvironment.executablePath
    ) throws(NotFound) -> String {
        func value(_ name: String) -> String? {
            if let environment { return environment[name] }
            return ProcessEnvironment.value(name)
        }
        if let explicit {
            guard ProcessEnvironment.isExecutableFile(explicit.path) else {
                throw NotFound(message: "the configured \(name) \(explicit.path) is missing or not executable")
            }
            return explicit.path
        }
        if let fromEnvironment = value(variable), !fromEnvironment.isEmpty {
            guard ProcessEnvironment.isExecutableFile(fromEnvironment) else {
                throw NotFound(message: "\(variable) names \(fromEnvironment), which is missing or not executable")
            }
            return fromEnvironment
        }
        let candidates = candidates(executablePath: executablePath, path: value("PATH") ?? "")
        if let found = candidates.first(where: ProcessEnvironment.isExecutableFile) { return found }
        throw NotFound(
            message: "\(name) not found (looked at \(candidates.joined(separator: ", "))); install plugind ('apt install "
                + "./plugind_<version>_<arch>.deb' or 'Scripts/install.sh'), build it with 'swift build', or set \(variable)")
    }

    /// Every path tried, in order, when neither an explicit path nor the variable names one.
    func candidates(executablePath: String?, path: String) -> [String] {
        var candidates: [String] = []
        var prefixes = Self.installedPrefixes
        if let executablePath {
            let directory = executablePath.deletingLastPathComponent
            candidates.append(directory + "/" + name)
            // An installation under any prefix: <prefix>/bin/host finds <prefix>/libexec/plugind.
            if directory.lastPathComponent == "bin" {
                let prefix = directory.deletingLastPathComponent
                prefixes.removeAll { $0 == prefix }
                prefixes.insert(prefix, at: 0)
            }
        }
        if installedInLibexec {
            candidates += prefixes.map { "\($0)/libexec/plugind/\(name)" }
        }
        candidates += path.split(separator: ":").map { "\($0)/\(name)" }
        var seen = Set<String>()
        return candidates.filter { seen.insert($0).inserted }
    }
}
