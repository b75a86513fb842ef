import Foundation
import Glibc
import TestSupport
import Testing

@testable import plugind

/// The walk of a project's directories that `plugind dev` watches: links to directories are
/// followed, so a project may lead back into itself or anywhere; the walk visits each directory
/// once and stops at its bounds. Assertions are on the entries the walk read, not on time.
@Suite("plugind dev's walk of a project's sources", .tags(.unit), .timeLimit(.minutes(1)))
struct SourceChangesTests {
    /// A project: a Makefile, `src/main.c`, `src/lib/`, and a build output that is not walked.
    static func project(in directory: TemporaryDirectory) throws -> String {
        let project = try directory.subdirectory("project")
        for path in ["src/lib", "build/objects"] {
            try FileManager.default.createDirectory(atPath: project + "/" + path, withIntermediateDirectories: true)
        }
        for file in ["Makefile", "src/main.c", "build/objects/main.o"] {
            #expect(FileManager.default.createFile(atPath: project + "/" + file, contents: Data()))
        }
        return project
    }

    @Test("two links to '.' and one to '..' are each a directory already walked: every entry is read once")
    func linksIntoItself() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let project = try Self.project(in: directory)
        #expect(symlink(".", project + "/here") == 0)
        #expect(symlink(".", project + "/again") == 0)
        #expect(symlink("..", project + "/src/up") == 0)
        let changes = try SourceChanges(watching: project)
        // The project's Makefile, src, build, here and again; src's main.c, lib and up; lib is
        // empty; build/ is not entered.
        #expect(changes.walkStatistics == .init(entries: 8, directories: 3, limitReached: false))
    }

    @Test("a link to a directory outside the project is walked once, however many links lead to it")
    func linksOutside() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let project = try Self.project(in: directory)
        let shared = try directory.subdirectory("shared")
        #expect(FileManager.default.createFile(atPath: shared + "/shared.c", contents: Data()))
        #expect(symlink(shared, project + "/vendor") == 0)
        #expect(symlink(shared, project + "/src/vendor") == 0)
        #expect(symlink(directory.path, shared + "/all") == 0)
        let changes = try SourceChanges(watching: project)
        // The project's four entries (Makefile, src, build, vendor), src's three, shared's two
        // (shared.c, all) and those of the temporary directory the last link leads to (project,
        // shared): the project's three directories, shared and the temporary directory, each
        // watched once.
        #expect(changes.walkStatistics == .init(entries: 11, directories: 5, limitReached: false))
    }

    @Test("a tree deeper than the bound is walked to the bound, and says so")
    func depthBound() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let project = try Self.project(in: directory)
        let deep = project + "/src/lib" + String(repeating: "/d", count: 10)
        try FileManager.default.createDirectory(atPath: deep, withIntermediateDirectories: true)
        let changes = try SourceChanges(watching: project, limits: .init(depth: 4, entries: 1000))
        // The project (depth 0; Makefile, src, build), src, lib, d and d (depth 4), one entry each
        // after src's two.
        #expect(changes.walkStatistics == .init(entries: 8, directories: 5, limitReached: true))
        let whole = try SourceChanges(watching: project)
        #expect(whole.walkStatistics == .init(entries: 15, directories: 13, limitReached: false))
    }

    @Test("a directory of more entries than the bound is read up to the bound, and says so")
    func entryBound() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let project = try Self.project(in: directory)
        for index in 0..<50 {
            #expect(FileManager.default.createFile(atPath: project + "/src/lib/file\(index).c", contents: Data()))
        }
        let changes = try SourceChanges(watching: project, limits: .init(depth: 32, entries: 20))
        #expect(changes.walkStatistics.entries == 20)
        #expect(changes.walkStatistics.limitReached)
    }
}
