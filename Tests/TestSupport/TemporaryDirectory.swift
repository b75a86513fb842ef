package import Foundation
import Glibc
import PlugindSystem

/// A private directory (mode 0700) under /tmp, removed by `remove()` and again when the process
/// that made it exits.
package struct TemporaryDirectory: Sendable {
    package let path: String

    package init(prefix: String = "plugind-test") throws {
        var template = Array("/tmp/\(prefix).XXXXXX".utf8CString)
        let created = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        guard let created else { throw CocoaError(.fileWriteUnknown) }
        path = String(cString: created)
        Self.madeByThisProcess.record(path)
    }

    package func url(_ component: String) -> URL {
        URL(fileURLWithPath: path).appendingPathComponent(component)
    }

    package func subdirectory(_ component: String) throws -> String {
        let directory = path + "/" + component
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        return directory
    }

    /// Writes `name` with `contents`, readable by anyone, in this directory made searchable by
    /// anyone: a root host's worker runs as nobody, so only confinement keeps such a file from it.
    /// Returns its path.
    package func publicFile(_ name: String, contents: String) throws -> String {
        try Self.publicFile(at: path, name: name, contents: contents)
    }

    /// `publicFile` in any directory.
    package static func publicFile(at directory: String, name: String, contents: String) throws -> String {
        chmod(directory, 0o755)
        let file = directory + "/" + name
        try Data(contents.utf8).write(to: URL(fileURLWithPath: file))
        chmod(file, 0o644)
        return file
    }

    /// Writes an executable script `name` with `contents` and returns its path. The script is
    /// written by `install`, a process of its own: a file this process wrote itself could still be
    /// open for writing in a child another test forked meanwhile (until that child execs), and
    /// executing it would fail with "Text file busy" on a busy machine.
    package func executableFile(_ name: String, contents: String) async throws -> String {
        let staging = path + "/." + name + ".staging"
        try Data(contents.utf8).write(to: URL(fileURLWithPath: staging))
        defer { unlink(staging) }
        let file = path + "/" + name
        let installed = try await CommandRunner.run("/usr/bin/install", ["-m", "755", staging, file], environment: [:])
        guard installed.status == 0 else { throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: file]) }
        return file
    }

    package func remove() {
        try? FileManager.default.removeItem(atPath: path)
    }

    /// Every directory this process made, removed again when it exits: a host records a worker's
    /// end when the worker has ended, which can be after the test removed its directory (the
    /// record makes the directory again), and an exit test's process exits without running its
    /// `defer`s.
    private static let madeByThisProcess = MadeDirectories()

    private final class MadeDirectories: Sendable {
        private let paths = Locked<[String]>([])

        init() {
            atexit { TemporaryDirectory.madeByThisProcess.removeAll() }
        }

        func record(_ path: String) {
            paths.withLock { $0.append(path) }
        }

        func removeAll() {
            for path in paths.withLock({ $0 }) { try? FileManager.default.removeItem(atPath: path) }
        }
    }
}
