import FoundationEssentials
import Glibc
import PlugindBundle
import PlugindSystem
import PlugindWire

/// Which of the host's files stand for the objects a worker names in a stack report. A hostile
/// worker can name any path: the host only ever reads the files it gave that worker (the
/// bundle's libraries, its dependency directories, a system library it sealed), the worker
/// executable and libraries in the system's library directories; any other object is shown by
/// its name and offset only, and nothing is opened for it.
struct StackObjectFiles: Sendable {
    /// Worker path → host path, for the files whose path differs or that are the bundle's.
    let exact: [String: String]
    /// Directories whose files the worker sees at the same paths.
    let directories: [String]
    /// The worker executable (the loader names it with an empty path).
    let workerExecutable: String?

    /// Knows no file: frames keep their objects' names and offsets.
    static let none = StackObjectFiles(exact: [:], directories: [], workerExecutable: nil)

    init(exact: [String: String], directories: [String], workerExecutable: String?) {
        self.exact = exact
        self.directories = directories
        self.workerExecutable = workerExecutable
    }

    init(plan: LaunchPlan, workerExecutable: String?) {
        var exact: [String: String] = [:]
        for source in plan.sealedFiles {
            if let bundle = source.bundlePath {
                let path = bundle + "/" + source.path
                exact[path] = path
            }
        }
        if plan.load.libraryPath.hasPrefix(LaunchPlan.systemLibraryDirectory + "/"),
            let system = plan.sealedFiles.first(where: { $0.bundlePath == nil })
        {
            exact[plan.load.libraryPath] = system.path
        }
        let directories = plan.load.view.compactMap { operation -> String? in
            guard case .bind(source: let source, path: let path, writable: false) = operation, source == path,
                path != LaunchPlan.bundleDataPath
            else { return nil }
            return path
        }
        self.init(exact: exact, directories: directories, workerExecutable: workerExecutable)
    }

    /// The host file to read for the object the worker calls `path`, or nil when the host does
    /// not know it.
    func hostPath(forWorkerPath path: String) -> String? {
        if path.isEmpty { return workerExecutable }
        if let known = exact[path] { return known }
        guard path.hasPrefix("/"), !path.contains("/../"), !path.contains("/./"), !path.contains("\n") else { return nil }
        let directory = path.deletingLastPathComponent
        if directories.contains(directory) { return path }
        if TrustedLibraryPath.systemDirectories.contains(where: { path.hasPrefix($0 + "/") }) { return path }
        return nil
    }
}
