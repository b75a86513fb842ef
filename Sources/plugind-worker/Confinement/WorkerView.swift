import CPlugindConfinement
import Glibc
import PlugindSystem
import PlugindWire

/// The worker's private filesystem view: a root of its own that holds only what the plugin needs.
/// A spare builds the part every worker shares while it waits (`prepare`); a launch adds the
/// plugin's bundle, dependencies and grants and seals it (`complete`). Afterwards the host's
/// files, sockets and directories outside the view do not exist for the plugin.
enum WorkerView {
    /// Where the plugin's bundle is bound for its data files (its libraries are sealed copies).
    static let bundleDataPath = "/.plugind/bundle"

    /// The view every worker starts from, computed once in the launcher before it forks: the
    /// worker's own library directories (libc, the Swift runtime, libffi, …), the files the
    /// dynamic linker and libc read, and the host's top-level symlinks (/lib → usr/lib).
    static let common: [ViewOperation] = commonOperations()

    /// Devices every worker may open: bound with device access, read-only (writing a device
    /// node's data needs no write access to its mount).
    static let devices = ["/dev/null", "/dev/zero", "/dev/full", "/dev/urandom", "/dev/random"]

    /// A view begun in a spare (or a worker forked on the spot), waiting for its plugin.
    struct Prepared {
        /// Paths the common part bound, so that a launch does not bind them again.
        let boundPaths: Set<String>
        /// The process already lives in the view, which a launch only completes and seals
        /// (`plugind_sandbox_settle_ahead`); false when the view is still built below a temporary root.
        var settled = false
    }

    /// Why a view could not be built: the step and the system's reason.
    struct Failure: Error, CustomStringConvertible {
        let step: String
        let errno: Errno
        /// Where in the view the failed step was to put something, when it was one of the view's operations.
        var path: String? = nil

        /// The plugin's bundle was gone from its path when it was to be bound (removed, or
        /// swapped by `install --force`, after the host sealed its files).
        var isBundleGone: Bool {
            path == WorkerView.bundleDataPath && [ENOENT, ENOTDIR, ESTALE].contains(errno.rawValue)
        }

        var description: String { "\(step): \(errno)" }
    }

    /// Begins the view: a new root with the common part, the worker's own /proc and device
    /// nodes. The process must own its user and mount namespaces. With `settlingAhead` (a
    /// process that will never show the host's whole tree), it also moves into the view now,
    /// where the kernel allows: a launch then neither pivots nor unmounts the host's tree.
    static func prepare(settlingAhead: Bool) -> Result<Prepared, Failure> {
        func check(_ step: String, _ result: CInt) -> Failure? {
            result == 0 ? nil : Failure(step: step, errno: Errno(rawValue: result))
        }
        if let failure = check("enter a new root with a /proc of its own", plugind_sandbox_enter()) { return .failure(failure) }
        var bound: Set<String> = []
        for operation in common {
            // A system without /usr/lib/locale, say, simply has nothing to show there.
            let result = apply(operation, owner: WorkerIdentity(uid: getuid(), gid: getgid()))
            if result == ENOENT { continue }
            if let failure = check(operation.description, result) { return .failure(failure) }
            if case .bind(_, let path, _) = operation { bound.insert(path) }
        }
        for device in devices {
            let result = plugind_sandbox_bind(device, device, PLUGIND_SANDBOX_BIND_DEVICE)
            if result == ENOENT { continue }
            if let failure = check("bind \(device)", result) { return .failure(failure) }
        }
        for (name, target) in [
            ("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2"),
        ] {
            if let failure = check("link /dev/\(name)", plugind_sandbox_symlink(target, "/dev/" + name)) { return .failure(failure) }
        }
        if let failure = check("mount /proc", plugind_sandbox_mount_proc("/proc")) { return .failure(failure) }
        // Where the kernel cannot bind from a detached tree, the launch settles the view instead.
        let settled = settlingAhead && plugind_sandbox_settle_ahead() == 0
        return .success(Prepared(boundPaths: bound, settled: settled))
    }

    /// What `complete` did: the steps it had to leave out (an owner's grant whose path is gone or
    /// now holds a symlink, say), each with its reason.
    struct Completion {
        var dropped: [String] = []
    }

    /// Adds the plugin's part and seals the view. A step that binds the owner's grants may be
    /// left out (the plugin then has less, never more); any other failed step fails the view.
    /// `owner`: the ids the plugin will run as, who owns its scratch space.
    static func complete(
        _ operations: [ViewOperation], prepared: Prepared, grants: Set<String>,
        owner: WorkerIdentity = WorkerIdentity(uid: getuid(), gid: getgid())
    ) -> Result<Completion, Failure> {
        var completion = Completion()
        for operation in operations {
            if case .bind(let source, let path, _) = operation, source != "/", prepared.boundPaths.contains(path) { continue }
            let result = apply(operation, owner: owner)
            guard result != 0 else { continue }
            if grants.contains(operation.path) {
                completion.dropped.append("\(operation.path) (\(Errno(rawValue: result)))")
                continue
            }
            return .failure(Failure(step: operation.description, errno: Errno(rawValue: result), path: operation.path))
        }
        let wholeHost = operations.contains { if case .bind("/", "/", _) = $0 { true } else { false } }
        let sealed = plugind_sandbox_complete(wholeHost ? 1 : 0)
        guard sealed == 0 else { return .failure(Failure(step: "pivot into the view", errno: Errno(rawValue: sealed))) }
        return .success(completion)
    }

    private static func apply(_ operation: ViewOperation, owner: WorkerIdentity) -> CInt {
        switch operation {
        case .bind(let source, let path, let writable):
            plugind_sandbox_bind(source, path, writable ? PLUGIND_SANDBOX_BIND_WRITABLE : 0)
        case .symlink(let path, let target):
            plugind_sandbox_symlink(target, path)
        case .directory(let path):
            plugind_sandbox_make_directory(path)
        case .sealed(let path, let descriptor):
            plugind_sandbox_symlink("/proc/self/fd/\(descriptor)", path)
        case .scratch(let path, let bytes):
            plugind_sandbox_mount_tmpfs(path, bytes, owner.uid, owner.gid)
        }
    }

    // MARK: The common part

    private static func commonOperations() -> [ViewOperation] {
        var operations: [ViewOperation] = []
        // The host's top-level symlinks, so that paths in ld.so.cache (/lib/x86_64-linux-gnu/…)
        // resolve as they do outside.
        for name in ["bin", "sbin", "lib", "lib32", "lib64", "libx32"] {
            if let target = symlinkContents("/" + name) { operations.append(.symlink(path: "/" + name, target: target)) }
        }
        for directory in mappedLibraryDirectories() {
            operations.append(.bind(source: directory, path: directory, writable: false))
        }
        for path in ["/etc/ld.so.cache", "/etc/localtime", "/usr/lib/locale"] {
            operations += ViewOperation.systemPath(path)
        }
        return operations
    }

    private static func symlinkContents(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX))
        let count = readlink(path, &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Canonical directories holding the libraries this worker has mapped (the Swift runtime among
    /// them), which plugins need as well. The lines are read as bytes: `Substring` methods from
    /// another module run unspecialized, and the conformances they look up are cached in a page
    /// every worker would write for this alone.
    private static func mappedLibraryDirectories() -> [String] {
        guard let maps = try? FileDescriptor.open("/proc/self/maps", O_RDONLY) else { return [] }
        defer { maps.close() }
        guard let bytes = try? maps.readToEnd(limit: 1 << 20) else { return [] }
        let (newline, slash) = (UInt8(ascii: "\n"), UInt8(ascii: "/"))
        let libraryMark = Array(".so".utf8)
        var directories: Set<String> = []
        for line in bytes.split(separator: newline) {
            guard let start = line.firstIndex(of: slash), let lastSlash = line.lastIndex(of: slash) else { continue }
            let path = line[start...]
            let isLibrary = path.indices.contains { path[$0...].starts(with: libraryMark) }
            guard isLibrary else { continue }
            // Canonical, since binds refuse a path through a symlink.
            guard let resolved = realpath(String(decoding: line[start..<lastSlash], as: UTF8.self), nil) else { continue }
            directories.insert(String(cString: resolved))
            free(resolved)
        }
        return directories.sorted()
    }
}
