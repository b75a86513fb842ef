import TestSupport
import Testing

@testable import PlugindWire

/// Declared structs: layouts and the fields a call sets and reads, checked as a manifest's are;
/// their declarations on the wire; a call's field values laid out; and the host's check of the
/// fields a (possibly hostile) worker returns.
@Suite("Struct declarations", .tags(.unit))
struct StructDeclarationTests {
    /// zlib's `z_stream` on x86-64, the fields a host uses.
    static let zStream = FunctionStruct(
        name: "z_stream", size: 112, alignment: 8,
        fields: [
            .init(name: "next_in", offset: 0, kind: .buffer(direction: .in, element: .uint8, count: "avail_in", advances: true)),
            .init(name: "avail_in", offset: 8, kind: .scalar(.uint32)),
            .init(name: "total_in", offset: 16, kind: .scalar(.uint64)),
            .init(name: "next_out", offset: 24, kind: .buffer(direction: .out, element: .uint8, count: "avail_out", advances: true)),
            .init(name: "avail_out", offset: 32, kind: .scalar(.uint32)),
            .init(name: "msg", offset: 48, kind: .string),
        ])

    /// `int deflate(z_stream *strm, int flush)` on a stream handle.
    static let deflate = FunctionSignature(
        name: "deflate",
        parameters: [
            FunctionParameter(
                .handle("deflate_stream", .in), name: "strm",
                fields: FunctionStructAccess(
                    layout: zStream, sets: ["next_in", "next_out", "avail_out"], gets: ["avail_in", "next_out", "avail_out", "msg"])),
            FunctionParameter(.value(.int32), name: "flush"),
        ],
        returns: .int32)

    /// `time_t timegm(struct tm *tm)`, a struct made for the call.
    static let timegm = FunctionSignature(
        name: "timegm",
        parameters: [
            FunctionParameter(
                .structure, name: "tm",
                fields: FunctionStructAccess(
                    layout: FunctionStruct(
                        name: "tm", size: 16, alignment: 4,
                        fields: [
                            .init(name: "year", offset: 0, kind: .scalar(.int32)), .init(name: "wday", offset: 12, kind: .scalar(.int32)),
                        ]),
                    sets: ["year"], gets: ["wday"]))
        ],
        returns: .int64)

    @Test("struct arguments and struct handles round-trip on the wire; what a caller passes and a result reports is flattened by field")
    func shapes() throws {
        for signature in [Self.deflate, Self.timegm] {
            try signature.validate()
            #expect(try FunctionDeclarationWireTests.roundTrip(signature) == signature)
        }
        #expect(Self.deflate.arguments == [.handle, .bytes, .uint32, .int32])
        #expect(Self.deflate.inputs.map(\.field) == [nil, "next_in", "avail_out", nil])
        #expect(Self.deflate.outputs.map(\.name) == ["strm.avail_in", "strm.next_out", "strm.avail_out", "strm.msg"])
        #expect(Self.deflate.outputs.map(\.type) == [.uint32, .bytes, .uint32, .string])
        #expect(
            Self.deflate.description
                == "deflate(deflate_stream (struct z_stream) *strm {set next_in, next_out, avail_out; get avail_in, next_out, avail_out, msg}, int32 flush) -> int32"
        )
        #expect(Self.timegm.arguments == [.int32])
        #expect(Self.timegm.description == "timegm(struct tm *tm {set year; get wday}) -> int64")
    }

    @Test("a call sets an in buffer with its count from the bytes, and binds room for an out buffer as its count says")
    func binding() throws {
        let handle = FunctionHandle(kind: "deflate_stream", id: 3)
        let bound = try Self.deflate.bind([.handle(handle), .bytes([1, 2, 3]), .uint32(64), .int32(4)])
        #expect(bound.slots == [.handle(handle), .value(.int32(4))])
        #expect(
            bound.fieldSettings[0] == [
                .init(field: "next_in", value: .buffer(content: [1, 2, 3], capacity: 3)),
                .init(field: "avail_in", value: .value(.uint32(3))),
                .init(field: "next_out", value: .buffer(content: [], capacity: 64)), .init(field: "avail_out", value: .value(.uint32(64))),
            ])
        #expect(bound.outputCapacity == 64)
        #expect(bound.capacity(of: "next_out", at: 0) == 64)
        let refused = #expect(throws: FunctionCallError.self) {
            try Self.deflate.bind([.handle(handle), .bytes([]), .int32(64), .int32(4)])
        }
        #expect(refused?.message.hasPrefix("argument 3 ('strm.avail_out') of deflate(") == true)
        #expect(refused?.message.hasSuffix("must be uint32, got int32") == true)
    }

    @Test("the host checks an advancing out buffer against the room it bound: the bytes are the room less what is left")
    func resultChecks() throws {
        let handle = FunctionHandle(kind: "deflate_stream", id: 3)
        let bound = try Self.deflate.bind([.handle(handle), .bytes([1, 2, 3]), .uint32(8), .int32(4)])
        let honest = try Self.deflate.result(
            value: .int32(1), outputs: [.uint32(0), .bytes([9, 9, 9, 9, 9]), .uint32(3), .string("")], errorNumber: nil,
            arguments: bound)
        #expect(honest[output: "strm.next_out"] == .bytes([9, 9, 9, 9, 9]))
        let beyond = #expect(throws: FunctionResultError.self) {
            try Self.deflate.result(
                value: .int32(1), outputs: [.uint32(0), .bytes([]), .uint32(9), .string("")], errorNumber: nil, arguments: bound)
        }
        #expect(beyond?.argument == "strm.avail_out")
        #expect(beyond?.message == "deflate set 'strm.avail_out' to 9, beyond the 8 uint8 elements bound to 'strm.next_out'")
        let mismatch = #expect(throws: FunctionResultError.self) {
            try Self.deflate.result(
                value: .int32(1), outputs: [.uint32(0), .bytes([1]), .uint32(3), .string("")], errorNumber: nil, arguments: bound)
        }
        #expect(mismatch?.message == "deflate returned 1 bytes for 'strm.next_out', where 'strm.avail_out' says 5")
    }

    static func layoutProblem(_ fields: [FunctionStruct.Field], size: Int = 16, alignment: Int = 8) -> String? {
        do {
            try FunctionStruct(name: "s", size: size, alignment: alignment, fields: fields).validate()
            return nil
        } catch {
            return error.description
        }
    }

    @Test("layouts are refused naming the struct and the field: outside, misaligned, overlapping, miscounted")
    func layoutRefusals() {
        let count = FunctionStruct.Field(name: "n", offset: 8, kind: .scalar(.uint32))
        func buffer(_ name: String, counted counter: String, direction: FunctionDirection = .in) -> FunctionStruct.Field {
            .init(name: name, offset: 0, kind: .buffer(direction: direction, element: .uint8, count: counter, advances: false))
        }
        #expect(Self.layoutProblem([buffer("p", counted: "n"), count]) == nil)
        #expect(Self.layoutProblem([], size: 12) == "struct s has size 12, not a multiple of its alignment 8")
        #expect(Self.layoutProblem([], alignment: 3) == "struct s has alignment 3; it must be 1, 2, 4, 8 or 16")
        #expect(
            Self.layoutProblem([.init(name: "x", offset: 12, kind: .scalar(.uint64))])
                == "field 'x' of struct s at offset 12 with 8 bytes does not fit in the 16 bytes of the struct")
        #expect(
            Self.layoutProblem([.init(name: "x", offset: 2, kind: .scalar(.int32))])
                == "field 'x' of struct s is at offset 2, not aligned for its 4 bytes")
        #expect(
            Self.layoutProblem([.init(name: "x", offset: 0, kind: .scalar(.int64)), .init(name: "y", offset: 4, kind: .scalar(.int32))])
                == "field 'x' of struct s overlaps field 'y'")
        #expect(
            Self.layoutProblem([buffer("p", counted: "q"), count])
                == "field 'p' of struct s is counted by 'q', which is not an integer field of s")
        #expect(
            Self.layoutProblem([buffer("p", counted: "n"), count, .init(name: "r", offset: 12, kind: .scalar(.int32))].map { $0 })
                == nil)
        #expect(
            Self.layoutProblem([.init(name: "x", offset: 0, kind: .scalar(.double))], size: 8, alignment: 4)
                == "field 'x' of struct s has 8 bytes, more than the struct's alignment 4 allows")
        #expect(
            Self.layoutProblem([buffer("p", counted: "n", direction: .inout), count])?.hasSuffix(
                "is an inout buffer; a buffer field is in (the caller's bytes) or out (room the library fills)") == true)
    }

    @Test("what a call may set and get: never a pointer field itself, and never an out buffer it cannot check")
    func accessRefusals() {
        func problem(sets: [String] = [], gets: [String] = []) -> String? {
            FunctionStructAccess(layout: Self.zStream, sets: sets, gets: gets).validate()
        }
        #expect(problem(sets: ["next_in", "next_out", "avail_out"], gets: ["next_out", "avail_out"]) == nil)
        #expect(problem(sets: ["msg"]) == "sets 'msg', a string the library sets (a pointer field is never the caller's to write)")
        #expect(problem(sets: ["next_out"]) == "sets out buffer 'next_out' but not its count 'avail_out', the room to bind for it")
        #expect(
            problem(sets: ["next_in", "avail_in"])
                == "sets both in buffer 'next_in' and its count 'avail_in'; the count is the length of the bytes given")
        #expect(problem(gets: ["next_in"]) == "gets in buffer 'next_in'; only what the library writes comes back")
        #expect(
            problem(gets: ["next_out", "avail_out"])
                == "gets out buffer 'next_out' without setting it; set it (and 'avail_out') so the call binds fresh room for it")
        #expect(
            problem(sets: ["next_out", "avail_out"], gets: ["next_out"])
                == "gets out buffer 'next_out' but not its count 'avail_out', by which the host checks its length")
        #expect(problem(gets: ["nothing"]) == "gets 'nothing', which struct z_stream does not declare")
        #expect(problem(sets: ["avail_out", "avail_out"]) == "sets 'avail_out' twice")
    }

    @Test("a struct kind is one layout everywhere, and is never returned: the worker makes it")
    func handleKinds() {
        let release = FunctionSignature(
            name: "deflateEnd",
            parameters: [
                FunctionParameter(.handle("deflate_stream", .in), name: "strm", fields: FunctionStructAccess(layout: Self.zStream))
            ],
            returns: .int32, releases: "deflate_stream")
        #expect((try? FunctionSignature.validateHandles(of: [Self.deflate, release])) != nil)
        let plain = FunctionSignature(
            name: "peek", parameters: [FunctionParameter(.handle("deflate_stream", .in), name: "strm")], returns: .int32)
        let mixed = #expect(throws: FunctionDeclarationError.self) {
            try FunctionSignature.validateHandles(of: [Self.deflate, release, plain])
        }
        #expect(mixed?.function == "peek")
        let returned = FunctionSignature(
            name: "make", parameters: [], returns: .handle, returnKind: "deflate_stream")
        let refused = #expect(throws: FunctionDeclarationError.self) {
            try FunctionSignature.validateHandles(of: [Self.deflate, release, returned])
        }
        #expect(
            refused?.problem == "returns a handle of kind deflate_stream, a struct the worker makes; a function gets one as an out argument"
        )
    }
}
