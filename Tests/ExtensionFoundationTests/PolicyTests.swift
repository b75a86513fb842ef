import ExtensionFoundation
import Foundation
import Glibc
import PlugindEngine
import PlugindPolicyEditing
import TestSupport
import Testing

@Suite("Owner approval policy", .tags(.process), .serialized, .timeLimit(.minutes(5)))
struct PolicyTests {
    func item(_ test: TestHost, _ identifier: String) throws -> Inventory.Item {
        try #require(Inventory.take(host: test.host, catalog: Catalog()).item(identifier))
    }

    @Test("external plugins start unapproved; bundled ones need no approval")
    func defaults() throws {
        let test = try TestHost()
        defer { test.remove() }
        try test.install(PluginFixture(library: "Echo", identifier: "org.plugind.tests.external"), bundled: false)
        try test.install(PluginFixture(library: "Echo", identifier: "org.plugind.tests.bundled"), bundled: true)
        #expect(try item(test, "org.plugind.tests.external").decision == .unapproved)
        #expect(try item(test, "org.plugind.tests.bundled").decision == .available(bundledWithHost: true))
    }

    @Test("an approval pins bytes and permissions: changing either unapproves")
    func pins() throws {
        let test = try TestHost()
        defer { test.remove() }
        let fixture = PluginFixture(library: "Echo", identifier: "org.plugind.tests.pinned")
        let bundle = try test.install(fixture, bundled: false)
        let editor = PolicyEditor(directory: test.host.policyDirectory)
        try editor.approve(try item(test, fixture.identifier).entry)
        #expect(try item(test, fixture.identifier).isAvailable)

        // Same bytes, new inode and times (a reinstall): still approved.
        try FileManager.default.removeItem(atPath: bundle + "/libEcho.so")
        try FileManager.default.copyItem(atPath: try BuiltProducts.library("Echo"), toPath: bundle + "/libEcho.so")
        #expect(try item(test, fixture.identifier).isAvailable)

        // Asking for the network changes the manifest and the permissions.
        var networked = fixture
        networked.extra["permissions"] = ["network": true]
        try networked.install(in: test.externalRoot)
        guard case .approvalOutdated(let change) = try item(test, fixture.identifier).decision else {
            Issue.record("a permission change kept the approval")
            return
        }
        #expect(change.contains("requested permissions changed (approved: none; it now also asks for network)"))
        try editor.approve(try item(test, fixture.identifier).entry)
        #expect(try item(test, fixture.identifier).isAvailable)
    }

    @Test("the administrator's disable wins; the administrator can approve for everyone")
    func administrator() throws {
        let test = try TestHost()
        defer { test.remove() }
        let fixture = PluginFixture(library: "Echo", identifier: "org.plugind.tests.admin")
        try test.install(fixture, bundled: false)
        let user = PolicyEditor(for: test.host, administrator: false)
        let admin = PolicyEditor(for: test.host, administrator: true)
        try admin.approve(try item(test, fixture.identifier).entry)
        #expect(try item(test, fixture.identifier).isAvailable)
        try user.approve(try item(test, fixture.identifier).entry)
        try admin.disable(fixture.identifier)
        #expect(try item(test, fixture.identifier).decision == .disabled(byAdministrator: true))
        // Every user's plugind reads the administrator's policy; the owner's is the owner's alone.
        func mode(_ path: String) -> Int? { (try? FileManager.default.attributesOfItem(atPath: path))?[.posixPermissions] as? Int }
        #expect(mode(admin.path) == 0o644)
        #expect(mode(test.host.administratorPolicyDirectory.path) == 0o755)
        #expect(mode(user.path) == 0o600)
        #expect(mode(test.host.policyDirectory.path) == 0o700)
    }

    @Test("a truncated policy file approves nothing, stays untouched and is reported")
    func corruptPolicy() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let fixture = PluginFixture(library: "Echo", identifier: "org.plugind.tests.truncated")
        try test.install(fixture, bundled: false)
        let editor = PolicyEditor(directory: test.host.policyDirectory)
        try editor.approve(try item(test, fixture.identifier).entry)
        let policy = editor.path
        let full = try Data(contentsOf: URL(fileURLWithPath: policy))
        let truncated = full.prefix(full.count / 2)
        try truncated.write(to: URL(fileURLWithPath: policy))

        let inventory = Inventory.take(host: test.host, catalog: Catalog())
        #expect(inventory.item(fixture.identifier)?.isAvailable == false)
        let report = try #require(inventory.problems.first { $0.kind == .policyUnreadable })
        #expect(report.path == policy)
        #expect(report.message.contains("is corrupt"))
        // Launching is refused, writing is refused, and the file keeps its bytes.
        let error = await #expect(throws: AppExtensionError.self) {
            _ = try await AppExtensionProcess(configuration: try test.configuration(fixture.identifier))
        }
        #expect(error?.code == .notApproved)
        #expect(error?.reason.contains(policy) == true)
        #expect(throws: PolicyEditor.EditError.self) { try editor.disable(fixture.identifier) }
        #expect(try Data(contentsOf: URL(fileURLWithPath: policy)) == truncated)
        // Moving it aside keeps the bytes and starts afresh.
        let aside = try #require(try editor.moveCorruptStoreAside())
        #expect(try Data(contentsOf: URL(fileURLWithPath: aside)) == truncated)
        #expect(!FileManager.default.fileExists(atPath: policy))
    }

    @Test("a policy or rules file that is a FIFO or larger than hosts read is refused at once, naming it; the editor leaves it untouched")
    func hostilePolicyFiles() async throws {
        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }
        let fifoPolicy = try scratch.subdirectory("fifo") + "/" + PolicyDocument.fileName
        let largePolicy = try scratch.subdirectory("large") + "/" + PolicyDocument.fileName
        let fifoRules = try scratch.subdirectory("fifo-rules")
        let largeRules = try scratch.subdirectory("large-rules")
        try HostileFile.makeFIFO(at: fifoPolicy)
        try HostileFile.makeFIFO(at: fifoRules + "/" + AdministratorRules.fileName)
        try HostileFile.makeSparse(at: largePolicy, size: PolicyDocument.maximumFileBytes + 1)
        try HostileFile.makeSparse(at: largeRules + "/" + AdministratorRules.fileName, size: (1 << 20) + 1)

        let fifos = [fifoPolicy, fifoRules + "/" + AdministratorRules.fileName]
        let reasons = try await HostileFile.readPromptly("the policy files to be read", unblocking: fifos) {
            func reason<Value>(_ result: Result<Value, PolicyFileError>) -> String? {
                guard case .failure(let error) = result else { return nil }
                return error.description
            }
            var editorError: String?
            do {
                try PolicyEditor(directory: URL(fileURLWithPath: fifoPolicy).deletingLastPathComponent()).revoke("org.example.plugin")
            } catch {
                editorError = String(describing: error)
            }
            return [
                reason(PolicyDocument.load(from: fifoPolicy)), reason(PolicyDocument.load(from: largePolicy)),
                reason(AdministratorRules.load(from: fifoRules)), reason(AdministratorRules.load(from: largeRules)), editorError,
            ]
        }
        #expect(reasons[0] == "policy file \(fifoPolicy) is a FIFO, not a regular file")
        #expect(reasons[1] == "policy file \(largePolicy) is larger than 16 MiB, the most read of it")
        #expect(reasons[2] == "policy file \(fifoRules)/rules.json is a FIFO, not a regular file")
        #expect(reasons[3] == "policy file \(largeRules)/rules.json is larger than 1 MiB, the most read of it")
        let untouched = "policy file \(fifoPolicy) is a FIFO, not a regular file; it was left untouched"
        #expect(reasons[4]?.hasPrefix(untouched) == true, "\(reasons)")
        var status = stat()
        #expect(lstat(fifoPolicy, &status) == 0 && status.st_mode & S_IFMT == S_IFIFO)
    }

    @Test("AppExtensionProcess refuses an identity that is not, or no longer, approved and enabled")
    func launchChecksPolicy() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let fixture = PluginFixture(library: "Echo", identifier: "org.plugind.tests.gated")
        try test.install(fixture, bundled: false)
        let configuration = try test.configuration(fixture.identifier)
        let unapproved = await #expect(throws: AppExtensionError.self) { _ = try await AppExtensionProcess(configuration: configuration) }
        #expect(unapproved?.code == .notApproved)
        #expect(unapproved?.reason.contains("plugind approve org.plugind.tests.gated") == true)

        let editor = PolicyEditor(directory: test.host.policyDirectory)
        try editor.approve(try item(test, fixture.identifier).entry)
        let process = try await AppExtensionProcess(configuration: configuration)
        await process.invalidateAndWait()

        try editor.disable(fixture.identifier)
        let disabled = await #expect(throws: AppExtensionError.self) { _ = try await AppExtensionProcess(configuration: configuration) }
        #expect(disabled?.code == .notApproved)
        #expect(disabled?.reason.contains("plugind enable") == true)
    }
}
