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

    package func remove() {
        try? FileManager.default.removeItem(atPath: path)
    }
}
