import Foundation

/// Whether a program the test needs is installed where Debian puts it.
package enum ExternalToolCheck {
    package static func available(_ tool: String) -> Bool {
        FileManager.default.isExecutableFile(atPath: "/usr/bin/" + tool)
    }
}
