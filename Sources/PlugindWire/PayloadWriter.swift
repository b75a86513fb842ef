import Glibc

/// Builds the payload of a structured message: fixed-width little-endian integers, and strings,
/// byte strings and arrays prefixed with a 32-bit count.
package struct PayloadWriter: Sendable {
    package private(set) var bytes: [UInt8] = []

    package init(capacity: Int = 64) {
        bytes.reserveCapacity(capacity)
    }

    package mutating func write(_ value: UInt8) { bytes.append(value) }
    package mutating func write(_ value: Bool) { bytes.append(value ? 1 : 0) }
    package mutating func write(_ value: UInt16) { writeInteger(value) }
    package mutating func write(_ value: UInt32) { writeInteger(value) }
    package mutating func write(_ value: UInt64) { writeInteger(value) }
    package mutating func write(_ value: Int32) { writeInteger(value) }
    package mutating func write(_ value: Int64) { writeInteger(value) }

    package mutating func writeInteger<T: FixedWidthInteger>(_ value: T) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    package mutating func write(_ value: String) {
        var value = value
        value.withUTF8 { write(bytes: UnsafeRawBufferPointer($0)) }
    }

    package mutating func write(bytes value: some Collection<UInt8>) {
        write(UInt32(value.count))
        bytes.append(contentsOf: value)
    }

    package mutating func write(bytes value: UnsafeRawBufferPointer) {
        write(UInt32(value.count))
        bytes.append(contentsOf: value)
    }

    package mutating func write(_ values: [String]) {
        write(UInt32(values.count))
        for value in values { write(value) }
    }

    package mutating func write<Element>(_ values: [Element], _ writeElement: (inout PayloadWriter, Element) -> Void) {
        write(UInt32(values.count))
        for value in values { writeElement(&self, value) }
    }
}

/// Reads what `PayloadWriter` wrote, checking every length against the bytes that remain so that
/// hostile input can neither read out of bounds nor make it allocate more than it received.
package struct PayloadReader {
    private let bytes: [UInt8]
    private var offset: Int

    package init(_ bytes: [UInt8]) {
        self.bytes = bytes
        self.offset = 0
    }

    package var remaining: Int { bytes.count - offset }

    package mutating func readUInt8() throws(WireError) -> UInt8 {
        try need(1, "byte")
        defer { offset += 1 }
        return bytes[offset]
    }

    package mutating func readBool() throws(WireError) -> Bool {
        switch try readUInt8() {
        case 0: return false
        case 1: return true
        case let other: throw .malformedPayload("boolean byte \(other)")
        }
    }

    package mutating func readUInt16() throws(WireError) -> UInt16 { try readInteger() }
    package mutating func readUInt32() throws(WireError) -> UInt32 { try readInteger() }
    package mutating func readUInt64() throws(WireError) -> UInt64 { try readInteger() }
    package mutating func readInt32() throws(WireError) -> Int32 { try readInteger() }
    package mutating func readInt64() throws(WireError) -> Int64 { try readInteger() }

    package mutating func readInteger<T: FixedWidthInteger>() throws(WireError) -> T {
        let size = MemoryLayout<T>.size
        try need(size, "\(T.self)")
        defer { offset += size }
        return bytes.withUnsafeBytes { T(littleEndian: $0.loadUnaligned(fromByteOffset: offset, as: T.self)) }
    }

    package mutating func readBytes() throws(WireError) -> [UInt8] {
        let count = Int(try readUInt32())
        try need(count, "byte string of \(count) bytes")
        defer { offset += count }
        return Array(bytes[offset..<offset + count])
    }

    package mutating func readString() throws(WireError) -> String {
        let count = Int(try readUInt32())
        try need(count, "string of \(count) bytes")
        defer { offset += count }
        // Decoded with repair, then compared with the input: a repaired string is valid UTF-8,
        // so it never equals invalid input, and this refuses exactly what validating refuses.
        // `String(validating:as:)` is generic inside the standard library and looked up its
        // metadata on every call: a large share of decoding the catalog store (`perf`).
        let start = offset
        let decoded: String? = bytes.withUnsafeBufferPointer { all in
            let input = UnsafeBufferPointer(rebasing: all[start..<start + count])
            var string = String(decoding: input, as: UTF8.self)
            return string.withUTF8 { Self.sameBytes($0, input) } ? string : nil
        }
        guard let decoded else { throw .malformedPayload("string is not valid UTF-8") }
        return decoded
    }

    package mutating func readStrings() throws(WireError) -> [String] {
        try readArray { (reader) throws(WireError) in try reader.readString() }
    }

    /// Reads a count and that many elements. Each element takes at least one byte, so a count
    /// larger than the bytes left is rejected before anything is reserved.
    package mutating func readArray<Element>(
        _ readElement: (inout PayloadReader) throws(WireError) -> Element
    ) throws(WireError) -> [Element] {
        let count = try readCount()
        var elements: [Element] = []
        elements.reserveCapacity(count)
        for _ in 0..<count { elements.append(try readElement(&self)) }
        return elements
    }

    /// The count that prefixes an array, checked as `readArray` checks it. For readers in other
    /// modules that build their arrays themselves: `readArray` is not specialized across modules
    /// here, and looked up its array's generic metadata on every call (a large share of decoding
    /// the catalog store, `perf`).
    package mutating func readCount() throws(WireError) -> Int {
        let count = Int(try readUInt32())
        guard count <= remaining else {
            throw .malformedPayload("array of \(count) elements in \(remaining) bytes")
        }
        return count
    }

    private static func sameBytes(_ first: UnsafeBufferPointer<UInt8>, _ second: UnsafeBufferPointer<UInt8>) -> Bool {
        guard first.count == second.count else { return false }
        guard let firstStart = first.baseAddress, let secondStart = second.baseAddress else { return true }
        return memcmp(firstStart, secondStart, first.count) == 0
    }

    /// Throws unless every byte was consumed.
    /// `what` is built only for the error: every frame is checked, and an interpolated name cost
    /// a host a dynamic cast and a print per message (`perf`).
    package func finish(_ what: @autoclosure () -> String) throws(WireError) {
        guard remaining == 0 else { throw .malformedPayload("\(remaining) unexpected bytes after \(what())") }
    }

    /// `what` is only built when the check fails: readers run on every message.
    private func need(_ count: Int, _ what: @autoclosure () -> String) throws(WireError) {
        guard count <= remaining else {
            throw .malformedPayload("needs \(count) bytes for a \(what()), \(remaining) left")
        }
    }
}
