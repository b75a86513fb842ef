import ExtensionFoundation
import Foundation
import Glibc
import PlugindEngine
import TestSupport
import Testing

#if arch(x86_64)
    private let filterSupported = true
#else
    private let filterSupported = false
#endif

/// One policy on missing layers for the whole machine: under an outer seccomp filter that
/// refuses Landlock with EPERM (as systemd-nspawn's does; the helper of
/// `LandlockFilterRefusalTests`), a launch is refused with nothing stated and the message says
/// how to accept the layers; once the owner's policy accepts them, `plugind run`, a C host and
/// a Python host run the plugin without them, and `info` says they are accepted and missing;
/// withdrawn, the launch is refused again, with no restart of anything.
@Suite(
    "Missing layers accepted by the machine's policy", .tags(.process), .serialized, .timeLimit(.minutes(5)),
    .enabled(if: filterSupported, "the outer filter is x86-64 BPF")
)
struct AcceptedMissingLayersTests {
    static let wellBehaved = "done threads, futexes, getrandom, mmap, rseq and a socketpair work"

    /// Launches the one plugin of the point in argv[1] and sends it "well-behaved": prints the
    /// reply, or the error's code and message and exits 3.
    static let cHost = #"""
        #include <plugind/plugind.h>
        #include <stdio.h>
        #include <stdlib.h>
        #include <string.h>

        static void fail(const char *what, plugind_error *error) {
            printf("%s failed: %d %s\n", what, plugind_error_code_of(error), plugind_error_message(error));
            plugind_error_free(error);
            exit(3);
        }

        int main(int argc, char **argv) {
            if (argc != 2) return 2;
            plugind_error *error = NULL;
            plugind_monitor *monitor = plugind_monitor_create(argv[1], PLUGIND_SCOPE_NONE, &error);
            if (monitor == NULL) fail("plugind_monitor_create", error);
            plugind_identity *identity = plugind_monitor_identity_at(monitor, 0, &error);
            if (identity == NULL) fail("plugind_monitor_identity_at", error);
            plugind_monitor_release(monitor);
            plugind_process *process = plugind_process_create(identity, NULL, NULL, &error);
            plugind_identity_release(identity);
            if (process == NULL) fail("plugind_process_create", error);
            plugind_connection *connection = plugind_connection_open(process, NULL, NULL, &error);
            if (connection == NULL) fail("plugind_connection_open", error);
            static const char request[] = "well-behaved";
            uint8_t *reply = NULL;
            size_t length = 0;
            if (plugind_connection_send(connection, (const uint8_t *)request, strlen(request), 0, &reply, &length, &error) != 0) {
                fail("plugind_connection_send", error);
            }
            printf("%.*s\n", (int)length, (const char *)reply);
            plugind_bytes_free(reply);
            plugind_connection_close(connection);
            plugind_process_release(process);
            return 0;
        }
        """#

    /// The same from Python: the reply, or "refused <code>: <message>" and status 3.
    static let pythonHost = """
        import sys
        import plugind

        monitor = plugind.Monitor(sys.argv[1])
        try:
            with plugind.Process(monitor.identities[0]) as process, process.connect() as connection:
                print(connection.send(b"well-behaved").decode())
        except plugind.Error as error:
            print("refused %s: %s" % (error.code, error.message))
            sys.exit(3)
        """

    struct Harness {
        let test: TestHost
        let helper: String
        let cHost: String
        let fixture = PluginFixture(library: "FaultyHostileProbe")
        let environment: [String: String]

        /// `plugind` under the filter that refuses Landlock.
        func plugind(_ arguments: [String]) async throws -> CommandRunner.Output {
            try await CommandRunner.run(helper, [try BuiltProducts.plugind()] + arguments, environment: environment)
        }

        /// `plugind` as it is, to change the policy.
        func policy(_ arguments: [String]) async throws -> CommandRunner.Output {
            try await CommandRunner.run(try BuiltProducts.plugind(), ["policy"] + arguments, environment: environment)
        }

        func c() async throws -> CommandRunner.Output {
            try await CommandRunner.run(helper, [cHost, fixture.extensionPoint], environment: environment)
        }

        func python(site: String) async throws -> CommandRunner.Output {
            var environment = environment
            environment["PLUGIND_LIBRARY"] = BuiltProducts.directory + "/libPlugindHost.so"
            environment["PYTHONDONTWRITEBYTECODE"] = "1"
            environment["PYTHONPATH"] = site
            return try await CommandRunner.run(
                helper, ["/usr/bin/python3", "-c", AcceptedMissingLayersTests.pythonHost, fixture.extensionPoint],
                environment: environment)
        }
    }

    static func harness() async throws -> Harness {
        let test = try TestHost()
        let helper = test.directory.path + "/refuse-landlock"
        try await CCompiler.executable(LandlockFilterRefusalTests.helperSource, output: helper)
        let cHost = test.directory.path + "/accepting_host"
        try await CCompiler.executable(
            Self.cHost, output: cHost,
            flags: [
                "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", BuiltProducts.packageRoot + "/Sources/CPlugindHostAPI/include",
                "-L", BuiltProducts.directory, "-lPlugindHost", "-Wl,-rpath," + BuiltProducts.directory,
            ])
        var environment = test.environment
        environment["PLUGIND_WORKER"] = try BuiltProducts.worker()
        let harness = Harness(test: test, helper: helper, cHost: cHost, environment: environment)
        try await installApproved(harness.fixture, in: test)
        return harness
    }

    static let refusal =
        "confinement layer 'filesystem' cannot be applied: a seccomp filter of this container or service refuses "
        + "landlock_create_ruleset (EPERM); the kernel may support Landlock; nor can 'signals'"

    @Test("refused with nothing stated, saying how to accept; run, C and Python once the owner accepts; refused again when withdrawn")
    func acceptedByOwner() async throws {
        let harness = try await Self.harness()
        defer { harness.test.remove() }
        let id = harness.fixture.identifier
        let site = try await PythonPackage.installed(in: harness.test.directory.path)
        let ownerFile = harness.test.host.policyDirectory.path + "/policy.json"

        let refused = try await harness.plugind(["run", id, "well-behaved"])
        #expect(refused.status != 0)
        #expect(refused.stdout.isEmpty)
        #expect(refused.stderr.contains(Self.refusal), "\(refused.stderr)")
        #expect(
            refused.stderr.contains(
                "to run plugins without them on this machine, run 'plugind policy accept-missing filesystem signals' (adds "
                    + "\"filesystem\" and \"signals\" to acceptMissingLayers in \(ownerFile)"),
            "\(refused.stderr)")
        let cRefused = try await harness.c()
        #expect(cRefused.status == 3, "\(cRefused.stdout) \(cRefused.stderr)")
        #expect(
            cRefused.stdout.contains(Self.refusal) && cRefused.stdout.contains("accept-missing filesystem signals"), "\(cRefused.stdout)")

        let accepted = try await harness.policy(["accept-missing", "filesystem", "signals"])
        #expect(accepted.status == 0, "\(accepted.stderr)")
        #expect(accepted.stderr.contains("Missing layers accepted on this machine now: filesystem, signals."), "\(accepted.stderr)")

        let run = try await harness.plugind(["run", id, "well-behaved"])
        #expect(run.stdout == Self.wellBehaved, "\(run.stderr)")
        #expect(run.stderr.contains("warning: confinement layer 'filesystem' is unavailable on this machine"), "\(run.stderr)")
        let c = try await harness.c()
        #expect(c.status == 0, "\(c.stdout) \(c.stderr)")
        #expect(c.stdout == Self.wellBehaved + "\n", "\(c.stderr)")
        let python = try await harness.python(site: site)
        #expect(python.status == 0, "\(python.stdout) \(python.stderr)")
        #expect(python.stdout == Self.wellBehaved + "\n", "\(python.stderr)")

        let info = try await harness.plugind(["info", id])
        #expect(info.stdout.contains("accepted missing on this machine: filesystem (missing now), signals (missing now)"), "\(info.stdout)")
        #expect(info.stdout.contains("[accepted missing by \(ownerFile)]"), "\(info.stdout)")
        let json = try await harness.plugind(["info", id, "--json"])
        let document = try #require(try JSONSerialization.jsonObject(with: Data(json.standardOutput)) as? [String: Any])
        let layers = try #require(document["acceptedMissingLayers"] as? [[String: Any]])
        #expect(layers.map { $0["layer"] as? String } == ["filesystem", "signals"])
        #expect(layers.map { $0["missingNow"] as? Bool } == [true, true])
        #expect(layers.map { $0["acceptedBy"] as? [String] } == [[ownerFile], [ownerFile]])

        // Only what is accepted: the signals alone leave the filesystem layer refusing.
        let withdrawn = try await harness.policy(["accept-missing", "--revoke", "filesystem"])
        #expect(withdrawn.status == 0, "\(withdrawn.stderr)")
        let partly = try await harness.plugind(["run", id, "well-behaved"])
        #expect(partly.status != 0)
        #expect(partly.stderr.contains("confinement layer 'filesystem' cannot be applied"), "\(partly.stderr)")
        #expect(!partly.stderr.contains("nor can 'signals'"), "\(partly.stderr)")
        #expect(partly.stderr.contains("run 'plugind policy accept-missing filesystem'"), "\(partly.stderr)")

        _ = try await harness.policy(["accept-missing", "--revoke", "signals"])
        let again = try await harness.plugind(["run", id, "well-behaved"])
        #expect(again.status != 0)
        #expect(again.stderr.contains(Self.refusal), "\(again.stderr)")
        let pythonAgain = try await harness.python(site: site)
        #expect(pythonAgain.status == 3, "\(pythonAgain.stdout) \(pythonAgain.stderr)")
        #expect(pythonAgain.stdout.contains("refused confinementUnavailable: "), "\(pythonAgain.stdout)")
        #expect(pythonAgain.stdout.contains("accept-missing filesystem signals"), "\(pythonAgain.stdout)")
    }

    @Test("the administrator's acceptance holds for the owner; an administrator who forbids it leaves the owner's unused")
    func administrator() async throws {
        let harness = try await Self.harness()
        defer { harness.test.remove() }
        let id = harness.fixture.identifier
        let adminFile = harness.test.host.administratorPolicyDirectory.path + "/policy.json"
        let accepted = try await harness.policy(["accept-missing", "filesystem", "signals", "--administrator"])
        #expect(accepted.status == 0, "\(accepted.stderr)")
        let run = try await harness.plugind(["run", id, "well-behaved"])
        #expect(run.stdout == Self.wellBehaved, "\(run.stderr)")

        // The administrator keeps the filesystem layer and forbids owners to add to the list.
        try Data(#"{"version": 2, "acceptMissingLayers": ["signals"], "ownersMayAcceptMissingLayers": false}"#.utf8)
            .write(to: URL(fileURLWithPath: adminFile))
        let mine = try await harness.policy(["accept-missing", "filesystem"])
        #expect(mine.status != 0)
        #expect(mine.stderr.contains("does not let owners accept missing layers"), "\(mine.stderr)")
        let refused = try await harness.plugind(["run", id, "well-behaved"])
        #expect(refused.status != 0)
        #expect(
            refused.stderr.contains("the administrator can run 'plugind policy accept-missing filesystem --administrator'"),
            "\(refused.stderr)")

        let check = try await harness.policy(["check"])
        #expect(
            check.stdout.contains(
                "\(adminFile) (administrator): ok, 0 plugin(s); accepts missing: signals; owners may not accept missing layers"),
            "\(check.stdout)")

        // A name that is no layer: the file is refused, naming it and the layers.
        try Data(#"{"version": 2, "acceptMissingLayers": ["landlock"]}"#.utf8).write(to: URL(fileURLWithPath: adminFile))
        let broken = try await harness.policy(["check"])
        #expect(broken.status != 0)
        #expect(
            broken.stdout.contains("names an unknown layer in acceptMissingLayers: 'landlock' is not a confinement layer"),
            "\(broken.stdout)")
        let usage = try await harness.policy(["accept-missing", "landlock"])
        #expect(usage.status != 0)
        #expect(usage.stderr.contains("its layers are 'filesystem' and 'signals'"), "\(usage.stderr)")
    }
}
