import CTestSupport
import ExtensionFoundation
import Foundation
import Glibc
import PlugindBundle
import PlugindEngine
import PlugindPolicyEditing
import Synchronization
import TestSupport
import Testing

/// The owner's approval holds the bytes it approved, and nothing a plugin or another user
/// controls can make plugind load, verify or trust anything else. Each test is an attack the
/// outside review found; each failed before the change that closed it.
@Suite(
    "Integrity: exactly the approved bytes, and nothing trusted that others control",
    .tags(.process), .serialized, .timeLimit(.minutes(5))
)
struct IntegrityTests {
    /// A plugin whose answer comes from a library of its own bundle, linked through $ORIGIN.
    static func dependentBundle(in root: String, name: String = "dependent.appex", answer: String) async throws -> String {
        let bundle = root + "/" + name
        try FileManager.default.createDirectory(atPath: bundle + "/lib", withIntermediateDirectories: true)
        try await CCompiler.sharedLibrary(
            "const char *dependency_answer(void) { return \"\(answer)\"; }", output: bundle + "/lib/libdependency.so")
        try await CCompiler.sharedLibrary(
            """
            #include <plugind_plugin.h>
            #include <string.h>
            const char *dependency_answer(void);
            static const plugind_host *host;
            static int32_t start(const plugind_host *given, void **state, plugind_plugin_response *error) {
                (void)state; (void)error; host = given; return PLUGIND_PLUGIN_OK;
            }
            static int32_t handle(void *state, const plugind_plugin_request *request, plugind_plugin_response *response) {
                (void)state; (void)request;
                const char *text = dependency_answer();
                return host->append(response, (const unsigned char *)text, strlen(text));
            }
            static const plugind_plugin descriptor = {.abi_version = PLUGIND_PLUGIN_ABI_VERSION, .size = sizeof(plugind_plugin),
                .name = "Dependent", .version = "1.0.0", .init = start, .handle = handle};
            PLUGIND_PLUGIN_EXPORT const plugind_plugin *plugind_plugin_entry(void) { return &descriptor; }
            """, output: bundle + "/libdependent.so", flags: ["-L\(bundle)/lib", "-ldependency", "-Wl,-rpath,$ORIGIN/lib"])
        let manifest: [String: Any] = [
            "manifestVersion": 1, "identifier": "org.plugind.tests.dependent", "name": "Dependent", "version": "1.0.0",
            "extensionPoint": "org.plugind.tests.point", "library": "libdependent.so",
        ]
        try JSONSerialization.data(withJSONObject: manifest).write(to: URL(fileURLWithPath: bundle + "/manifest.json"))
        return bundle
    }

    func approve(_ identifier: String, _ test: TestHost) throws {
        try PolicyEditor(directory: test.host.policyDirectory).approve(
            try #require(Inventory.take(host: test.host).item(identifier)?.entry))
    }

    func answer(_ identifier: String, _ test: TestHost) async throws -> String {
        let process = try await AppExtensionProcess(configuration: try test.configuration(identifier))
        defer { process.invalidate() }
        return String(decoding: try await process.makeConnection().send(Array("x".utf8)), as: UTF8.self)
    }

    @Test("a library of the bundle loads from its sealed copy; swapping it after approval unapproves the plugin")
    func dependencySwap() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let bundle = try await Self.dependentBundle(in: test.externalRoot, answer: "approved dependency")
        try approve("org.plugind.tests.dependent", test)
        #expect(try await answer("org.plugind.tests.dependent", test) == "approved dependency")

        // Another build of the dependency, put in place by rename, as an update would.
        let elsewhere = try await Self.dependentBundle(in: test.directory.path, name: "other.appex", answer: "swapped dependency")
        try FileManager.default.removeItem(atPath: bundle + "/lib/libdependency.so")
        try FileManager.default.moveItem(atPath: elsewhere + "/lib/libdependency.so", toPath: bundle + "/lib/libdependency.so")
        let item = try #require(Inventory.take(host: test.host).item("org.plugind.tests.dependent"))
        guard case .approvalOutdated(let change) = item.decision else {
            Issue.record("a swapped dependency kept the approval: \(item.decision)")
            return
        }
        #expect(change == "lib/libdependency.so changed since it was approved (SHA-256 no longer matches)")
        let error = await #expect(throws: AppExtensionError.self) { try await answer("org.plugind.tests.dependent", test) }
        #expect(error?.code == .notApproved)
    }

    @Test("a dependency another user may write makes the bundle unusable, in list and in verify")
    func writableDependency() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let bundle = try await Self.dependentBundle(in: test.externalRoot, answer: "approved dependency")
        chmod(bundle + "/lib/libdependency.so", 0o666)
        let problem = Inventory.take(host: test.host).problems.first { $0.bundleIdentifier == "org.plugind.tests.dependent" }
        #expect(problem?.kind == .insecurePermissions)
        #expect(problem?.message.contains("lib/libdependency.so is writable by every user") == true, "\(problem?.message ?? "")")
        let verified = try await CommandRunner.run(try BuiltProducts.plugind(), ["verify", bundle], environment: test.environment)
        #expect(verified.status == 1)
        #expect(verified.stdout.contains("error: [permissions]") && verified.stdout.contains("libdependency.so"), "\(verified.stdout)")
    }

    @Test("exchanging the bundle directory with another while launching loads the approved bytes or nothing, never the other's")
    func directoryExchangeRace() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let identifier = "org.plugind.tests.raced"
        // The approved bundle echoes; the other one, outside every search root, upper-cases.
        let good = try PluginFixture(library: "Echo", identifier: identifier).install(in: test.externalRoot, bundleName: "raced.appex")
        try approve(identifier, test)
        let evilRoot = try test.directory.subdirectory("evil")
        let evil = try PluginFixture(library: "Echo", identifier: identifier).install(in: evilRoot, bundleName: "raced.appex")
        try FileManager.default.removeItem(atPath: evil + "/libEcho.so")
        try FileManager.default.copyItem(atPath: try BuiltProducts.library("CTextFilter"), toPath: evil + "/libEcho.so")
        let configuration = try test.configuration(identifier)

        let running = Atomic(true)
        let swaps = Atomic(0)
        let racerEnded = AsyncStream<Void>.makeStream()
        let racer = Thread {
            while running.load(ordering: .relaxed) {
                if plugind_test_exchange(good, evil) == 0 { swaps.add(1, ordering: .relaxed) }
            }
            racerEnded.continuation.finish()
        }
        racer.start()
        var answers: [String: Int] = [:]
        for _ in 0..<150 {
            do {
                let process = try await AppExtensionProcess(configuration: configuration)
                let text = String(decoding: try await process.makeConnection().send(Array("abc".utf8)), as: UTF8.self)
                answers[text, default: 0] += 1
                await process.invalidateAndWait()
            } catch let error as AppExtensionError {
                answers["refused: \(error.code)", default: 0] += 1
            }
        }
        running.store(false, ordering: .relaxed)
        // Its last exchange done: the count below is final.
        for await _ in racerEnded.stream {}
        #expect(swaps.load(ordering: .relaxed) > 0)
        #expect(answers["ABC"] == nil, "the other bundle's code ran: \(answers)")
        // Every launch raced an exchange; most were refused (the bundle at the path was not the
        // approved one, or was gone for an instant). How many got through depends on the load of
        // the machine, so the control comes after the race: with the exchanges undone, the
        // approved bundle launches as before.
        #expect(answers.values.reduce(0, +) == 150)
        if swaps.load(ordering: .relaxed) % 2 == 1 { #expect(plugind_test_exchange(good, evil) == 0) }
        let process = try await AppExtensionProcess(configuration: configuration)
        #expect(try await process.makeConnection().send(Array("abc".utf8)) == Array("abc".utf8), "\(answers)")
        await process.invalidateAndWait()
    }

    @Test("verify runs no code of the bundle: a constructor that phones home is never called")
    func verifyRunsNothing() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let marker = test.directory.path + "/constructor-ran"
        let listener = try UnixListener(address: test.directory.path + "/home.sock", kind: .stream)
        let bundle = test.externalRoot + "/phone-home.appex"
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        try await CCompiler.sharedLibrary(
            """
            #include <fcntl.h>
            #include <plugind_plugin.h>
            #include <string.h>
            #include <sys/socket.h>
            #include <sys/un.h>
            #include <unistd.h>
            __attribute__((constructor)) static void phone_home(void) {
                int file = open("\(marker)", O_WRONLY | O_CREAT, 0644);
                if (file >= 0) { write(file, "ran", 3); close(file); }
                int fd = socket(AF_UNIX, SOCK_STREAM, 0);
                struct sockaddr_un address = {.sun_family = AF_UNIX};
                strcpy(address.sun_path, "\(listener.address)");
                if (connect(fd, (struct sockaddr *)&address, sizeof address) == 0) write(fd, "secret", 6);
                close(fd);
            }
            static int32_t handle(void *state, const plugind_plugin_request *request, plugind_plugin_response *response) {
                (void)state; (void)request; (void)response; return 0;
            }
            static const plugind_plugin descriptor = {.abi_version = PLUGIND_PLUGIN_ABI_VERSION, .size = sizeof(plugind_plugin),
                .name = "Phone home", .version = "1.0.0", .handle = handle};
            PLUGIND_PLUGIN_EXPORT const plugind_plugin *plugind_plugin_entry(void) { return &descriptor; }
            """, output: bundle + "/libphonehome.so")
        let manifest: [String: Any] = [
            "manifestVersion": 1, "identifier": "org.plugind.tests.phonehome", "name": "Phone home", "version": "1.0.0",
            "extensionPoint": "org.plugind.tests.point", "library": "libphonehome.so",
            "permissions": ["network": true, "read": ["/"], "write": [test.directory.path]],
        ]
        try JSONSerialization.data(withJSONObject: manifest).write(to: URL(fileURLWithPath: bundle + "/manifest.json"))
        let verified = try await CommandRunner.run(try BuiltProducts.plugind(), ["verify", bundle], environment: test.environment)
        #expect(verified.status == 0, "\(verified.stdout)")
        #expect(!FileManager.default.fileExists(atPath: marker))
        #expect(!listener.receivedAnything)
        // Asked for, a load test runs the constructor, with none of the permissions asked for.
        let loaded = try await CommandRunner.run(try BuiltProducts.plugind(), ["verify", "--load", bundle], environment: test.environment)
        #expect(loaded.stdout.contains("load (plugin ABI 2)"), "\(loaded.stdout)")
        #expect(!FileManager.default.fileExists(atPath: marker))
        #expect(!listener.receivedAnything)
    }

    @Test("a policy file or directory another user may write approves nothing, and says which and how to fix it")
    func untrustedPolicy() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let fixture = PluginFixture(library: "Echo")
        try test.install(fixture, bundled: false)
        try approve(fixture.identifier, test)
        #expect(Inventory.take(host: test.host).item(fixture.identifier)?.isAvailable == true)
        let policy = test.host.policyDirectory.path + "/policy.json"
        for (path, mode) in [(policy, 0o666), (test.host.policyDirectory.path, 0o777)] as [(String, mode_t)] {
            var original = stat()
            stat(path, &original)
            chmod(path, mode)
            let inventory = Inventory.take(host: test.host)
            #expect(inventory.item(fixture.identifier)?.isAvailable == false)
            let problem = inventory.problems.first { $0.kind == .policyUnreadable }
            #expect(problem?.message.contains("\(path) is writable by every user") == true, "\(problem?.message ?? "")")
            #expect(problem?.message.contains("chmod go-w \(path)") == true)
            let approve = try await CommandRunner.run(
                try BuiltProducts.plugind(), ["approve", fixture.identifier, "--yes"], environment: test.environment)
            #expect(approve.status == 1)
            #expect(approve.stderr.contains("cannot be trusted"), "\(approve.stderr)")
            let check = try await CommandRunner.run(try BuiltProducts.plugind(), ["policy"], environment: test.environment)
            #expect(check.status == 1)
            #expect(check.stdout.contains("cannot be used: cannot be trusted"), "\(check.stdout)")
            chmod(path, original.st_mode & 0o7777)
        }
        #expect(Inventory.take(host: test.host).item(fixture.identifier)?.isAvailable == true)
    }

    @Test("escape sequences and direction overrides in every field a bundle controls reach the terminal inert")
    func inertFields() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let escape = "\u{1B}[8m"
        let override = "\u{202E}"
        // C1 controls: CSI (a terminal starts an escape sequence) and NEL (a line break).
        let c1 = "\u{9B}8m\u{85}"
        let fixture = PluginFixture(
            library: "Echo", identifier: "org.plugind.tests.hostile", name: "Evil\(escape)name\(override)",
            extra: [
                "version": "1.0\(escape)", "description": "says\(override)olleh\(c1)", "permissions": ["read": ["/tmp/\(escape)red"]],
            ])
        try fixture.install(in: test.externalRoot, bundleName: "hostile\(escape).appex")
        let broken = test.externalRoot + "/broken\(escape).appex"
        try FileManager.default.createDirectory(atPath: broken, withIntermediateDirectories: true)
        try Data("{\"manifestVersion\": 1, \"\(escape)\": 1}".utf8).write(to: URL(fileURLWithPath: broken + "/manifest.json"))
        let bundle = test.externalRoot + "/hostile\(escape).appex"
        for arguments in [
            ["list", "--all"], ["info", "org.plugind.tests.hostile", "--no-probe"], ["approve", "org.plugind.tests.hostile"],
            ["verify", bundle, broken],
        ] {
            let result = try await CommandRunner.run(try BuiltProducts.plugind(), arguments, environment: test.environment)
            for text in [result.stdout, result.stderr] {
                #expect(!text.contains("\u{1B}"), "\(arguments): \(text)")
                #expect(!text.contains(override), "\(arguments): \(text)")
                #expect(!text.unicodeScalars.contains { (0x80...0x9F).contains($0.value) }, "\(arguments): \(text)")
            }
            #expect((result.stdout + result.stderr).contains("\\e[8m"), "\(arguments)")
        }
        // JSON keeps the data, escaped as JSON.
        let json = try await CommandRunner.run(try BuiltProducts.plugind(), ["list", "--all", "--json"], environment: test.environment)
        let info = try await CommandRunner.run(
            try BuiltProducts.plugind(), ["info", "org.plugind.tests.hostile", "--no-probe", "--json"], environment: test.environment)
        for output in [json.stdout, info.stdout] {
            #expect(!output.contains("\u{1B}"))
            #expect(!output.contains(override))
            #expect(!output.unicodeScalars.contains { (0x80...0x9F).contains($0.value) }, "\(output)")
            #expect(output.contains("\\u009b8m\\u0085"), "\(output)")
        }
        let document = try JSONSerialization.jsonObject(with: Data(json.standardOutput)) as? [String: Any]
        let plugins = (document?["plugins"] as? [[String: Any]]) ?? []
        #expect(plugins.compactMap { $0["name"] as? String }.contains("Evil\(escape)name\(override)"))
        #expect(plugins.compactMap { $0["description"] as? String }.contains("says\(override)olleh\(c1)"))
    }

    @Test("a 1 GiB sparse manifest is refused by its size, without reading it")
    func hugeManifest() throws {
        let test = try TestHost()
        defer { test.remove() }
        let bundle = test.externalRoot + "/huge.appex"
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        let manifest = open(bundle + "/manifest.json", O_WRONLY | O_CREAT, 0o644)
        #expect(ftruncate(manifest, 1 << 30) == 0)
        close(manifest)
        var before = rusage()
        getrusage(RUSAGE_SELF.rawValue, &before)
        let problem = Inventory.take(host: test.host, catalog: Catalog()).problems.first { $0.path.hasSuffix("huge.appex") }
        var after = rusage()
        getrusage(RUSAGE_SELF.rawValue, &after)
        #expect(problem?.kind == .invalidManifest)
        #expect(
            problem?.message.contains("is 1073741824 bytes; a manifest may have at most 262144 bytes") == true, "\(problem?.message ?? "")")
        // Peak memory did not grow by anything near the file's size.
        #expect(after.ru_maxrss - before.ru_maxrss < 64 << 10)
    }
}
