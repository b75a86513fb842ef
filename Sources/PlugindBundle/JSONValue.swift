package import FoundationEssentials
import Glibc
import PlugindSystem

/// A JSON document as a tree with the type of every value kept exact (a boolean is never a
/// number, an integer keeps every digit), so that a manifest can be validated key by key.
package enum JSONValue: Equatable, Sendable {
    case null
    case bool(Bool)
    case integer(Int64)
    case unsignedInteger(UInt64)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    /// Parses JSON bytes (UTF-8), strictly: see `JSONParser`.
    package static func parse(_ data: Data) throws(JSONParser.Failure) -> JSONValue {
        // `withUnsafeBytes` rethrows untyped errors; the result carries the typed one out.
        try data.withUnsafeBytes { bytes in Result { () throws(JSONParser.Failure) in try JSONParser.parse(bytes) } }.get()
    }

    /// The JSON type name used in messages: "string", "number", "boolean", …
    package var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "boolean"
        case .integer, .unsignedInteger, .number: "number"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }
}
