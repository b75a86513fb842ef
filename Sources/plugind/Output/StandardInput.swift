import Foundation

/// Reads a whole input until its end: a file, pipe or device named by `path`, or stdin.
enum StandardInput {
    static func read(from path: String?) throws(CommandFailure) -> [UInt8] {
        do {
            if let path {
                // Read to its end, not by its size: a pipe (`--input <(command)`) or a device
                // (`/dev/null`) is input as much as a file; Data(contentsOf:) refused them.
                let file = try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
                defer { try? file.close() }
                return [UInt8](try file.readToEnd() ?? Data())
            }
            return [UInt8](try FileHandle.standardInput.readToEnd() ?? Data())
        } catch {
            throw CommandFailure(message: "cannot read the input from \(path ?? "stdin"): \(error.localizedDescription)", status: .noInput)
        }
    }
}
