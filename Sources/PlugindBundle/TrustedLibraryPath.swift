package import Glibc

/// The rule for a library that lives outside every bundle: a system library named by soname, or
/// a dependency (`DT_NEEDED`) of a bundle's library that resolves outside the bundle.
///
/// Its path is walked one component at a time from `/`, as the kernel would, following symlinks
/// only when nobody but a trusted owner could have made or changed them: every directory passed
/// through, every symlink followed and the file itself must belong to a trusted owner and be
/// writable by no one else. The walk holds a descriptor of each directory it has checked, so
/// what it checked is what it opens. For a library the owner approves as a system library the
/// trusted owner is root alone and the file must end inside the system library directories:
/// such bytes change only when the package manager (or an administrator) changes them.
package enum TrustedLibraryPath {
    /// Which files the walk trusts.
    package enum Rule: Sendable, Hashable {
        /// A library named by soname, which the owner approves as one the package manager
        /// maintains: root owns everything on the way, and the file lies in the system library
        /// directories.
        case systemLibrary
        /// A dependency outside the bundle, which the bundle's author pointed at (the Swift
        /// toolchain, a library the owner built): root or the user running the host owns
        /// everything on the way, so that no other user can change it.
        case dependency
        /// A foreign plugin (LADSPA, frei0r) its package installed: root owns everything on the
        /// way, as for a system library, wherever the ABI's directories are (/usr/lib/ladspa,
        /// /usr/local/lib/frei0r-1, a directory on LADSPA_PATH).
        case systemPlugin
        /// A program plugind runs (the worker executable a launcher is exec'd from): root owns
        /// everything on the way, so neither another user nor a worker can change it.
        case installedProgram

        func trusts(_ uid: uid_t) -> Bool {
            switch self {
            case .systemLibrary, .systemPlugin, .installedProgram: uid == 0
            case .dependency: uid == 0 || uid == geteuid()
            }
        }

        var phrase: String {
            switch self {
            case .systemLibrary, .systemPlugin, .installedProgram: "root owns"
            case .dependency: "root or you own"
            }
        }

        var endsInSystemDirectories: Bool { self == .systemLibrary }
    }

    /// The directories (canonical, as the walk ends) a system library named by soname may live in.
    package static let systemDirectories = ["/usr/lib", "/usr/lib64", "/usr/lib32", "/usr/libx32", "/lib", "/lib64", "/lib32", "/libx32"]

    /// Why a path is not followed.
    package struct Refusal: Error, Sendable, Hashable, CustomStringConvertible {
        /// The path asked for.
        package var path: String
        /// What the walk found, naming the component, its owner and its mode.
        package var reason: String
        /// The error number when a system call failed (rather than a component being untrusted):
        /// such a refusal can be the host's passing state, such as running out of descriptors.
        package var systemErrno: CInt? = nil

        package var description: String { "\(path): \(reason)" }
    }

    /// A file the walk reached: its canonical path and, when asked for, an open descriptor.
    package struct Resolution: Sendable {
        package var canonicalPath: String
        package var status: FileStatus
    }

    /// The canonical path of `path` when the walk trusts everything on the way.
    package static func resolve(_ path: String, rule: Rule) -> Result<Resolution, Refusal> {
        walk(path, rule: rule, open: false).map(\.resolution)
    }

    /// Opens `path` for reading when the walk trusts everything on the way; the caller closes the
    /// descriptor. The file is opened from the descriptor of the directory that was checked.
    package static func open(_ path: String, rule: Rule) -> Result<(descriptor: CInt, resolution: Resolution), Refusal> {
        walk(path, rule: rule, open: true).map { ($0.descriptor, $0.resolution) }
    }

    /// `O_PATH`, which Glibc's module does not export (it needs `_GNU_SOURCE`): a descriptor
    /// that names a directory without reading it, so a directory that may be searched but not
    /// listed can still be walked.
    private static let pathOnly: CInt = 0o10_000_000

    /// Symlinks followed at most, as the kernel's own limit.
    private static let maximumLinks = 40

    private static func walk(
        _ path: String, rule: Rule, open: Bool
    ) -> Result<(descriptor: CInt, resolution: Resolution), Refusal> {
        func refuse(_ reason: String, systemErrno: CInt? = nil) -> Result<(descriptor: CInt, resolution: Resolution), Refusal> {
            .failure(Refusal(path: path, reason: reason, systemErrno: systemErrno))
        }
        guard path.hasPrefix("/") else { return refuse("not an absolute path") }
        var directory = Glibc.open("/", pathOnly | O_DIRECTORY | O_CLOEXEC)
        guard directory >= 0 else { return refuse("cannot open /: \(String(cString: strerror(errno)))", systemErrno: errno) }
        defer { close(directory) }
        var rootStatus = stat()
        guard fstat(directory, &rootStatus) == 0 else { return refuse("cannot examine /") }
        if let problem = untrusted(rootStatus, "/", rule) { return refuse(problem) }

        var canonical: [String] = []
        var pending = Array(path.split(separator: "/").map(String.init).reversed())
        var links = 0
        while let name = pending.popLast() {
            if name == "." { continue }
            let here = "/" + canonical.joined(separator: "/")
            if name == ".." {
                // Every ancestor was checked on the way down.
                guard !canonical.isEmpty else { continue }
                let parent = openat(directory, "..", pathOnly | O_DIRECTORY | O_CLOEXEC)
                guard parent >= 0 else { return refuse("cannot open the parent of \(here)") }
                close(directory)
                directory = parent
                canonical.removeLast()
                continue
            }
            let full = (canonical + [name]).reduce("") { $0 + "/" + $1 }
            var status = stat()
            guard fstatat(directory, name, &status, AT_SYMLINK_NOFOLLOW) == 0 else {
                return refuse("\(full) \(errno == ENOENT ? "does not exist" : String(cString: strerror(errno)))", systemErrno: errno)
            }
            switch status.st_mode & S_IFMT {
            case S_IFLNK:
                // Its directory is trusted; a link in it is someone's choice only if they own it.
                guard rule.trusts(status.st_uid) else {
                    return refuse(
                        "the symlink \(full) is owned by \(ownerName(status.st_uid)); only links that \(rule.phrase) are followed")
                }
                links += 1
                guard links <= maximumLinks else { return refuse("more than \(maximumLinks) symlinks") }
                guard let target = readLink(directory, name) else { return refuse("cannot read the symlink \(full)") }
                if target.hasPrefix("/") {
                    let root = Glibc.open("/", pathOnly | O_DIRECTORY | O_CLOEXEC)
                    guard root >= 0 else { return refuse("cannot open /") }
                    close(directory)
                    directory = root
                    canonical = []
                }
                pending += target.split(separator: "/").map(String.init).reversed()
            case S_IFDIR:
                if let problem = untrusted(status, full, rule) { return refuse(problem) }
                let child = openat(directory, name, pathOnly | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                guard child >= 0 else { return refuse("cannot open \(full): \(String(cString: strerror(errno)))", systemErrno: errno) }
                var opened = stat()
                guard fstat(child, &opened) == 0, opened.st_dev == status.st_dev, opened.st_ino == status.st_ino else {
                    close(child)
                    return refuse("\(full) changed while it was examined")
                }
                close(directory)
                directory = child
                canonical.append(name)
            case S_IFREG:
                guard pending.allSatisfy({ $0 == "." }) else { return refuse("\(full) is a file, not a directory") }
                if let problem = untrusted(status, full, rule) { return refuse(problem) }
                if rule.endsInSystemDirectories, !systemDirectories.contains(where: { full.hasPrefix($0 + "/") }) {
                    return refuse(
                        "resolves to \(full), outside the system library directories (\(systemDirectories.prefix(3).joined(separator: ", ")), …)"
                    )
                }
                var descriptor: CInt = -1
                if open {
                    descriptor = openat(directory, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
                    guard descriptor >= 0 else {
                        return refuse("cannot open \(full): \(String(cString: strerror(errno)))", systemErrno: errno)
                    }
                    var opened = stat()
                    guard fstat(descriptor, &opened) == 0, opened.st_dev == status.st_dev, opened.st_ino == status.st_ino else {
                        close(descriptor)
                        return refuse("\(full) changed while it was examined")
                    }
                }
                return .success((descriptor, Resolution(canonicalPath: full, status: FileStatus(status))))
            default:
                return refuse("\(full) is not a regular file")
            }
        }
        return refuse("names a directory, not a file")
    }

    /// Why a directory or file is not trusted, naming its owner and mode, or nil.
    private static func untrusted(_ status: stat, _ path: String, _ rule: Rule) -> String? {
        let mode = String(status.st_mode & 0o7777, radix: 8)
        let kind = status.st_mode & S_IFMT == S_IFDIR ? "directory" : "file"
        guard rule.trusts(status.st_uid) else {
            return
                "the \(kind) \(path) is owned by \(ownerName(status.st_uid)) (mode \(mode)); only files and directories that \(rule.phrase) and no one else may write are trusted"
        }
        // A sticky directory (/tmp) lets others add entries but not replace or rename ours, and
        // every entry the walk takes from it is checked in turn.
        let sticky = status.st_mode & S_IFMT == S_IFDIR && status.st_mode & S_ISVTX != 0
        if status.st_mode & (S_IWGRP | S_IWOTH) != 0, !sticky {
            let who = status.st_mode & S_IWOTH != 0 ? "every user" : "group \(status.st_gid)"
            return
                "the \(kind) \(path) is writable by \(who) (owner \(ownerName(status.st_uid)), mode \(mode)); only files and directories that no one else may write are trusted"
        }
        return nil
    }

    private static func readLink(_ directory: CInt, _ name: String) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlinkat(directory, name, &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// "root", "uid 1000 (alice)", or "uid 1234" when the user has no name.
    package static func ownerName(_ uid: uid_t) -> String {
        if uid == 0 { return "root" }
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 1024)
        guard getpwuid_r(uid, &entry, &buffer, buffer.count, &result) == 0, result != nil, let name = entry.pw_name else {
            return "uid \(uid)"
        }
        return "uid \(uid) (\(String(cString: name)))"
    }
}
