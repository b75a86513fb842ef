package import FoundationEssentials
import Glibc
import PlugindSystem

/// Decodes `Decodable` values from JSON read by `JSONParser`: the one reader of every file
/// plugind reads that another process wrote (policy, the administrator's rules, signatures,
/// extension-point descriptors, the crash log, activity records, log lines), so that no two of
/// its readers can see different documents in the same bytes. Foundation's `JSONDecoder` takes
/// the last of a key given twice; this one refuses the document, and invalid UTF-8, lone
/// surrogates, nesting deeper than `JSONParser.maximumDepth` and text after the document too.
///
/// Otherwise it reads as `JSONDecoder` with its default strategies does, except that an integer
/// outside its type's range, or a number with a fraction where an integer is expected, is an
/// error naming the key path (never truncated). A syntax error is a `DecodingError.dataCorrupted`
/// whose underlying error is the `JSONParser.Failure` (with its line and column); any other error
/// carries the coding path. The tree keeps no positions, so the latter carry no line.
package struct StrictJSONDecoder: Sendable {
    package enum DateDecodingStrategy: Sendable {
        /// As `Date` decodes itself: a number of seconds since 2001-01-01 (`JSONDecoder`'s default).
        case deferredToDate
        /// An ISO 8601 string, as `JSONDecoder.DateDecodingStrategy.iso8601` reads one.
        case iso8601
    }

    package var dateDecodingStrategy: DateDecodingStrategy

    package init(dateDecodingStrategy: DateDecodingStrategy = .deferredToDate) {
        self.dateDecodingStrategy = dateDecodingStrategy
    }

    /// The value of `type` in the JSON document `data`.
    package func decode<T: Decodable>(_ type: T.Type, from data: Data) throws -> T {
        let value: JSONValue
        do {
            value = try JSONValue.parse(data)
        } catch {
            throw Self.notJSON(error)
        }
        return try decode(type, from: value)
    }

    /// The value of `type` in the JSON document `bytes`.
    package func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T {
        let parsed = bytes.withUnsafeBytes { bytes in Result { () throws(JSONParser.Failure) in try JSONParser.parse(bytes) } }
        switch parsed {
        case .success(let value): return try decode(type, from: value)
        case .failure(let failure): throw Self.notJSON(failure)
        }
    }

    /// The value of `type` in a document already parsed.
    package func decode<T: Decodable>(_ type: T.Type, from value: JSONValue) throws -> T {
        try JSONValueDecoder(value: value, path: .root, dates: dateDecodingStrategy).decodeValue(type)
    }

    private static func notJSON(_ failure: JSONParser.Failure) -> DecodingError {
        .dataCorrupted(
            DecodingError.Context(codingPath: [], debugDescription: "The given data was not valid JSON.", underlyingError: failure))
    }
}

/// Where a value lies in the document, as a list from the value up: kept as nodes so that
/// descending costs no copy of the path, which is made into `[any CodingKey]` only when asked
/// (for an error, or by a type that reads its decoder's `codingPath`).
private indirect enum CodingPath {
    case root
    case key(any CodingKey, CodingPath)
    /// A member of a `[String: Value]`, which has no `CodingKey` of its own to keep.
    case member(String, CodingPath)
    case index(Int, CodingPath)

    var keys: [any CodingKey] {
        var keys: [any CodingKey] = []
        var node = self
        while true {
            switch node {
            case .root: return keys.reversed()
            case .key(let key, let parent):
                keys.append(key)
                node = parent
            case .member(let name, let parent):
                keys.append(NamedKey(name))
                node = parent
            case .index(let index, let parent):
                keys.append(IndexKey(index))
                node = parent
            }
        }
    }

    /// "plugins.com.example.x.approval.limits" for messages; "the top level" at the root.
    var shown: String {
        let keys = self.keys
        return keys.isEmpty ? "the top level" : "'" + keys.map(\.stringValue).joined(separator: ".") + "'"
    }
}

/// The key of an array's element in a coding path.
private struct IndexKey: CodingKey {
    let intValue: Int?
    let stringValue: String

    init(_ index: Int) {
        intValue = index
        stringValue = String(index)
    }

    init?(intValue: Int) { self.init(intValue) }

    init?(stringValue: String) {
        guard let index = Int(stringValue) else { return nil }
        self.init(index)
    }
}

private struct NamedKey: CodingKey {
    /// The key `superDecoder()` reads, as `JSONDecoder` names it.
    static let superKey = NamedKey("super")

    let stringValue: String
    var intValue: Int? { nil }

    init(_ name: String) { stringValue = name }
    init?(stringValue: String) { self.init(stringValue) }
    init?(intValue: Int) { nil }
}

/// The conversions of one value, shared by the three kinds of container. `path` is evaluated
/// only for an error.
private enum Scalar {
    static func mismatch(_ type: Any.Type, _ value: JSONValue, _ path: CodingPath) -> DecodingError {
        let context = DecodingError.Context(
            codingPath: path.keys, debugDescription: "expected \(expectation(type)) at \(path.shown), found \(value.typeName)")
        if case .null = value { return .valueNotFound(type, context) }
        return .typeMismatch(type, context)
    }

    private static func expectation(_ type: Any.Type) -> String {
        switch type {
        case is Bool.Type: "a boolean"
        case is String.Type: "a string"
        case is any BinaryInteger.Type, is any BinaryFloatingPoint.Type: "a number"
        case is [String: Any].Type: "an object"
        case is [Any].Type: "an array"
        default: "a value of type \(type)"
        }
    }

    static func corrupt(_ problem: String, _ path: CodingPath) -> DecodingError {
        .dataCorrupted(DecodingError.Context(codingPath: path.keys, debugDescription: "\(problem) at \(path.shown)"))
    }

    static func bool(_ value: JSONValue, at path: @autoclosure () -> CodingPath) throws -> Bool {
        guard case .bool(let bool) = value else { throw mismatch(Bool.self, value, path()) }
        return bool
    }

    static func string(_ value: JSONValue, at path: @autoclosure () -> CodingPath) throws -> String {
        guard case .string(let string) = value else { throw mismatch(String.self, value, path()) }
        return string
    }

    /// An integer of `T` exactly: never a fraction cut off nor a value wrapped or clamped.
    static func integer<T: FixedWidthInteger>(_ type: T.Type, _ value: JSONValue, at path: @autoclosure () -> CodingPath) throws -> T {
        let exact: T?
        let shown: String
        switch value {
        case .integer(let integer):
            exact = T(exactly: integer)
            shown = String(integer)
        case .unsignedInteger(let integer):
            exact = T(exactly: integer)
            shown = String(integer)
        case .number(let number):
            exact = T(exactly: number)
            shown = String(number)
            if exact == nil && number.rounded(.towardZero) != number {
                throw corrupt("the number \(shown) is not an integer, as \(T.self) must be", path())
            }
        default:
            throw mismatch(T.self, value, path())
        }
        guard let exact else { throw corrupt("the number \(shown) does not fit in \(T.self) (\(T.min)...\(T.max))", path()) }
        return exact
    }

    static func double(_ value: JSONValue, at path: @autoclosure () -> CodingPath) throws -> Double {
        switch value {
        case .integer(let integer): return Double(integer)
        case .unsignedInteger(let integer): return Double(integer)
        case .number(let number): return number
        default: throw mismatch(Double.self, value, path())
        }
    }

    static func float(_ value: JSONValue, at path: @autoclosure () -> CodingPath) throws -> Float {
        let wide = try double(value, at: path())
        guard wide.magnitude <= Double(Float.greatestFiniteMagnitude) else {
            throw corrupt("the number \(wide) does not fit in Float", path())
        }
        return Float(wide)
    }
}

/// A `Decoder` of one value of the tree; also its single-value container.
private struct JSONValueDecoder: Decoder, SingleValueDecodingContainer {
    let value: JSONValue
    let path: CodingPath
    let dates: StrictJSONDecoder.DateDecodingStrategy

    var codingPath: [any CodingKey] { path.keys }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    /// `type` from this value, with the types `JSONDecoder` reads its own way read the same way.
    func decodeValue<T: Decodable>(_ type: T.Type) throws -> T {
        if type == Date.self, case .iso8601 = dates {
            let string = try Scalar.string(value, at: path)
            guard let date = try? Date.ISO8601FormatStyle().parse(string) else {
                throw Scalar.corrupt("the date '\(string)' is not ISO 8601 (such as 2024-05-01T12:00:00Z)", path)
            }
            return try cast(date)
        }
        if case .object(let members) = value, let dictionary = type as? any StringKeyedDictionary.Type {
            return try cast(dictionary.decode(members, at: path, dates: dates))
        }
        if type == Data.self {
            // `JSONDecoder`'s default: base64, not an array of numbers.
            let string = try Scalar.string(value, at: path)
            guard let data = Data(base64Encoded: string) else { throw Scalar.corrupt("the data is not base64", path) }
            return try cast(data)
        }
        return try T(from: self)
    }

    private func cast<T, Value>(_ value: Value) throws -> T {
        guard let cast = value as? T else { throw Scalar.mismatch(T.self, self.value, path) }
        return cast
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .object(let members) = value else { throw Scalar.mismatch([String: Any].self, value, path) }
        return KeyedDecodingContainer(KeyedContainer<Key>(members: members, path: path, dates: dates))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .array(let elements) = value else { throw Scalar.mismatch([Any].self, value, path) }
        return UnkeyedContainer(elements: elements, path: path, dates: dates)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

    func decodeNil() -> Bool {
        if case .null = value { return true }
        return false
    }

    func decode(_ type: Bool.Type) throws -> Bool { try Scalar.bool(value, at: path) }
    func decode(_ type: String.Type) throws -> String { try Scalar.string(value, at: path) }
    func decode(_ type: Double.Type) throws -> Double { try Scalar.double(value, at: path) }
    func decode(_ type: Float.Type) throws -> Float { try Scalar.float(value, at: path) }
    func decode(_ type: Int.Type) throws -> Int { try Scalar.integer(type, value, at: path) }
    func decode(_ type: Int8.Type) throws -> Int8 { try Scalar.integer(type, value, at: path) }
    func decode(_ type: Int16.Type) throws -> Int16 { try Scalar.integer(type, value, at: path) }
    func decode(_ type: Int32.Type) throws -> Int32 { try Scalar.integer(type, value, at: path) }
    func decode(_ type: Int64.Type) throws -> Int64 { try Scalar.integer(type, value, at: path) }
    func decode(_ type: UInt.Type) throws -> UInt { try Scalar.integer(type, value, at: path) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try Scalar.integer(type, value, at: path) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try Scalar.integer(type, value, at: path) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try Scalar.integer(type, value, at: path) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try Scalar.integer(type, value, at: path) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try decodeValue(type) }
}

/// `[String: Value]`, read from an object's members directly: `Dictionary.init(from:)` would make
/// a list of keys and look each up again, which is most of the time a policy takes to read.
private protocol StringKeyedDictionary {
    static func decode(_ members: [String: JSONValue], at path: CodingPath, dates: StrictJSONDecoder.DateDecodingStrategy) throws -> Self
}

extension Dictionary: StringKeyedDictionary where Key == String, Value: Decodable {
    fileprivate static func decode(
        _ members: [String: JSONValue], at path: CodingPath, dates: StrictJSONDecoder.DateDecodingStrategy
    ) throws -> Self {
        var decoded: [String: Value] = [:]
        decoded.reserveCapacity(members.count)
        for (name, member) in members {
            decoded[name] = try JSONValueDecoder(value: member, path: .member(name, path), dates: dates).decodeValue(Value.self)
        }
        return decoded
    }
}

private struct KeyedContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let members: [String: JSONValue]
    let path: CodingPath
    let dates: StrictJSONDecoder.DateDecodingStrategy

    var codingPath: [any CodingKey] { path.keys }
    var allKeys: [Key] { members.keys.compactMap { Key(stringValue: $0) } }

    func contains(_ key: Key) -> Bool { members[key.stringValue] != nil }

    private func member(_ key: Key) throws -> JSONValue {
        guard let member = members[key.stringValue] else {
            let problem = "no key '\(key.stringValue)' in the object at \(path.shown)"
            throw DecodingError.keyNotFound(key, DecodingError.Context(codingPath: path.keys, debugDescription: problem))
        }
        return member
    }

    /// The member of `key`, or nil when it is missing or null (what `decodeIfPresent` reads).
    private func present(_ key: Key) -> JSONValue? {
        switch members[key.stringValue] {
        case .none, .null: nil
        case .some(let member): member
        }
    }

    private func decoder(_ member: JSONValue, _ key: any CodingKey) -> JSONValueDecoder {
        JSONValueDecoder(value: member, path: .key(key, path), dates: dates)
    }

    func decodeNil(forKey key: Key) throws -> Bool {
        if case .null = try member(key) { return true }
        return false
    }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try Scalar.bool(member(key), at: .key(key, path)) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try Scalar.string(member(key), at: .key(key, path)) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try Scalar.double(member(key), at: .key(key, path)) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try Scalar.float(member(key), at: .key(key, path)) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try Scalar.integer(type, member(key), at: .key(key, path)) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try Scalar.integer(type, member(key), at: .key(key, path)) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try Scalar.integer(type, member(key), at: .key(key, path)) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try Scalar.integer(type, member(key), at: .key(key, path)) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try Scalar.integer(type, member(key), at: .key(key, path)) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try Scalar.integer(type, member(key), at: .key(key, path)) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try Scalar.integer(type, member(key), at: .key(key, path)) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try Scalar.integer(type, member(key), at: .key(key, path)) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try Scalar.integer(type, member(key), at: .key(key, path)) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try Scalar.integer(type, member(key), at: .key(key, path)) }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try decoder(member(key), key).decodeValue(type) }

    // One look-up each, not the three of the protocol's defaults (`contains`, `decodeNil`, `decode`).
    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? {
        try present(key).map { try Scalar.bool($0, at: .key(key, path)) }
    }
    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? {
        try present(key).map { try Scalar.string($0, at: .key(key, path)) }
    }
    func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? {
        try present(key).map { try Scalar.double($0, at: .key(key, path)) }
    }
    func decodeIfPresent(_ type: Float.Type, forKey key: Key) throws -> Float? {
        try present(key).map { try Scalar.float($0, at: .key(key, path)) }
    }
    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? { try integerIfPresent(type, key) }
    func decodeIfPresent(_ type: Int8.Type, forKey key: Key) throws -> Int8? { try integerIfPresent(type, key) }
    func decodeIfPresent(_ type: Int16.Type, forKey key: Key) throws -> Int16? { try integerIfPresent(type, key) }
    func decodeIfPresent(_ type: Int32.Type, forKey key: Key) throws -> Int32? { try integerIfPresent(type, key) }
    func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? { try integerIfPresent(type, key) }
    func decodeIfPresent(_ type: UInt.Type, forKey key: Key) throws -> UInt? { try integerIfPresent(type, key) }
    func decodeIfPresent(_ type: UInt8.Type, forKey key: Key) throws -> UInt8? { try integerIfPresent(type, key) }
    func decodeIfPresent(_ type: UInt16.Type, forKey key: Key) throws -> UInt16? { try integerIfPresent(type, key) }
    func decodeIfPresent(_ type: UInt32.Type, forKey key: Key) throws -> UInt32? { try integerIfPresent(type, key) }
    func decodeIfPresent(_ type: UInt64.Type, forKey key: Key) throws -> UInt64? { try integerIfPresent(type, key) }
    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        try present(key).map { try decoder($0, key).decodeValue(type) }
    }

    private func integerIfPresent<T: FixedWidthInteger>(_ type: T.Type, _ key: Key) throws -> T? {
        try present(key).map { try Scalar.integer(type, $0, at: .key(key, path)) }
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws
        -> KeyedDecodingContainer<NestedKey>
    {
        try decoder(member(key), key).container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try decoder(member(key), key).unkeyedContainer()
    }

    func superDecoder() throws -> any Decoder {
        decoder(members[NamedKey.superKey.stringValue] ?? .null, NamedKey.superKey)
    }

    func superDecoder(forKey key: Key) throws -> any Decoder {
        decoder(members[key.stringValue] ?? .null, key)
    }
}

private struct UnkeyedContainer: UnkeyedDecodingContainer {
    let elements: [JSONValue]
    let path: CodingPath
    let dates: StrictJSONDecoder.DateDecodingStrategy
    private(set) var currentIndex = 0

    init(elements: [JSONValue], path: CodingPath, dates: StrictJSONDecoder.DateDecodingStrategy) {
        self.elements = elements
        self.path = path
        self.dates = dates
    }

    var codingPath: [any CodingKey] { path.keys }
    var count: Int? { elements.count }
    var isAtEnd: Bool { currentIndex >= elements.count }

    private var here: CodingPath { .index(currentIndex, path) }

    /// The next element; the index moves past it only once it is decoded (`advance`), as
    /// `JSONDecoder`'s does, so that a caller may try another type after an error.
    private func next(_ type: Any.Type) throws -> JSONValue {
        guard currentIndex < elements.count else {
            throw DecodingError.valueNotFound(
                type, DecodingError.Context(codingPath: here.keys, debugDescription: "the array at \(path.shown) has no more elements"))
        }
        return elements[currentIndex]
    }

    private mutating func advance<T>(_ decoded: T) -> T {
        currentIndex += 1
        return decoded
    }

    mutating func decodeNil() throws -> Bool {
        guard case .null = try next(Never?.self) else { return false }
        currentIndex += 1
        return true
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { advance(try Scalar.bool(next(type), at: here)) }
    mutating func decode(_ type: String.Type) throws -> String { advance(try Scalar.string(next(type), at: here)) }
    mutating func decode(_ type: Double.Type) throws -> Double { advance(try Scalar.double(next(type), at: here)) }
    mutating func decode(_ type: Float.Type) throws -> Float { advance(try Scalar.float(next(type), at: here)) }
    mutating func decode(_ type: Int.Type) throws -> Int { advance(try Scalar.integer(type, next(type), at: here)) }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { advance(try Scalar.integer(type, next(type), at: here)) }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { advance(try Scalar.integer(type, next(type), at: here)) }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { advance(try Scalar.integer(type, next(type), at: here)) }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { advance(try Scalar.integer(type, next(type), at: here)) }
    mutating func decode(_ type: UInt.Type) throws -> UInt { advance(try Scalar.integer(type, next(type), at: here)) }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { advance(try Scalar.integer(type, next(type), at: here)) }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { advance(try Scalar.integer(type, next(type), at: here)) }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { advance(try Scalar.integer(type, next(type), at: here)) }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { advance(try Scalar.integer(type, next(type), at: here)) }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { advance(try elementDecoder(type).decodeValue(type)) }

    private func elementDecoder(_ type: Any.Type) throws -> JSONValueDecoder {
        JSONValueDecoder(value: try next(type), path: here, dates: dates)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        advance(try elementDecoder([String: Any].self).container(keyedBy: type))
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        advance(try elementDecoder([Any].self).unkeyedContainer())
    }

    mutating func superDecoder() throws -> any Decoder {
        advance(try elementDecoder(Any.self))
    }
}
