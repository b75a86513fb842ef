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
        var output = Data()
        try stream(tool, arguments, package: package, in: directory) {
            output.append($0)
            return true
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// Runs `tool`, handing each line of its standard output to `line` as it arrives (a long
    /// running tool such as `journalctl --follow`); throws with what it wrote on standard error
    /// when it fails, or with what `line` threw (the tool is then killed).
    static func streamLines(
        _ tool: String, _ arguments: [String], package: String, _ line: (Data) throws -> Void
    ) throws {
        var pending = Data()
        var thrown: (any Error)?
        try stream(tool, arguments, package: package) { chunk -> Bool in
            pending.append(chunk)
            while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                let text = pending[pending.startIndex..<newline]
                pending.removeSubrange(pending.startIndex...newline)
                do { try line(Data(text)) } catch {
                    thrown = error
                    return false
                }
            }
            return true
        }
        if let thrown { throw thrown }
    }

    /// Runs `tool`, handing its standard output to `output` chunk by chunk until it returns false
    /// (then the tool is killed); standard error is read on its own thread so that neither pipe
    /// can fill and stall the tool.
    private static func stream(
        _ tool: String, _ arguments: [String], package: String, in directory: String? = nil, _ output: (Data) -> Bool
    ) throws(Failure) {
        guard let path = path(of: tool) else {
            throw Failure(description: "\(tool) is needed for this; install it with 'apt install \(package)'")
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
        let standardOutput = Foundation.Pipe()
        let errors = Foundation.Pipe()
        process.standardOutput = standardOutput
        process.standardError = errors
        do {
            try process.run()
        } catch {
            throw Failure(description: "cannot run \(tool): \(error.localizedDescription)")
        }
        let errorText = Locked(Data())
        let errorReader = errors.fileHandleForReading
        let reading = DispatchGroup()
        DispatchQueue.global().async(group: reading) {
            let data = errorReader.readDataToEndOfFile()
            errorText.withLock { $0 = data }
        }
        let reader = standardOutput.fileHandleForReading
        while true {
            let data = reader.availableData
            if data.isEmpty { break }
            if !output(data) {
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
                reading.wait()
                return
            }
        }
        process.waitUntilExit()
        reading.wait()
        let errorData = errorText.withLock { $0 }
        guard process.terminationStatus == 0 else {
            let message = String(decoding: errorData, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            throw Failure(description: "\(tool) failed: \(message.isEmpty ? "exit status \(process.terminationStatus)" : message)")
        }
    }
}
