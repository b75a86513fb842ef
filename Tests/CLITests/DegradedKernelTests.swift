import Foundation
import Glibc
import TestSupport
import Testing

#if arch(x86_64)
    private let degradationSupported = true
#else
    private let degradationSupported = false
#endif

/// The security cases on kernels that lack a layer: user namespaces refused, no Landlock, no
/// control groups. Each is simulated from outside plugind, for `plugind` and every process it
/// starts: an outer seccomp filter makes the kernel refuse the calls (as a kernel built without
/// them, or a distribution's policy, would), or a mount namespace hides /sys/fs/cgroup. Each
/// asserts that the layer is reported unavailable with its reason, that a host requiring every
/// layer refuses to launch, and that what remains still holds, beside a well-behaved probe that
/// must work under every layer.
@Suite(
    "Degraded kernels", .tags(.process, .root), .serialized, .timeLimit(.minutes(5)),
    .enabled(if: degradationSupported, "the outer filter is x86-64 BPF")
)
struct DegradedKernelTests {
    /// `degrade MODE PROGRAM ARGS…`: runs PROGRAM with the kernel made to lack one layer.
    static let helperSource = #"""
        #define _GNU_SOURCE
        #include <errno.h>
        #include <linux/audit.h>
        #include <linux/filter.h>
        #include <linux/seccomp.h>
        #include <sched.h>
        #include <stddef.h>
        #include <stdio.h>
        #include <string.h>
        #include <sys/mount.h>
        #include <sys/prctl.h>
        #include <sys/syscall.h>
        #include <unistd.h>

        #define LOAD(field) BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, field))
        #define IS(value, yes, no) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (value), (yes), (no))
        #define RETURN(action) BPF_STMT(BPF_RET | BPF_K, (action))

        int main(int argc, char **argv) {
            if (argc < 3) return 64;
            if (strcmp(argv[1], "no-cgroups") == 0) {
                // No control group hierarchy at all, as in a container that mounts none.
                if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
                    mount("none", "/sys/fs/cgroup", "tmpfs", MS_NOSUID | MS_NODEV, "size=4k") != 0) {
                    perror("degrade: hide /sys/fs/cgroup");
                    return 70;
                }
            } else if (strcmp(argv[1], "no-libseccomp") == 0) {
                // libseccomp gone (its package removed, a broken upgrade): an empty file where the
                // library was, wherever the loader looks for it.
                if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
                    perror("degrade: a mount namespace");
                    return 70;
                }
                const char *paths[] = {"/usr/lib/x86_64-linux-gnu/libseccomp.so.2", "/lib/x86_64-linux-gnu/libseccomp.so.2"};
                int hidden = 0;
                for (size_t index = 0; index < sizeof paths / sizeof paths[0]; index++) {
                    if (access(paths[index], F_OK) == 0 && mount("/dev/null", paths[index], NULL, MS_BIND, NULL) == 0) hidden++;
                }
                if (hidden == 0) {
                    fprintf(stderr, "degrade: libseccomp.so.2 not found to hide\n");
                    return 70;
                }
            } else {
                struct sock_filter user[] = {
                    LOAD(arch), IS(AUDIT_ARCH_X86_64, 1, 0), RETURN(SECCOMP_RET_ALLOW),
                    LOAD(nr), IS(SYS_clone3, 0, 1), RETURN(SECCOMP_RET_ERRNO | ENOSYS),
                    IS(SYS_clone, 2, 0), IS(SYS_unshare, 1, 0), RETURN(SECCOMP_RET_ALLOW),
                    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
                    BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, CLONE_NEWUSER, 0, 1), RETURN(SECCOMP_RET_ERRNO | EPERM),
                    RETURN(SECCOMP_RET_ALLOW),
                };
                struct sock_filter landlock[] = {
                    LOAD(arch), IS(AUDIT_ARCH_X86_64, 1, 0), RETURN(SECCOMP_RET_ALLOW),
                    LOAD(nr), BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 444, 0, 2), BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, 446, 1, 0),
                    RETURN(SECCOMP_RET_ERRNO | ENOSYS), RETURN(SECCOMP_RET_ALLOW),
                };
                struct sock_fprog program;
                if (strcmp(argv[1], "no-user-namespaces") == 0) {
                    program = (struct sock_fprog){sizeof user / sizeof user[0], user};
                } else if (strcmp(argv[1], "no-landlock") == 0) {
                    program = (struct sock_fprog){sizeof landlock / sizeof landlock[0], landlock};
                } else {
                    return 64;
                }
                if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
                    perror("degrade: install the filter");
                    return 70;
                }
            }
            execvp(argv[2], argv + 2);
            perror("degrade: exec");
            return 127;
        }
        """#

    enum Degradation: String, CaseIterable, CustomTestStringConvertible {
        case noUserNamespaces = "no-user-namespaces"
        case noLandlock = "no-landlock"
        case noControlGroups = "no-cgroups"
        case noLibseccomp = "no-libseccomp"

        /// The kernel's layers, each missing in turn (`noLibseccomp` is a library, tested apart).
        static let kernelLayers: [Degradation] = [.noUserNamespaces, .noLandlock, .noControlGroups]

        var testDescription: String { rawValue }

        /// A layer a host requiring every layer names when it refuses, and its reason.
        var missing: (layer: String, reason: String)? {
            switch self {
            case .noUserNamespaces: ("process-tree", "not started in its own pid namespace")
            case .noLandlock: ("filesystem", "the kernel does not offer Landlock")
            case .noControlGroups: nil
            case .noLibseccomp: ("system-calls", "the seccomp filter could not be installed")
            }
        }

        /// What a read of a file of the owner's gets: hidden by the view, or refused by Landlock
        /// where there is no view.
        var ownerFile: String { self == .noUserNamespaces ? "refused EACCES" : "refused ENOENT" }
    }

    struct Harness {
        let test: TestHost
        let helper: String
        let identifier = "org.plugind.tests.faultyhostileprobe"

        func plugind(_ degradation: Degradation, _ arguments: [String]) async throws -> CommandRunner.Output {
            var environment = test.environment
            environment["PLUGIND_WORKER"] = try BuiltProducts.worker()
            return try await CommandRunner.run(
                helper, [degradation.rawValue, try BuiltProducts.plugind()] + arguments, environment: environment)
        }
    }

    static func harness(permissions: [String: Any] = [:]) async throws -> Harness {
        let test = try TestHost()
        let helper = test.directory.path + "/degrade"
        try await CCompiler.executable(helperSource, output: helper)
        try await installApproved(PluginFixture(library: "FaultyHostileProbe", extra: ["permissions": permissions]), in: test)
        return Harness(test: test, helper: helper)
    }

    @Test(
        "each missing layer is reported with its reason, a host requiring every layer refuses, and what remains holds",
        arguments: Degradation.kernelLayers)
    func degraded(_ degradation: Degradation) async throws {
        if degradation == .noControlGroups && geteuid() != 0 {
            // An ordinary user's host has no control group to lose (none is delegated here).
            return
        }
        let harness = try await Self.harness()
        defer { harness.test.remove() }
        let secret = try harness.test.directory.publicFile("owner-secret", contents: "the owner's")
        let id = harness.identifier

        if let missing = degradation.missing {
            let refused = try await harness.plugind(degradation, ["run", id, "well-behaved"])
            #expect(refused.status != 0)
            #expect(refused.stdout.isEmpty)
            #expect(
                refused.stderr.contains("confinement layer '\(missing.layer)' cannot be applied: \(missing.reason)"),
                "\(degradation): \(refused.stderr)")
        }
        let bestEffort = ["run", "--best-effort", id]
        let control = try await harness.plugind(degradation, bestEffort + ["well-behaved"])
        #expect(control.stdout == "done threads, futexes, getrandom, mmap, rseq and a socketpair work", "\(degradation): \(control.stderr)")
        if let missing = degradation.missing {
            #expect(
                control.stderr.contains("warning: confinement layer '\(missing.layer)' is unavailable on this machine: \(missing.reason)"),
                "\(degradation): \(control.stderr)")
        } else {
            #expect(!control.stderr.contains("warning:"), "\(control.stderr)")
        }
        // What the other layers stop, they still stop.
        let remaining: [(String, String)] = [
            ("read " + secret, degradation.ownerFile), ("socket-inet", "refused EACCES"), ("unshare", "refused EPERM"),
            ("bpf", "refused EPERM"), ("fork", "refused EPERM"),
        ]
        for (request, expected) in remaining {
            let answer = try await harness.plugind(degradation, bestEffort + ["--quiet", request])
            #expect(answer.stdout == expected, "\(degradation) \(request): \(answer.stdout) \(answer.stderr)")
        }
    }

    @Test(
        "without control groups, a plugin that may start processes still runs, and info says its children are not bounded as a whole",
        .enabled(if: geteuid() == 0, "an ordinary user's host has no control group to lose"))
    func processesWithoutControlGroups() async throws {
        let harness = try await Self.harness(permissions: ["processes": true])
        defer { harness.test.remove() }
        let forked = try await harness.plugind(.noControlGroups, ["run", harness.identifier, "fork"])
        #expect(forked.stdout == "done forked", "\(forked.stderr)")
        let info = try await harness.plugind(.noControlGroups, ["info", harness.identifier, "--no-probe"])
        #expect(info.stdout.contains("no control group is usable on this machine"), "\(info.stdout)")
    }

    @Test(
        "without libseccomp the system-call layer is reported unavailable naming the library, a host requiring every layer refuses, and the view still holds",
        .enabled(if: geteuid() == 0, "hiding a system library takes a mount namespace"))
    func withoutLibseccomp() async throws {
        let harness = try await Self.harness()
        defer { harness.test.remove() }
        let id = harness.identifier
        let refused = try await harness.plugind(.noLibseccomp, ["run", id, "well-behaved"])
        #expect(refused.status != 0)
        #expect(refused.stdout.isEmpty)
        #expect(
            refused.stderr.contains("confinement layer 'system-calls' cannot be applied: the seccomp filter could not be installed"),
            "\(refused.stderr)")
        // The loader's own words name the library.
        #expect(refused.stderr.contains("libseccomp.so.2"), "\(refused.stderr)")
        let control = try await harness.plugind(.noLibseccomp, ["run", "--best-effort", id, "well-behaved"])
        #expect(control.stdout == "done threads, futexes, getrandom, mmap, rseq and a socketpair work", "\(control.stderr)")
        #expect(control.stderr.contains("warning: confinement layer 'system-calls' is unavailable on this machine"), "\(control.stderr)")
        let secret = try harness.test.directory.publicFile("owner-secret", contents: "the owner's")
        let read = try await harness.plugind(.noLibseccomp, ["run", "--best-effort", "--quiet", id, "read " + secret])
        #expect(read.stdout == "refused ENOENT", "\(read.stdout) \(read.stderr)")
    }
}
