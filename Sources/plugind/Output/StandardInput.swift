import Foundation

/// Reads a whole input: a file, or stdin (a pipe, a terminal or a file) until end of input.
enum StandardInput {
    static func read(from path: String?) throws(CommandFailure) -> [UInt8] {
        do {
            if let path {
                return [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
            }
            return [UInt8](try FileHandle.standardInput.readToEnd() ?? Data())
        } catch {
            throw CommandFailure(message: "cannot read the input from \(path ?? "stdin"): \(error.localizedDescription)", status: .noInput)
        }
    }
}
