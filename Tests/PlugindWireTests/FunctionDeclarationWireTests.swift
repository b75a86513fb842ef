import TestSupport
import Testing

@testable import PlugindWire

/// Declarations with pointers, buffers, NULL and errno on the wire; the layout of a call's
/// arguments both sides agree on; and the host's check of what a (possibly hostile) worker
/// returns. Decoders refuse malformed input with `WireError` and never trap.
@Suite("Function declarations and call results on the wire", .tags(.unit))
struct FunctionDeclarationWireTests {
    static func buffer(_ direction: FunctionDirection, _ count: FunctionBuffer.Count, element: FunctionValueType = .uint8)
        -> FunctionParameter.Kind
    {
        .buffer(FunctionBuffer(direction: direction, element: element, count: count))
    }

    /// `int compress(Bytef *dest, uLongf *destLen, const Bytef *source, uLong sourceLen)`.
    static let compress = FunctionSignature(
        name: "compress",
        parameters: [
            FunctionParameter(buffer(.out, .length(1)), name: "dest"), FunctionParameter(.pointer(.uint64, .inout), name: "destLen"),
            FunctionParameter(buffer(.in, .argument(3)), name: "source"), FunctionParameter(.value(.uint64), name: "sourceLen"),
        ],
        returns: .int32)

    static let signatures: [FunctionSignature] = [
        FunctionSignature(name: "legacy", arguments: [.int8, .bytes, .string], returns: .double),
        compress,
        FunctionSignature(
            name: "frexp", parameters: [FunctionParameter(.value(.double)), FunctionParameter(.pointer(.int32, .out), name: "exp")],
            returns: .double),
        FunctionSignature(
            name: "strtol", parameters: [FunctionParameter(.value(.string)), FunctionParameter(.null), FunctionParameter(.value(.int32))],
            returns: .int64, reportsErrno: true),
        FunctionSignature(
            name: "block",
            parameters: [
                FunctionParameter(buffer(.inout, .constant(16), element: .int32), name: "block"),
                FunctionParameter(buffer(.out, .argument(2), element: .double), name: "values"),
                FunctionParameter(.value(.uint16), name: "n"),
            ],
            returns: .void),
        StructDeclarationTests.deflate,
        StructDeclarationTests.timegm,
        execWithRows,
    ]

    /// `sqlite3_exec` with its row callback: a context it does not see, a count, two arrays of
    /// strings that count counts; and a buffer counted by the function's own argument.
    static let execWithRows = FunctionSignature(
        name: "exec_rows",
        parameters: [
            FunctionParameter(.value(.string), name: "sql"),
            FunctionParameter(.value(.uint64), name: "size"),
            FunctionParameter(
                .callback(
                    FunctionCallbackSignature(
                        parameters: [
                            .init(.ignored), .init(.value(.int32), name: "ncols"), .init(.strings(count: .argument(1)), name: "values"),
                            .init(.buffer(element: .uint8, count: .outer(1)), name: "key"), .init(.value(.double), name: "weight"),
                        ], returns: .int32)), name: "callback"),
        ],
        returns: .int32)

    @Test("a callback's handler gets a strings argument as as many values as its count, each a string or void (NULL)")
    func callbackArguments() throws {
        guard case .callback(let callback) = Self.execWithRows.parameters[2].kind else { return }
        #expect(
            callback.matches([.int32(2), .string("a"), .void, .bytes([1]), .double(0.5)]),
            "two strings, one of them NULL")
        #expect(!callback.matches([.int32(2), .string("a"), .bytes([1]), .double(0.5)]), "one string short")
        #expect(!callback.matches([.int32(1), .bytes([1]), .bytes([1]), .double(0.5)]), "a string of another type")
        #expect(!callback.matches([.int32(0), .bytes([1]), .double(0.5), .double(1)]), "one too many")
        #expect(callback.matches([.int32(0), .bytes([1]), .double(0.5)]))
        #expect(
            callback.described(outer: Self.execWithRows.parameters)
                == "int32 (*)(void *, int32 ncols, strings values[ncols], in uint8 key[size], double weight)")
        let counted = FunctionCallbackSignature(
            parameters: [.init(.strings(count: .argument(1)), name: "v"), .init(.value(.int32), name: "n")], returns: .void)
        #expect(counted.problem(outer: []) == "has 'v' counted by something that is not an earlier integer argument of the callback")
    }

    static func roundTrip(_ signature: FunctionSignature) throws(WireError) -> FunctionSignature {
        var writer = PayloadWriter()
        writer.write(signature)
        var reader = PayloadReader(writer.bytes)
        let decoded = try reader.readFunctionSignature()
        guard reader.remaining == 0 else { throw .malformedPayload("trailing bytes") }
        return decoded
    }

    @Test("declarations round-trip, and describe themselves as C would write them", arguments: signatures)
    func signatureRoundTrip(signature: FunctionSignature) throws {
        try signature.validate()
        #expect(try Self.roundTrip(signature) == signature)
    }

    @Test("descriptions: the old form unchanged, the new kinds C-like")
    func descriptions() {
        #expect(Self.signatures[0].description == "legacy(int8, bytes, string) -> double")
        #expect(
            Self.compress.description
                == "compress(out uint8 dest[*destLen], inout uint64 *destLen, in uint8 source[sourceLen], uint64 sourceLen) -> int32")
        #expect(Self.signatures[2].description == "frexp(double, out int32 *exp) -> double")
        #expect(Self.signatures[3].description == "strtol(string, NULL, int32) -> int64, errno")
        #expect(Self.compress.arguments == [.uint64, .bytes], "the caller passes the capacity and the source")
        #expect(Self.compress.outputs.map(\.name) == ["dest", "destLen"])
        #expect(Self.signatures[4].arguments == [.bytes, .uint16])
    }

    @Test("a declaration the manifest parser would refuse is refused on the wire too")
    func inconsistentOnTheWire() {
        let bad = FunctionSignature(
            name: "f", parameters: [FunctionParameter(Self.buffer(.in, .argument(1)), name: "b"), FunctionParameter(.value(.double))],
            returns: .void)
        #expect(throws: WireError.self) { try Self.roundTrip(bad) }
        var writer = PayloadWriter()
        writer.write(Self.compress)
        var bytes = writer.bytes
        bytes[bytes.count - 1] = 0x80  // an unknown flag
        var reader = PayloadReader(bytes)
        #expect(throws: WireError.self) { try reader.readFunctionSignature() }
    }

    @Test("call replies round-trip in worker messages")
    func replyRoundTrip() throws {
        let replies = [
            FunctionCallReply(.int32(0), outputs: [.bytes([1, 2, 3]), .uint64(3)]),
            FunctionCallReply(.void, outputs: [], errorNumber: 34),
            FunctionCallReply(.double(0.5), outputs: [.int32(4)], errorNumber: 0),
        ]
        for reply in replies {
            let message = WorkerMessage.callResult(id: 5, reply)
            #expect(try WorkerMessage(message.encode()) == message)
        }
    }

    /// A deterministic generator, so that a failure names its seed.
    struct Generator: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var mixed = state
            mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
            mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
            return mixed ^ (mixed >> 31)
        }
    }

    @Test("random bytes and mutated encodings never trap the decoders: WireError, or a declaration that validates")
    func decoderFuzz() {
        var generator = Generator(state: 53)
        var seeds: [[UInt8]] = Self.signatures.map { signature in
            var writer = PayloadWriter()
            writer.write(signature)
            return writer.bytes
        }
        for reply in [FunctionCallReply(.int32(0), outputs: [.bytes([1, 2]), .uint64(2)], errorNumber: 1)] {
            var writer = PayloadWriter()
            writer.write(reply)
            seeds.append(writer.bytes)
        }
        var decodedSignatures = 0
        for round in 0..<20_000 {
            var bytes: [UInt8]
            if round % 2 == 0 {
                bytes = (0..<Int.random(in: 0...64, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            } else {
                bytes = seeds[Int.random(in: 0..<seeds.count, using: &generator)]
                for _ in 0..<Int.random(in: 1...4, using: &generator) where !bytes.isEmpty {
                    switch Int.random(in: 0..<3, using: &generator) {
                    case 0: bytes[Int.random(in: 0..<bytes.count, using: &generator)] = UInt8.random(in: 0...255, using: &generator)
                    case 1: bytes.removeLast(Int.random(in: 0...bytes.count, using: &generator))
                    default:
                        bytes.insert(UInt8.random(in: 0...255, using: &generator), at: Int.random(in: 0...bytes.count, using: &generator))
                    }
                }
            }
            var signatureReader = PayloadReader(bytes)
            if let signature = try? signatureReader.readFunctionSignature() {
                decodedSignatures += 1
                #expect((try? signature.validate()) != nil, "round \(round): a decoded declaration does not validate")
            }
            var replyReader = PayloadReader(bytes)
            _ = try? replyReader.readFunctionCallReply()
            let frame = Frame(header: FrameHeader(kind: .callResult, requestID: 1, payloadLength: bytes.count), payload: bytes)
            _ = try? WorkerMessage(frame)
        }
        #expect(decodedSignatures > 0, "the mutations never kept a declaration whole: the fuzzing checks little")
    }

    // MARK: - Laying out a call

    @Test("a call's arguments: counts from buffer lengths, capacities from lengths, constants and arguments")
    func binding() throws {
        let bound = try Self.compress.bind([.uint64(100), .bytes([1, 2, 3])])
        #expect(
            bound.slots == [
                .buffer(content: [], capacity: 100), .pointer(.uint64(100)), .buffer(content: [1, 2, 3], capacity: 3), .value(.uint64(3)),
            ])
        #expect(bound.outputCapacity == 100)
        let block = try Self.signatures[4].bind([.bytes(Array(repeating: 7, count: 64)), .uint16(3)])
        #expect(block.slots[1] == .buffer(content: [], capacity: 24))
        #expect(block.outputCapacity == 64 + 24)
        let frexp = try Self.signatures[2].bind([.double(8)])
        #expect(frexp.slots == [.value(.double(8)), .pointer(.int32(0))])
    }

    @Test("arguments that do not fit are refused naming the function and the argument")
    func bindingRefusals() {
        func message(_ signature: FunctionSignature, _ values: [FunctionValue]) -> String? {
            do {
                _ = try signature.bind(values)
                return nil
            } catch {
                return error.message
            }
        }
        #expect(
            message(Self.compress, [.uint64(1)])
                == "compress(out uint8 dest[*destLen], inout uint64 *destLen, in uint8 source[sourceLen], uint64 sourceLen) -> int32 takes 2 argument(s), got 1"
        )
        #expect(message(Self.compress, [.uint32(1), .bytes([])])?.hasPrefix("argument 1 ('destLen') of compress(") == true)
        #expect(
            message(Self.signatures[4], [.bytes([1]), .uint16(1)])
                == "'block' of block holds 1 bytes, not a whole number of int32 elements (4 bytes each)")
        #expect(
            message(Self.signatures[4], [.bytes(Array(repeating: 0, count: 60)), .uint16(1)])
                == "'block' of block must hold exactly 64 bytes, got 60")
        let narrow = FunctionSignature(
            name: "narrow",
            parameters: [FunctionParameter(Self.buffer(.in, .argument(1)), name: "data"), FunctionParameter(.value(.uint8), name: "n")],
            returns: .void)
        #expect(
            message(narrow, [.bytes(Array(repeating: 0, count: 256))]) == "'data' of narrow holds 256 elements, more than 'n' can count")
        let signed = FunctionSignature(
            name: "signed",
            parameters: [FunctionParameter(Self.buffer(.out, .argument(1)), name: "out"), FunctionParameter(.value(.int32), name: "n")],
            returns: .void)
        #expect(message(signed, [.int32(-1)]) == "'n' of signed is -1, which cannot count 'out'")
        #expect(message(signed, [.int32(.max)]) == nil, "2 GiB is within the declaration's bounds; the message limit is checked apart")
    }

    // MARK: - Checking what comes back

    static func resultError(
        _ signature: FunctionSignature, _ values: [FunctionValue], _ reply: FunctionCallReply
    ) throws -> FunctionResultError? {
        let bound = try signature.bind(values)
        do {
            _ = try signature.result(value: reply.value, outputs: reply.outputs, errorNumber: reply.errorNumber, arguments: bound)
            return nil
        } catch {
            return error
        }
    }

    @Test("a result whose lengths exceed the capacity given, or that is not what was declared, is refused naming the function")
    func hostileResults() throws {
        let compress = Self.compress
        let arguments: [FunctionValue] = [.uint64(16), .bytes([1])]
        #expect(try Self.resultError(compress, arguments, FunctionCallReply(.int32(0), outputs: [.bytes([9, 9]), .uint64(2)])) == nil)
        let beyond = try Self.resultError(compress, arguments, FunctionCallReply(.int32(0), outputs: [.bytes([]), .uint64(17)]))
        #expect(beyond?.message == "compress set 'destLen' to 17, beyond the capacity of 16 uint8 elements given for 'dest'")
        #expect(beyond?.argument == "destLen")
        // A worker that sends more bytes than the length it reports, or than the capacity.
        let longer = try Self.resultError(
            compress, arguments, FunctionCallReply(.int32(0), outputs: [.bytes(Array(repeating: 0, count: 64)), .uint64(2)]))
        #expect(longer?.message == "compress returned 64 bytes for 'dest', where 'destLen' says 2")
        let fixed = try Self.resultError(
            Self.signatures[4], [.bytes(Array(repeating: 0, count: 64)), .uint16(1)],
            FunctionCallReply(.void, outputs: [.bytes(Array(repeating: 0, count: 65)), .bytes(Array(repeating: 0, count: 8))]))
        #expect(fixed?.message == "block returned 65 bytes for 'block', which holds 64")
        #expect(fixed?.argument == "block")
        // Types, counts and errno as declared.
        #expect(
            try Self.resultError(compress, arguments, FunctionCallReply(.int64(0), outputs: [.bytes([]), .uint64(0)]))?.message
                == "compress returned int64, not the declared int32")
        #expect(
            try Self.resultError(compress, arguments, FunctionCallReply(.int32(0), outputs: [.bytes([])]))?.message
                == "the result of compress has 1 outputs, not the 2 declared")
        #expect(
            try Self.resultError(compress, arguments, FunctionCallReply(.int32(0), outputs: [.bytes([]), .int32(0)]))?.message
                == "compress returned int32 for 'destLen', not uint64")
        #expect(
            try Self.resultError(compress, arguments, FunctionCallReply(.int32(0), outputs: [.bytes([]), .uint64(0)], errorNumber: 1))?
                .message
                == "the result of compress has errno, which the declaration does not")
        #expect(try Self.resultError(Self.signatures[3], [.string("1"), .int32(10)], FunctionCallReply(.int64(1))) != nil)
    }
}
