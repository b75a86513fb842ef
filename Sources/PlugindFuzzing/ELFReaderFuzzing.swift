import PlugindBundle

/// The body of the ELF-reader fuzz target, shared with the regression test that replays the
/// corpus. Any bytes must be read or rejected with an `ELFFile.Problem`, never crash or hang;
/// what a file that reads says must be consistent with its bytes; and the bytes read from a file
/// (page by page, as `plugind verify` and launches read a library) must give what the bytes in
/// memory give.
package enum ELFReaderFuzzing {
    package struct InvariantViolation: Error, CustomStringConvertible {
        package var description: String
    }

    package static func run(_ input: [UInt8]) throws {
        let inMemory = outcome { () throws(ELFFile.Problem) in try ELFFile.inspect(bytes: input) }
        let path = try FuzzScratch.emptyDirectory() + "/library.so"
        try FuzzScratch.write(input, to: path)
        let fromFile = outcome { () throws(ELFFile.Problem) in try ELFFile.inspect(atPath: path) }
        guard summary(inMemory) == summary(fromFile) else {
            throw InvariantViolation(description: "read from a file: \(summary(fromFile)); in memory: \(summary(inMemory))")
        }
        guard case .success(let file) = inMemory else { return }
        // A string the reader returned came out of the file and ends within it.
        for name in file.needed + file.runPaths + [file.soname ?? ""] + Array(file.exportedSymbols) where name.utf8.count > input.count {
            throw InvariantViolation(description: "read a string longer than the file: \(name.prefix(64))")
        }
        for note in file.pluginNotes where note.description.count > input.count {
            throw InvariantViolation(description: "read a note longer than the file")
        }
    }

    private static func outcome(_ read: () throws(ELFFile.Problem) -> ELFFile) -> Result<ELFFile, ELFFile.Problem> {
        do {
            return .success(try read())
        } catch {
            return .failure(error)
        }
    }

    /// Everything a read says, or why it was refused, comparable.
    private static func summary(_ outcome: Result<ELFFile, ELFFile.Problem>) -> String {
        switch outcome {
        case .failure(let problem):
            return "refused: \(problem)"
        case .success(let file):
            let notes = file.pluginNotes.map { "\($0.type):\($0.description)" }
            return
                "\(file.header) needed \(file.needed) run paths \(file.runPaths) soname \(String(describing: file.soname)) symbols \(file.exportedSymbols.sorted()) ABI \(String(describing: file.pluginABIVersion)) Go \(file.isBuiltByGo) notes \(notes)"
        }
    }
}
