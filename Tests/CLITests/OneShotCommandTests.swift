import Foundation
import TestSupport
import Testing

/// `plugind run` and `plugind call` launch one plugin once and exit: they exec the one launcher
/// their worker needs and leave no process behind, running or a zombie.
@Suite("plugind run and call: one launch, nothing left behind", .tags(.process), .serialized, .timeLimit(.minutes(5)))
struct OneShotCommandTests {
    /// Runs its arguments as a child and, once that child has exited, reports every process left
    /// to it (`left: PID STATE NAME`), kills and reaps them, and exits with the child's status.
    /// As the child subreaper, it inherits every orphan of the child's tree, and the kernel hands
    /// them over while the child exits, before its parent can learn that it did: what is left is
    /// known the moment the wait returns, with no guess at how long anything takes.
    static let subreaperSource = """
        #include <dirent.h>
        #include <signal.h>
        #include <stdio.h>
        #include <stdlib.h>
        #include <string.h>
        #include <sys/prctl.h>
        #include <sys/wait.h>
        #include <unistd.h>

        int main(int argc, char **argv) {
            if (argc < 2 || prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) return 125;
            pid_t child = fork();
            if (child < 0) return 125;
            if (child == 0) {
                execv(argv[1], argv + 1);
                _exit(126);
            }
            int status = 0;
            if (waitpid(child, &status, 0) != child) return 125;
            char path[64];
            snprintf(path, sizeof path, "/proc/self/task/%d/children", (int)getpid());
            FILE *children = fopen(path, "r");
            int pid;
            while (children && fscanf(children, "%d", &pid) == 1) {
                char stat[512] = "", statPath[64];
                snprintf(statPath, sizeof statPath, "/proc/%d/stat", pid);
                FILE *file = fopen(statPath, "r");
                if (file) {
                    if (!fgets(stat, sizeof stat, file)) stat[0] = 0;
                    fclose(file);
                }
                char *close = strrchr(stat, ')');
                char *open = strchr(stat, '(');
                if (close && open) *close = 0;
                fprintf(stderr, "left: %d %c %s\\n", pid, close ? close[2] : '?', open ? open + 1 : "?");
                kill(pid, SIGKILL);
                waitpid(pid, NULL, 0);
            }
            if (children) fclose(children);
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        }
        """

    /// Runs `plugind ARGUMENTS` under the subreaper, with the launch trace on.
    func plugindUnderSubreaper(_ arguments: [String], in test: TestHost) async throws -> CommandRunner.Output {
        let subreaper = test.directory.path + "/subreaper"
        if !FileManager.default.fileExists(atPath: subreaper) {
            try await CCompiler.executable(Self.subreaperSource, output: subreaper)
        }
        var environment = test.environment
        environment["PLUGIND_WORKER"] = try BuiltProducts.worker()
        environment["PLUGIND_TRACE"] = "1"
        return try await CommandRunner.run(subreaper, [try BuiltProducts.plugind()] + arguments, environment: environment)
    }

    func left(_ output: CommandRunner.Output) -> [String] {
        output.stderr.split(separator: "\n").filter { $0.hasPrefix("left: ") }.map(String.init)
    }

    func launchers(_ output: CommandRunner.Output) -> Int {
        output.stderr.split(separator: "\n").filter { $0.hasPrefix("plugind trace: ") && $0.contains(" launcher started, pid ") }.count
    }

    @Test("plugind run: one launcher, its worker's answer, and no process left, also when the plugin fails or is not found")
    func run() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let echo = PluginFixture(library: "Echo")
        try await installApproved(echo, in: test)
        let answered = try await plugindUnderSubreaper(["run", echo.identifier, "hello"], in: test)
        #expect(answered.status == 0, "\(answered.stderr)")
        #expect(answered.stdout == "hello")
        #expect(left(answered).isEmpty, "\(answered.stderr)")
        #expect(launchers(answered) == 1, "\(answered.stderr)")

        let crash = PluginFixture(library: "FaultySegfault")
        try await installApproved(crash, in: test)
        let crashed = try await plugindUnderSubreaper(["run", crash.identifier, "x"], in: test)
        #expect(crashed.status == 70, "\(crashed.stderr)")
        #expect(left(crashed).isEmpty, "\(crashed.stderr)")
        #expect(launchers(crashed) == 1, "\(crashed.stderr)")

        // The launcher exec'd ahead of a launch that never comes is ended and reaped too.
        let missing = try await plugindUnderSubreaper(["run", "org.plugind.tests.nothing", "x"], in: test)
        #expect(missing.status == 69, "\(missing.stderr)")
        #expect(left(missing).isEmpty, "\(missing.stderr)")
        #expect(launchers(missing) <= 1, "\(missing.stderr)")
    }

    @Test("plugind call: one launcher, the result, and no process left, also for a usage error")
    func call() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let path = BuiltProducts.packageRoot + "/ExamplePlugins/FunctionLibrary/manifest.json"
        let manifest = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any]
        let fixture = PluginFixture(library: "FunctionLibrary", extra: ["functions": manifest?["functions"] ?? []])
        try await installApproved(fixture, in: test)
        let called = try await plugindUnderSubreaper(["call", fixture.identifier, "add_int64", "2", "40"], in: test)
        #expect(called.status == 0, "\(called.stderr)")
        #expect(called.stdout == "42\n")
        #expect(left(called).isEmpty, "\(called.stderr)")
        #expect(launchers(called) == 1, "\(called.stderr)")

        let refused = try await plugindUnderSubreaper(["call", fixture.identifier, "identity_int8", "128"], in: test)
        #expect(refused.status == 64, "\(refused.stderr)")
        #expect(left(refused).isEmpty, "\(refused.stderr)")
        #expect(launchers(refused) <= 1, "\(refused.stderr)")
    }
}
