import Foundation
import TestSupport
import Testing

@testable import plugind

/// The texts of a plugin's package from what a manifest and the command line give, which are the
/// publisher's: a maintainer and a licence read as lintian and Debian read them, and a
/// description, a changelog and a copyright file in lines lintian accepts whatever the manifest holds.
@Suite("Plugin Debian packages: maintainer, licence and texts", .tags(.unit))
struct PluginDebianPackageTextTests {
    @Test("a maintainer is a name and an address on a host with a domain, one line, its spaces made one")
    func maintainers() throws {
        let parsed = try DebianMaintainer.parse("  José  Núñez   <jose.nunez+plugins@mail.example.org> ")
        #expect(parsed == DebianMaintainer(name: "José Núñez", address: "jose.nunez+plugins@mail.example.org"))
        #expect(parsed.description == "José Núñez <jose.nunez+plugins@mail.example.org>")
        #expect(try DebianMaintainer.parse("J. O'Brien <job@example.co.uk>").name == "J. O'Brien")
        for refused in [
            "", "Name", "Name <>", "Name <@example.org>", "Name <a@>", "Name <a@example>", "Name <a@example.-org>", "Name <a@exa_mple.org>",
            "Name <a..b@example.org>", "Name <.a@example.org>", "Name <a@example.org> extra", "Na\u{202E}me <a@example.org>",
            "Name\t<a@example.org>", "\"Name\" <a@example.org>", "Name (x) <a@example.org>", "ROOT <a@example.org>", "Name <a@example.4>",
            String(repeating: "n", count: 260) + " <a@example.org>",
        ] {
            #expect(throws: DebianMaintainer.Failure.self, "\(refused)") { try DebianMaintainer.parse(refused) }
        }
        #expect(try DebianMaintainer.fromEnvironment { _ in nil } == nil)
        let environment = ["DEBEMAIL": "Team <team@example.org>", "DEBFULLNAME": "Ignored"]
        #expect(try DebianMaintainer.fromEnvironment { environment[$0] }?.description == "Team <team@example.org>")
    }

    @Test("a licence is an SPDX expression; Debian's common licences get Debian's short names and point to /usr/share/common-licenses")
    func licences() throws {
        let license = try DebianLicense(spdx: "(GPL-2.0-or-later WITH Classpath-exception-2.0 OR MIT) AND Apache-2.0")
        #expect(license.identifiers == ["GPL-2.0-or-later", "MIT", "Apache-2.0"])
        #expect(license.exceptions == ["Classpath-exception-2.0"])
        #expect(license.shortName == "(GPL-2+ with Classpath-exception-2.0 or MIT) and Apache-2.0")
        #expect(try DebianLicense(spdx: "LGPL-2.1-only").shortName == "LGPL-2.1")
        #expect(try DebianLicense(spdx: "LicenseRef-Example-Proprietary").shortName == "LicenseRef-Example-Proprietary")
        let gpl = DebianLicense.paragraph(for: "GPL-3.0-or-later", licenceFiles: [])
        #expect(gpl.contains("any later version") && gpl.hasSuffix("/usr/share/common-licenses/GPL-3."))
        #expect(DebianLicense.paragraph(for: "MIT", licenceFiles: ["/x/LICENSE"]).contains("spdx.org/licenses/MIT.html"))
        for refused in [
            "", "MIT OR", "OR MIT", "MIT and Apache-2.0", "(MIT", "MIT)", "MIT Apache-2.0", "MIT WITH", "MIT\nDepends: x", "MIT;", "-MIT",
        ] {
            #expect(throws: DebianLicense.Failure.self, "\(refused)") { try DebianLicense(spdx: refused) }
        }
    }

    @Test("a manifest's text becomes lines of at most 80 characters, without control characters, none that reads as markup")
    func wrapping() {
        let hostile =
            "Line\none\r\u{2028}two\tthree\u{202E} four\u{0}five. - list - item * star . .NET \(String(repeating: "x", count: 200)) end"
        let lines = DebianPackage.descriptionLines(String(repeating: "word ", count: 40) + hostile)
        #expect(lines.count > 3)
        for line in lines {
            #expect(line.unicodeScalars.count <= 80, "\(line)")
            #expect(line.hasPrefix(" ") && !line.hasPrefix(" .") && !line.hasPrefix(" -") && !line.hasPrefix(" *"), "\(line)")
            #expect(!line.unicodeScalars.contains { DebianMaintainer.isControl($0) }, "\(line)")
        }
        #expect(lines.joined().contains("one two three four five."))
        let entry = DebianPackage.wrap(String(repeating: "change ", count: 30), first: "  * ", rest: "    ")
        #expect(entry.first?.hasPrefix("  * change") == true && entry.dropFirst().allSatisfy { $0.hasPrefix("    change") })
        #expect(entry.allSatisfy { $0.unicodeScalars.count <= 80 })
        #expect(DebianPackage.changelogDate(Date(timeIntervalSince1970: 1_700_000_000)) == "Tue, 14 Nov 2023 22:13:20 +0000")
        #expect(throws: DebianPackage.Failure.self) { try DebianPackage.packageDate(sourceDateEpoch: "yesterday") }
    }

    @Test("an ELF file's sections say whether it is stripped and how many libraries it needs")
    func sections() throws {
        let echo = try #require(try DebianPackage.ELFSections.read(atPath: try BuiltProducts.library("Echo")))
        #expect(echo.isLoadable && echo.needsStripping && echo.neededCount >= 1)
        #expect(echo.names.contains(".dynsym"))
        #expect(try DebianPackage.ELFSections.read(atPath: BuiltProducts.packageRoot + "/Package.swift") == nil)
        // A publisher's file that claims what it does not hold is refused, never read past its end.
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var header = [UInt8](repeating: 0, count: 64)
        header.replaceSubrange(0..<6, with: [0x7F, 0x45, 0x4C, 0x46, 2, 1])
        header[16] = 3  // ET_DYN
        header.replaceSubrange(0x28..<0x30, with: [0xF0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF])  // e_shoff near 2^64
        header[0x3A] = 64  // e_shentsize
        header[0x3C] = 2  // e_shnum
        for (name, bytes) in [("far", header), ("truncated", Array(header.prefix(20)))] {
            let path = directory.path + "/" + name
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            #expect(throws: DebianPackage.Failure.self, "\(name)") { try DebianPackage.ELFSections.read(atPath: path) }
        }
        // A real library cut short anywhere, or with a byte of its header changed: read or
        // refused, never a trap.
        let library = try [UInt8](Data(contentsOf: URL(fileURLWithPath: try BuiltProducts.library("Echo"))))
        let path = directory.path + "/mutated"
        var variants = stride(from: 0, to: library.count, by: max(1, library.count / 64)).map { Array(library.prefix($0)) }
        for offset in 16..<64 {
            var changed = library
            changed[offset] ^= 0xFF
            variants.append(changed)
        }
        for variant in variants {
            try Data(variant).write(to: URL(fileURLWithPath: path))
            _ = try? DebianPackage.ELFSections.read(atPath: path)
        }
    }
}
