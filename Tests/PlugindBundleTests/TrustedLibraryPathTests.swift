import Foundation
import Glibc
import PlugindBundle
import PlugindSystem
import TestSupport
import Testing

@Suite("libraries outside a bundle: followed only through what no other user can change", .tags(.unit, .root))
struct TrustedLibraryPathTests {
    @Test("a soname symlink in a directory reached through /lib resolves to the versioned file")
    func sonameSymlink() throws {
        let candidate = try #require(LibraryResolver().candidate(for: "libz.so.1"))
        var link = stat()
        #expect(lstat(candidate, &link) == 0 && link.st_mode & S_IFMT == S_IFLNK, "libz.so.1 is a symlink on Debian")
        let resolution = try TrustedLibraryPath.resolve(candidate, rule: .systemLibrary).get()
        #expect(resolution.canonicalPath == canonicalPath(candidate))
        #expect(resolution.canonicalPath.hasPrefix("/usr/lib/"))
        #expect(resolution.status.isRegularFile)
        let opened = try TrustedLibraryPath.open(candidate, rule: .systemLibrary).get()
        defer { close(opened.descriptor) }
        var status = stat()
        #expect(fstat(opened.descriptor, &status) == 0 && FileIdentity(status) == resolution.status.identity)
    }

    @Test("a directory every user may write, a loop of symlinks and a directory path are refused, naming what")
    func refusals() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let open = try directory.subdirectory("open")
        try Data("x".utf8).write(to: URL(fileURLWithPath: open + "/libx.so"))
        #expect(chmod(open, 0o777) == 0)
        let writable = TrustedLibraryPath.resolve(open + "/libx.so", rule: .dependency)
        #expect(
            writable.failure?.reason
                == "the directory \(open) is writable by every user (owner \(TrustedLibraryPath.ownerName(geteuid())), mode 777); only files and directories that no one else may write are trusted"
        )
        // The same file in a directory only its owner may write: trusted as a dependency, never
        // as a system library (owned by root, inside the system directories).
        #expect(chmod(open, 0o755) == 0)
        #expect(TrustedLibraryPath.resolve(open + "/libx.so", rule: .dependency).failure == nil)
        let system = TrustedLibraryPath.resolve(open + "/libx.so", rule: .systemLibrary).failure
        let expected = geteuid() == 0 ? "outside the system library directories" : "is owned by \(TrustedLibraryPath.ownerName(geteuid()))"
        #expect(system?.reason.contains(expected) == true, "\(String(describing: system))")

        try FileManager.default.createSymbolicLink(atPath: open + "/a", withDestinationPath: "b")
        try FileManager.default.createSymbolicLink(atPath: open + "/b", withDestinationPath: "a")
        #expect(
            TrustedLibraryPath.resolve(open + "/a", rule: .dependency).failure?.reason
                == "more than 40 symlinks")
        #expect(
            TrustedLibraryPath.resolve(open, rule: .dependency).failure?.reason
                == "names a directory, not a file")
        #expect(
            TrustedLibraryPath.resolve("libz.so.1", rule: .systemLibrary).failure?.reason == "not an absolute path")
    }

    @Test("a bundle naming a soname that resolves into a directory every user may write is refused at inspection")
    func inspectionRefusesWritableSystemDirectory() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let libraries = try directory.subdirectory("lib")
        let real = try #require(LibraryResolver().resolve("libz.so.1"))
        try FileManager.default.copyItem(atPath: real, toPath: libraries + "/libz.so.1")
        #expect(chmod(libraries, 0o777) == 0)
        let bundle = try directory.subdirectory("zlib.appex")
        let manifest = """
            {"manifestVersion": 1, "identifier": "org.plugind.tests.zlib", "name": "zlib", "version": "1",
             "extensionPoint": "org.plugind.tests.functions", "library": "libz.so.1",
             "functions": [{"name": "zlibVersion", "arguments": [], "returns": "string"}]}
            """
        try Data(manifest.utf8).write(to: URL(fileURLWithPath: bundle + "/manifest.json"))
        let resolver = LibraryResolver(cachePath: "/nonexistent", defaultDirectories: [libraries])
        guard case .failure(let problem) = BundleInspector.inspect(bundleAt: bundle, resolver: resolver) else {
            Issue.record("a library in a directory every user may write was accepted")
            return
        }
        #expect(problem.kind == .insecurePermissions)
        // Root owns every directory above: the one every user may write is named. An ordinary
        // user's temporary directory is refused first, as not root's.
        let refused =
            geteuid() == 0
            ? "the directory \(libraries) is writable by every user"
            : "the directory \(directory.path) is owned by \(TrustedLibraryPath.ownerName(geteuid())) (mode 700)"
        #expect(
            problem.message.hasPrefix("system library 'libz.so.1' is refused: \(libraries)/libz.so.1: \(refused)"), "\(problem.message)")
        // The real one, through the system's own resolution, is accepted.
        guard case .success(let inspected) = BundleInspector.inspect(bundleAt: bundle) else {
            Issue.record("the system's libz.so.1 was refused")
            return
        }
        #expect(inspected.usesSystemLibrary && inspected.libraryPath == real)
    }
}

extension Result {
    fileprivate var failure: Failure? {
        if case .failure(let failure) = self { return failure }
        return nil
    }
}
