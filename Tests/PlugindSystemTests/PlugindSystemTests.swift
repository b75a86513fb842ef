import CPlugindShims
import Foundation
import Glibc
import PlugindSystem
import TestSupport
import Testing

@Suite("PlugindSystem: the seam to the kernel", .tags(.unit))
struct PlugindSystemTests {
    private func temporaryDirectory() throws -> String {
        var template = Array((NSTemporaryDirectory() + "/plugind-system.XXXXXX").utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        return String(cString: try #require(made))
    }

    @Test("AtomicFile.replace puts the new bytes in place with the mode asked for, and leaves no temporary file behind")
    func atomicReplace() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/policy.json"
        try AtomicFile.replace(path, with: Array("first".utf8))
        try AtomicFile.replace(path, with: Array("second".utf8), mode: 0o640)
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "second")
        var status = stat()
        #expect(stat(path, &status) == 0)
        #expect(status.st_mode & 0o777 == 0o640)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory) == ["policy.json"])
        // Into a directory that does not exist: an error naming the call, and nothing made.
        #expect(throws: SystemError.self) { try AtomicFile.replace(directory + "/missing/file", with: [1]) }
    }

    @Test("a monotonic instant moves forward, adds durations exactly, saturates instead of overflowing, and measures back")
    func monotonicInstant() {
        let start = MonotonicInstant.now
        let later = start + .milliseconds(1500)
        #expect(later.nanoseconds - start.nanoseconds == 1_500_000_000)
        #expect(start.duration(to: later) == .milliseconds(1500))
        #expect(later.duration(to: start) == .milliseconds(-1500))
        #expect(start < later && !(later < start))
        #expect(MonotonicInstant.now >= start)
        #expect((start + .seconds(Int64.max)).nanoseconds == .max)
        #expect((start + .seconds(Int64.min)).nanoseconds == .min)
        #expect(MonotonicInstant.after(.seconds(1)) > start)
    }

    @Test(
        "containsBytes finds text anywhere, byte for byte (unlike String.contains, inside a combined character too)",
        arguments: [
            ("posix_spawn", "spawn", true), ("clone3", "clone", true), ("fork", "fork", true), ("open", "fork", false),
            ("/usr/lib/libc.so.6", ".so", true), ("/usr/lib/x.s", ".so", false), ("", "", true), ("a", "", true), ("", "a", false),
            ("caf\u{E9}", "\u{E9}", true), ("cafe\u{301}", "e", true),
        ])
    func containsBytes(text: String, word: String, expected: Bool) {
        #expect(text.containsBytes(of: word) == expected)
        #expect(text[...].containsBytes(of: word) == expected)
    }

    @Test(
        "reading to the end returns every byte of a file larger than its first buffer, of a pipe, and at most the limit; a positional read returns the range asked for and fewer only at the end"
    )
    func wholeAndPositionalReads() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/store"
        let contents = (0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        try AtomicFile.replace(path, with: contents)
        let file = try FileDescriptor.open(path, [.readOnly])
        defer { file.close() }
        #expect(try file.readToEnd() == contents)
        #expect(try file.read(count: 100, at: 150_000) == Array(contents[150_000..<150_100]))
        #expect(try file.read(count: 100, at: 199_950) == Array(contents[199_950...]))
        #expect(try file.read(count: 10, at: 300_000) == [])
        let again = try FileDescriptor.open(path, [.readOnly])
        defer { again.close() }
        #expect(try again.readToEnd(limit: 70_000) == Array(contents[..<70_000]))
        // A pipe has no length to size the buffer by: it grows as the bytes come.
        var ends: [CInt] = [0, 0]
        #expect(Glibc.pipe(&ends) == 0)
        let (reader, writer) = (FileDescriptor(rawValue: ends[0]), FileDescriptor(rawValue: ends[1]))
        defer { reader.close() }
        let written = Array(contents[..<10_000])
        try writer.writeAll(written)
        writer.close()
        #expect(try reader.readToEnd() == written)
    }

    @Test(
        "opening beneath a directory by a walk (where openat2 is missing) opens nested files and refuses symlinks, '..' and absolute paths as openat2 does"
    )
    func openBeneathByWalk() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try FileManager.default.createDirectory(atPath: directory + "/bundle/lib", withIntermediateDirectories: true)
        try Data("library".utf8).write(to: URL(fileURLWithPath: directory + "/bundle/lib/libX.so"))
        try Data("secret".utf8).write(to: URL(fileURLWithPath: directory + "/secret"))
        try FileManager.default.createSymbolicLink(atPath: directory + "/bundle/link", withDestinationPath: "../secret")
        try FileManager.default.createSymbolicLink(atPath: directory + "/bundle/dir", withDestinationPath: "lib")
        let bundle = try FileDescriptor.open(directory + "/bundle", [.readOnly, .directory])
        defer { bundle.close() }
        func walk(_ path: String) -> (CInt, FileDescriptor?) {
            var raw: CInt = -1
            let result = plugind_shim_open_beneath_by_walk(bundle.rawValue, path, O_RDONLY, &raw)
            return (result, result == 0 ? FileDescriptor(rawValue: raw) : nil)
        }
        let (status, opened) = walk("lib/libX.so")
        #expect(status == 0)
        if let opened {
            #expect(try opened.readToEnd() == Array("library".utf8))
            opened.close()
        }
        #expect(walk("./lib/libX.so").0 == 0)
        walk("./lib/libX.so").1?.close()
        #expect(walk("link").0 == ELOOP)
        #expect(walk("dir/libX.so").0 == ELOOP || walk("dir/libX.so").0 == ENOTDIR)
        #expect(walk("../secret").0 == EXDEV)
        #expect(walk("lib/../../secret").0 == EXDEV)
        #expect(walk(directory + "/secret").0 == EXDEV)
        #expect(walk("").0 == ENOENT)
        #expect(walk("lib/missing").0 == ENOENT)
    }

    @Test("Inotify reports a file created in a watched directory by the watch's number and the name")
    func inotifyEvents() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let inotify = try Inotify()
        defer { inotify.descriptor.close() }
        let watch = try #require(inotify.addWatch(directory, mask: Inotify.directoryChanges))
        #expect(inotify.addWatch(directory + "/missing", mask: Inotify.directoryChanges) == nil)
        #expect(FileManager.default.createFile(atPath: directory + "/manifest.json", contents: Data("{}".utf8)))
        var events: [Inotify.Event] = []
        inotify.drain { bytes in events += Inotify.events(in: bytes) ?? [] }
        #expect(events.contains { $0.watch == watch && $0.name == "manifest.json" })
        #expect(Inotify.events(in: [1, 2, 3][...]) == nil)
    }

    @Test("Locked holds a non-copyable value and hands one out")
    func lockedNonCopyable() {
        let slot = Locked<Token?>(Token(number: 7))
        let number = slot.withLock { slot -> Int? in
            guard let token = slot.take() else { return nil }
            return token.number
        }
        #expect(number == 7)
        let empty = slot.withLock { $0 == nil }
        #expect(empty)
    }

    @Test("a pipe's two ends are close-on-exec, and what is written is read back")
    func pipe() throws {
        let pipe = try PlugindSystem.Pipe()
        defer { pipe.close() }
        #expect(fcntl(pipe.readEnd.rawValue, F_GETFD) & FD_CLOEXEC != 0)
        #expect(fcntl(pipe.writeEnd.rawValue, F_GETFD) & FD_CLOEXEC != 0)
        try pipe.writeEnd.writeAll([1, 2, 3])
        var buffer = [UInt8](repeating: 0, count: 3)
        let count = try buffer.withUnsafeMutableBytes { try pipe.readEnd.read(into: $0) }
        #expect(count == 3 && buffer == [1, 2, 3])
    }

    @Test("readRegularFile reads a regular file within its limit; a link, a FIFO, a device or a larger one is refused at once")
    func boundedRegularFile() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try AtomicFile.replace(directory + "/record", with: Array("{}".utf8))
        try HostileFile.makeFIFO(at: directory + "/fifo")
        try HostileFile.makeSparse(at: directory + "/large", size: 4097)
        #expect(symlink(directory + "/record", directory + "/link") == 0)
        #expect(symlink("/dev/zero", directory + "/zero") == 0)

        let outcomes = try await HostileFile.readPromptly("the reads to return", unblocking: [directory + "/fifo"]) {
            ["record", "fifo", "large", "link", "zero", "missing"].map { name -> Result<[UInt8], RegularFileReadError> in
                Result { () throws(RegularFileReadError) in try FileDescriptor.readRegularFile(directory + "/" + name, limit: 4096) }
            }
        }
        #expect(outcomes[0] == .success(Array("{}".utf8)))
        #expect(outcomes[1] == .failure(.notRegular("a FIFO")))
        #expect(outcomes[2] == .failure(.tooLarge(limit: 4096)))
        #expect(outcomes[3] == .failure(.symbolicLink))
        #expect(outcomes[4] == .failure(.symbolicLink))
        #expect(outcomes[5] == .failure(.absent))
        // Relative to a directory, and following links where the caller vetted them.
        let opened = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        defer { close(opened) }
        #expect(try FileDescriptor.readRegularFile("link", in: opened, limit: 2, followingLinks: true) == Array("{}".utf8))
        #expect(throws: RegularFileReadError.notRegular("a character device")) {
            try FileDescriptor.readRegularFile(directory + "/zero", limit: 4096, followingLinks: true)
        }
        #expect(throws: RegularFileReadError.notRegular("a directory")) { try FileDescriptor.readRegularFile(directory, limit: 4096) }
        #expect(throws: RegularFileReadError.tooLarge(limit: 1)) { try FileDescriptor.readRegularFile(directory + "/record", limit: 1) }
    }
}

/// A value that cannot be copied.
private struct Token: ~Copyable {
    let number: Int
}
