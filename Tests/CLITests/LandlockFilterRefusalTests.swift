import Foundation
import Glibc
import TestSupport
import Testing

#if arch(x86_64)
    private let filterSupported = true
#else
    private let filterSupported = false
#endif

/// A kernel that offers Landlock, under a seccomp filter that refuses its calls with EPERM, as
/// systemd-nspawn's default filter and some container profiles do: the filesystem layer's reason
/// says a filter refuses the call and the kernel may support Landlock, where a kernel without it
/// (`DegradedKernelTests`, an outer filter answering ENOSYS) is said not to offer it. The same
/// words reach a host requiring every layer, a best-effort host's warning and `plugind info`.
@Suite(
    "Landlock refused by a container's filter", .tags(.process), .serialized, .timeLimit(.minutes(3)),
    .enabled(if: filterSupported, "the outer filter is x86-64 BPF")
)
struct LandlockFilterRefusalTests {
    /// `refuse-landlock PROGRAM ARGS…`: runs PROGRAM with landlock_create_ruleset,
    /// landlock_add_rule and landlock_restrict_self (444–446) refused with EPERM.
    static let helperSource = #"""
        #include <errno.h>
        #include <linux/audit.h>
        #include <linux/filter.h>
        #include <linux/seccomp.h>
        #include <stddef.h>
        #include <stdio.h>
        #include <sys/prctl.h>
        #include <unistd.h>

        int main(int argc, char **argv) {
            if (argc < 2) return 64;
            struct sock_filter refuse[] = {
                BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
                BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
                BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
                BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 444, 0, 2), BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, 446, 1, 0),
                BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
            };
            struct sock_fprog program = {sizeof refuse / sizeof refuse[0], refuse};
            if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
                perror("refuse-landlock: install the filter");
                return 70;
            }
            execvp(argv[1], argv + 1);
            perror("refuse-landlock: exec");
            return 127;
        }
        """#

    static let reason =
        "a seccomp filter of this container or service refuses landlock_create_ruleset (EPERM); the kernel may support Landlock"

    @Test("a host requiring every layer names the filter, a best-effort host warns so and runs, and info says it")
    func refusedByFilter() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let helper = test.directory.path + "/refuse-landlock"
        try await CCompiler.executable(Self.helperSource, output: helper)
        let fixture = PluginFixture(library: "FaultyHostileProbe")
        try await installApproved(fixture, in: test)
        var environment = test.environment
        environment["PLUGIND_WORKER"] = try BuiltProducts.worker()
        func plugind(_ arguments: [String]) async throws -> CommandRunner.Output {
            try await CommandRunner.run(helper, [try BuiltProducts.plugind()] + arguments, environment: environment)
        }

        let refused = try await plugind(["run", fixture.identifier, "well-behaved"])
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("confinement layer 'filesystem' cannot be applied: \(Self.reason)"), "\(refused.stderr)")

        let bestEffort = try await plugind(["run", "--best-effort", fixture.identifier, "well-behaved"])
        #expect(bestEffort.stdout == "done threads, futexes, getrandom, mmap, rseq and a socketpair work", "\(bestEffort.stderr)")
        #expect(
            bestEffort.stderr.contains("warning: confinement layer 'filesystem' is unavailable on this machine: \(Self.reason)"),
            "\(bestEffort.stderr)")

        let info = try await plugind(["info", fixture.identifier])
        #expect((info.stdout + info.stderr).contains(Self.reason), "\(info.stdout) \(info.stderr)")
    }
}
