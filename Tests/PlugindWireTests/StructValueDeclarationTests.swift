import TestSupport
import Testing

@testable import PlugindWire

/// Structs passed and returned by value: the layout must declare every field where C puts it
/// (the registers a struct travels in depend on all of them), a copy gets nothing back, a
/// returned struct only reports; their declarations on the wire; what a caller passes and a
/// result reports, flattened by field.
@Suite("Struct-by-value declarations", .tags(.unit))
struct StructValueDeclarationTests {
    static let complex = FunctionStruct(
        name: "complex", size: 16, alignment: 8,
        fields: [.init(name: "re", offset: 0, kind: .scalar(.double)), .init(name: "im", offset: 8, kind: .scalar(.double))])

    /// `double complex cpow(double complex z, double complex w)`.
    static let cpow = FunctionSignature(
        name: "cpow",
        parameters: [
            FunctionParameter(.structureValue, name: "z", fields: FunctionStructAccess(layout: complex, sets: ["re", "im"])),
            FunctionParameter(.structureValue, name: "w", fields: FunctionStructAccess(layout: complex, sets: ["re"])),
        ],
        returns: .void, returnedStruct: FunctionStructAccess(layout: complex, gets: ["re", "im"]))

    static func layout(_ fields: [FunctionStruct.Field], size: Int, alignment: Int) -> FunctionStruct {
        FunctionStruct(name: "s", size: size, alignment: alignment, fields: fields)
    }

    @Test("passed and returned by value: round trip on the wire, inputs and outputs by field, C-like description")
    func shapes() throws {
        try Self.cpow.validate()
        #expect(try FunctionDeclarationWireTests.roundTrip(Self.cpow) == Self.cpow)
        #expect(Self.cpow.arguments == [.double, .double, .double])
        #expect(Self.cpow.inputs.map(\.field) == ["re", "im", "re"])
        #expect(Self.cpow.outputs.map(\.name) == ["return.re", "return.im"])
        #expect(Self.cpow.outputs.map(\.parameter) == [2, 2])
        #expect(
            Self.cpow.description == "cpow(struct complex z {set re, im}, struct complex w {set re}) -> struct complex {get re, im}")
        let bound = try Self.cpow.bind([.double(1), .double(2), .double(3)])
        #expect(bound.slots == [.structureValue, .structureValue])
        #expect(bound.fieldSettings[1] == [.init(field: "re", value: .value(.double(3)))])
        let result = try Self.cpow.result(value: .void, outputs: [.double(4), .double(5)], errorNumber: nil, arguments: bound)
        #expect(result.outputs.map(\.description) == ["return.re: 4.0", "return.im: 5.0"])
        // A worker's reply of the wrong type for a returned field is refused.
        #expect(throws: FunctionResultError.self) {
            try Self.cpow.result(value: .void, outputs: [.double(4), .int32(5)], errorNumber: nil, arguments: bound)
        }
    }

    @Test("a layout passed by value declares every field where C puts it, and no buffer")
    func completeLayouts() {
        #expect(Self.complex.byValueProblem == nil)
        // uint8 then int16: C pads one byte; 4 bytes, aligned to 2.
        let padded = Self.layout(
            [.init(name: "t", offset: 0, kind: .scalar(.uint8)), .init(name: "v", offset: 2, kind: .scalar(.int16))], size: 4, alignment: 2)
        #expect(padded.byValueProblem == nil)
        // double then int32: 16 bytes with its tail padding.
        let tail = Self.layout(
            [.init(name: "x", offset: 0, kind: .scalar(.double)), .init(name: "n", offset: 8, kind: .scalar(.int32))], size: 16,
            alignment: 8)
        #expect(tail.byValueProblem == nil)
        let gap = Self.layout(
            [.init(name: "a", offset: 0, kind: .scalar(.int32)), .init(name: "b", offset: 8, kind: .scalar(.double))], size: 16,
            alignment: 8)
        // int32 then double: the four bytes between are C's padding, not a field left out.
        #expect(gap.byValueProblem == nil)
        #expect(
            Self.layout(
                [.init(name: "a", offset: 0, kind: .scalar(.int32)), .init(name: "b", offset: 12, kind: .scalar(.int32))], size: 16,
                alignment: 4
            )
            .byValueProblem?.hasPrefix("declares field 'b' at offset 12 where C would put it at 4 (bytes 4 to 11 are no field's)") == true)
        #expect(
            Self.layout([.init(name: "a", offset: 0, kind: .scalar(.int32))], size: 16, alignment: 4).byValueProblem?.hasPrefix(
                "has size 16 and alignment 4, where its fields make 4 and 4") == true)
        #expect(
            Self.layout([.init(name: "a", offset: 0, kind: .scalar(.int32))], size: 8, alignment: 8).byValueProblem?.hasPrefix(
                "has size 8 and alignment 8, where its fields make 4 and 4") == true)
        #expect(Self.layout([], size: 8, alignment: 8).byValueProblem != nil)
        let buffered = Self.layout(
            [
                .init(name: "p", offset: 0, kind: .buffer(direction: .in, element: .uint8, count: "n", advances: false)),
                .init(name: "n", offset: 8, kind: .scalar(.uint64)),
            ], size: 16, alignment: 8)
        #expect(buffered.byValueProblem == "holds buffer field 'p'; a struct passed or returned by value holds scalars and strings")
    }

    @Test("refused naming the function and the argument: a copy that gets fields, a returned struct that sets them, an incomplete layout")
    func refusals() {
        func problem(_ signature: FunctionSignature) -> String? {
            do {
                try signature.validate()
                return nil
            } catch {
                return error.description
            }
        }
        let gets = FunctionSignature(
            name: "f",
            parameters: [FunctionParameter(.structureValue, name: "z", fields: FunctionStructAccess(layout: Self.complex, gets: ["re"]))],
            returns: .void)
        #expect(problem(gets)?.contains("is a struct passed by value and gets fields; the library gets a copy") == true)
        let sets = FunctionSignature(
            name: "f", parameters: [], returns: .void, returnedStruct: FunctionStructAccess(layout: Self.complex, sets: ["re"]))
        #expect(problem(sets)?.contains("sets fields of the struct it returns") == true)
        let both = FunctionSignature(
            name: "f", parameters: [], returns: .int32, returnedStruct: FunctionStructAccess(layout: Self.complex, gets: ["re"]))
        #expect(problem(both)?.contains("returns both int32 and struct complex") == true)
        let holey = Self.layout([.init(name: "a", offset: 8, kind: .scalar(.double))], size: 16, alignment: 8)
        let incomplete = FunctionSignature(
            name: "f", parameters: [FunctionParameter(.structureValue, name: "z", fields: FunctionStructAccess(layout: holey))],
            returns: .void)
        #expect(
            problem(incomplete)?.contains("is a struct s passed by value that declares field 'a' at offset 8 where C would put it at 0")
                == true)
        let unnamed = FunctionSignature(
            name: "f", parameters: [FunctionParameter(.structureValue, fields: FunctionStructAccess(layout: Self.complex))], returns: .void)
        #expect(problem(unnamed)?.contains("is a struct and needs a name") == true)
    }
}
