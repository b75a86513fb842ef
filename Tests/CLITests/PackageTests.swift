import ExtensionFoundation
import Foundation
import PlugindEngine
import TestSupport
import Testing

/// Publisher keys, signatures and single-file packages: `keygen`, `sign`, `pack`, `install FILE`,
/// and what `info` says of a signature.
@Suite("Signed packages", .tags(.process), .timeLimit(.minutes(5)))
struct PackageTests {
    /// A key pair in the test's directory; returns the private key's path.
    func keygen(_ test: TestHost, _ name: String = "publisher") async throws -> String {
        let path = try test.directory.subdirectory("keys") + "/" + name
        let made = try await plugind("keygen", "--output", path, in: test)
        #expect(made.status == 0, "\(made.stderr)")
        return path
    }

    /// A copy of the Echo bundle, outside every search path.
    func bundle(_ test: TestHost, _ name: String = "Echo.appex") throws -> String {
        try PluginFixture(library: "Echo").install(in: try test.directory.subdirectory("work"), bundleName: name)
    }

    func publisher(_ test: TestHost, _ identifier: String) async throws -> String {
        let info = try await plugind("info", identifier, "--no-probe", in: test)
        return info.stdout.split(separator: "\n").first { $0.contains("publisher:") }.map(String.init) ?? info.stderr
    }

    /// What `plugind install` (run with the test's environment) put in the user's plugin
    /// directory, hidden staging directories included.
    func installedEntries(_ test: TestHost) -> [String] {
        let root = AppExtensionHost(identifier: "org.plugind.tests", environment: test.environment).userPluginsDirectory.path
        return (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
    }

    @Test("keygen writes a 0600 private key and its public key, never overwrites, never prints the private key")
    func keys() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let path = try test.directory.subdirectory("keys") + "/publisher"
        let made = try await plugind("keygen", "--output", path, in: test)
        #expect(made.status == 0)
        #expect(made.stdout.hasPrefix("ed25519:"))
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        #expect(attributes[.posixPermissions] as? Int == 0o600)
        let privateText = try String(contentsOfFile: path, encoding: .utf8)
        #expect(privateText.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        #expect(try String(contentsOfFile: path + ".pub", encoding: .utf8).hasPrefix("-----BEGIN PUBLIC KEY-----"))
        let secret = privateText.split(separator: "\n")[1]
        #expect(!made.stdout.contains(secret) && !made.stderr.contains(secret))
        let again = try await plugind("keygen", "--output", path, in: test)
        #expect(again.status == 1)
        #expect(again.stderr.contains("already exists"))
        #expect(try String(contentsOfFile: path, encoding: .utf8) == privateText)
    }

    @Test("a signature covers every file: info shows the key, and a changed, added or removed file, or another key, invalidates it")
    func signatures() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let key = try await keygen(test)

        // A key others may read is refused.
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: key)
        let loose = try await plugind("sign", try bundle(test), "--key", key, in: test)
        #expect(loose.status == 1)
        #expect(loose.stderr.contains("chmod 600"))
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: key)

        let signed = try test.install(PluginFixture(library: "Echo"), bundled: false)
        #expect(try await plugind("sign", signed, "--key", key, in: test).status == 0)
        #expect(try await publisher(test, "org.plugind.tests.echo").hasSuffix("(signature valid)"))

        let changes: [(String, (String) throws -> Void)] = [
            ("a file added", { try Data("x".utf8).write(to: URL(fileURLWithPath: $0 + "/extra.txt")) }),
            ("a file changed", { try Data("{}".utf8).write(to: URL(fileURLWithPath: $0 + "/extra.txt")) }),
            ("a file removed", { try FileManager.default.removeItem(atPath: $0 + "/extra.txt") }),
        ]
        for (index, (what, change)) in changes.enumerated() {
            if index == 2 { #expect(try await plugind("sign", signed, "--key", key, in: test).status == 0) }
            try change(signed)
            let line = try await publisher(test, "org.plugind.tests.echo")
            #expect(line.contains("signature INVALID: the bundle changed after it was signed"), "\(what): \(line)")
        }

        // The signature of one key presented with another key's public half.
        #expect(try await plugind("sign", signed, "--key", key, in: test).status == 0)
        let other = try await keygen(test, "other")
        let signaturePath = signed + "/plugind-signature.json"
        var document = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: signaturePath))) as? [String: Any])
        let otherPublic = try String(contentsOfFile: other + ".pub", encoding: .utf8)
            .split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
        // The raw key is the last 32 bytes of the DER SubjectPublicKeyInfo.
        document["publicKey"] = Data(try #require(Data(base64Encoded: otherPublic)).suffix(32)).base64EncodedString()
        try JSONSerialization.data(withJSONObject: document).write(to: URL(fileURLWithPath: signaturePath))
        #expect(try await publisher(test, "org.plugind.tests.echo").contains("signature INVALID: the signature does not match its key"))

        // A signature that has expired, and one whose expiry was pushed back by hand.
        #expect(try await plugind("sign", signed, "--key", key, "--expires", "2999-12-31", in: test).status == 0)
        #expect(try await publisher(test, "org.plugind.tests.echo").hasSuffix("(signature valid)"))
        #expect(try await plugind("sign", signed, "--key", key, "--expires", "2020-01-31", in: test).status == 0)
        #expect(try await publisher(test, "org.plugind.tests.echo").contains("signature INVALID: the signature expired on 2020-01-31"))
        let expired = try await plugind("pack", signed, "--output", test.directory.path + "/expired.plugin", in: test)
        #expect(expired.status == 1)
        #expect(expired.stderr.contains("expired on 2020-01-31"))
        let extended = try String(contentsOfFile: signaturePath, encoding: .utf8).replacingOccurrences(of: "2020-01-31", with: "2999-01-31")
        try Data(extended.utf8).write(to: URL(fileURLWithPath: signaturePath))
        #expect(try await publisher(test, "org.plugind.tests.echo").contains("signature INVALID: the signature does not match its key"))
        #expect(try await plugind("sign", signed, "--key", key, "--expires", "soon", in: test).status == 64)

        // A malformed key file.
        let malformed = try test.directory.subdirectory("keys") + "/malformed"
        try Data("-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n".utf8).write(to: URL(fileURLWithPath: malformed))
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: malformed)
        let bad = try await plugind("sign", signed, "--key", malformed, in: test)
        #expect(bad.status == 1)
        #expect(bad.stderr.contains("not a PEM private key"), "\(bad.stderr)")
    }

    @Test(
        "pack --format deb: the signed bundle under /usr/lib/plugind/plugins, the library's architecture, Depends from dpkg-shlibdeps; a bundle that does not verify is refused"
    )
    func packDebian() async throws {
        guard ExternalToolCheck.available("dpkg-deb"), ExternalToolCheck.available("dpkg-shlibdeps") else {
            Issue.record("dpkg-deb and dpkg-shlibdeps are needed (Scripts/setup.sh installs dpkg-dev)")
            return
        }
        let test = try TestHost()
        defer { test.remove() }
        let key = try await keygen(test)
        let source = try bundle(test)
        let package = test.directory.path + "/echo.deb"
        let unsigned = try await plugind("pack", source, "--format", "deb", "--output", package, in: test)
        #expect(unsigned.status == 1)
        #expect(unsigned.stderr.contains("is not signed"))
        #expect(!FileManager.default.fileExists(atPath: package))

        #expect(try await plugind("sign", source, "--key", key, in: test).status == 0)
        // The maintainer, and the key to sign again once the library is stripped
        // (PluginDebianPackageTests: what lintian says of the package).
        let packed = try await plugind(
            "pack", source, "--format", "deb", "--output", package, "--maintainer", "Tests <tests@example.org>", "--key", key, in: test)
        #expect(packed.status == 0, "\(packed.stderr)")
        #expect(packed.stdout == package + "\n")
        let fields = try await CommandRunner.run("/usr/bin/dpkg-deb", ["-f", package], environment: test.environment)
        #expect(fields.stdout.contains("Package: plugind-plugin-org.plugind.tests.echo\n"))
        #expect(fields.stdout.contains("Architecture: amd64\n") || fields.stdout.contains("Architecture: arm64\n"))
        #expect(fields.stdout.contains("Depends: plugind (>= 0.1.0), libc6 (>= "), "\(fields.stdout)")
        let contents = try await CommandRunner.run("/usr/bin/dpkg-deb", ["-c", package], environment: test.environment)
        for file in ["manifest.json", "libEcho.so", "plugind-signature.json"] {
            #expect(
                contents.stdout.contains("root/root")
                    && contents.stdout.contains("./usr/lib/plugind/plugins/org.plugind.tests.echo/\(file)\n"))
        }

        // A change after signing: the bundle no longer verifies against its signature.
        try Data("tampered".utf8).write(to: URL(fileURLWithPath: source + "/extra.txt"))
        let tampered = try await plugind("pack", source, "--format", "deb", "--output", test.directory.path + "/tampered.deb", in: test)
        #expect(tampered.status == 1)
        #expect(tampered.stderr.contains("signature"), "\(tampered.stderr)")
        #expect(!FileManager.default.fileExists(atPath: test.directory.path + "/tampered.deb"))
        let badFormat = try await plugind("pack", source, "--format", "rpm", in: test)
        #expect(badFormat.status == 64)
        #expect(badFormat.stderr.contains("not 'rpm'"))
    }

    @Test("pack needs a signed bundle; install of the package lands the same bytes, signature valid")
    func packAndInstall() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let key = try await keygen(test)
        let source = try bundle(test)
        let package = test.directory.path + "/echo.plugin"
        let unsigned = try await plugind("pack", source, "--output", package, in: test)
        #expect(unsigned.status == 1)
        #expect(unsigned.stderr.contains("is not signed"))
        #expect(!FileManager.default.fileExists(atPath: package))

        #expect(try await plugind("sign", source, "--key", key, in: test).status == 0)
        let packed = try await plugind("pack", source, "--output", package, in: test)
        #expect(packed.status == 0, "\(packed.stderr)")
        let installed = try await plugind("install", package, in: test)
        #expect(installed.status == 0, "\(installed.stderr)")
        #expect(installedEntries(test) == ["org.plugind.tests.echo.appex"])
        #expect(try await publisher(test, "org.plugind.tests.echo").hasSuffix("(signature valid)"))
        #expect(try await plugind("install", package, in: test).stderr.contains("already installed"))
        #expect(try await plugind("approve", "org.plugind.tests.echo", "--yes", in: test).status == 0)
        #expect(try await plugind("run", "org.plugind.tests.echo", "hi", in: test).stdout == "hi")
    }

    @Test("concurrent installs of one package leave one installed bundle and nothing half-done")
    func concurrentInstalls() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let key = try await keygen(test)
        let source = try bundle(test)
        #expect(try await plugind("sign", source, "--key", key, in: test).status == 0)
        let package = test.directory.path + "/echo.plugin"
        #expect(try await plugind("pack", source, "--output", package, in: test).status == 0)
        let statuses = try await withThrowingTaskGroup(of: Int32.self) { group in
            for _ in 0..<4 { group.addTask { try await plugind("install", package, in: test).status } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(statuses.contains(0))
        #expect(installedEntries(test) == ["org.plugind.tests.echo.appex"])
        #expect(try await publisher(test, "org.plugind.tests.echo").hasSuffix("(signature valid)"))
    }

    /// Builds, signs with `key` (nil: unsigned) and packs a version of the Echo plugin.
    func release(_ test: TestHost, _ version: String, key: String?, extra: [String: Any] = [:]) async throws -> String {
        var manifest = extra
        manifest["version"] = version
        let directory = try test.directory.subdirectory("releases/\(version)-\(UUID().uuidString)")
        let bundle = try PluginFixture(library: "Echo", extra: manifest).install(in: directory)
        if let key { #expect(try await plugind("sign", bundle, "--key", key, in: test).status == 0) }
        guard key != nil else { return bundle }
        let package = directory + "/echo.plugin"
        #expect(try await plugind("pack", bundle, "--output", package, in: test).status == 0)
        return package
    }

    func listed(_ test: TestHost) async throws -> (state: String, version: String, reason: String) {
        let list = try await plugind("list", "--all", "--json", in: test)
        let document = try JSONSerialization.jsonObject(with: Data(list.standardOutput)) as? [String: Any]
        let plugin = (document?["plugins"] as? [[String: Any]])?.first { $0["identifier"] as? String == "org.plugind.tests.echo" }
        return (plugin?["state"] as? String ?? "", plugin?["version"] as? String ?? "", plugin?["reason"] as? String ?? "")
    }

    @Test(
        "an update signed by the approved publisher that asks for no more stays approved; more, another key or none is unapproved with the reason"
    )
    func updatesKeepApproval() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let publisher = try await keygen(test)
        let stranger = try await keygen(test, "stranger")
        let limits: [String: Any] = ["limits": ["memoryBytes": 536_870_912]]
        #expect(try await plugind("install", try await release(test, "1.0.0", key: publisher, extra: limits), in: test).status == 0)
        #expect(try await plugind("approve", "org.plugind.tests.echo", "--yes", in: test).status == 0)
        #expect(try await listed(test).state == "available")

        // A newer version by the same publisher, asking for nothing more: no --force, no approve.
        let update = try await plugind("install", try await release(test, "1.1.0", key: publisher, extra: limits), in: test)
        #expect(update.status == 0, "\(update.stderr)")
        #expect(update.stderr.contains("Updating org.plugind.tests.echo from 1.0.0 to 1.1.0"))
        #expect(try await listed(test).state == "available")
        #expect(try await listed(test).version == "1.1.0")
        #expect(try await plugind("run", "org.plugind.tests.echo", "still approved", in: test).stdout == "still approved")

        let cases: [(String, String?, [String: Any], String)] = [
            ("1.2.0", publisher, ["permissions": ["network": true], "limits": ["memoryBytes": 536_870_912]], "also asks for network"),
            ("1.3.0", publisher, ["limits": ["memoryBytes": 1_073_741_824]], "asks for higher limits: memoryBytes"),
            ("1.4.0", stranger, limits, "not by the approved publisher"),
        ]
        for (version, key, extra, reason) in cases {
            let package = try await release(test, version, key: key, extra: extra)
            if key == stranger {
                // Another publisher's version needs --force even when newer, and says why.
                let refused = try await plugind("install", package, in: test)
                #expect(refused.status == 1)
                #expect(refused.stderr.contains("the installed one by") && refused.stderr.contains("pass --force"), "\(refused.stderr)")
            }
            let installed = try await plugind("install", package, "--force", in: test)
            #expect(installed.status == 0, "\(installed.stderr)")
            let now = try await listed(test)
            #expect(now.state == "approval-outdated", "\(version): \(now)")
            #expect(now.reason.contains(reason), "\(version): \(now.reason)")
        }
        let unsigned = try await plugind("install", try await release(test, "2.1.0", key: nil, extra: limits), "--force", in: test)
        #expect(unsigned.status == 0)
        #expect(try await listed(test).reason.contains("this version is unsigned"))
        let approve = try await plugind("approve", "org.plugind.tests.echo", "--yes", in: test)
        #expect(approve.stderr.contains("publisher:       unsigned"), "\(approve.stderr)")
    }

    @Test("approvals are monotonic: the publisher's older version, or other bytes under the approved version, is outdated and never runs")
    func rollbackIsOutdated() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let publisher = try await keygen(test)
        let limits: [String: Any] = ["limits": ["memoryBytes": 536_870_912]]
        let old = try await release(test, "1.0.0", key: publisher, extra: limits)
        #expect(try await plugind("install", try await release(test, "2.0.0", key: publisher, extra: limits), in: test).status == 0)
        #expect(try await plugind("approve", "org.plugind.tests.echo", "--yes", in: test).status == 0)
        #expect(try await plugind("run", "org.plugind.tests.echo", "2.0", in: test).stdout == "2.0")

        // Same key, same permissions, older: install needs --force and says the approval ends.
        let refused = try await plugind("install", old, in: test)
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("version 1.0.0 is not newer than the installed 2.0.0"), "\(refused.stderr)")
        let forced = try await plugind("install", old, "--force", in: test)
        #expect(forced.status == 0, "\(forced.stderr)")
        #expect(forced.stderr.contains("an approval of the installed build no longer holds"), "\(forced.stderr)")
        let rolledBack = try await listed(test)
        #expect(rolledBack.state == "approval-outdated", "\(rolledBack)")
        #expect(rolledBack.reason.contains("older than the approved 2.0.0"), "\(rolledBack.reason)")
        let run = try await plugind("run", "org.plugind.tests.echo", "1.0", in: test)
        #expect(run.status != 0)
        #expect(run.stdout.isEmpty)

        // Other bytes under the approved version number: the owner decides too.
        let rebuilt = try await release(test, "2.0.0", key: publisher, extra: limits.merging(["description": "rebuilt"]) { $1 })
        #expect(try await plugind("install", rebuilt, "--force", in: test).status == 0)
        #expect(try await listed(test).reason.contains("the same version 2.0.0 as approved, with other bytes"))
        // A newer one is still an update.
        #expect(
            try await plugind("install", try await release(test, "2.1.0", key: publisher, extra: limits), "--force", in: test).status == 0)
        #expect(try await listed(test).state == "available")
    }

    @Test("a running host keeps a same-publisher update listed, new processes run the new bytes, a running one keeps the old")
    func updateInRunningHost() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let publisher = try await keygen(test)
        let limits: [String: Any] = ["limits": ["memoryBytes": 536_870_912]]
        #expect(try await plugind("install", try await release(test, "1.0.0", key: publisher, extra: limits), in: test).status == 0)
        #expect(try await plugind("approve", "org.plugind.tests.echo", "--yes", in: test).status == 0)

        let host = AppExtensionHost(identifier: "org.plugind.tests", environment: test.environment)
        let monitor = AppExtensionPoint.Monitor(host: host)
        try await monitor.addAppExtensionPoint(try AppExtensionPoint(identifier: "org.plugind.tests.point", scope: .none))
        let identity = try #require(monitor.identities.first)
        var configuration = AppExtensionProcess.Configuration(appExtensionIdentity: identity, onInterruption: {})
        configuration.sharing = .dedicated
        let dedicated = configuration
        let old = try await AppExtensionProcess(configuration: dedicated)
        defer { old.invalidate() }
        let oldConnection = try await old.makeConnection()
        #expect(try await oldConnection.send(Array("abc".utf8)) == Array("abc".utf8))

        // Version 1.1.0 is another library (it upper-cases): the same publisher, nothing more asked.
        let directory = try test.directory.subdirectory("releases/filter")
        let bundle = try PluginFixture(
            library: "CTextFilter", identifier: "org.plugind.tests.echo", name: "Echo",
            extra: limits.merging(["version": "1.1.0"]) { _, new in new }
        )
        .install(in: directory)
        #expect(try await plugind("sign", bundle, "--key", publisher, in: test).status == 0)
        let updated = try await plugind("install", bundle, in: test)
        #expect(updated.status == 0, "\(updated.stderr)")

        let answer = try await Deadline.wait("a new process to run the new version") {
            while true {
                let process = try await AppExtensionProcess(configuration: dedicated)
                defer { process.invalidate() }
                let answer = try await process.makeConnection().send(Array("abc".utf8))
                if answer == Array("ABC".utf8) { return answer }
            }
        }
        #expect(answer == Array("ABC".utf8))
        #expect(monitor.identities.map(\.bundleIdentifier) == ["org.plugind.tests.echo"])
        #expect(monitor.state.unapprovedCount == 0)
        #expect(try await oldConnection.send(Array("abc".utf8)) == Array("abc".utf8), "the running process keeps its approved bytes")
    }

    @Test(
        "administrator rules: a deny wins over every approval, signatures can be required, an allow approves what it matches, and list and info name the rule"
    )
    func administratorRules() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let publisher = try await keygen(test)
        let fingerprint = try await plugind("trust", "add", publisher + ".pub", in: test).stdout.trimmingCharacters(
            in: .whitespacesAndNewlines)
        #expect(try await plugind("trust", "remove", fingerprint, in: test).status == 0)
        let admin = try #require(test.environment["PLUGIND_ADMIN_POLICY_DIR"])
        try FileManager.default.createDirectory(atPath: admin, withIntermediateDirectories: true)
        func rules(_ text: String) throws { try Data(text.utf8).write(to: URL(fileURLWithPath: admin + "/rules.json")) }

        // Signed by the publisher, approved by the owner.
        #expect(try await plugind("install", try await release(test, "1.0.0", key: publisher), in: test).status == 0)
        #expect(try await plugind("approve", "org.plugind.tests.echo", "--yes", in: test).status == 0)
        #expect(try await listed(test).state == "available")

        try rules(#"{"formatVersion": 1, "rules": [{"name": "no-echo", "effect": "deny", "identifier": "org.plugind.tests.ech*"}]}"#)
        #expect(try await listed(test).state == "denied")
        #expect(try await listed(test).reason.contains("denied by the administrator's rule 'no-echo'"))
        let run = try await plugind("run", "org.plugind.tests.echo", "x", in: test)
        #expect(run.status != 0)
        #expect(run.stderr.contains("rule 'no-echo'"), "\(run.stderr)")
        // Identifiers are not case-sensitive, and neither are the patterns that name them.
        try rules(#"{"formatVersion": 1, "rules": [{"name": "no-echo", "effect": "deny", "identifier": "ORG.Plugind.Tests.ECH*"}]}"#)
        #expect(try await listed(test).state == "denied")

        // An allow by publisher and point approves without the owner; a deny that also matches wins.
        #expect(try await plugind("revoke", "org.plugind.tests.echo", in: test).status == 0)
        let allow = #"{"name": "acme", "effect": "allow", "publisher": "\#(fingerprint)", "extensionPoint": "org.plugind.tests.*"}"#
        try rules(
            #"{"formatVersion": 1, "rules": [\#(allow), {"name": "no-echo", "effect": "deny", "identifier": "org.plugind.tests.echo"}]}"#)
        #expect(try await listed(test).state == "denied")
        try rules(#"{"formatVersion": 1, "rules": [\#(allow)]}"#)
        #expect(try await listed(test).state == "available")
        #expect(try await plugind("list", "--all", in: test).stdout.contains("allowed by the administrator's rule 'acme'"))
        #expect(
            try await plugind("info", "org.plugind.tests.echo", "--no-probe", in: test).stdout.contains(
                "(allowed by the administrator's rule 'acme'"))
        #expect(try await plugind("run", "org.plugind.tests.echo", "allowed", in: test).stdout == "allowed")

        // Signatures required: an unsigned version is denied whatever the owner approved.
        try rules(#"{"formatVersion": 1, "requireSignatures": true}"#)
        #expect(try await plugind("install", try await release(test, "2.0.0", key: nil), "--force", in: test).status == 0)
        #expect(try await plugind("approve", "org.plugind.tests.echo", "--yes", in: test).status == 0)
        #expect(try await listed(test).state == "denied")
        #expect(try await listed(test).reason.contains("requires signed plugins"))

        // A rules file that cannot be used approves nothing external, and says why.
        try rules(#"{"formatVersion": 1, "rules": [{"name": "everything", "effect": "deny"}]}"#)
        let broken = try await plugind("list", "--all", in: test)
        #expect(broken.stdout.contains("names no identifier, extension point or publisher"), "\(broken.stdout)")
        #expect(try await listed(test).state == "unapproved")
    }

    @Test("a trusted publisher's signed plugins are approved as they are; another's are not; removing the trust unapproves them")
    func trustedPublishers() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let publisher = try await keygen(test)
        let stranger = try await keygen(test, "stranger")
        #expect(try await plugind("install", try await release(test, "1.0.0", key: publisher), in: test).status == 0)
        #expect(try await listed(test).state == "unapproved")

        let added = try await plugind("trust", "add", publisher + ".pub", in: test)
        #expect(added.status == 0, "\(added.stderr)")
        let fingerprint = added.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(fingerprint.hasPrefix("ed25519:"))
        #expect(try await listed(test).state == "available")
        #expect(try await plugind("run", "org.plugind.tests.echo", "trusted", in: test).stdout == "trusted")
        #expect(try await plugind("trust", "list", in: test).stdout.contains(fingerprint))

        // Another publisher's version of the same plugin is not covered by that trust.
        #expect(try await plugind("install", try await release(test, "1.1.0", key: stranger), "--force", in: test).status == 0)
        #expect(try await listed(test).state == "unapproved")
        #expect(try await plugind("install", try await release(test, "1.2.0", key: publisher), "--force", in: test).status == 0)
        #expect(try await listed(test).state == "available")

        #expect(try await plugind("trust", "remove", fingerprint, in: test).status == 0)
        #expect(try await listed(test).state == "unapproved")
        let unknown = try await plugind("trust", "remove", fingerprint, in: test)
        #expect(unknown.status != 0)
        #expect(unknown.stderr.contains("is not a trusted publisher"))
        let notAKey = try await plugind("trust", "add", publisher, in: test)
        #expect(
            try await plugind("trust", "list", "--json", in: test).stdout.contains("\"publishers\" : [") && notAKey.status == 0,
            "a private key file yields its public half")
    }

    /// The `trustedPublisher` of the Echo plugin in `list --all --json`, or nil when it has none.
    func trustedPublisher(_ test: TestHost) async throws -> [String: String]? {
        let list = try await plugind("list", "--all", "--json", in: test)
        let document = try JSONSerialization.jsonObject(with: Data(list.standardOutput)) as? [String: Any]
        let plugin = (document?["plugins"] as? [[String: Any]])?.first { $0["identifier"] as? String == "org.plugind.tests.echo" }
        return plugin?["trustedPublisher"] as? [String: String]
    }

    @Test(
        "list and info say when a plugin is usable because its publisher is trusted: the key's fingerprint, and the owner's trust, the administrator's or a rule"
    )
    func trustShown() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let publisher = try await keygen(test)
        let echo = "org.plugind.tests.echo"
        #expect(try await plugind("install", try await release(test, "1.0.0", key: publisher), in: test).status == 0)
        #expect(try await trustedPublisher(test) == nil)

        // The owner's trust.
        let fingerprint = try await plugind("trust", "add", publisher + ".pub", in: test).stdout.trimmingCharacters(
            in: .whitespacesAndNewlines)
        #expect(try await trustedPublisher(test) == ["fingerprint": fingerprint, "trustedBy": "owner"])
        let list = try await plugind("list", "--all", in: test)
        #expect(list.stdout.contains("available\n    its publisher \(fingerprint) is trusted by the owner"), "\(list.stdout)")
        let info = try await plugind("info", echo, "--no-probe", in: test)
        #expect(info.stdout.contains("state:           available (its publisher \(fingerprint) is trusted by the owner"), "\(info.stdout)")
        let json = try await plugind("info", echo, "--no-probe", "--json", in: test)
        let document = try JSONSerialization.jsonObject(with: Data(json.standardOutput)) as? [String: Any]
        let plugin = document?["plugin"] as? [String: Any]
        #expect(plugin?["trustedPublisher"] as? [String: String] == ["fingerprint": fingerprint, "trustedBy": "owner"], "\(json.stdout)")

        // The administrator's trust as well: the owner's removal would not stop it, so it is named.
        #expect(try await plugind("trust", "add", publisher + ".pub", "--administrator", in: test).status == 0)
        #expect(try await trustedPublisher(test) == ["fingerprint": fingerprint, "trustedBy": "administrator"])
        let administrator = try await plugind("list", "--all", in: test)
        #expect(administrator.stdout.contains("its publisher \(fingerprint) is trusted by the administrator"), "\(administrator.stdout)")

        // An approval of its own is why it runs, whoever trusts the key.
        #expect(try await plugind("approve", echo, "--yes", in: test).status == 0)
        #expect(try await trustedPublisher(test) == nil)
        #expect(try await plugind("revoke", echo, in: test).status == 0)
        #expect(try await trustedPublisher(test)?["trustedBy"] == "administrator")
        #expect(try await plugind("trust", "remove", fingerprint, "--administrator", in: test).status == 0)
        #expect(try await plugind("trust", "remove", fingerprint, in: test).status == 0)
        #expect(try await listed(test).state == "unapproved")
        #expect(try await trustedPublisher(test) == nil)

        // An administrator's rule that names the key: the rule and the key.
        let admin = try #require(test.environment["PLUGIND_ADMIN_POLICY_DIR"])
        try FileManager.default.createDirectory(atPath: admin, withIntermediateDirectories: true)
        func rules(_ text: String) throws { try Data(text.utf8).write(to: URL(fileURLWithPath: admin + "/rules.json")) }
        try rules(#"{"formatVersion": 1, "rules": [{"name": "acme", "effect": "allow", "publisher": "\#(fingerprint)"}]}"#)
        #expect(try await trustedPublisher(test) == ["fingerprint": fingerprint, "trustedBy": "administrator", "rule": "acme"])
        let ruled = try await plugind("list", "--all", in: test)
        #expect(ruled.stdout.contains("allowed by the administrator's rule 'acme' ("), "\(ruled.stdout)")
        #expect(ruled.stdout.contains(", which names its publisher \(fingerprint)\n"), "\(ruled.stdout)")
        // A rule that names no publisher: the rule, and no key.
        try rules(#"{"formatVersion": 1, "rules": [{"name": "echo", "effect": "allow", "identifier": "org.plugind.tests.echo"}]}"#)
        #expect(try await listed(test).state == "available")
        #expect(try await trustedPublisher(test) == nil)
    }

    @Test(
        "a hostile package is refused naming the entry, and nothing of it remains",
        arguments: HostileArchive.allCases)
    func hostilePackages(_ archive: HostileArchive) async throws {
        let test = try TestHost()
        defer { test.remove() }
        let key = try await keygen(test)
        let source = try bundle(test)
        #expect(try await plugind("sign", source, "--key", key, in: test).status == 0)
        // A good version is installed first: the hostile package must leave it as it was.
        let good = test.directory.path + "/good.plugin"
        #expect(try await plugind("pack", source, "--output", good, in: test).status == 0)
        #expect(try await plugind("install", good, in: test).status == 0)
        let root = AppExtensionHost(identifier: "org.plugind.tests", environment: test.environment).userPluginsDirectory.path
        let manifest = root + "/org.plugind.tests.echo.appex/manifest.json"
        let before = try Data(contentsOf: URL(fileURLWithPath: manifest))

        let package = test.directory.path + "/hostile.plugin"
        try archive.bytes(signedBundle: source).write(to: URL(fileURLWithPath: package))
        // Even --force lets nothing of it through.
        let installed = try await plugind("install", package, "--force", in: test)
        #expect(installed.status == 1)
        #expect(installed.stderr.contains(archive.expected), "\(archive): \(installed.stderr)")
        #expect(installedEntries(test) == ["org.plugind.tests.echo.appex"], "\(installedEntries(test))")
        #expect(try Data(contentsOf: URL(fileURLWithPath: manifest)) == before)
        #expect(try await publisher(test, "org.plugind.tests.echo").hasSuffix("(signature valid)"))
    }
}

extension PackageTests {
    @Test("a gzip bomb writes nothing to disk: 0.5 MiB unpacking to 512 MiB, unsigned or with a signature that does not hold")
    func gzipBomb() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let key = try await keygen(test)
        let source = try bundle(test)
        #expect(try await plugind("sign", source, "--key", key, in: test).status == 0)
        for signed in [false, true] {
            let package = test.directory.path + "/bomb-\(signed).plugin"
            // Zeros streamed through gzip: about 0.5 MiB on disk, 512 MiB unpacked; with the real
            // bundle's files and, when `signed`, its signature (of other contents).
            let script = """
                import gzip, io, sys, tarfile
                source, output, signed = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
                class Zeros(io.RawIOBase):
                    def __init__(self, size): self.left = size
                    def readable(self): return True
                    def readinto(self, buffer):
                        count = min(len(buffer), self.left); buffer[:count] = bytes(count); self.left -= count; return count
                with gzip.open(output, "wb", compresslevel=1) as stream, tarfile.open(fileobj=stream, mode="w", format=tarfile.PAX_FORMAT) as tar:
                    for name in ["manifest.json", "libEcho.so"] + (["plugind-signature.json"] if signed else []):
                        tar.add(source + "/" + name, arcname=name)
                    info = tarfile.TarInfo("zeros"); info.size = 512 << 20
                    tar.addfile(info, Zeros(info.size))
                """
            let made = try await CommandRunner.run(
                "/usr/bin/env", ["python3", "-c", script, source, package, signed ? "1" : "0"],
                environment: ProcessInfo.processInfo.environment)
            #expect(made.status == 0, "\(made.stderr)")
            // Under a file-size limit of 1 MiB, a write of the first zeros would fail with EFBIG.
            var environment = test.environment
            environment["PLUGIND_WORKER"] = try BuiltProducts.worker()
            let installed = try await CommandRunner.run(
                "/usr/bin/env", ["prlimit", "--fsize=1048576", try BuiltProducts.plugind(), "install", package],
                environment: environment)
            #expect(installed.status == 1)
            let reason = signed ? "the bundle changed after it was signed" : "carries no publisher signature"
            #expect(installed.stderr.contains(reason) && installed.stderr.contains("nothing was unpacked"), "\(installed.stderr)")
            #expect(installedEntries(test).isEmpty, "\(installedEntries(test))")
        }
    }
}

/// Archives that `plugind pack` would never write, made byte by byte (libarchive refuses to write
/// most of them): POSIX ustar headers, uncompressed.
enum HostileArchive: String, CaseIterable, CustomTestStringConvertible {
    case parentPath, absolutePath, symlink, hardLink, device, fifo, setuid, hugeEntry, manyEntries, truncated, corrupt, duplicate,
        changedAfterSigning

    var testDescription: String { rawValue }

    /// What the refusal must say.
    var expected: String {
        switch self {
        case .parentPath: "entry '../escape' leaves the bundle"
        case .absolutePath: "entry '/tmp/escape' has an absolute or empty path"
        case .symlink: "entry 'link' is a link"
        case .hardLink: "entry 'hard' is a link"
        case .device: "entry 'null' is not a regular file or a directory"
        case .fifo: "entry 'pipe' is not a regular file or a directory"
        case .setuid: "entry 'tool' has a setuid, setgid or sticky bit"
        case .hugeEntry: "entry 'huge' is larger than"
        case .manyEntries: "holds more than 1024 entries"
        case .truncated: "truncated"
        case .corrupt: "is not a plugin package"
        case .duplicate: "entry 'manifest.json': it appears twice"
        case .changedAfterSigning: "the bundle changed after it was signed"
        }
    }

    func bytes(signedBundle bundle: String) throws -> Data {
        func file(_ name: String) throws -> (String, Data) { (name, try Data(contentsOf: URL(fileURLWithPath: bundle + "/" + name))) }
        let real = try ["manifest.json", "libEcho.so", "plugind-signature.json"].map(file)
        var tar = TarWriter()
        switch self {
        case .parentPath: tar.file("../escape", Data("x".utf8))
        case .absolutePath: tar.file("/tmp/escape", Data("x".utf8))
        case .symlink: tar.entry("link", type: "2", link: "/etc/passwd")
        case .hardLink: tar.entry("hard", type: "1", link: "manifest.json")
        case .device: tar.entry("null", type: "3")
        case .fifo: tar.entry("pipe", type: "6")
        case .setuid: tar.file("tool", Data("x".utf8), mode: 0o4755)
        case .hugeEntry: tar.entry("huge", type: "0", declaredSize: 10 << 30)
        case .manyEntries: for index in 0..<100_000 { tar.file("f\(index)", Data()) }
        case .truncated:
            for (name, data) in real { tar.file(name, data) }
            return tar.data.prefix(tar.data.count / 2)
        case .corrupt: return Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 7919) })
        case .duplicate:
            for (name, data) in real { tar.file(name, data) }
            tar.file("manifest.json", real[0].1)
        case .changedAfterSigning:
            for (name, data) in real { tar.file(name, name == "manifest.json" ? data + Data(" ".utf8) : data) }
        }
        return tar.finished
    }
}

/// Writes ustar headers and data, including what no archiver would write.
struct TarWriter {
    var data = Data()

    mutating func file(_ name: String, _ contents: Data, mode: Int = 0o644) {
        entry(name, type: "0", mode: mode, declaredSize: contents.count)
        data += contents
        data += Data(count: (512 - contents.count % 512) % 512)
    }

    mutating func entry(_ name: String, type: Character, mode: Int = 0o644, link: String = "", declaredSize: Int = 0) {
        var header = [UInt8](repeating: 0, count: 512)
        func put(_ text: String, at offset: Int, length: Int) {
            for (index, byte) in text.utf8.prefix(length).enumerated() { header[offset + index] = byte }
        }
        func octal(_ value: Int, length: Int) -> String {
            let digits = String(value, radix: 8)
            return String(repeating: "0", count: max(length - 1 - digits.count, 0)) + digits
        }
        put(name, at: 0, length: 100)
        put(octal(mode, length: 8), at: 100, length: 7)
        put(octal(0, length: 8), at: 108, length: 7)
        put(octal(0, length: 8), at: 116, length: 7)
        put(octal(declaredSize, length: 12), at: 124, length: 11)
        put(octal(0, length: 12), at: 136, length: 11)
        put(String(repeating: " ", count: 8), at: 148, length: 8)
        header[156] = type.asciiValue ?? 0x30
        put(link, at: 157, length: 100)
        put("ustar", at: 257, length: 6)
        put("00", at: 263, length: 2)
        let checksum = header.reduce(0) { $0 + Int($1) }
        put(octal(checksum, length: 7) + "\0", at: 148, length: 8)
        data += header
    }

    var finished: Data { data + Data(count: 1024) }
}
