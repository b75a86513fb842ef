import PlugindBundle

/// The body of the ELF-reader fuzz target, shared with the regression test that replays the
/// corpus. Any bytes must be read or rejected with an `ELFFile.Problem`, never crash or hang;
/// what a file that reads says must be consistent with its bytes.
package enum ELFReaderFuzzing {
    package struct InvariantViolation: Error, CustomStringConvertible {
        package var description: String
    }

    package static func run(_ input: [UInt8]) throws {
        guard let file = try? ELFFile.inspect(bytes: input) else { return }
        // A string the reader returned came out of the file and ends within it.
        for name in file.needed + file.runPaths + [file.soname ?? ""] + Array(file.exportedSymbols) where name.utf8.count > input.count {
            throw InvariantViolation(description: "read a string longer than the file: \(name.prefix(64))")
        }
        for note in file.pluginNotes where note.description.count > input.count {
            throw InvariantViolation(description: "read a note longer than the file")
        }
    }
}
