/// A JSON value whose objects keep their keys in the order written: a drafted declaration reads
/// as a manifest's author writes one (name, arguments, returns), and prints the same every time.
enum DraftJSON: Sendable, Equatable, Encodable {
    case string(String)
    case integer(Int64)
    case bool(Bool)
    case array([DraftJSON])
    case object([(String, DraftJSON)])

    static func == (left: DraftJSON, right: DraftJSON) -> Bool {
        switch (left, right) {
        case (.string(let a), .string(let b)): a == b
        case (.integer(let a), .integer(let b)): a == b
        case (.bool(let a), .bool(let b)): a == b
        case (.array(let a), .array(let b)): a == b
        case (.object(let a), .object(let b)): a.map(\.0) == b.map(\.0) && a.map(\.1) == b.map(\.1)
        default: false
        }
    }

    /// Whether a string in it is a value left to the author (`DeclarationDraft.todo`).
    var containsTodo: Bool {
        switch self {
        case .string(let text): text.hasPrefix(DeclarationDraft.todo)
        case .integer, .bool: false
        case .array(let elements): elements.contains(where: \.containsTodo)
        case .object(let members): members.contains { $0.1.containsTodo }
        }
    }

    /// The member called `key` of an object.
    subscript(key: String) -> DraftJSON? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.0 == key }?.1
    }

    /// Indented by four spaces a level; a short array of plain values on one line.
    func rendered(indent: Int = 0) -> String {
        let pad = String(repeating: " ", count: indent + 4)
        let closing = String(repeating: " ", count: indent)
        switch self {
        case .string(let text): return Self.quoted(text)
        case .integer(let number): return String(number)
        case .bool(let flag): return flag ? "true" : "false"
        case .array(let elements):
            if elements.isEmpty { return "[]" }
            if elements.allSatisfy({ if case .string = $0 { true } else { false } }) {
                let line = "[" + elements.map { $0.rendered() }.joined(separator: ", ") + "]"
                if line.count <= 80 { return line }
            }
            return "[\n" + elements.map { pad + $0.rendered(indent: indent + 4) }.joined(separator: ",\n") + "\n" + closing + "]"
        case .object(let members):
            if members.isEmpty { return "{}" }
            let lines = members.map { key, value in pad + Self.quoted(key) + ": " + value.rendered(indent: indent + 4) }
            return "{\n" + lines.joined(separator: ",\n") + "\n" + closing + "}"
        }
    }

    private static func quoted(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\t": result += "\\t"
            case "\r": result += "\\r"
            default:
                if scalar.value < 0x20 {
                    let hex = String(scalar.value, radix: 16)
                    result += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    result.unicodeScalars.append(scalar)
                }
            }
        }
        return result + "\""
    }

    private struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    func encode(to encoder: any Encoder) throws {
        switch self {
        case .string(let text):
            var container = encoder.singleValueContainer()
            try container.encode(text)
        case .integer(let number):
            var container = encoder.singleValueContainer()
            try container.encode(number)
        case .bool(let flag):
            var container = encoder.singleValueContainer()
            try container.encode(flag)
        case .array(let elements):
            var container = encoder.unkeyedContainer()
            for element in elements { try container.encode(element) }
        case .object(let members):
            var container = encoder.container(keyedBy: Key.self)
            for (key, value) in members { try container.encode(value, forKey: Key(stringValue: key)) }
        }
    }
}
