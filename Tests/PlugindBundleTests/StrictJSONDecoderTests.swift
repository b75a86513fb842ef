import Foundation
import PlugindBundle
import TestSupport
import Testing

@Suite("Strict JSON decoder", .tags(.unit))
struct StrictJSONDecoderTests {
    let decoder = StrictJSONDecoder()

    func decode<T: Decodable>(_ type: T.Type, _ text: String, dates: StrictJSONDecoder.DateDecodingStrategy = .deferredToDate) throws -> T {
        try StrictJSONDecoder(dateDecodingStrategy: dates).decode(type, from: Data(text.utf8))
    }

    /// The error `body` throws, as a `DecodingError`; nil when it throws none.
    func decodingError<T>(_ body: () throws -> T) -> DecodingError? {
        do {
            _ = try body()
            return nil
        } catch let error as DecodingError {
            return error
        } catch {
            Issue.record("not a DecodingError: \(error)")
            return nil
        }
    }

    func path(_ error: DecodingError?) -> String? {
        switch error {
        case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context):
            context.codingPath.map(\.stringValue).joined(separator: ".")
        case .keyNotFound(let key, let context):
            (context.codingPath + [key]).map(\.stringValue).joined(separator: ".")
        default:
            nil
        }
    }

    func parserFailure(_ error: DecodingError?) -> JSONParser.Failure? {
        guard case .dataCorrupted(let context) = error else { return nil }
        return context.underlyingError as? JSONParser.Failure
    }

    struct Scalars: Codable, Equatable {
        var flag: Bool
        var text: String
        var small: Int8
        var port: UInt16
        var count: Int
        var big: UInt64
        var negative: Int64
        var ratio: Double
        var single: Float
        var missing: String?
        var null: Int?
        var present: UInt32?
    }

    @Test("a keyed container: every scalar, optionals missing, null and present")
    func keyed() throws {
        let text = """
            {"flag": true, "text": "é\\n", "small": -128, "port": 65535, "count": 42, "big": 18446744073709551615,
             "negative": -9223372036854775808, "ratio": 0.25, "single": 1.5, "null": null, "present": 7}
            """
        let decoded = try decode(Scalars.self, text)
        #expect(
            decoded
                == Scalars(
                    flag: true, text: "é\n", small: -128, port: 65535, count: 42, big: .max, negative: .min, ratio: 0.25, single: 1.5,
                    missing: nil, null: nil, present: 7))
        // What JSONEncoder writes reads back the same.
        #expect(try decoder.decode(Scalars.self, from: JSONEncoder().encode(decoded)) == decoded)
        // A number read as a double, an integer where a double is expected.
        #expect(try decode([String: Double].self, #"{"a": 3, "b": 1e300}"#) == ["a": 3, "b": 1e300])
    }

    @Test("a keyed container's keys, contains, nested containers and missing keys")
    func keyedStructure() throws {
        struct Shape: Decodable {
            enum Keys: String, CodingKey { case name, inner, list, absent }
            enum InnerKeys: String, CodingKey { case value }
            var keys: Set<String>
            var hasAbsent: Bool
            var inner: Int
            var list: [String]

            init(from decoder: any Decoder) throws {
                let container = try decoder.container(keyedBy: Keys.self)
                keys = Set(container.allKeys.map(\.stringValue))
                hasAbsent = container.contains(.absent)
                inner = try container.nestedContainer(keyedBy: InnerKeys.self, forKey: .inner).decode(Int.self, forKey: .value)
                var list = try container.nestedUnkeyedContainer(forKey: .list)
                var items: [String] = []
                while !list.isAtEnd { items.append(try list.decode(String.self)) }
                self.list = items
            }
        }
        let shape = try decode(Shape.self, #"{"name": "x", "inner": {"value": 5}, "list": ["a", "b"], "unknown": 1}"#)
        #expect(shape.keys == ["name", "inner", "list"], "a key the type does not know is not one of its keys")
        #expect(!shape.hasAbsent)
        #expect(shape.inner == 5 && shape.list == ["a", "b"])

        let missing = decodingError { try decode(Shape.self, #"{"inner": {}, "list": []}"#) }
        guard case .keyNotFound(let key, _) = missing else {
            Issue.record("expected keyNotFound, got \(String(describing: missing))")
            return
        }
        #expect(key.stringValue == "value" && path(missing) == "inner.value")
        #expect(path(decodingError { try decode(Shape.self, #"{"inner": 3, "list": []}"#) }) == "inner")
    }

    @Test("an unkeyed container: count, index, nil, running past its end")
    func unkeyed() throws {
        struct Pair: Decodable, Equatable {
            var first: Int
            var second: String?
            var count: Int?

            init(from decoder: any Decoder) throws {
                var container = try decoder.unkeyedContainer()
                count = container.count
                first = try container.decode(Int.self)
                #expect(container.currentIndex == 1)
                // A failed decode leaves the index where it was.
                #expect(throws: DecodingError.self) { try container.decode(Bool.self) }
                second = try container.decodeNil() ? nil : try container.decode(String.self)
                #expect(container.isAtEnd)
            }

            init(first: Int, second: String?, count: Int) {
                self.first = first
                self.second = second
                self.count = count
            }
        }
        #expect(try decode(Pair.self, #"[1, "b"]"#) == Pair(first: 1, second: "b", count: 2))
        #expect(try decode(Pair.self, "[1, null]") == Pair(first: 1, second: nil, count: 2))
        let short = decodingError { try decode(Pair.self, "[1]") }
        guard case .valueNotFound = short else {
            Issue.record("expected valueNotFound, got \(String(describing: short))")
            return
        }
        #expect(path(short) == "1")
        #expect(try decode([Int?].self, "[1, null, 3]") == [1, nil, 3])
        #expect(try decode([[String]].self, #"[[], ["a"], ["b", "c"]]"#) == [[], ["a"], ["b", "c"]])
    }

    @Test("a single-value container: scalars at the top level, null, raw-value enums")
    func singleValue() throws {
        enum State: String, Decodable { case approved, disabled }
        #expect(try decode(String.self, #""text""#) == "text")
        #expect(try decode(Int.self, "-7") == -7)
        #expect(try decode(Bool.self, "false") == false)
        #expect(try decode(Double.self, "2.5") == 2.5)
        #expect(try decode(Int?.self, "null") == nil)
        #expect(try decode(State.self, #""disabled""#) == .disabled)
        #expect(try decode(Data.self, #""AAEC/w==""#) == Data([0, 1, 2, 255]), "base64, as JSONDecoder reads Data")
        guard case .dataCorrupted = decodingError({ try decode(State.self, #""other""#) }) else {
            Issue.record("an unknown raw value was read")
            return
        }
        let mismatch = decodingError { try decode(String.self, "1") }
        guard case .typeMismatch(_, let context) = mismatch else {
            Issue.record("expected typeMismatch, got \(String(describing: mismatch))")
            return
        }
        #expect(context.debugDescription.contains("expected a string") && context.debugDescription.contains("found number"))
        guard case .valueNotFound = decodingError({ try decode(String.self, "null") }) else {
            Issue.record("null read as a string")
            return
        }
        #expect(decodingError { try decode(Bool.self, "1") } != nil, "a number is not a boolean")
    }

    @Test("a key twice in one object is refused, with where; Foundation's decoder would read one of them")
    func duplicateKey() throws {
        struct Grant: Codable { var path: String }
        let text = "{\n  \"path\": \"/srv/data\",\n  \"path\": \"/\"\n}"
        // Foundation's readers accept it and disagree on it: its decoder keeps one "path", its
        // JSONSerialization (as Python's json) the other.
        let decoded = try JSONDecoder().decode(Grant.self, from: Data(text.utf8)).path
        let serialized = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: String]
        #expect(serialized?["path"] != decoded)
        let error = decodingError { try decode(Grant.self, text) }
        let failure = try #require(parserFailure(error))
        #expect(failure.problem.contains("\"path\" appears twice"))
        #expect(failure.line == 3 && failure.column == 3)
        #expect("\(try #require(error))".contains("line 3, column 3"), "the error's text says where")
    }

    @Test("other ambiguities are refused too: invalid UTF-8, a lone surrogate, text after the document")
    func ambiguities() {
        for bytes: [UInt8] in [[0x22, 0xC3, 0x28, 0x22], Array(#""\ud83d""#.utf8), Array(#""a" "b""#.utf8)] {
            #expect(parserFailure(decodingError { try decoder.decode(String.self, from: bytes) }) != nil, "\(bytes)")
        }
    }

    @Test("integers are read exactly: out of range or with a fraction is an error naming the key path")
    func integerRange() throws {
        struct Limits: Decodable {
            var limits: [String: UInt64]
            var tries: UInt8?
            var level: Int8?
            var offset: Int?
        }
        #expect(try decode(Limits.self, #"{"limits": {"memory": 18446744073709551615}}"#).limits["memory"] == .max)
        #expect(try decode(Limits.self, #"{"limits": {}, "tries": 2e2, "offset": 1.0}"#).tries == 200, "a whole number in any notation")
        #expect(try decode(UInt64.self, "1e19") == 10_000_000_000_000_000_000)
        let cases: [(text: String, path: String)] = [
            (#"{"limits": {"memory": -1}}"#, "limits.memory"),
            (#"{"limits": {"memory": 18446744073709551616}}"#, "limits.memory"),
            (#"{"limits": {}, "tries": 256}"#, "tries"),
            (#"{"limits": {}, "level": -129}"#, "level"),
            (#"{"limits": {}, "offset": 1.5}"#, "offset"),
            (#"{"limits": {}, "offset": 9223372036854775808}"#, "offset"),
        ]
        for (text, expected) in cases {
            let error = decodingError { try decode(Limits.self, text) }
            guard case .dataCorrupted(let context) = error else {
                Issue.record("\(text) was read, or refused otherwise: \(String(describing: error))")
                continue
            }
            #expect(path(error) == expected, "\(text)")
            #expect(context.debugDescription.contains("'\(expected)'"), "\(context.debugDescription)")
        }
        #expect(decodingError { try decode(Int32.self, "2147483648") } != nil)
        #expect(decodingError { try decode(Float.self, "1e39") } != nil, "beyond Float's range")
    }

    @Test("dates: ISO 8601 strings as JSONDecoder's .iso8601 reads them, or seconds by default")
    func dates() throws {
        struct Stamp: Codable, Equatable { var time: Date }
        let foundation = JSONDecoder()
        foundation.dateDecodingStrategy = .iso8601
        for text in ["2024-05-01T12:00:00Z", "2024-05-01T12:00:00.250Z", "2024-05-01T14:00:00+02:00"] {
            let json = Data(#"{"time": "\#(text)"}"#.utf8)
            let strict = try StrictJSONDecoder(dateDecodingStrategy: .iso8601).decode(Stamp.self, from: json)
            #expect(strict == (try foundation.decode(Stamp.self, from: json)), "\(text)")
        }
        #expect(try decode(Stamp.self, #"{"time": "2024-05-01T12:00:00Z"}"#, dates: .iso8601).time.timeIntervalSince1970 == 1_714_564_800)
        let bad = decodingError { try decode(Stamp.self, #"{"time": "yesterday"}"#, dates: .iso8601) }
        guard case .dataCorrupted(let context) = bad else {
            Issue.record("expected dataCorrupted, got \(String(describing: bad))")
            return
        }
        #expect(path(bad) == "time" && context.debugDescription.contains("yesterday"))
        #expect(decodingError { try decode(Stamp.self, #"{"time": 12}"#, dates: .iso8601) } != nil)
        // The default, as Date decodes itself: seconds since 2001.
        #expect(try decode(Stamp.self, #"{"time": 60}"#).time == Date(timeIntervalSinceReferenceDate: 60))

        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        let written = Stamp(time: Date(timeIntervalSince1970: 1_714_564_800))
        #expect(try StrictJSONDecoder(dateDecodingStrategy: .iso8601).decode(Stamp.self, from: encoder.encode(written)) == written)
    }

    @Test("nested arrays of structs, and the path of an error deep in them")
    func nestedArrays() throws {
        struct Member: Codable, Equatable { var id: Int }
        struct Group: Codable, Equatable {
            var name: String
            var members: [Member]
        }
        struct Directory: Codable, Equatable { var groups: [Group] }
        let directory = Directory(groups: [
            Group(name: "a", members: [Member(id: 1), Member(id: 2)]), Group(name: "b", members: []),
            Group(name: "c", members: [Member(id: 3)]),
        ])
        #expect(try decoder.decode(Directory.self, from: JSONEncoder().encode(directory)) == directory)
        let text = #"{"groups": [{"name": "a", "members": []}, {"name": "b", "members": [{"id": 1}, {"id": "2"}]}]}"#
        let error = decodingError { try decode(Directory.self, text) }
        guard case .typeMismatch(_, let context) = error else {
            Issue.record("expected typeMismatch, got \(String(describing: error))")
            return
        }
        #expect(path(error) == "groups.1.members.1.id")
        #expect(context.debugDescription.contains("'groups.1.members.1.id'"))
    }

    /// Counts the arrays nested in the document.
    struct Nesting: Decodable {
        var depth: Int

        init(from decoder: any Decoder) throws {
            var container = try decoder.unkeyedContainer()
            depth = container.isAtEnd ? 1 : try container.decode(Nesting.self).depth + 1
        }
    }

    @Test("a document nested 65 deep is refused; 64 deep is read")
    func depth() throws {
        func nested(_ depth: Int) -> String { String(repeating: "[", count: depth) + String(repeating: "]", count: depth) }
        #expect(try decode(Nesting.self, nested(JSONParser.maximumDepth)).depth == 64)
        let failure = parserFailure(decodingError { try decode(Nesting.self, nested(65)) })
        #expect(failure?.problem.contains("nesting deeper than 64") == true)
    }

    @Test("a bundle signature round-trips: JSONEncoder writes it, the strict decoder reads it back equal")
    func signatureRoundTrip() throws {
        let key = try PublisherKeys.privateKey(pem: Array(try PublisherKeys.generate().privatePEM.utf8))
        let digest = String(repeating: "ab", count: 32)
        for expires in [nil, "2099-12-31"] {
            let signature = try BundleSignature.sign(digest: digest, with: key, expires: expires)
            let read = try decoder.decode(BundleSignature.self, from: try signature.fileContents)
            #expect(read == signature)
            #expect(read.check(digest: digest).validKey != nil)
        }
    }
}
