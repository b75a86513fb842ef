import CPlugindShims
import Glibc

/// What a new process gets, built in Swift and handed to the C shim in one call, so that no Swift
/// runs between fork and exec.
package struct SpawnRequest: Sendable {
    package struct Options: OptionSet, Sendable {
        package var rawValue: CInt
        package init(rawValue: CInt) { self.rawValue = rawValue }

        package static let newSession = Options(rawValue: PLUGIND_SHIM_SPAWN_NEW_SESSION)
        package static let dieWithParentThread = Options(rawValue: PLUGIND_SHIM_SPAWN_DIE_WITH_PARENT)
        package static let newPIDNamespace = Options(rawValue: PLUGIND_SHIM_SPAWN_NEW_PID_NAMESPACE)
        package static let newUserNamespace = Options(rawValue: PLUGIND_SHIM_SPAWN_NEW_USER_NAMESPACE)
        package static let newMountNamespace = Options(rawValue: PLUGIND_SHIM_SPAWN_NEW_MOUNT_NAMESPACE)
        package static let newIPCNamespace = Options(rawValue: PLUGIND_SHIM_SPAWN_NEW_IPC_NAMESPACE)
        package static let sibling = Options(rawValue: PLUGIND_SHIM_SPAWN_SIBLING)
        /// For the pre-forked launcher only: see PLUGIND_SHIM_SPAWN_NO_ADVANCE_RESTRICTIONS.
        package static let noAdvanceRestrictions = Options(rawValue: PLUGIND_SHIM_SPAWN_NO_ADVANCE_RESTRICTIONS)

        /// Spawns only: the child raises its OOM score adjustment to `oomScoreAdjustment` before
        /// it execs (see PLUGIND_SHIM_SPAWN_RAISE_OOM_SCORE).
        package static let raiseOOMScore = Options(rawValue: PLUGIND_SHIM_SPAWN_RAISE_OOM_SCORE)

        /// A network namespace of its own: for workers whose plugin was not granted the network.
        package static let newNetworkNamespace = Options(rawValue: PLUGIND_SHIM_SPAWN_NEW_NET_NAMESPACE)

        /// Stays in the caller's working directory instead of "/": for a program of the user's.
        package static let keepDirectory = Options(rawValue: PLUGIND_SHIM_SPAWN_KEEP_DIRECTORY)

        /// Every namespace a worker gets (the network namespace only without the network).
        package static let namespaces: Options = [.newPIDNamespace, .newUserNamespace, .newMountNamespace, .newIPCNamespace]
    }

    package var executablePath: String
    package var arguments: [String]
    /// "NAME=value" entries; nothing else is inherited.
    package var environment: [String]
    /// `descriptors[i]` becomes descriptor `i` of the child; every other descriptor is closed.
    package var descriptors: [FileDescriptor]
    package var options: Options
    /// Forks only: cgroup.procs files the child's pid is written to before it goes on.
    package var cgroupFiles: [String] = []
    /// Spawns only: the executable to run instead of `executablePath` (which then only names it
    /// in errors), for an image that is not a file on disk (see `SealedFile.executableCopy`).
    package var executableDescriptor: FileDescriptor?
    /// Forks only: the address (in this process) where the kernel stores the child's pid as it
    /// creates it, or 0 (see `ForkRecord`). An address, not a pointer, so the request stays Sendable.
    package var childPIDAddress = 0
    /// With `.raiseOOMScore`: the score the child raises itself to.
    package var oomScoreAdjustment: Int32 = 0

    /// The OOM score adjustment of launchers, spares and workers: half-way to the most
    /// expendable (1000), above a host's usual 0, so that under memory pressure the kernel takes
    /// a worker (or a launcher, which the host replaces) before the host, and the host's owner
    /// can still rank processes above them.
    package static let workerOOMScoreAdjustment: Int32 = 500

    package init(
        executablePath: String,
        arguments: [String],
        environment: [String],
        descriptors: [FileDescriptor],
        options: Options
    ) {
        self.executablePath = executablePath
        self.arguments = arguments
        self.environment = environment
        self.descriptors = descriptors
        self.options = options
    }
}

/// A child process and the pidfd that tracks it.
package struct SpawnedProcess: Sendable {
    package var processIdentifier: Int32
    package var processDescriptor: FileDescriptor

    package init(processIdentifier: Int32, processDescriptor: FileDescriptor) {
        self.processIdentifier = processIdentifier
        self.processDescriptor = processDescriptor
    }
}

/// Spawns `request` through `plugind_shim_spawn` (clone with CLONE_VFORK and CLONE_PIDFD).
package func spawnProcess(_ request: SpawnRequest) throws(SystemError) -> SpawnedProcess {
    let arguments = CStringArray(request.arguments)
    let environment = CStringArray(request.environment)
    defer {
        arguments.deallocate()
        environment.deallocate()
    }
    let descriptors = request.descriptors.map(\.rawValue)
    // Kept open in the child at a number above those it is given, for execveat.
    var executable = request.executableDescriptor
    if let given = executable, given.rawValue < CInt(descriptors.count) {
        executable = try given.duplicate(minimum: CInt(descriptors.count))
    }
    defer { if let executable, executable != request.executableDescriptor { executable.close() } }
    var pid: Int32 = 0
    var pidfd: CInt = -1
    let result = request.executablePath.withCString { path in
        descriptors.withUnsafeBufferPointer { descriptorBuffer in
            var shimRequest = plugind_shim_spawn_request(
                path: path,
                argv: arguments.pointer,
                envp: environment.pointer,
                descriptors: descriptorBuffer.baseAddress!,
                descriptor_count: CInt(descriptorBuffer.count),
                flags: request.options.rawValue,
                uid: getuid(),
                gid: getgid(),
                id_count: 1,
                keep_descriptor: executable?.rawValue ?? -1,
                cgroup_files: nil,
                cgroup_file_count: 0,
                executable_descriptor: executable?.rawValue ?? -1,
                record_child_pid: nil,
                oom_score_adj: request.oomScoreAdjustment
            )
            return plugind_shim_spawn(&shimRequest, &pid, &pidfd)
        }
    }
    try checkShim("spawn \(request.executablePath)", result)
    return SpawnedProcess(processIdentifier: pid, processDescriptor: FileDescriptor(rawValue: pidfd))
}

/// A NULL-terminated array of C strings, allocated before the spawn call.
private struct CStringArray {
    let pointer: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>

    init(_ strings: some Collection<String>) {
        pointer = .allocate(capacity: strings.count + 1)
        for (index, string) in strings.enumerated() {
            pointer[index] = strdup(string)
        }
        pointer[strings.count] = nil
    }

    /// "" with static storage, for requests that execute nothing.
    var emptyString: UnsafePointer<CChar> {
        UnsafeRawPointer(StaticString("").utf8Start).assumingMemoryBound(to: CChar.self)
    }

    func deallocate() {
        var index = 0
        while let string = pointer[index] {
            free(string)
            index += 1
        }
        pointer.deallocate()
    }
}

/// The ids a worker runs plugin code as, in its user namespace (the same ids outside): the
/// caller's own, or, when the caller is root, ids of plugind's own range that no other process
/// of the machine uses, so that a worker of a root host owns no root file, holds no capability
/// outside its namespaces and shares its uid with no daemon (`nobody` is many daemons' uid: they
/// could signal or trace a worker running as it). A root host maps the whole range into each
/// worker's namespace; each plugin takes the id its identifier hashes to, the same at every
/// launch, so that what it wrote into its grants stays its own and another plugin's is not.
/// A root host's worker builds its view as root of its namespace (so that it can reach the
/// owner's paths), then takes its plugin's ids.
package struct WorkerIdentity: Sendable, Equatable {
    package var uid: UInt32
    package var gid: UInt32
    /// How many ids from `uid` and `gid` on are mapped: the range a root host's workers pick from.
    package var count: UInt32 = 1

    package init(uid: UInt32, gid: UInt32, count: UInt32 = 1) {
        self.uid = uid
        self.gid = gid
        self.count = count
    }

    /// plugind's range for the workers of root hosts: uids and gids 2,000,000,000 to
    /// 2,004,194,303, above every regular, system, systemd-homed and dynamic range and below the
    /// ranges systemd hands out to containers' foreign ids (see the README's Security section).
    package static let rootWorkerRange: ClosedRange<UInt32> = 2_000_000_000...2_004_194_303

    /// Computed once, in the launcher before it forks.
    package static let current: WorkerIdentity = {
        guard geteuid() == 0 else { return WorkerIdentity(uid: getuid(), gid: getgid()) }
        let range = rootWorkerRange
        return WorkerIdentity(uid: range.lowerBound, gid: range.lowerBound, count: range.upperBound - range.lowerBound + 1)
    }()

    /// The ids the plugin `identifier` runs as: the caller's own, or (for a root host) the one of
    /// the range that FNV-1a of the identifier, lowercased, selects.
    package func forPlugin(_ identifier: String) -> WorkerIdentity {
        guard count > 1 else { return self }
        var hash: UInt32 = 2_166_136_261
        for byte in identifier.lowercased().utf8 {
            hash = (hash ^ UInt32(byte)) &* 16_777_619
        }
        let offset = hash % count
        return WorkerIdentity(uid: uid + offset, gid: gid + offset)
    }
}

/// Forks this single-threaded process into a worker with `request`'s descriptors and options
/// (path and arguments are ignored: the child goes on running this program). Returns nil in the
/// child, and the child's pid in the parent. For the pre-forked launcher only.
package func forkWorker(_ request: SpawnRequest) throws(SystemError) -> Int32? {
    try forking(request, keeping: nil, plugind_shim_fork_worker)
}

/// Forks this single-threaded process into a spare worker that keeps only its standard
/// descriptors and `socket`, waiting for `installDescriptors`. Returns nil in the child.
package func forkSpare(options: SpawnRequest.Options, keeping socket: FileDescriptor, childPIDAddress: Int = 0) throws(SystemError)
    -> Int32?
{
    var request = SpawnRequest(executablePath: "", arguments: [], environment: [], descriptors: [], options: options)
    request.childPIDAddress = childPIDAddress
    return try forking(request, keeping: socket, plugind_shim_fork_spare)
}

/// Makes `descriptors[i]` descriptor `i` of this process and closes every other descriptor.
package func installDescriptors(_ descriptors: [FileDescriptor]) throws(SystemError) {
    let request = SpawnRequest(executablePath: "", arguments: [], environment: [], descriptors: descriptors, options: [])
    let result = withShimRequest(request, keeping: nil) { plugind_shim_install_descriptors($0) }
    try checkShim("install descriptors", result)
}

private func forking(
    _ request: SpawnRequest,
    keeping: FileDescriptor?,
    _ fork: (UnsafePointer<plugind_shim_spawn_request>, UnsafeMutablePointer<pid_t>, UnsafeMutablePointer<CInt>) -> CInt
) throws(SystemError) -> Int32? {
    var pid: pid_t = 0
    var isChild: CInt = 0
    let result = withShimRequest(request, keeping: keeping) { fork($0, &pid, &isChild) }
    try checkShim("fork", result)
    return isChild == 1 ? nil : pid
}

/// Calls `body` with the C form of `request` (no argv or environment: nothing is executed).
private func withShimRequest(
    _ request: SpawnRequest,
    keeping: FileDescriptor?,
    _ body: (UnsafePointer<plugind_shim_spawn_request>) -> CInt
) -> CInt {
    let noArguments = CStringArray([])
    let cgroupFiles = CStringArray(request.cgroupFiles)
    defer {
        noArguments.deallocate()
        cgroupFiles.deallocate()
    }
    let identity = WorkerIdentity.current
    var descriptors = request.descriptors.map(\.rawValue)
    if descriptors.isEmpty { descriptors = [-1] }
    let count = CInt(request.descriptors.count)
    return descriptors.withUnsafeBufferPointer { descriptorBuffer in
        var shimRequest = plugind_shim_spawn_request(
            path: noArguments.emptyString,
            argv: noArguments.pointer,
            envp: noArguments.pointer,
            descriptors: descriptorBuffer.baseAddress!,
            descriptor_count: count,
            flags: request.options.rawValue,
            uid: identity.uid,
            gid: identity.gid,
            id_count: identity.count,
            keep_descriptor: keeping?.rawValue ?? -1,
            cgroup_files: UnsafeRawPointer(cgroupFiles.pointer).assumingMemoryBound(to: UnsafePointer<CChar>?.self),
            cgroup_file_count: CInt(request.cgroupFiles.count),
            executable_descriptor: -1,
            record_child_pid: UnsafeMutablePointer<Int32>(bitPattern: request.childPIDAddress),
            oom_score_adj: request.oomScoreAdjustment
        )
        return body(&shimRequest)
    }
}

/// Runs `start` with `options`; when the system refuses the namespaces (no user namespaces for
/// this user, an AppArmor restriction, too many), runs it again without them. Returns the result
/// and the options that took effect: the worker then reports the layers that need them as
/// unavailable, which fails the launch unless the host accepts best-effort confinement.
package func withNamespaceFallback<Result>(
    _ options: SpawnRequest.Options,
    _ start: (SpawnRequest.Options) throws(SystemError) -> Result
) -> Swift.Result<(Result, SpawnRequest.Options), SystemError> {
    do {
        return .success((try start(options), options))
    } catch {
        let refusals: Set<Errno> = [.operationNotPermitted, .invalidArgument, Errno(rawValue: ENOSPC), Errno(rawValue: EUSERS)]
        guard refusals.contains(error.errno), !options.isDisjoint(with: .namespaces) else {
            return .failure(error)
        }
        // A kernel that allows the other namespaces but no more network namespaces (a limit on
        // their number) keeps the others; the worker reports its network namespace unavailable.
        if options.contains(.newNetworkNamespace) {
            let withoutNetwork = options.subtracting(.newNetworkNamespace)
            if let result = try? start(withoutNetwork) { return .success((result, withoutNetwork)) }
        }
        let reduced = options.subtracting(.namespaces).subtracting(.newNetworkNamespace)
        do {
            return .success((try start(reduced), reduced))
        } catch {
            return .failure(error)
        }
    }
}
