import CPlugindShims
import Foundation
import Glibc
import PlugindSystem
import Testing

@Suite("PlugindSystem: the seam to the kernel")
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
}

/// A value that cannot be copied.
private struct Token: ~Copyable {
    let number: Int
}
