/// A command's plugin and request: the ID, then the request as the INPUT argument or the contents
/// of the file `option` names, never both (`plugind run`, `plugind debug`).
struct RequestInput {
    let identifier: String
    let text: String?
    let file: String?

    init(_ arguments: ArgumentScanner, option: CommandOption, command: String) throws(UsageError) {
        let positionals = try arguments.positionals(["id"], optional: ["input"])
        identifier = positionals[0]
        text = positionals.count > 1 ? positionals[1] : nil
        file = arguments.value(option)
        if text != nil && file != nil {
            throw UsageError(message: "give the input either as INPUT or with --input, not both", command: command)
        }
    }

    /// Whether INPUT or the file was given.
    var isGiven: Bool { text != nil || file != nil }

    /// The request's bytes: INPUT, the file's contents, or else all of stdin.
    func read() throws(CommandFailure) -> [UInt8] {
        if let text { return Array(text.utf8) }
        return try StandardInput.read(from: file)
    }
}
