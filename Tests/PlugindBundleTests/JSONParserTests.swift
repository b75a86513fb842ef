import Foundation
import PlugindBundle
import TestSupport
import Testing

@Suite("Strict JSON reader", .tags(.unit))
struct JSONParserTests {
    func parse(_ text: String) throws(JSONParser.Failure) -> JSONValue {
        try JSONValue.parse(Data(text.utf8))
    }

    func failure(_ bytes: [UInt8]) -> JSONParser.Failure? {
        do {
            _ = try JSONValue.parse(Data(bytes))
            return nil
        } catch {
            return error
        }
    }

    func failure(_ text: String) -> JSONParser.Failure? { failure(Array(text.utf8)) }

    @Test("every kind of value, with white space around and between")
    func kinds() throws {
        let value = try parse(
            " \t\r\n{\"s\": \"text\", \"t\": true, \"f\": false, \"n\": null, \"a\": [1, \"two\", [], {}], \"o\": {\"k\": -3}}\n")
        #expect(
            value
                == .object([
                    "s": .string("text"), "t": .bool(true), "f": .bool(false), "n": .null,
                    "a": .array([.integer(1), .string("two"), .array([]), .object([:])]),
                    "o": .object(["k": .integer(-3)]),
                ]))
    }

    @Test("integers keep every digit; a fraction or exponent makes a double unless it is whole")
    func numbers() throws {
        #expect(try parse("9223372036854775807") == .integer(Int64.max))
        #expect(try parse("-9223372036854775808") == .integer(Int64.min))
        #expect(try parse("9223372036854775808") == .unsignedInteger(UInt64(Int64.max) + 1))
        #expect(try parse("18446744073709551615") == .unsignedInteger(UInt64.max))
        #expect(try parse("18446744073709551616") == .number(18_446_744_073_709_551_616))
        #expect(try parse("-0") == .integer(0))
        #expect(try parse("1.0") == .integer(1))
        #expect(try parse("2e3") == .integer(2000))
        #expect(try parse("1.5") == .number(1.5))
        #expect(try parse("-2.5E-1") == .number(-0.25))
        for bad in ["01", "-", "1.", ".5", "1e", "1e+", "+1", "0x10", "1e400", "NaN", "Infinity"] {
            #expect(failure(bad) != nil, "accepted \(bad)")
        }
    }

    @Test("escapes, surrogate pairs and UTF-8 decode to the same text")
    func strings() throws {
        #expect(try parse(#""a\"b\\c\/d\b\f\n\r\t""#) == .string("a\"b\\c/d\u{8}\u{C}\n\r\t"))
        #expect(try parse(#""\u00e9\u4E2D\ud83d\ude00""#) == .string("é中😀"))
        #expect(try parse("\"é中😀\"") == .string("é中😀"))
        #expect(try parse(#""x\u0000y""#) == .string("x\u{0}y"))
    }

    @Test("text two readers could read differently is refused")
    func ambiguities() {
        #expect(failure(#"{"library": "a.so", "library": "b.so"}"#)?.problem.contains("\"library\" appears twice") == true)
        #expect(failure(#""\ud83d""#) != nil)
        #expect(failure(#""\ud83dx""#) != nil)
        #expect(failure(#""\ude00""#) != nil)
        #expect(failure([0x22, 0xC3, 0x28, 0x22]) != nil)  // a broken two-byte sequence
        #expect(failure([0x22, 0xED, 0xA0, 0x80, 0x22]) != nil)  // a surrogate written as UTF-8
        #expect(failure([0x22, 0x0A, 0x22]) != nil)  // a raw line feed inside a string
    }

    @Test("malformed documents are refused with where the problem is")
    func malformed() {
        let documents = [
            "", "  ", "{", "[1,]", "{\"a\":1,}", "{\"a\" 1}", "{a: 1}", "[1 2]",
            "tru", "nul", "\"open", "\"\\x\"", "\"\\u12\"", "{} {}", "'s'",
        ]
        for bad in documents {
            #expect(failure(bad) != nil, "accepted \(bad)")
        }
        let located = failure("{\n  \"a\": 1,\n  \"b\": ?\n}")
        #expect(located?.line == 3)
        #expect(located?.column == 8)
        #expect(located?.description.contains("'?'") == true)
    }

    @Test("a UTF-8 byte-order mark before the document is skipped")
    func byteOrderMark() throws {
        #expect(try JSONValue.parse(Data([0xEF, 0xBB, 0xBF] + Array("[true]".utf8))) == .array([.bool(true)]))
    }

    @Test("nesting is bounded, so a hostile file cannot exhaust the stack")
    func depth() throws {
        let deepest = String(repeating: "[", count: JSONParser.maximumDepth) + String(repeating: "]", count: JSONParser.maximumDepth)
        #expect(throws: Never.self) { try parse(deepest) }
        let tooDeep = "[" + deepest + "]"
        #expect(failure(tooDeep)?.problem.contains("nesting") == true)
        #expect(failure(String(repeating: "{\"a\":", count: 200_000))?.problem.contains("nesting") == true)
        #expect(failure(String(repeating: "[", count: 256 << 10)) != nil)
    }

    /// Every valid document in the manifest fuzzing corpus reads as Foundation reads it.
    @Test("agrees with Foundation's reader on the manifest corpus")
    func agreesWithFoundation() throws {
        let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Fuzz/Corpus/manifest-parser")
        let files = try FileManager.default.contentsOfDirectory(at: corpus, includingPropertiesForKeys: nil)
        #expect(files.count >= 5)
        var compared = 0
        for file in files {
            let data = try Data(contentsOf: file)
            guard let reference = try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed]) else {
                #expect(throws: JSONParser.Failure.self, "\(file.lastPathComponent)") { try JSONValue.parse(data) }
                continue
            }
            let value = try JSONValue.parse(data)
            #expect(Self.matches(value, reference), "\(file.lastPathComponent)")
            compared += 1
        }
        #expect(compared >= 4)
    }

    private static func matches(_ value: JSONValue, _ reference: Any) -> Bool {
        switch value {
        case .null: return reference is NSNull
        case .string(let text): return reference as? String == text
        case .bool(let flag): return (reference as? NSNumber)?.boolValue == flag
        case .integer(let number): return (reference as? NSNumber)?.int64Value == number
        case .unsignedInteger(let number): return (reference as? NSNumber)?.uint64Value == number
        case .number(let number): return (reference as? NSNumber)?.doubleValue == number
        case .array(let elements):
            guard let other = reference as? [Any], other.count == elements.count else { return false }
            return zip(elements, other).allSatisfy { matches($0, $1) }
        case .object(let members):
            guard let other = reference as? [String: Any], Set(other.keys) == Set(members.keys) else { return false }
            return members.allSatisfy { key, member in other[key].map { matches(member, $0) } ?? false }
        }
    }
}
