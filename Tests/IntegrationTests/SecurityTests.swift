import CTestSupport
import ExtensionFoundation
import Foundation
import Glibc
import PlugindEngine
import PlugindPolicyEditing
import PlugindSystem
import TestSupport
import Testing

/// A plugin with hostile intent and no permissions tries every way out the outside review found
/// (and those found since). Each test checks both the refusal inside the plugin (the errno it
/// got) and, from outside, the absence of any effect. Runs as root and as an ordinary user.
@Suite("Security: what a hostile plugin can reach", .tags(.process, .root), .serialized, .timeLimit(.minutes(5)))
struct SecurityTests {
    /// A running probe: each call sends one vector and returns the plugin's answer.
    struct Probe {
        let process: AppExtensionProcess

        func callAsFunction(_ vector: String, _ argument: String = "") async throws -> String {
            String(decoding: try await process.makeConnection().send(Array("\(vector) \(argument)".utf8)), as: UTF8.self)
        }
    }

    /// Runs `body` with a probe bundled with a host of its own (no approval needed).
    func withProbe<Result>(
        _ extra: [String: Any] = [:],
        configure: (inout TestHost) -> Void = { _ in },
        _ body: (Probe, TestHost) async throws -> Result
    ) async throws -> Result {
        var test = try TestHost()
        configure(&test)
        defer { test.remove() }
        let process = try await test.launch(PluginFixture(library: "FaultyHostileProbe", extra: extra))
        do {
            let result = try await body(Probe(process: process), test)
            await process.invalidateAndWait()
            return result
        } catch {
            await process.invalidateAndWait()
            throw error
        }
    }

    /// A directory every uid may write (a root host's worker runs under an id of plugind's own
    /// range, so what it may write must be writable by it), and the permissions granting it.
    static func writableGrant() throws -> (TemporaryDirectory, [String: Any]) {
        let directory = try TemporaryDirectory()
        chmod(directory.path, 0o777)
        return (directory, ["permissions": ["write": [directory.path]]])
    }

    @Test("the owner's unix sockets (stream, datagram, abstract) are out of reach; the listeners receive nothing")
    func ownerSockets() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let stream = try UnixListener(address: directory.path + "/stream.sock", kind: .stream)
        let datagram = try UnixListener(address: directory.path + "/datagram.sock", kind: .datagram)
        let abstract = try UnixListener(address: "plugind-test-\(getpid())", kind: .abstractStream)
        try await withProbe { (probe: Probe, _: TestHost) async throws in
            #expect(try await probe("connect-stream", stream.address) == "refused ENOENT")
            #expect(try await probe("send-datagram", datagram.address) == "refused ENOENT")
            // The name does not exist in the worker's own network namespace.
            #expect(try await probe("connect-abstract", abstract.address) == "refused ECONNREFUSED")
        }
        #expect(!stream.receivedAnything)
        #expect(!datagram.receivedAnything)
        #expect(!abstract.receivedAnything)
        // The control: a worker without confinement reaches them, and the listeners see it.
        let unconfined: (inout TestHost) -> Void = { $0.host.confinement = .disabled }
        try await withProbe(configure: unconfined) { (probe: Probe, _: TestHost) async throws in
            #expect(try await probe("connect-stream", stream.address) == "done connected and wrote")
            #expect(try await probe("send-datagram", datagram.address) == "done sent")
            #expect(try await probe("connect-abstract", abstract.address) == "done connected and wrote")
        }
        #expect(stream.receivedAnything)
        #expect(datagram.receivedAnything)
        #expect(abstract.receivedAnything)
    }

    /// Whether the host's network namespace has the abstract name `name` free: binding it works.
    static func abstractNameIsFree(_ name: String) -> Bool {
        (try? UnixListener(address: name, kind: .abstractStream)) != nil
    }

    @Test(
        "without the network, a plugin's abstract names and the host's socket table are in a network namespace of its own: nothing squats the host's names, nothing lists the owner's sockets"
    )
    func networkNamespace() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let agent = try UnixListener(address: directory.path + "/agent.sock", kind: .stream)
        let name = "plugind-squat-\(getpid())"
        try await withProbe { (probe: Probe, _: TestHost) async throws in
            #expect(try await probe("bind-abstract", name) == "done bound")
            // While the plugin holds its name, the host's (and every other process's) is free.
            #expect(Self.abstractNameIsFree(name))
            #expect(try await probe("socket-table", agent.address) == "done not listed")
            #expect(try await probe("socket-table", "@" + name) == "done listed")
            let layers = probe.process.confinement.map { "\($0.name): \($0.state.rawValue)" }
            #expect(layers.contains("network-namespace: applied"), "\(layers)")
        }
        #expect(!agent.receivedAnything)
        // The control: a worker without confinement shares the host's namespace.
        let unconfined: (inout TestHost) -> Void = { $0.host.confinement = .disabled }
        try await withProbe(configure: unconfined) { (probe: Probe, _: TestHost) async throws in
            #expect(try await probe("socket-table", agent.address) == "done listed")
            #expect(try await probe("bind-abstract", name) == "done bound")
            #expect(!Self.abstractNameIsFree(name))
        }
    }

    @Test("with the network, a plugin makes no unix socket of its own and binds no abstract name, even from a socketpair")
    func networkPluginAbstractNames() async throws {
        let name = "plugind-squat-pair-\(getpid())"
        try await withProbe(["permissions": ["network": true]]) { (probe: Probe, _: TestHost) async throws in
            #expect(try await probe("socket-inet") == "done socket")
            #expect(try await probe("socket-unix") == "refused EACCES")
            #expect(try await probe("bind-abstract-pair", name) == "refused EACCES")
            #expect(Self.abstractNameIsFree(name))
            let layers = probe.process.confinement.map { "\($0.name): \($0.state.rawValue)" }
            #expect(layers.contains("network-namespace: not-requested"), "\(layers)")
        }
        // The control: without the network, the same socketpair binds, in its own namespace.
        try await withProbe { (probe: Probe, _: TestHost) async throws in
            #expect(try await probe("bind-abstract-pair", name) == "done bound")
            #expect(Self.abstractNameIsFree(name))
        }
    }

    /// Mode and `user.plugind` attribute of every sealed copy this process (the host) keeps.
    static func sealedCopiesOfTheHost() -> [(name: String, mode: UInt32, marked: Bool)] {
        let directory = "/proc/self/fd"
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return entries.compactMap { entry in
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: directory + "/" + entry),
                target.hasPrefix("/memfd:plugind:lib"), let fd = Int32(entry)
            else { return nil }
            var status = stat()
            guard fstat(fd, &status) == 0 else { return nil }
            let copy: (name: String, mode: UInt32, marked: Bool) = (
                target, status.st_mode & 0o7777, plugind_test_has_xattr(directory + "/" + entry, "user.plugind") != 0
            )
            return copy
        }
    }

    @Test("a sealed copy shared between launches cannot be changed by a worker: mode and attributes stay, the next launch loads")
    func sharedSealedCopies() async throws {
        for launch in 1...2 {
            try await withProbe { (probe: Probe, _: TestHost) async throws in
                let answer = try await probe("tamper-descriptor", "\(LaunchPlan.firstSealedDescriptor)")
                // A root host's worker is not the owner of the host's copy; an ordinary user's
                // worker is, and tampers with a copy of its own.
                #expect(answer == (geteuid() == 0 ? "refused EACCES" : "done marked and made unreadable"), "launch \(launch)")
            }
            // The probe's own copies: other suites of this process launch plugins at the same
            // time, and a copy the host is still writing (before it is sealed and made 0555, and
            // before any worker has it) is theirs, not this test's subject.
            let copies = Self.sealedCopiesOfTheHost().filter { $0.name.contains("libFaultyHostileProbe.so") }
            #expect(!copies.isEmpty)
            for copy in copies {
                #expect(copy.mode == 0o555, "\(copy.name)")
                #expect(!copy.marked, "\(copy.name)")
            }
        }
    }

    @Test("metadata of the owner's files cannot change: chmod, chown, xattrs, times, inside the view or out")
    func fileMetadata() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let file = directory.path + "/bashrc"
        try Data("owner's".utf8).write(to: URL(fileURLWithPath: file))
        chmod(file, 0o644)
        var before = stat()
        stat(file, &before)
        try await withProbe { (probe: Probe, test: TestHost) async throws in
            for vector in ["chmod", "chown", "setxattr", "utimes", "stat"] {
                #expect(try await probe(vector, file) == "refused ENOENT", "\(vector)")
            }
            // Inside the view, the bundle is read-only.
            let manifest = test.bundledRoot + "/org.plugind.tests.faultyhostileprobe.appex/manifest.json"
            for vector in ["chmod", "setxattr", "utimes", "write"] {
                // Read-only in the view, and outside every Landlock rule that grants writing.
                let answer = try await probe(vector, manifest)
                #expect(answer == "refused EROFS" || answer == "refused EACCES", "\(vector) in the bundle: \(answer)")
            }
            var bundleFile = stat()
            stat(manifest, &bundleFile)
            #expect(bundleFile.st_mode & 0o777 == 0o644)
        }
        var after = stat()
        stat(file, &after)
        #expect(after.st_mode == before.st_mode)
        #expect(after.st_uid == before.st_uid)
        #expect(after.st_mtim.tv_sec == before.st_mtim.tv_sec && after.st_mtim.tv_nsec == before.st_mtim.tv_nsec)
        #expect(plugind_test_has_xattr(file, "user.plugind") == 0)
    }

    @Test("no capability in any set, as /proc shows from outside; the worker runs as an unprivileged id")
    func noCapabilities() async throws {
        try await withProbe { (probe: Probe, _: TestHost) async throws in
            let status = ProcessInspection.readProcFile("/proc/\(probe.process.processIdentifier)/status")
            for set in ["CapEff", "CapPrm", "CapBnd", "CapAmb", "CapInh"] {
                #expect(status.contains("\(set):\t0000000000000000"), "\(set): \(status)")
            }
            let uid = status.split(separator: "\n").first { $0.hasPrefix("Uid:") }.map(String.init) ?? ""
            // A root host's worker: its plugin's id in plugind's own range, never nobody's.
            let expected = WorkerIdentity.current.forPlugin("org.plugind.tests.faultyhostileprobe").uid
            #expect(uid == "Uid:\t\(expected)\t\(expected)\t\(expected)\t\(expected)", "\(uid)")
            #expect(status.contains("NoNewPrivs:\t1"))
            #expect(try await probe("capabilities") == "done 0000000000000000")
        }
    }

    @Test(
        "privileged or escaping system calls are refused inside the plugin",
        arguments: [
            ("bpf", "refused EPERM"), ("perf", "refused EPERM"), ("userfaultfd", "refused EPERM"), ("clock", "refused EPERM"),
            ("syslog", "refused EPERM"), ("mount", "refused EPERM"), ("unshare", "refused EPERM"), ("setns", "refused EPERM"),
            ("ptrace", "refused EPERM"), ("process-vm", "refused EPERM"), ("fanotify", "refused EPERM"), ("clone3", "refused ENOSYS"),
            ("io_uring", "refused ENOSYS"), ("socket-inet", "refused EACCES"), ("map-wx", "refused EACCES"),
            ("protect-wx", "refused EACCES"),
        ])
    func refusedCalls(vector: String, expected: String) async throws {
        let (wallBefore, before) = (Date(), ContinuousClock.now)
        try await withProbe { (probe: Probe, _: TestHost) async throws in
            #expect(try await probe(vector) == expected)
        }
        // The clock was not set back or forth: the wall clock moved as the monotonic one did,
        // however long the probe took on a loaded machine.
        let wall = Date().timeIntervalSince(wallBefore)
        let elapsed = ContinuousClock.now - before
        let monotonic = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        #expect(abs(wall - monotonic) < 60, "the wall clock moved \(wall) s in \(monotonic) s")
    }

    @Test("the owner's keyrings are out of reach: the secret is not in the answer")
    func keyring() async throws {
        let description = "plugind-test-\(getpid())"
        let secret = "owner-secret-\(UInt64.random(in: 0..<UInt64.max))"
        let key = plugind_test_add_key(description, secret)
        defer { if key >= 0 { plugind_test_remove_key(key) } }
        try await withProbe { (probe: Probe, _: TestHost) async throws in
            let answer = try await probe("keyring", description)
            #expect(answer == "refused EPERM")
            #expect(!answer.contains(secret))
        }
    }

    @Test("inotify and fanotify are refused: no file name or event of the owner's reaches the plugin")
    func watching() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try await withProbe { (probe: Probe, test: TestHost) async throws in
            #expect(try await probe("inotify", directory.path) == "refused EPERM")
            #expect(try await probe("inotify", test.bundledRoot) == "refused EPERM")
            #expect(try await probe("fanotify") == "refused EPERM")
        }
    }

    @Test("without the processes permission: no fork, no spawn, no memfd, no System V memory; threads are capped")
    func noProcesses() async throws {
        try await withProbe(["limits": ["threads": 16]]) { (probe: Probe, _: TestHost) async throws in
            #expect(try await probe("fork") == "refused EPERM")
            #expect(try await probe("vfork-spawn") == "refused EPERM")
            #expect(try await probe("memfd", "64") == "refused EPERM")
            #expect(try await probe("shmget") == "refused EPERM")
            let threads = try await probe("threads", "200")
            let made = Int(threads.dropFirst("done ".count)) ?? -1
            // The worker's own thread counts against the cap.
            #expect(made >= 1 && made <= 15, "\(threads)")
        }
    }

    @Test("scratch space is the plugin's own, for a root host's worker too, and a bundle under /tmp still launches with it")
    func scratchSpace() async throws {
        try await withProbe(["limits": ["scratchBytes": 1 << 20]]) { (probe: Probe, test: TestHost) async throws in
            #expect(test.bundledRoot.hasPrefix("/tmp/"), "the probe's bundle lies under the scratch path")
            #expect(try await probe("write", "/tmp/scratch-file") == "done written")
            #expect(try await probe("read", "/tmp/scratch-file") == "done written by the plugin")
        }
        #expect(access("/tmp/scratch-file", F_OK) != 0, "nothing reached the host's /tmp")
    }

    @Test("without the network a plugin's sockets keep their default buffers; no file it writes grows past the host's file cap")
    func kernelMemoryAndFileBounds() async throws {
        let (directory, granted) = try Self.writableGrant()
        defer { directory.remove() }
        let smallFiles: (inout TestHost) -> Void = { $0.host.limits.fileBytes = 16 }
        try await withProbe(granted, configure: smallFiles) { (probe: Probe, _: TestHost) async throws in
            #expect(try await probe("grow-buffer") == "refused EPERM")
            // "written by the plugin" is 21 bytes: past a 16-byte cap the write stops short.
            #expect(try await probe("write", directory.path + "/big").hasPrefix("done"))
            let layers = probe.process.confinement.first { $0.name == "resource-limits" }?.detail ?? ""
            #expect(layers.contains("files written 16 bytes each"), "\(layers)")
        }
        var status = stat()
        #expect(stat(directory.path + "/big", &status) == 0 && status.st_size == 16, "size \(status.st_size)")
        // With the network, buffers stay the plugin's to size.
        try await withProbe(["permissions": ["network": true]]) { (probe: Probe, _: TestHost) async throws in
            #expect(try await probe("grow-buffer") == "done buffer grown")
        }
    }

    @Test("no symlink in a write grant unless the manifest asks for symlinks")
    func symlinksInGrants() async throws {
        let (directory, granted) = try Self.writableGrant()
        defer { directory.remove() }
        try await withProbe(granted) { (probe: Probe, _: TestHost) async throws in
            #expect(try await probe("symlink", directory.path + "/shadow") == "refused EACCES")
            #expect(try await probe("write", directory.path + "/plain") == "done written")
        }
        var status = stat()
        #expect(lstat(directory.path + "/shadow", &status) != 0, "no link was planted")
        let asked: [String: Any] = ["permissions": ["write": [directory.path], "symlinks": true]]
        try await withProbe(asked) { (probe: Probe, _: TestHost) async throws in
            #expect(try await probe("symlink", directory.path + "/shadow") == "done symlink made")
        }
        #expect(lstat(directory.path + "/shadow", &status) == 0 && status.st_mode & S_IFMT == S_IFLNK)
    }

    @Test(
        "the launcher and the spares are not dumpable while they wait: the owner's other processes cannot ptrace them",
        .enabled(if: geteuid() != 0, "a root host's processes belong to root whether dumpable or not; an ordinary user's show it"))
    func sparesNotDumpable() async {
        // In a process of its own: workers of tests running in parallel (some with confinement
        // off, which are dumpable on purpose) are children of this process too. Exit statuses:
        // 40 fewer than a launcher and a spare, 41 one of them dumpable (its pid and owner on
        // stderr).
        let report = ExitTestReport()
        let result = await #expect(processExitsWith: .success) { [path = report.path as String] in
            ExitTestReport.redirectStandardError(to: path)
            let test = try TestHost()
            defer { test.remove() }
            let process = try await test.launch(PluginFixture(library: "FaultyHostileProbe"))
            await process.invalidateAndWait()
            await LaunchPool.settleAll()
            let waiting = ProcessInspection.children(of: getpid()).filter {
                ProcessInspection.readProcFile("/proc/\($0)/comm").hasPrefix("plugind-worker") && ProcessInspection.state(of: $0) != "Z"
            }
            guard waiting.count >= 2 else { exit(40) }
            for pid in waiting {
                // A process that is not dumpable has its /proc files owned by root, and only a
                // process with CAP_SYS_PTRACE may trace it.
                var status = stat()
                guard stat("/proc/\(pid)/mem", &status) == 0, status.st_uid == 0 else {
                    FileHandle.standardError.write(Data("pid \(pid): owner \(status.st_uid)\n".utf8))
                    exit(41)
                }
            }
        }
        let said = report.take()
        if result == nil { Issue.record("child said: \(said)") }
    }

    @Test("each worker has an address-space layout, a stack canary and a hash seed of its own, from a spare or forked on the spot")
    func ownLayout() async throws {
        var layouts: [[Substring]] = []
        for launch in 0..<4 {
            // Spares for the first three (the pool full before each); the fourth is granted the
            // network, so it is forked on the spot.
            await LaunchPool.settleAll()
            let extra: [String: Any] = launch == 3 ? ["permissions": ["network": true]] : [:]
            let answer = try await withProbe(extra) { (probe: Probe, _: TestHost) async throws in try await probe("layout") }
            #expect(answer.hasPrefix("done code="), "\(answer)")
            layouts.append(answer.split(separator: " ").dropFirst().map { $0.drop(while: { $0 != "=" }) })
        }
        for field in 0..<5 {
            let values = layouts.map { $0.count > field ? String($0[field]) : "" }
            #expect(Set(values).count == values.count, "shared between workers: \(values)")
        }
    }

    @Test("a host that chose preforkedSharingLayout gets what it chose: its spares' workers share one layout, canary and seed")
    func sharedLayoutWhenChosen() async throws {
        var layouts: [String] = []
        for _ in 0..<2 {
            await LaunchPool.settleAll()
            let sharing: (inout TestHost) -> Void = { $0.host.launchStrategy = .preforkedSharingLayout }
            let answer = try await withProbe(configure: sharing) { (probe: Probe, _: TestHost) async throws in try await probe("layout") }
            // The stack and heap addresses are the worker's own allocations; code, canary and
            // seed come with the launcher.
            let fields = answer.split(separator: " ")
            #expect(fields.count == 6, "\(answer)")
            layouts.append([1, 4, 5].compactMap { fields.count > $0 ? String(fields[$0]) : nil }.joined(separator: " "))
        }
        #expect(layouts.count == 2 && layouts[0] == layouts[1], "\(layouts)")
    }

    @Test("no setuid or setgid file, even where the plugin may write")
    func setuidBits() async throws {
        let (directory, granted) = try Self.writableGrant()
        defer { directory.remove() }
        try await withProbe(granted) { (probe: Probe, _: TestHost) async throws in
            #expect(try await probe("create-setuid", directory.path + "/shell") == "refused EPERM")
            #expect(try await probe("write", directory.path + "/plain") == "done written")
            #expect(try await probe("chmod-setuid", directory.path + "/plain") == "refused EPERM")
            #expect(try await probe("mknod-setuid", directory.path + "/made") == "refused EPERM")
        }
        var status = stat()
        #expect(stat(directory.path + "/shell", &status) != 0)
        #expect(stat(directory.path + "/made", &status) != 0)
        #expect(stat(directory.path + "/plain", &status) == 0)
        #expect(status.st_mode & (S_ISUID | S_ISGID) == 0)
    }

    @Test("no descriptor the plugin holds leads to the host's files: a spare's copy of the host's tree is gone before plugin code runs")
    func noDescriptorReachesTheHost() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let secret = try directory.publicFile("secret", contents: "the owner's")
        // The control: the file is there for the host.
        #expect(access(secret, F_OK) == 0)
        // After the pool is full the second launch takes a spare, which settled its view ahead
        // and bound the bundle from its copy of the host's tree.
        for launch in 1...2 {
            await LaunchPool.settleAll()
            try await withProbe { (probe: Probe, _: TestHost) async throws in
                let answer = try await probe("descriptors", String(secret.dropFirst()))
                #expect(answer.hasPrefix("none of "), "launch \(launch): \(answer)")
            }
        }
    }

    @Test("/proc is the worker's own: no system-wide files, no host process")
    func ownProc() async throws {
        try await withProbe { (probe: Probe, _: TestHost) async throws in
            #expect(try await probe("stat", "/proc/sys/kernel/core_pattern") == "refused ENOENT")
            #expect(try await probe("stat", "/proc/sysrq-trigger") == "refused ENOENT")
            #expect(try await probe("stat", "/proc/\(getpid())") == "refused ENOENT")
            #expect(try await probe("stat", "/proc/1") == "done exists")
            #expect(try await probe("read", "/etc/passwd") == "refused ENOENT")
        }
    }

    @Test("a symlink planted in an approved grant after the approval never redirects it")
    func plantedSymlink() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        chmod(directory.path, 0o755)
        let data = directory.path + "/data"
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        try Data("granted".utf8).write(to: URL(fileURLWithPath: data + "/file"))
        chmod(data, 0o755)
        chmod(data + "/file", 0o644)
        var test = try TestHost()
        defer { test.remove() }
        test.host.confinement = .required
        let fixture = PluginFixture(library: "FaultyHostileProbe", extra: ["permissions": ["read": [data]]])
        try test.install(fixture, bundled: false)
        try PolicyEditor(directory: test.host.policyDirectory).approve(
            try #require(Inventory.take(host: test.host).item(fixture.identifier)?.entry))
        // After the approval, the granted directory becomes a symlink to somewhere else.
        try FileManager.default.moveItem(atPath: data, toPath: directory.path + "/moved")
        try FileManager.default.createSymbolicLink(atPath: data, withDestinationPath: "/etc")
        let process = try await AppExtensionProcess(configuration: try test.configuration(fixture.identifier))
        let probe = Probe(process: process)
        #expect(try await probe("read", data + "/passwd") == "refused ENOENT")
        #expect(try await probe("read", "/etc/passwd") == "refused ENOENT")
        let view = process.confinement.first { $0.name == "filesystem-view" }
        #expect(view?.detail.contains("left out: \(data)") == true, "\(view?.detail ?? "")")
        await process.invalidateAndWait()
    }

    /// A plugin that asks the kernel for what the two tests below name: "pdeathsig N" sets its
    /// parent-death signal to N; "chmod-exe MODE" changes the mode (octal) of the file it runs
    /// from, the launcher image every launcher of its host is exec'd from; "exe-mode" says that
    /// file's mode. Answers "done" and a number, or "refused" and the errno's name.
    static func processProbe(in test: TestHost, identifier: String = "org.plugind.tests.processprobe") async throws -> PluginFixture {
        let library = test.directory.path + "/libProcessProbe.so"
        if access(library, F_OK) != 0 {
            try await CCompiler.sharedLibrary(
                """
                #define _GNU_SOURCE
                #include <errno.h>
                #include <plugind_plugin.h>
                #include <stdio.h>
                #include <stdlib.h>
                #include <string.h>
                #include <sys/prctl.h>
                #include <sys/stat.h>
                static const plugind_host *host;
                static int32_t start(const plugind_host *given, void **state, plugind_plugin_response *error) {
                    (void)state; (void)error; host = given; return PLUGIND_PLUGIN_OK;
                }
                static int32_t handle(void *state, const plugind_plugin_request *request, plugind_plugin_response *response) {
                    (void)state;
                    char text[64] = {0}, answer[64];
                    memcpy(text, request->bytes, request->length < 63 ? request->length : 63);
                    const char *argument = strchr(text, ' ') != NULL ? strchr(text, ' ') + 1 : "";
                    struct stat status;
                    long result = -1;
                    errno = EINVAL;
                    if (strncmp(text, "pdeathsig ", 10) == 0) result = prctl(PR_SET_PDEATHSIG, strtol(argument, NULL, 10));
                    if (strncmp(text, "chmod-exe ", 10) == 0) result = chmod("/proc/self/exe", (mode_t)strtol(argument, NULL, 8));
                    if (strncmp(text, "exe-mode ", 9) == 0 && stat("/proc/self/exe", &status) == 0) result = status.st_mode & 07777;
                    if (result < 0) snprintf(answer, sizeof answer, "refused %s", strerrorname_np(errno));
                    else snprintf(answer, sizeof answer, "done %lo", result);
                    return host->append(response, (const unsigned char *)answer, strlen(answer));
                }
                static const plugind_plugin descriptor = {.abi_version = PLUGIND_PLUGIN_ABI_VERSION, .size = sizeof(plugind_plugin),
                    .name = "ProcessProbe", .version = "1.0.0", .init = start, .handle = handle};
                PLUGIND_PLUGIN_EXPORT const plugind_plugin *plugind_plugin_entry(void) { return &descriptor; }
                """, output: library)
        }
        return PluginFixture(library: "ProcessProbe", identifier: identifier, libraryPath: library)
    }

    @Test("a plugin cannot clear or change its parent-death signal (SIGKILL it may set): its worker never outlives its host")
    func parentDeathSignal() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let probe = Probe(process: try await test.launch(try await Self.processProbe(in: test)))
        // Cleared on every thread (a handler of the plugin's runs on the thread that waits), it
        // would leave the worker running, confined but unwatched, after its host was killed.
        #expect(try await probe("pdeathsig", "0") == "refused EPERM")
        #expect(try await probe("pdeathsig", "\(SIGCHLD)") == "refused EPERM")
        #expect(try await probe("pdeathsig", "\(SIGKILL)") == "done 0")
        await probe.process.invalidateAndWait()
    }

    @Test(
        "a worker that changes the mode of the launcher image it runs from stops no later launch, and the image is execute-only again"
    )
    func launcherImageMode() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let worker = try BuiltProducts.worker()
        var status = stat()
        #expect(stat(worker, &status) == 0)
        let hostile = Probe(process: try await test.launch(try await Self.processProbe(in: test)))
        let inPlace = LauncherImages.needsNoCopy(worker)
        if inPlace {
            // Launchers run the worker executable itself, which root owns: no worker may change it.
            #expect(try await hostile("chmod-exe", "0") == "refused EPERM")
        } else {
            // An ordinary user's worker owns the image (root's does not: refused, and the rest
            // holds as it is). Readable, a launcher exec'd from it is dumpable until it says
            // otherwise; without its execute bits, every later launcher's exec would fail, in
            // every pool of the host.
            _ = try await hostile("chmod-exe", "755")
            _ = try await hostile("chmod-exe", "0")
        }
        // Each launch takes a spare and has the pool fork the next from a launcher exec'd now.
        var mode = ""
        for launch in 1...3 {
            await LaunchPool.settleAll()
            let fixture = try await Self.processProbe(in: test, identifier: "org.plugind.tests.processprobe\(launch)")
            let probe = Probe(process: try await test.launch(fixture))
            mode = try await probe("exe-mode")
            await probe.process.invalidateAndWait()
        }
        #expect(mode == (inPlace ? "done " + String(status.st_mode & 0o7777, radix: 8) : "done 111"))
        await hostile.process.invalidateAndWait()
    }

    @Test("launchers run the worker executable itself only when root owns it and its directories and a copy would protect nothing")
    func launcherImageChoice() throws {
        // Root's, readable by all: enough for a root host (nobody else may trace root's
        // processes), not for another user's (a launcher exec'd from a readable file is dumpable).
        #expect(LauncherImages.needsNoCopy("/usr/bin/true") == (geteuid() == 0))
        let test = try TestHost()
        defer { test.remove() }
        let worker = test.directory.path + "/worker"
        #expect(FileManager.default.createFile(atPath: worker, contents: Data([0x7f]), attributes: [.posixPermissions: 0o711]))
        // In a directory every user may write (and, for an ordinary user, owned by that user).
        #expect(chmod(test.directory.path, 0o777) == 0)
        #expect(!LauncherImages.needsNoCopy(worker))
        #expect(!LauncherImages.needsNoCopy(test.directory.path + "/missing"))
    }
}
