import Foundation
import Glibc
import PlugindBundle
import TestSupport
import Testing

@testable import ExtensionFoundation
@testable import PlugindEngine

@Suite("Catalog: discovery and diagnostics", .tags(.unit))
struct CatalogTests {
    /// Installs `count` echo bundles, `org.plugind.tests.echo0` on, in `root`.
    func installEchoes(_ count: Int, in root: String) throws {
        for index in 0..<count {
            try PluginFixture(library: "Echo", identifier: "org.plugind.tests.echo\(index)").install(in: root)
        }
    }

    /// Writes a bundle directory with a manifest text and, optionally, a library.
    func writeBundle(_ root: String, _ name: String, manifest: String, library: String? = "Echo") throws -> String {
        let bundle = root + "/" + name
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        try Data(manifest.utf8).write(to: URL(fileURLWithPath: bundle + "/manifest.json"))
        if let library {
            try FileManager.default.copyItem(atPath: try BuiltProducts.library(library), toPath: bundle + "/lib\(library).so")
        }
        return bundle
    }

    func manifest(_ identifier: String, library: String = "libEcho.so") -> String {
        """
        {"manifestVersion": 1, "identifier": "\(identifier)", "name": "N", "version": "1",
         "extensionPoint": "org.plugind.tests.point", "library": "\(library)"}
        """
    }

    @Test("each kind of bad bundle gets its own diagnostic while the good bundles beside it still list")
    func badBundles() throws {
        let test = try TestHost()
        defer { test.remove() }
        let root = test.externalRoot
        let good = try PluginFixture(library: "Echo", identifier: "org.plugind.tests.good").install(in: root)
        let badJSON = try writeBundle(root, "bad-json", manifest: "{\"manifestVersion\": 1, ")
        let missingKey = try writeBundle(
            root, "missing-key",
            manifest: #"{"manifestVersion": 1, "identifier": "org.x.y", "name": "N", "version": "1", "library": "libEcho.so"}"#)
        let wrongType = try writeBundle(
            root, "wrong-type",
            manifest:
                #"{"manifestVersion": 1, "identifier": "org.x.z", "name": 5, "version": "1", "extensionPoint": "org.plugind.tests.point", "library": "libEcho.so"}"#
        )
        let libraryMissing = try writeBundle(
            root, "library-missing", manifest: manifest("org.plugind.tests.nolib", library: "libNothing.so"), library: nil)
        let outside = try writeBundle(
            root, "outside", manifest: manifest("org.plugind.tests.outside", library: "libOutside.so"), library: nil)
        try FileManager.default.createSymbolicLink(
            atPath: outside + "/libOutside.so", withDestinationPath: try BuiltProducts.library("Echo"))
        let wrongMachine = try writeBundle(root, "wrong-machine", manifest: manifest("org.plugind.tests.arm"))
        var elf = [UInt8](try Data(contentsOf: URL(fileURLWithPath: wrongMachine + "/libEcho.so")))
        elf[18] = 183
        elf[19] = 0
        try Data(elf).write(to: URL(fileURLWithPath: wrongMachine + "/libEcho.so"))
        let notELF = try writeBundle(root, "not-elf", manifest: manifest("org.plugind.tests.text", library: "libText.so"), library: nil)
        try Data("#!/bin/sh\n".utf8).write(to: URL(fileURLWithPath: notELF + "/libText.so"))
        let writable = try writeBundle(root, "world-writable", manifest: manifest("org.plugind.tests.writable"))
        chmod(writable + "/libEcho.so", 0o666)
        // The same identifier in the bundled root (earlier) shadows this external copy.
        try PluginFixture(library: "Echo", identifier: "org.plugind.tests.twice").install(in: test.bundledRoot)
        let shadowed = try PluginFixture(library: "Echo", identifier: "org.plugind.tests.twice").install(in: root)

        let inventory = Inventory.take(host: test.host, catalog: Catalog())
        #expect(inventory.items.map(\.entry.identifier).sorted() == ["org.plugind.tests.good", "org.plugind.tests.twice"])
        #expect(inventory.item("org.plugind.tests.twice")?.entry.root.isBundledWithHost == true)
        #expect(inventory.item("org.plugind.tests.good")?.entry.bundle.bundlePath == good)

        func diagnostic(_ path: String) -> AppExtensionDiagnostic? {
            inventory.problems.first { $0.path == path }
        }
        #expect(diagnostic(badJSON)?.kind == .invalidManifest)
        #expect(diagnostic(badJSON)?.message.contains("is not valid JSON") == true)
        #expect(diagnostic(missingKey)?.kind == .invalidManifest)
        #expect(diagnostic(missingKey)?.message.contains("key 'extensionPoint' is missing") == true)
        #expect(diagnostic(wrongType)?.message.contains("key 'name' must be a string, found number") == true)
        #expect(diagnostic(libraryMissing)?.kind == .libraryMissing)
        #expect(diagnostic(outside)?.kind == .libraryOutsideBundle)
        #expect(diagnostic(outside)?.message.contains("outside the bundle") == true)
        #expect(diagnostic(wrongMachine)?.kind == .wrongArchitecture)
        #expect(diagnostic(wrongMachine)?.message.contains("AArch64") == true)
        #expect(diagnostic(notELF)?.kind == .notALibrary)
        #expect(diagnostic(writable)?.kind == .insecurePermissions)
        #expect(diagnostic(writable)?.message.contains("writable by every user") == true)
        #expect(diagnostic(shadowed)?.kind == .shadowed)
        #expect(diagnostic(shadowed)?.message.contains(test.bundledRoot) == true)
        #expect(inventory.problems.count == 9)
    }

    @Test("an unchanged tree is not re-read; a changed bundle is")
    func cache() throws {
        let test = try TestHost()
        defer { test.remove() }
        try installEchoes(5, in: test.externalRoot)
        let catalog = Catalog()
        let roots = SearchRoot.roots(of: test.host)
        #expect(catalog.scan(roots).entries.count == 5)
        #expect(catalog.inspectionCount == 5)
        #expect(catalog.scan(roots).entries.count == 5)
        #expect(catalog.inspectionCount == 5)
        // Touching one manifest invalidates that bundle only.
        let manifest = test.externalRoot + "/org.plugind.tests.echo3.appex/manifest.json"
        let text = try String(contentsOfFile: manifest, encoding: .utf8)
        try text.replacingOccurrences(of: "1.0.0", with: "1.0.1").write(toFile: manifest, atomically: false, encoding: .utf8)
        let entries = catalog.scan(roots).entries
        #expect(catalog.inspectionCount == 6)
        #expect(entries.first { $0.identifier == "org.plugind.tests.echo3" }?.manifest.version == "1.0.1")
    }

    @Test("a rejected bundle is read again only once it changes; a directory without a manifest is passed over until one appears")
    func rejectedAndIncomplete() throws {
        let test = try TestHost()
        defer { test.remove() }
        let root = test.externalRoot
        let badJSON = try writeBundle(root, "bad-json", manifest: "{\"manifestVersion\": 1, ")
        _ = try writeBundle(root, "library-missing", manifest: manifest("org.plugind.tests.nolib", library: "libNothing.so"), library: nil)
        let writable = try writeBundle(root, "world-writable", manifest: manifest("org.plugind.tests.writable"))
        chmod(writable + "/libEcho.so", 0o666)
        try FileManager.default.createDirectory(atPath: root + "/incomplete", withIntermediateDirectories: false)
        let catalog = Catalog()
        let roots = SearchRoot.roots(of: test.host)
        let first = catalog.scan(roots)
        #expect(first.entries.isEmpty && first.diagnostics.count == 3)
        #expect(!first.diagnostics.contains { $0.path.hasSuffix("/incomplete") })
        #expect(catalog.inspectionCount == 3)
        #expect(catalog.scan(roots).diagnostics.count == 3)
        #expect(catalog.inspectionCount == 3)

        // A fix to one rejected bundle, and a manifest arriving in the incomplete directory.
        chmod(writable + "/libEcho.so", 0o644)
        try Data(manifest("org.plugind.tests.arrived").utf8).write(to: URL(fileURLWithPath: root + "/incomplete/manifest.json"))
        try FileManager.default.copyItem(atPath: try BuiltProducts.library("Echo"), toPath: root + "/incomplete/libEcho.so")
        let fixed = catalog.scan(roots)
        #expect(Set(fixed.entries.map(\.identifier)) == ["org.plugind.tests.writable", "org.plugind.tests.arrived"])
        #expect(fixed.diagnostics.count == 2 && fixed.diagnostics.contains { $0.path == badJSON })
        #expect(catalog.inspectionCount == 5)
    }

    @Test("a new process reads unchanged bundles from the store on disk and still sees changed ones")
    func storeOnDisk() throws {
        let test = try TestHost()
        defer { test.remove() }
        try installEchoes(4, in: test.externalRoot)
        // One with every optional field the store must keep (a field it dropped would make the
        // next process's entries differ).
        try PluginFixture(
            library: "Echo", identifier: "org.plugind.tests.echo4",
            extra: [
                "description": "Echoes", "localizedNames": ["de": "Echo (de)", "pt-BR": "Eco"],
                "localizedDescriptions": ["de": "Wiederholt"], "minimumHostVersion": "0.1.0", "concurrency": 2,
                "extensionPointVersions": ["minimum": "1.2", "below": "2"], "capabilities": ["text/markdown", "text/plain"],
                "permissions": ["network": true, "write": ["/srv/documents"], "read": ["/usr/share/dict"], "symlinks": true],
                "limits": ["memoryBytes": 64 << 20, "threads": 8],
            ]
        ).install(in: test.externalRoot)
        let roots = SearchRoot.roots(of: test.host)
        let store = test.host.stateDirectory.path
        let first = Catalog()
        let original = first.scan(roots, storeDirectory: store).entries
        #expect(first.inspectionCount == 5)
        let rich = try #require(original.first { $0.identifier == "org.plugind.tests.echo4" }?.manifest)
        #expect(rich.permissions.symlinks && rich.localizedNames["pt-BR"] == "Eco" && rich.localizedDescriptions["de"] == "Wiederholt")
        #expect(rich.extensionPointVersions?.description == "1.2 or later, before 2")
        #expect(rich.capabilities == ["text/markdown", "text/plain"])
        let storePath = store + "/catalog.cache"
        let attributes = try FileManager.default.attributesOfItem(atPath: storePath)
        #expect((attributes[.posixPermissions] as? Int) == 0o600)

        // A fresh catalog stands for a new process: nothing is read in full, the result is the same.
        let second = Catalog()
        #expect(second.scan(roots, storeDirectory: store).entries == original)
        #expect(second.inspectionCount == 0)

        let manifest = test.externalRoot + "/org.plugind.tests.echo3.appex/manifest.json"
        let text = try String(contentsOfFile: manifest, encoding: .utf8)
        try text.replacingOccurrences(of: "1.0.0", with: "2.0.0").write(toFile: manifest, atomically: true, encoding: .utf8)
        let third = Catalog()
        let entries = third.scan(roots, storeDirectory: store).entries
        #expect(third.inspectionCount == 1)
        #expect(entries.first { $0.identifier == "org.plugind.tests.echo3" }?.manifest.version == "2.0.0")
        // The store now holds the change: the next process reads nothing again.
        let fourth = Catalog()
        #expect(fourth.scan(roots, storeDirectory: store).entries == entries)
        #expect(fourth.inspectionCount == 0)
    }

    @Test("scans of a new process that overlap, one reading the store, find the same bundles")
    func overlappingScansOfANewProcess() async throws {
        let test = try TestHost()
        defer { test.remove() }
        try installEchoes(6, in: test.externalRoot)
        let roots = SearchRoot.roots(of: test.host)
        let store = test.host.stateDirectory.path
        let expected = Catalog().scan(roots, storeDirectory: store).entries
        let catalog = Catalog()
        let found = await withTaskGroup(of: [CatalogEntry].self) { group in
            for _ in 0..<8 { group.addTask { catalog.scan(roots, storeDirectory: store).entries } }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(found.count == 8 && found.allSatisfy { $0 == expected })
        // Whatever the overlap, each bundle was read in full at most once per scan, and a scan
        // after them all reads nothing.
        #expect(catalog.inspectionCount <= 8 * expected.count)
        let settled = catalog.inspectionCount
        #expect(catalog.scan(roots, storeDirectory: store).entries == expected)
        #expect(catalog.inspectionCount == settled)
    }

    @Test("a bundle removed is forgotten and the store rewritten without it; an unchanged rescan writes nothing")
    func removal() throws {
        let test = try TestHost()
        defer { test.remove() }
        try installEchoes(3, in: test.externalRoot)
        let roots = SearchRoot.roots(of: test.host)
        let store = test.host.stateDirectory.path
        let storePath = store + "/catalog.cache"
        let catalog = Catalog()
        #expect(catalog.scan(roots, storeDirectory: store).entries.count == 3)
        let written = try #require(FileStatus(path: storePath)?.identity)
        #expect(catalog.scan(roots, storeDirectory: store).entries.count == 3)
        #expect(FileStatus(path: storePath)?.identity == written)
        try FileManager.default.removeItem(atPath: test.externalRoot + "/org.plugind.tests.echo1.appex")
        let remaining = ["org.plugind.tests.echo0", "org.plugind.tests.echo2"]
        #expect(catalog.scan(roots, storeDirectory: store).entries.map(\.identifier) == remaining)
        #expect(FileStatus(path: storePath)?.identity != written)
        // A new process reads the two from the store, and nothing in full.
        let next = Catalog()
        #expect(next.scan(roots, storeDirectory: store).entries.map(\.identifier) == remaining)
        #expect(next.inspectionCount == 0)
    }

    @Test("a library symlink pointed at another file counts as a change, in this process and the next")
    func librarySymlink() throws {
        let test = try TestHost()
        defer { test.remove() }
        let bundle = try writeBundle(
            test.externalRoot, "linked.appex", manifest: manifest("org.plugind.tests.linked", library: "lib/libEcho.so"), library: nil)
        try FileManager.default.createDirectory(atPath: bundle + "/lib", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: try BuiltProducts.library("Echo"), toPath: bundle + "/lib/libEcho.so.1")
        try FileManager.default.copyItem(atPath: try BuiltProducts.library("CTextFilter"), toPath: bundle + "/lib/libEcho.so.2")
        try FileManager.default.createSymbolicLink(atPath: bundle + "/lib/libEcho.so", withDestinationPath: "libEcho.so.1")
        let roots = SearchRoot.roots(of: test.host)
        let store = test.host.stateDirectory.path
        let catalog = Catalog()
        #expect(catalog.scan(roots, storeDirectory: store).entries.first?.bundle.libraryPath.hasSuffix("libEcho.so.1") == true)
        try FileManager.default.removeItem(atPath: bundle + "/lib/libEcho.so")
        try FileManager.default.createSymbolicLink(atPath: bundle + "/lib/libEcho.so", withDestinationPath: "libEcho.so.2")
        #expect(catalog.scan(roots, storeDirectory: store).entries.first?.bundle.libraryPath.hasSuffix("libEcho.so.2") == true)
        #expect(Catalog().scan(roots, storeDirectory: store).entries.first?.bundle.libraryPath.hasSuffix("libEcho.so.2") == true)
    }

    @Test("a bundle directory linked into a root, and a library named plainly that is a symlink, are followed to their files")
    func linkedBundleAndLibrary() throws {
        let test = try TestHost()
        defer { test.remove() }
        let elsewhere = try TemporaryDirectory()
        defer { elsewhere.remove() }
        let target = try writeBundle(elsewhere.path, "target.appex", manifest: manifest("org.plugind.tests.linkedbundle"), library: nil)
        try FileManager.default.copyItem(atPath: try BuiltProducts.library("Echo"), toPath: target + "/libEcho.so.1")
        try FileManager.default.createSymbolicLink(atPath: target + "/libEcho.so", withDestinationPath: "libEcho.so.1")
        try FileManager.default.createSymbolicLink(atPath: test.externalRoot + "/linked.appex", withDestinationPath: target)
        let catalog = Catalog()
        let inventory = Inventory.take(host: test.host, catalog: catalog)
        let bundle = try #require(inventory.item("org.plugind.tests.linkedbundle")?.entry.bundle, "\(inventory.problems)")
        #expect(bundle.bundlePath == canonicalPath(target))
        #expect(bundle.libraryPath == canonicalPath(target + "/libEcho.so.1"))
        #expect(bundle.libraryStatus == FileStatus(path: target + "/libEcho.so.1"))
        // Unchanged, it is not read again, in this process or (from the store) the next.
        let roots = SearchRoot.roots(of: test.host)
        let store = test.host.stateDirectory.path
        #expect(catalog.scan(roots, storeDirectory: store).entries.map(\.bundle.bundlePath) == [bundle.bundlePath])
        #expect(catalog.scan(roots, storeDirectory: store).entries.count == 1)
        #expect(catalog.inspectionCount == 1)
        let next = Catalog()
        #expect(next.scan(roots, storeDirectory: store).entries.map(\.bundle.bundlePath) == [bundle.bundlePath])
        #expect(next.inspectionCount == 0)
        // The link pointed at another bundle is a change, in this process and the next.
        let other = try writeBundle(elsewhere.path, "other.appex", manifest: manifest("org.plugind.tests.otherlinked"))
        try FileManager.default.removeItem(atPath: test.externalRoot + "/linked.appex")
        try FileManager.default.createSymbolicLink(atPath: test.externalRoot + "/linked.appex", withDestinationPath: other)
        #expect(Catalog().scan(roots, storeDirectory: store).entries.map(\.identifier) == ["org.plugind.tests.otherlinked"])
        #expect(catalog.scan(roots).entries.map(\.identifier) == ["org.plugind.tests.otherlinked"])
    }

    @Test("a store another user could have written is not read")
    func storeOwnership() throws {
        let test = try TestHost()
        defer { test.remove() }
        try PluginFixture(library: "Echo", identifier: "org.plugind.tests.echo").install(in: test.externalRoot)
        let roots = SearchRoot.roots(of: test.host)
        let store = test.host.stateDirectory.path
        _ = Catalog().scan(roots, storeDirectory: store)
        #expect(chmod(store + "/catalog.cache", 0o666) == 0)
        let catalog = Catalog()
        #expect(catalog.scan(roots, storeDirectory: store).entries.count == 1)
        #expect(catalog.inspectionCount == 1)
    }

    @Test("a damaged store is ignored and replaced", arguments: ["garbage", "truncated", "empty"])
    func damagedStore(damage: String) throws {
        let test = try TestHost()
        defer { test.remove() }
        try installEchoes(3, in: test.externalRoot)
        let roots = SearchRoot.roots(of: test.host)
        let store = test.host.stateDirectory.path
        _ = Catalog().scan(roots, storeDirectory: store)
        let storePath = store + "/catalog.cache"
        let intact = try Data(contentsOf: URL(fileURLWithPath: storePath))
        let damaged: Data =
            switch damage {
            case "garbage": Data((0..<intact.count).map { UInt8(truncatingIfNeeded: $0 &* 31) })
            case "truncated": intact.prefix(intact.count / 2)
            default: Data()
            }
        try damaged.write(to: URL(fileURLWithPath: storePath))
        let catalog = Catalog()
        #expect(catalog.scan(roots, storeDirectory: store).entries.count == 3)
        #expect(catalog.inspectionCount == 3)
        let next = Catalog()
        #expect(next.scan(roots, storeDirectory: store).entries.count == 3)
        #expect(next.inspectionCount == 0)
    }

    @Test("a large root is scanned in parallel with the same result as one bundle at a time")
    func parallelScan() throws {
        let test = try TestHost()
        defer { test.remove() }
        let library = try BuiltProducts.library("Echo")
        for index in 0..<300 {
            let bundle = try writeBundle(
                test.externalRoot, String(format: "b%03d.appex", index), manifest: manifest("org.plugind.tests.b\(index)"), library: nil)
            try FileManager.default.copyItem(atPath: library, toPath: bundle + "/libEcho.so")
        }
        // Two broken ones among them, and a plain directory that is no bundle.
        try Data("{".utf8).write(to: URL(fileURLWithPath: test.externalRoot + "/b100.appex/manifest.json"))
        try FileManager.default.removeItem(atPath: test.externalRoot + "/b200.appex/libEcho.so")
        try FileManager.default.createDirectory(atPath: test.externalRoot + "/b250.appex/sub", withIntermediateDirectories: true)
        try FileManager.default.removeItem(atPath: test.externalRoot + "/b250.appex/manifest.json")
        let snapshot = Catalog().scan(SearchRoot.roots(of: test.host))
        let expected = (0..<300).filter { ![100, 200, 250].contains($0) }.map { "org.plugind.tests.b\($0)" }
        #expect(snapshot.entries.map(\.identifier) == expected)
        #expect(snapshot.diagnostics.map(\.path).map { ($0 as NSString).lastPathComponent } == ["b100.appex", "b200.appex"])
        // Stored in chunks of 64 and read back, each chunk decoded on its own: the same bundles.
        let store = CatalogStore(directory: test.host.stateDirectory.path, writerVersion: .current, chunkSize: 64)
        store.save(snapshot.entries.map { ($0.bundle.bundlePath, $0.bundle) })
        let opened = try #require(store.open())
        defer { opened.close() }
        #expect(opened.chunks.count == 5)
        let loaded = try (0..<opened.chunks.count).flatMap { try #require(opened.bundles(inChunk: $0)) }
        #expect(loaded.map(\.bundle.manifest.identifier).sorted() == expected.sorted())
        #expect(loaded.allSatisfy { $0.foundAt == $0.bundle.bundlePath })
        // A new process uses every chunk (only the two broken bundles, which are not stored, are
        // read in full) — or none, when one chunk among them is damaged.
        let reader = Catalog()
        #expect(reader.scan(SearchRoot.roots(of: test.host), storeDirectory: test.host.stateDirectory.path).entries.count == expected.count)
        #expect(reader.inspectionCount == 2)
        store.save(snapshot.entries.map { ($0.bundle.bundlePath, $0.bundle) })
        var bytes = try Data(contentsOf: URL(fileURLWithPath: store.path))
        bytes.replaceSubrange(opened.chunks[2].lowerBound..<opened.chunks[2].lowerBound + 4, with: [0xFF, 0xFF, 0xFF, 0xFF])
        try bytes.write(to: URL(fileURLWithPath: store.path))
        let damaged = Catalog()
        #expect(
            damaged.scan(SearchRoot.roots(of: test.host), storeDirectory: test.host.stateDirectory.path).entries.count == expected.count)
        #expect(damaged.inspectionCount == expected.count + 2)
    }

    @Test("a function-only bundle may name a system library by soname")
    func systemLibrary() throws {
        let test = try TestHost()
        defer { test.remove() }
        let bundle = try writeBundle(
            test.externalRoot,
            "libc.appex",
            manifest: """
                {"manifestVersion": 1, "identifier": "org.plugind.tests.libc", "name": "libc", "version": "1",
                 "extensionPoint": "org.plugind.tests.point", "library": "libc.so.6",
                 "functions": [{"name": "abs", "arguments": ["int32"], "returns": "int32"}]}
                """,
            library: nil
        )
        let inventory = Inventory.take(host: test.host, catalog: Catalog())
        let entry = try #require(inventory.item("org.plugind.tests.libc")?.entry)
        #expect(entry.bundle.usesSystemLibrary)
        #expect(entry.bundle.libraryPath.hasPrefix("/"))
        #expect(!entry.bundle.libraryPath.hasPrefix(bundle))
    }
}
