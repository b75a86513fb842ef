import Foundation
import TestSupport
import Testing

@testable import plugind

/// `plugind pack --format deb` as lintian sees it: a C plugin built as a publisher builds one
/// (cc, -g, static functions, no library needed), signed, packed with a maintainer, and checked
/// by lintian at its default level, then taken apart: the changelog, the copyright file, the
/// library stripped with its dynamic symbols and its function names for crash reports, the
/// bundle signed again and still installable.
@Suite("Plugin Debian packages that lintian accepts", .tags(.process), .timeLimit(.minutes(5)))
struct PluginDebianPackageTests {
    static let identifier = "org.plugind.tests.shout"
    static let package = "plugind-plugin-org.plugind.tests.shout"
    static let maintainer = "Plugin Team <plugins@example.org>"
    /// 2023-11-14 22:13:20 UTC, a Tuesday.
    static let sourceDateEpoch = "1700000000"

    /// A plugin in C that answers "SHOUT: " and the request, through a static handler (a name
    /// only the symbol table has), calling no library function, as `plugind new --lang c` writes.
    static let source = #"""
        #include <plugind_plugin.h>

        static const plugind_host *host;

        static int32_t shout_init(const plugind_host *host_interface, void **state, plugind_plugin_response *error) {
            (void)state;
            (void)error;
            host = host_interface;
            return PLUGIND_PLUGIN_OK;
        }

        __attribute__((noinline)) static int32_t shout_handle(void *state, const plugind_plugin_request *request,
                                                              plugind_plugin_response *response) {
            (void)state;
            static const char prefix[] = "SHOUT: ";
            if (host->append(response, (const uint8_t *)prefix, sizeof prefix - 1) != 0 ||
                host->append(response, request->bytes, request->length) != 0) {
                host->set_error(response, "the response does not fit");
                return 1;
            }
            return PLUGIND_PLUGIN_OK;
        }

        static const plugind_plugin descriptor = {
            .abi_version = PLUGIND_PLUGIN_ABI_VERSION,
            .size = sizeof(plugind_plugin),
            .name = "Shout",
            .version = "1.2.0",
            .init = shout_init,
            .handle = shout_handle,
        };

        PLUGIND_PLUGIN_EXPORT const plugind_plugin *plugind_plugin_entry(void) { return &descriptor; }
        PLUGIND_PLUGIN_BINDING("org.plugind.tests.point");
        """#

    /// The bundle of the C plugin at `version` in the test's work directory, unsigned, its
    /// library built with debug information (-g) as a publisher's usually is.
    static func bundle(_ test: TestHost, version: String = "1.2.0", stripped: Bool = false) async throws -> String {
        let bundle = try test.directory.subdirectory("work-\(UUID().uuidString)") + "/Shout.appex"
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        let manifest: [String: Any] = [
            "manifestVersion": 1, "identifier": identifier, "name": "Shout", "version": version,
            "extensionPoint": "org.plugind.tests.point", "library": "libShout.so",
            "description": "Answers each request in capitals. - A test's plugin, whose description has a line or two to wrap.",
        ]
        try JSONSerialization.data(withJSONObject: manifest, options: [.sortedKeys]).write(
            to: URL(fileURLWithPath: bundle + "/manifest.json"))
        try await CCompiler.sharedLibrary(source, output: bundle + "/libShout.so", flags: ["-g", "-fvisibility=hidden"])
        if stripped {
            let strip = try await CommandRunner.run(
                "/usr/bin/strip", ["--strip-unneeded", bundle + "/libShout.so"], environment: ProcessInfo.processInfo.environment)
            #expect(strip.status == 0, "\(strip.stderr)")
        }
        return bundle
    }

    /// A key pair in the test's directory; returns the private key's path and its fingerprint.
    static func keygen(_ test: TestHost, _ name: String = "publisher") async throws -> (path: String, fingerprint: String) {
        let path = try test.directory.subdirectory("keys") + "/" + name
        let made = try await plugind("keygen", "--output", path, in: test)
        #expect(made.status == 0, "\(made.stderr)")
        return (path, made.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    static func tool(_ name: String, _ arguments: [String], input: [UInt8] = []) async throws -> CommandRunner.Output {
        try await CommandRunner.run("/usr/bin/" + name, arguments, environment: ProcessInfo.processInfo.environment, input: input)
    }

    /// The package's files, unpacked into a new directory of the test.
    static func unpack(_ package: String, _ test: TestHost) async throws -> String {
        let root = try test.directory.subdirectory("unpacked-\(UUID().uuidString)")
        let unpacked = try await tool("dpkg-deb", ["-x", package, root])
        #expect(unpacked.status == 0, "\(unpacked.stderr)")
        return root
    }

    @Test(
        "lintian finds no error and no warning; the changelog, the copyright file, the stripped library with its symbols for crash reports, the bundle signed again and installable",
        .enabled(if: ExternalToolCheck.available("lintian"), "needs lintian (Debian's lintian), which Scripts/setup.sh installs"),
        .enabled(if: ExternalToolCheck.available("dpkg-shlibdeps"), "needs dpkg-shlibdeps (dpkg-dev), which Scripts/setup.sh installs"),
        arguments: ["1.2.0", "1.2.0-1"])
    func lintianAccepts(version: String) async throws {
        let test = try TestHost()
        defer { test.remove() }
        let (key, fingerprint) = try await Self.keygen(test)
        let bundle = try await Self.bundle(test, version: version)
        #expect(try await plugind("sign", bundle, "--key", key, in: test).status == 0)
        // The static handler's address, for the crash report's name below.
        let symbols = try await Self.tool("nm", ["--defined-only", bundle + "/libShout.so"])
        let handler = try #require(
            symbols.stdout.split(separator: "\n").first { $0.hasSuffix(" t shout_handle") }?.split(separator: " ").first)

        let package = test.directory.path + "/shout.deb"
        let packed = try await plugind(
            [
                "pack", bundle, "--format", "deb", "--output", package, "--maintainer", Self.maintainer, "--license", "Apache-2.0", "--key",
                key,
            ],
            in: test, environment: ["SOURCE_DATE_EPOCH": Self.sourceDateEpoch])
        #expect(packed.status == 0, "\(packed.stderr)")
        #expect(packed.stderr.contains("stripped libShout.so and signed the bundle again"), "\(packed.stderr)")

        let lintian = try await Self.tool("lintian", ["--fail-on", "error,warning", "--tag-display-limit", "0", package])
        #expect(lintian.status == 0, "lintian: \(lintian.stdout)\(lintian.stderr)")
        let complaints = lintian.stdout.split(separator: "\n").filter { $0.hasPrefix("E: ") || $0.hasPrefix("W: ") }
        #expect(complaints.isEmpty, "\(complaints)")

        // The documents, where Debian keeps them: a native version's changelog is changelog.gz,
        // one with a Debian revision's changelog.Debian.gz.
        let changelogName = version.contains("-") ? "changelog.Debian.gz" : "changelog.gz"
        let documentation = "./usr/share/doc/\(Self.package)/"
        let listing = try await Self.tool("dpkg-deb", ["-c", package])
        #expect(listing.stdout.contains(documentation + changelogName + "\n"), "\(listing.stdout)")
        #expect(listing.stdout.contains(documentation + "copyright\n"), "\(listing.stdout)")
        let fields = try await Self.tool("dpkg-deb", ["-f", package])
        #expect(fields.stdout.contains("Maintainer: \(Self.maintainer)\n"), "\(fields.stdout)")
        #expect(fields.stdout.contains("Version: \(version)\n"))
        #expect(fields.stdout.split(separator: "\n").allSatisfy { $0.unicodeScalars.count <= 80 }, "\(fields.stdout)")

        let root = try await Self.unpack(package, test)
        let changelog = try Data(contentsOf: URL(fileURLWithPath: root + documentation.dropFirst() + changelogName))
        // gzip -9n: no name, no time, the best compression.
        #expect(changelog.count > 10 && changelog[3] & 0x08 == 0 && changelog[4..<8].allSatisfy { $0 == 0 } && changelog[8] == 2)
        let plainChangelog = test.directory.path + "/changelog"
        try Data(try await Self.tool("gzip", ["-dc"], input: [UInt8](changelog)).standardOutput).write(
            to: URL(fileURLWithPath: plainChangelog))
        let parsed = try await Self.tool("dpkg-parsechangelog", ["-l", plainChangelog])
        #expect(parsed.status == 0, "\(parsed.stderr)")
        for field in [
            "Source: \(Self.package)", "Version: \(version)", "Distribution: unstable", "Maintainer: \(Self.maintainer)",
            "Date: Tue, 14 Nov 2023 22:13:20 +0000",
        ] {
            #expect(parsed.stdout.contains(field + "\n"), "\(field) in \(parsed.stdout)")
        }
        let copyright = try String(contentsOfFile: root + documentation.dropFirst() + "copyright", encoding: .utf8)
        #expect(copyright.hasPrefix("Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n"))
        #expect(copyright.contains("\nFiles: *\nCopyright: 2023 Plugin Team\nLicense: Apache-2.0\n"), "\(copyright)")
        #expect(copyright.contains("/usr/share/common-licenses/Apache-2.0"), "\(copyright)")

        // Stripped: no symbol table, no debug information; the dynamic symbols, and the
        // function names as MiniDebugInfo, which the host's crash reports read.
        let installed = root + "/usr/lib/plugind/plugins/" + Self.identifier
        let sections = try await Self.tool("readelf", ["-S", "-W", installed + "/libShout.so"])
        #expect(!sections.stdout.contains(".debug_") && !sections.stdout.contains(".symtab"), "\(sections.stdout)")
        #expect(sections.stdout.contains(".dynsym") && sections.stdout.contains(".gnu_debugdata"), "\(sections.stdout)")
        let dynamic = try await Self.tool("nm", ["--dynamic", "--defined-only", installed + "/libShout.so"])
        #expect(dynamic.stdout.contains(" T plugind_plugin_entry\n"), "\(dynamic.stdout)")
        let address = String(UInt64(handler, radix: 16)! + 4, radix: 16)
        let named = try await CommandRunner.run(
            try BuiltProducts.worker(), ["--symbolize"], environment: test.environment,
            input: Array("object 0 0 l \(installed)/libShout.so\nframe 0 \(address) 0\n".utf8))
        #expect(
            named.stdout.hasPrefix("0\tshout_handle\t4\t"), "the crash report's name of a static function: \(named.stdout) \(named.stderr)")

        // The signature holds for the stripped bytes: the bundle verifies, installs, and runs.
        let verified = try await plugind("verify", installed, in: test)
        #expect(verified.stdout.contains(": ok ("), "\(verified.stdout)")
        let installation = try await plugind("install", installed, in: test)
        #expect(installation.status == 0, "\(installation.stderr)")
        let info = try await plugind("info", Self.identifier, "--no-probe", in: test)
        #expect(info.stdout.contains("publisher:       \(fingerprint) (signature valid)"), "\(info.stdout)")
        #expect(try await plugind("approve", Self.identifier, "--yes", in: test).status == 0)
        let run = try await plugind("run", Self.identifier, "hi", in: test)
        #expect(run.stdout == "SHOUT: hi", "\(run.stdout) \(run.stderr)")
    }

    @Test(
        "with no maintainer pack says what to pass, DEBEMAIL and DEBFULLNAME stand in for it, a malformed one or licence is refused, and nothing is written",
        .enabled(if: ExternalToolCheck.available("dpkg-shlibdeps"), "needs dpkg-shlibdeps (dpkg-dev), which Scripts/setup.sh installs"))
    func maintainerRequired() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let key = try await Self.keygen(test).path
        let bundle = try await Self.bundle(test)
        #expect(try await plugind("sign", bundle, "--key", key, in: test).status == 0)
        let package = test.directory.path + "/shout.deb"

        let missing = try await plugind("pack", bundle, "--format", "deb", "--output", package, "--key", key, in: test)
        #expect(missing.status == 64)
        #expect(missing.stderr.contains("cannot pack \(Self.identifier) as a Debian package: it needs a maintainer"), "\(missing.stderr)")
        #expect(missing.stderr.contains("pass --maintainer 'Tools Team <tools@example.com>', or set DEBEMAIL"), "\(missing.stderr)")
        #expect(!FileManager.default.fileExists(atPath: package))

        let addressOnly = try await plugind(
            "pack", bundle, "--format", "deb", "--output", package, "--key", key, in: test, environment: ["DEBEMAIL": "env@example.org"])
        #expect(addressOnly.status == 64)
        #expect(addressOnly.stderr.contains("DEBFULLNAME, the name, is not set"), "\(addressOnly.stderr)")
        let fromEnvironment = try await plugind(
            "pack", bundle, "--format", "deb", "--output", package, "--key", key, in: test,
            environment: ["DEBEMAIL": "env@example.org", "DEBFULLNAME": "Environment  Team"])
        #expect(fromEnvironment.status == 0, "\(fromEnvironment.stderr)")
        #expect(try await Self.tool("dpkg-deb", ["-f", package, "Maintainer"]).stdout == "Environment Team <env@example.org>\n")
        try FileManager.default.removeItem(atPath: package)

        for (maintainer, problem) in [
            ("Plugin Team", "has no address in angle brackets"),
            ("<plugins@example.org>", "has no name before the address"),
            ("Plugin Team <plugins@localhost>", "is not a host name with a domain"),
            ("Plugin Team <plugins@invalid>", "is not a host name with a domain"),
            ("root <root@example.org>", "is root"),
            ("Plugin Team <root@example.org>", "is root's address"),
            ("Team, Others <plugins@example.org>", "has ',' in its name"),
            ("Plugin Team <plugins@example.org>\nDepends: evil", "holds the control character U+A"),
            ("Plugin Team <a@b@example.org>", "which is not local-part@host"),
        ] {
            let refused = try await plugind("pack", bundle, "--format", "deb", "--output", package, "--maintainer", maintainer, in: test)
            #expect(refused.status == 64, "\(maintainer)")
            #expect(
                refused.stderr.contains(problem) && refused.stderr.contains("e.g. 'Tools Team <tools@example.com>'"), "\(refused.stderr)")
            #expect(!refused.stderr.contains("\nDepends"))
        }
        let badLicense = try await plugind(
            "pack", bundle, "--format", "deb", "--output", package, "--maintainer", Self.maintainer, "--license", "MIT; Depends: evil",
            in: test)
        #expect(badLicense.status == 64)
        #expect(badLicense.stderr.contains("give an SPDX licence expression"), "\(badLicense.stderr)")
        let notDeb = try await plugind("pack", bundle, "--output", package, "--license", "MIT", in: test)
        #expect(notDeb.status == 64)
        #expect(notDeb.stderr.contains("--license is for --format deb"), "\(notDeb.stderr)")
        #expect(!FileManager.default.fileExists(atPath: package))
    }

    @Test(
        "a library stripped before signing is packed as signed, without the key; one that is not needs the key the bundle is signed with",
        .enabled(if: ExternalToolCheck.available("dpkg-shlibdeps"), "needs dpkg-shlibdeps (dpkg-dev), which Scripts/setup.sh installs"))
    func strippingNeedsTheKey() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let (key, fingerprint) = try await Self.keygen(test)
        let other = try await Self.keygen(test, "other").path
        let package = test.directory.path + "/shout.deb"

        let unstripped = try await Self.bundle(test)
        #expect(try await plugind("sign", unstripped, "--key", key, in: test).status == 0)
        let keyless = try await plugind(
            "pack", unstripped, "--format", "deb", "--output", package, "--maintainer", Self.maintainer, in: test)
        #expect(keyless.status == 1)
        #expect(keyless.stderr.contains("libShout.so has a symbol table or debug information"), "\(keyless.stderr)")
        #expect(keyless.stderr.contains("pass --key with the private key of \(fingerprint)"), "\(keyless.stderr)")
        #expect(keyless.stderr.contains("or strip before signing"), "\(keyless.stderr)")
        let wrongKey = try await plugind(
            "pack", unstripped, "--format", "deb", "--output", package, "--maintainer", Self.maintainer, "--key", other, in: test)
        #expect(wrongKey.status == 64)
        #expect(wrongKey.stderr.contains("but the bundle is signed by \(fingerprint)"), "\(wrongKey.stderr)")
        #expect(!FileManager.default.fileExists(atPath: package))
        // The bundle itself is left as it was: still signed, still unstripped.
        #expect(try await plugind("pack", unstripped, "--output", test.directory.path + "/shout.plugin", in: test).status == 0)

        let stripped = try await Self.bundle(test, stripped: true)
        #expect(try await plugind("sign", stripped, "--key", key, in: test).status == 0)
        let packed = try await plugind("pack", stripped, "--format", "deb", "--output", package, "--maintainer", Self.maintainer, in: test)
        #expect(packed.status == 0, "\(packed.stderr)")
        #expect(!packed.stderr.contains("stripped"), "\(packed.stderr)")
        #expect(packed.stderr.contains("no licence stated"), "\(packed.stderr)")
        let root = try await Self.unpack(package, test)
        let installed = root + "/usr/lib/plugind/plugins/" + Self.identifier
        for file in ["libShout.so", "manifest.json", "plugind-signature.json"] {
            #expect(
                FileManager.default.contents(atPath: installed + "/" + file) == FileManager.default.contents(atPath: stripped + "/" + file),
                "\(file)")
        }
        let copyright = try String(contentsOfFile: root + "/usr/share/doc/\(Self.package)/copyright", encoding: .utf8)
        #expect(copyright.contains("License: NOASSERTION\n The publisher stated no licence"), "\(copyright)")
    }
}
