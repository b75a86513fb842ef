/// What a command prints with `--json`: one document, or for a stream each line, an object that
/// names the version of its format. `Console.json` and `Console.jsonLine` take nothing else, so a
/// command cannot print JSON without a `formatVersion`.
///
/// A conforming type encodes as an object (a keyed container): a list goes under a key that says
/// what it holds ("plugins", "workers"), never as a bare array.
protocol JSONDocument: Encodable {
    /// The version of the format. Within a version, fields keep their names and meaning and new
    /// fields may be added; a change that would break a script raises it.
    static var formatVersion: Int { get }
}

/// A document with its `formatVersion` beside its own fields, in one object.
struct VersionedJSON<Document: JSONDocument>: Encodable {
    let document: Document

    private enum Key: String, CodingKey { case formatVersion }

    func encode(to encoder: any Encoder) throws {
        try document.encode(to: encoder)
        var container = encoder.container(keyedBy: Key.self)
        try container.encode(Document.formatVersion, forKey: .formatVersion)
    }
}
