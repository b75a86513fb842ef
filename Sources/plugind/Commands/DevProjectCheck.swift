import Glibc
import PlugindBundle

/// Whether a project is the owner's alone before `plugind dev` builds and runs it. `dev` runs the
/// project's Makefile unconfined as the owner, then inspects the bundle under build/ and launches
/// it: whoever else may write the project directory edits that Makefile, and whoever may write it,
/// build/ or a directory above them swaps the whole bundle between the inspection and the launch.
/// So the project directory and the build directory must belong to the owner or root and be
/// writable by no one else, and so must every directory above them (symlinks resolved) up to `/`,
/// except that a directory above may be shared if it is sticky and the owner's or root's (as /tmp
/// is): nobody else can rename or remove an entry there that is not theirs. A group-writable
/// directory passes when its group has the owner's number (the personal group of umask 002), as
/// everywhere plugind judges files.
enum DevProjectCheck {
    /// Why another user could change what `dev` builds or runs from `project`, naming the
    /// directory or file at fault, its owner and mode, and the fix; nil when nobody can.
    static func problem(project: String) -> String? {
        guard let resolved = canonicalPath(project) else { return "\(project) cannot be resolved" }
        if let problem = problem(directory: resolved, role: "the project directory") { return problem }
        if let makefile = canonicalPath(resolved + "/Makefile") {
            if let problem = problem(file: makefile) { return problem }
            // A Makefile linked from elsewhere: the directory holding it must be as safe.
            let holder = parent(of: makefile)
            if holder != resolved, let problem = problem(directory: holder, role: "the directory of the Makefile") { return problem }
        }
        let build = resolved + "/build"
        guard FileStatus(path: build) != nil else { return nil }
        guard let resolvedBuild = canonicalPath(build) else { return "\(build) cannot be resolved" }
        return problem(directory: resolvedBuild, role: "the build directory")
    }

    /// `directory` itself held to the strict rule, the directories above it to the rule with the
    /// sticky exception.
    private static func problem(directory: String, role: String) -> String? {
        var current = directory
        var strict = true
        while true {
            let status: FileStatus
            switch FileStatus.examining(current, followingLinks: true) {
            case .success(let found): status = found
            case .failure(let error): return "\(current) cannot be examined: \(error)"
            }
            if let reason = reason(status, sharedIfSticky: !strict) {
                let which = strict ? "\(role) \(current)" : "\(current), above \(role) \(directory),"
                return refusal(which, current, status, reason)
            }
            if current == "/" { return nil }
            current = parent(of: current)
            strict = false
        }
    }

    private static func problem(file: String) -> String? {
        guard let status = FileStatus(path: file), let reason = reason(status, sharedIfSticky: false) else { return nil }
        return refusal("the Makefile \(file)", file, status, reason)
    }

    private static func reason(_ status: FileStatus, sharedIfSticky: Bool) -> String? {
        if status.foreignOwnerProblem != nil { return "is owned by another user" }
        if sharedIfSticky && status.isDirectory && status.isSticky { return nil }
        guard status.writableByOthersProblem != nil else { return nil }
        return status.mode & S_IWOTH != 0 ? "is writable by every user" : "is writable by group \(status.group)"
    }

    private static func refusal(_ which: String, _ path: String, _ status: FileStatus, _ reason: String) -> String {
        let user = effectiveUserID
        let mode = String(status.mode & 0o7777, radix: 8)
        var fix = "'chmod go-w \(path)'"
        if status.owner != user && status.owner != 0 { fix = "'chown \(user) \(path)' and " + fix }
        return "\(which) \(reason) (owner \(TrustedLibraryPath.ownerName(status.owner)), mode \(mode)): another user could change "
            + "the Makefile dev runs as you, or swap the bundle between its inspection and its launch. Fix it with \(fix), "
            + "or move the project into a directory only you can write"
    }

    private static func parent(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/"), slash != path.startIndex else { return "/" }
        return String(path[..<slash])
    }
}
