package import Foundation
import Glibc

/// A private directory (mode 0700) under /tmp, removed by `remove()`.
package struct TemporaryDirectory: Sendable {
    package let path: String

    package init(prefix: String = "plugind-test") throws {
        var template = Array("/tmp/\(prefix).XXXXXX".utf8CString)
        let created = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        guard let created else { throw CocoaError(.fileWriteUnknown) }
        path = String(cString: created)
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

    package func remove() {
        try? FileManager.default.removeItem(atPath: path)
    }
}
