import Dispatch
import Foundation
import PlugindSystem

/// Another program plugind runs on the user's behalf (dpkg-deb, dpkg-shlibdeps, pkg-config), found
/// on PATH; a missing one is named with the Debian package that provides it.
enum ExternalTool {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// Whether `tool` is on PATH.
    static func path(of tool: String) -> String? {
        (ProcessEnvironment.value("PATH") ?? "/usr/bin:/bin").split(separator: ":").map { "\($0)/\(tool)" }
            .first(where: ProcessEnvironment.isExecutableFile)
    }

    /// Runs `tool` and returns what it wrote on standard output; throws with what it wrote on
    /// standard error when it fails.
    @discardableResult
    static func run(_ tool: String, _ arguments: [String], package: String, in directory: String? = nil) throws(Failure) -> String {
        guard let path = path(of: tool) else {
            throw Failure(description: "\(tool) is needed for this; install it with 'apt install \(package)'")
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
        let output = Foundation.Pipe()
        let errors = Foundation.Pipe()
        process.standardOutput = output
        process.standardError = errors
        do {
            try process.run()
        } catch {
            throw Failure(description: "cannot run \(tool): \(error.localizedDescription)")
        }
        // Standard error is read on its own thread so that neither pipe can fill and stall the tool.
        let errorText = Locked(Data())
        let errorReader = errors.fileHandleForReading
        let reading = DispatchGroup()
        DispatchQueue.global().async(group: reading) {
            let data = errorReader.readDataToEndOfFile()
            errorText.withLock { $0 = data }
        }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        reading.wait()
        let errorData = errorText.withLock { $0 }
        guard process.terminationStatus == 0 else {
            let message = String(decoding: errorData, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            throw Failure(description: "\(tool) failed: \(message.isEmpty ? "exit status \(process.terminationStatus)" : message)")
        }
        return String(decoding: data, as: UTF8.self)
    }
}
