/// A strict JSON (RFC 8259) reader of UTF-8 bytes into a `JSONValue`.
///
/// Discovery reads every manifest under every search path; Foundation's `JSONDecoder`, driven
/// through `Decodable` into a tree, was most of a first scan's time. This reader does the one
/// thing a manifest needs in one pass over the bytes, and is stricter than the decoder where
/// ambiguity could let two readers see different manifests: a key twice in one object, invalid
/// UTF-8, a lone surrogate escape are refused.
package struct JSONParser {
    /// Deeper nesting than any manifest has; a hostile file of 256 KiB of `[` stops here, long
    /// before the parser's recursion could exhaust a thread's stack.
    package static let maximumDepth = 64

    package struct Failure: Error, Sendable, CustomStringConvertible {
        package let problem: String
        package let line: Int
        package let column: Int
        package var description: String { "\(problem) at line \(line), column \(column)" }
    }

    private let bytes: UnsafeRawBufferPointer
    private var position = 0

    private init(_ bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
    }

    /// Parses a whole document: one value, white space around it, nothing else.
    package static func parse(_ bytes: UnsafeRawBufferPointer) throws(Failure) -> JSONValue {
        var parser = JSONParser(bytes)
        // A UTF-8 byte-order mark, which some editors write, is not part of the document.
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { parser.position = 3 }
        parser.skipWhiteSpace()
        let value = try parser.value(depth: 0)
        parser.skipWhiteSpace()
        guard parser.position == bytes.count else { throw parser.failure("unexpected text after the document") }
        return value
    }

    private var current: UInt8? { position < bytes.count ? bytes[position] : nil }

    private mutating func skipWhiteSpace() {
        while let byte = current, byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 { position += 1 }
    }

    private mutating func value(depth: Int) throws(Failure) -> JSONValue {
        guard let byte = current else { throw failure("the document ends where a value was expected") }
        switch byte {
        case UInt8(ascii: "{"): return try object(depth: depth + 1)
        case UInt8(ascii: "["): return try array(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): return try literal("true", .bool(true))
        case UInt8(ascii: "f"): return try literal("false", .bool(false))
        case UInt8(ascii: "n"): return try literal("null", .null)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
        default: throw failure("unexpected \(Self.describe(byte)) where a value was expected")
        }
    }

    private mutating func literal(_ word: StaticString, _ value: JSONValue) throws(Failure) -> JSONValue {
        let word = UnsafeRawBufferPointer(start: word.utf8Start, count: word.utf8CodeUnitCount)
        guard bytes.count - position >= word.count, bytes[position..<position + word.count].elementsEqual(word) else {
            throw failure("unexpected \(Self.describe(bytes[position])) where a value was expected")
        }
        position += word.count
        return value
    }

    private mutating func object(depth: Int) throws(Failure) -> JSONValue {
        var members: [String: JSONValue] = [:]
        guard try open(depth: depth, closing: UInt8(ascii: "}")) else { return .object(members) }
        repeat {
            guard current == UInt8(ascii: "\"") else { throw failure("expected a key in quotes") }
            let keyStart = position
            let key = try string()
            skipWhiteSpace()
            guard current == UInt8(ascii: ":") else { throw failure("expected ':' after the key \"\(key)\"") }
            position += 1
            skipWhiteSpace()
            let member = try value(depth: depth)
            guard members.updateValue(member, forKey: key) == nil else {
                position = keyStart
                throw failure("the key \"\(key)\" appears twice in one object")
            }
        } while try continues(closing: UInt8(ascii: "}"), in: "an object")
        return .object(members)
    }

    private mutating func array(depth: Int) throws(Failure) -> JSONValue {
        var elements: [JSONValue] = []
        guard try open(depth: depth, closing: UInt8(ascii: "]")) else { return .array(elements) }
        repeat {
            elements.append(try value(depth: depth))
        } while try continues(closing: UInt8(ascii: "]"), in: "an array")
        return .array(elements)
    }

    /// Steps over a container's opening bracket; false when `closing` follows at once (an empty
    /// container, consumed).
    private mutating func open(depth: Int, closing: UInt8) throws(Failure) -> Bool {
        guard depth <= Self.maximumDepth else { throw failure("nesting deeper than \(Self.maximumDepth) levels") }
        position += 1
        skipWhiteSpace()
        guard current == closing else { return true }
        position += 1
        return false
    }

    /// After a member or element: true after a comma (another one follows), false at `closing`
    /// (consumed).
    private mutating func continues(closing: UInt8, in container: String) throws(Failure) -> Bool {
        skipWhiteSpace()
        switch current {
        case UInt8(ascii: ","):
            position += 1
            skipWhiteSpace()
            return true
        case closing:
            position += 1
            return false
        default:
            throw failure("expected ',' or '\(Character(Unicode.Scalar(closing)))' in \(container)")
        }
    }

    /// A string from its opening quote: the bytes between the quotes as they are when there is
    /// no escape (the common case), checked to be UTF-8 either way.
    private mutating func string() throws(Failure) -> String {
        let start = position
        position += 1
        var decoded: [UInt8] = []
        var runStart = position
        while true {
            guard let byte = current else {
                position = start
                throw failure("a string is not closed")
            }
            if byte == UInt8(ascii: "\"") { break }
            if byte < 0x20 { throw failure("a control character (\(Self.describe(byte))) inside a string must be escaped") }
            if byte == UInt8(ascii: "\\") {
                decoded.append(contentsOf: bytes[runStart..<position])
                try escape(into: &decoded)
                runStart = position
            } else {
                position += 1
            }
        }
        let text: String?
        if decoded.isEmpty {
            text = String(validating: bytes[runStart..<position], as: UTF8.self)
        } else {
            decoded.append(contentsOf: bytes[runStart..<position])
            text = String(validating: decoded, as: UTF8.self)
        }
        guard let text else {
            position = start
            throw failure("a string is not valid UTF-8")
        }
        position += 1
        return text
    }

    /// One escape sequence from its backslash, appended as UTF-8.
    private mutating func escape(into decoded: inout [UInt8]) throws(Failure) {
        position += 1
        guard let byte = current else { throw failure("a string ends inside an escape") }
        position += 1
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): decoded.append(byte)
        case UInt8(ascii: "b"): decoded.append(0x08)
        case UInt8(ascii: "f"): decoded.append(0x0C)
        case UInt8(ascii: "n"): decoded.append(0x0A)
        case UInt8(ascii: "r"): decoded.append(0x0D)
        case UInt8(ascii: "t"): decoded.append(0x09)
        case UInt8(ascii: "u"):
            var scalar = try hexQuad()
            if (0xD800...0xDBFF).contains(scalar) {
                guard bytes.count - position >= 2, bytes[position] == UInt8(ascii: "\\"), bytes[position + 1] == UInt8(ascii: "u")
                else { throw failure("a high surrogate escape without its low surrogate") }
                position += 2
                let low = try hexQuad()
                guard (0xDC00...0xDFFF).contains(low) else { throw failure("a high surrogate escape without its low surrogate") }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            }
            guard let unicode = Unicode.Scalar(scalar) else { throw failure("a lone low surrogate escape") }
            decoded.append(contentsOf: String(Character(unicode)).utf8)
        default:
            position -= 1
            throw failure("a backslash before \(Self.describe(byte)) is not an escape JSON knows")
        }
    }

    private mutating func hexQuad() throws(Failure) -> UInt32 {
        guard bytes.count - position >= 4 else { throw failure("a \\u escape needs four hexadecimal digits") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[position]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw failure("a \\u escape needs four hexadecimal digits")
            }
            value = value << 4 | UInt32(digit)
            position += 1
        }
        return value
    }

    /// A number as JSON writes it. An integer literal keeps its exact value (`Int64`, or `UInt64`
    /// above `Int64.max`); one with a fraction or an exponent is a `Double`, kept as an integer
    /// when it is a whole number within `Int64` (as Foundation's decoder read `1.0` for an `Int`).
    private mutating func number() throws(Failure) -> JSONValue {
        let start = position
        let negative = current == UInt8(ascii: "-")
        if negative { position += 1 }
        let integerStart = position
        guard let first = current, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first) else {
            throw failure("a number needs a digit after '-'")
        }
        skipDigits()
        if first == UInt8(ascii: "0") && position - integerStart > 1 {
            position = integerStart
            throw failure("a number may not have a leading zero")
        }
        var isInteger = true
        if current == UInt8(ascii: ".") {
            position += 1
            guard skipRequiredDigits() else { throw failure("a number needs a digit after '.'") }
            isInteger = false
        }
        if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
            position += 1
            if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { position += 1 }
            guard skipRequiredDigits() else { throw failure("a number needs a digit in its exponent") }
            isInteger = false
        }
        let literal = bytes[start..<position]
        if isInteger, let exact = Self.integer(literal[(negative ? start + 1 : start)...], negative: negative) {
            return exact
        }
        guard let double = Double(String(decoding: literal, as: UTF8.self)), double.isFinite else {
            position = start
            throw failure("a number too large for a double")
        }
        if double.rounded(.towardZero) == double, let whole = Int64(exactly: double) { return .integer(whole) }
        return .number(double)
    }

    private mutating func skipDigits() {
        while let byte = current, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) { position += 1 }
    }

    private mutating func skipRequiredDigits() -> Bool {
        let before = position
        skipDigits()
        return position > before
    }

    /// The exact value of decimal digits, nil past what 64 bits hold.
    private static func integer(_ digits: Slice<UnsafeRawBufferPointer>, negative: Bool) -> JSONValue? {
        var magnitude: UInt64 = 0
        for digit in digits {
            let (times10, overflowTimes) = magnitude.multipliedReportingOverflow(by: 10)
            let (sum, overflowPlus) = times10.addingReportingOverflow(UInt64(digit - UInt8(ascii: "0")))
            guard !overflowTimes, !overflowPlus else { return nil }
            magnitude = sum
        }
        if negative {
            guard magnitude <= UInt64(Int64.max) + 1 else { return nil }
            return .integer(magnitude == UInt64(Int64.max) + 1 ? Int64.min : -Int64(magnitude))
        }
        return magnitude <= UInt64(Int64.max) ? .integer(Int64(magnitude)) : .unsignedInteger(magnitude)
    }

    /// A failure at the current position, with its line and column (1-based, columns in bytes).
    private func failure(_ problem: String) -> Failure {
        let end = min(position, bytes.count)
        var line = 1
        var lineStart = 0
        for index in 0..<end where bytes[index] == 0x0A {
            line += 1
            lineStart = index + 1
        }
        return Failure(problem: problem, line: line, column: end - lineStart + 1)
    }

    private static func describe(_ byte: UInt8) -> String {
        (0x21...0x7E).contains(byte) ? "'\(Character(Unicode.Scalar(byte)))'" : "byte 0x\(String(byte, radix: 16, uppercase: true))"
    }
}
