import Foundation
import Glibc

/// What the child of an exit test wrote on its standard error, kept in a file the parent chose.
/// The testing library returns nothing of a child that ended otherwise than expected (not its
/// standard error either), so a child that names the check it failed would go unheard. The
/// child sends its standard error to the file first thing; the parent reads it afterwards and
/// records it when the exit test failed.
package struct ExitTestReport: Sendable {
    package let path: String

    package init() {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("plugind-exit-test-\(UUID().uuidString).txt").path
    }

    /// In the child: its standard error goes to the report at `path` from now on.
    package static func redirectStandardError(to path: String) {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { return }
        dup2(descriptor, STDERR_FILENO)
        close(descriptor)
    }

    /// In the parent, once the child has ended: what it wrote (empty if nothing), and the file
    /// removed.
    package func take() -> String {
        defer { unlink(path) }
        return (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
    }
}
