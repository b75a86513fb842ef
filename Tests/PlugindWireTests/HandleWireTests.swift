import TestSupport
import Testing

@testable import PlugindWire

/// Handles in declarations and values on the wire; the checks of a declaration, of a library's
/// handle kinds, of a call's handle arguments (before anything is sent) and of the handles a
/// worker returns.
@Suite("Handles in declarations, calls and results", .tags(.unit))
struct HandleWireTests {
    static let open = FunctionSignature(
        name: "sqlite3_open",
        parameters: [FunctionParameter(.value(.string), name: "filename"), FunctionParameter(.handle("sqlite3", .out), name: "ppDb")],
        returns: .int32)
    static let close = FunctionSignature(
        name: "sqlite3_close_v2", parameters: [FunctionParameter(.handle("sqlite3", .in), name: "db")], returns: .int32,
        releases: "sqlite3")
    static let finalize = FunctionSignature(
        name: "sqlite3_finalize", parameters: [FunctionParameter(.handle("sqlite3_stmt", .in), name: "stmt")], returns: .int32,
        releases: "sqlite3_stmt")
    static let step = FunctionSignature(
        name: "sqlite3_step", parameters: [FunctionParameter(.handle("sqlite3_stmt", .in), name: "stmt")], returns: .int32)
    static let dbHandle = FunctionSignature(
        name: "sqlite3_db_handle", parameters: [FunctionParameter(.handle("sqlite3_stmt", .in))], returns: .handle,
        returnKind: "sqlite3")
    static let prepare = FunctionSignature(
        name: "sqlite3_prepare_v2",
        parameters: [
            FunctionParameter(.handle("sqlite3", .in), name: "db"), FunctionParameter(.value(.string), name: "zSql"),
            FunctionParameter(.value(.int32), name: "nByte"), FunctionParameter(.handle("sqlite3_stmt", .out), name: "ppStmt"),
            FunctionParameter(.null, name: "pzTail"),
        ],
        returns: .int32, reportsErrno: true)

    static let signatures = [open, close, finalize, step, dbHandle, prepare]

    static func roundTrip(_ signature: FunctionSignature) throws(WireError) -> FunctionSignature {
        var writer = PayloadWriter()
        writer.write(signature)
        var reader = PayloadReader(writer.bytes)
        let decoded = try reader.readFunctionSignature()
        guard reader.remaining == 0 else { throw .malformedPayload("trailing bytes") }
        return decoded
    }

    @Test("declarations with handles round-trip, kinds and release marks included", arguments: signatures)
    func signatureRoundTrip(signature: FunctionSignature) throws {
        try signature.validate()
        let decoded = try Self.roundTrip(signature)
        #expect(decoded == signature)
        #expect(decoded.returnKind == signature.returnKind && decoded.releases == signature.releases)
    }

    @Test("descriptions write handles as C would")
    func descriptions() {
        #expect(Self.open.description == "sqlite3_open(string filename, out sqlite3 **ppDb) -> int32")
        #expect(Self.dbHandle.description == "sqlite3_db_handle(sqlite3_stmt *) -> sqlite3 *")
        #expect(Self.prepare.inputs.map(\.kind) == ["sqlite3", nil, nil])
        #expect(Self.prepare.outputs.map(\.name) == ["ppStmt"])
        #expect(Self.prepare.outputs.map(\.kind) == ["sqlite3_stmt"])
    }

    @Test("handle values round-trip in calls and replies, NULL included")
    func valueRoundTrip() throws {
        let db = FunctionHandle(kind: "sqlite3", id: 7)
        let call = HostMessage.call(id: 3, function: 1, arguments: [.handle(db), .string("SELECT 1"), .int32(-1)])
        #expect(try HostMessage(call.encode()) == call)
        let reply = WorkerMessage.callResult(
            id: 3, FunctionCallReply(.int32(0), outputs: [.handle(FunctionHandle(kind: "sqlite3_stmt", id: 8))]))
        #expect(try WorkerMessage(reply.encode()) == reply)
        let null = WorkerMessage.callResult(id: 4, FunctionCallReply(.handle(.null(kind: "sqlite3"))))
        #expect(try WorkerMessage(null.encode()) == null)
        #expect(FunctionValue.handle(db).description == "sqlite3#7")
        #expect(FunctionHandle.null(kind: "sqlite3").description == "sqlite3#null")
        #expect(FunctionHandle.parse("sqlite3#7") == db)
        #expect(FunctionHandle.parse("sqlite3#null")?.isNull == true)
        for text in ["sqlite3", "#7", "sqlite3#0", "sqlite3#-1", "my-db#1", "sqlite3#x"] {
            #expect(FunctionHandle.parse(text) == nil, "\(text)")
        }
    }

    struct Inconsistent: Sendable, CustomTestStringConvertible {
        var what: String
        var signature: FunctionSignature
        var words: [String]
        /// Whether the wire can carry it (a kind on a return that is not a handle has no place there).
        var onWire = true
        var testDescription: String { what }
    }

    static let inconsistent: [Inconsistent] = [
        Inconsistent(
            what: "a handle value of no kind", signature: FunctionSignature(name: "f", arguments: [.handle], returns: .void),
            words: ["argument 1 of f", "no kind"]),
        Inconsistent(
            what: "an inout handle",
            signature: FunctionSignature(name: "f", parameters: [FunctionParameter(.handle("db", .inout), name: "d")], returns: .void),
            words: ["'d' of f", "inout"]),
        Inconsistent(
            what: "an out handle without a name",
            signature: FunctionSignature(name: "f", parameters: [FunctionParameter(.handle("db", .out))], returns: .void),
            words: ["argument 1 of f", "needs a name"]),
        Inconsistent(
            what: "a kind that is not a C identifier",
            signature: FunctionSignature(name: "f", parameters: [FunctionParameter(.handle("my db", .in))], returns: .void),
            words: ["argument 1 of f", "C identifier"]),
        Inconsistent(
            what: "a handle return of no kind", signature: FunctionSignature(name: "f", arguments: [], returns: .handle),
            words: ["f returns a handle of no kind"]),
        Inconsistent(
            what: "a kind on an integer return",
            signature: FunctionSignature(name: "f", parameters: [], returns: .int32, returnKind: "db"), words: ["has no kind"],
            onWire: false),
        Inconsistent(
            what: "a release function of two inputs",
            signature: FunctionSignature(
                name: "close", parameters: [FunctionParameter(.handle("db", .in), name: "d"), FunctionParameter(.value(.int32))],
                returns: .int32, releases: "db"),
            words: ["close", "release function of handle kind db"]),
        Inconsistent(
            what: "a release function of another kind",
            signature: FunctionSignature(
                name: "close", parameters: [FunctionParameter(.handle("stmt", .in), name: "s")], returns: .int32, releases: "db"),
            words: ["'s' of close", "a db handle passed by value"]),
    ]

    @Test("inconsistent handle declarations are refused, naming the function and argument, and on the wire too", arguments: inconsistent)
    func refusedDeclaration(_ case: Inconsistent) {
        do {
            try `case`.signature.validate()
            Issue.record("accepted \(`case`.signature)")
        } catch {
            for word in `case`.words { #expect(error.description.contains(word), "'\(word)' is not in: \(error)") }
        }
        if `case`.onWire { #expect(throws: WireError.self) { try Self.roundTrip(`case`.signature) } }
    }

    @Test("a library's kinds: each used kind has one release function")
    func libraryKinds() throws {
        try FunctionSignature.validateHandles(of: Self.signatures)
        #expect(throws: FunctionDeclarationError.self) { try FunctionSignature.validateHandles(of: [Self.open]) }
        #expect(throws: FunctionDeclarationError.self) { try FunctionSignature.validateHandles(of: [Self.finalize, Self.dbHandle]) }
        let twice = FunctionSignature(
            name: "close2", parameters: [FunctionParameter(.handle("sqlite3", .in), name: "db")], returns: .int32, releases: "sqlite3")
        do {
            try FunctionSignature.validateHandles(of: [Self.close, twice])
            Issue.record("two release functions of one kind accepted")
        } catch {
            #expect(error.description.contains("close2") && error.description.contains("sqlite3_close_v2"))
        }
        do {
            try FunctionSignature.validateHandles(of: [Self.close, Self.step])
            Issue.record("a kind without a release function accepted")
        } catch {
            #expect(error.function == "sqlite3_step" && error.argument == "'stmt'", "\(error)")
        }
    }

    @Test("a call's handles are checked before anything is sent: kind, NULL, released")
    func bindRefusals() throws {
        let statement = FunctionHandle(kind: "sqlite3_stmt", id: 2)
        let bound = try Self.step.bind([.handle(statement)])
        #expect(bound.slots == [.handle(statement)])
        #expect(try Self.prepare.bind([.handle(FunctionHandle(kind: "sqlite3", id: 1)), .string("x"), .int32(-1)]).slots.count == 5)
        func refusal(_ signature: FunctionSignature, _ values: [FunctionValue]) -> String {
            do {
                _ = try signature.bind(values)
                return ""
            } catch {
                return error.message
            }
        }
        let wrongKind = refusal(Self.step, [.handle(FunctionHandle(kind: "sqlite3", id: 1))])
        #expect(
            wrongKind.contains("argument 1 ('stmt') of sqlite3_step") && wrongKind.contains("not a sqlite3_stmt handle"), "\(wrongKind)")
        let null = refusal(Self.step, [.handle(.null(kind: "sqlite3_stmt"))])
        #expect(null.contains("argument 1 ('stmt') of sqlite3_step") && null.contains("NULL"), "\(null)")
        let released = FunctionHandle(kind: "sqlite3_stmt", id: 3)
        #expect(released.markReleased())
        #expect(!released.markReleased())
        #expect(refusal(Self.step, [.handle(released)]).contains("was released"))
        #expect(refusal(Self.step, [.int64(3)]).contains("must be handle"))
        #expect(Self.finalize.releasedHandle(in: [.handle(statement)]) === statement)
        #expect(Self.step.releasedHandle(in: [.handle(statement)]) == nil)
    }

    @Test("handles a worker returns are checked against the declared kinds")
    func resultChecks() throws {
        let arguments = try Self.open.bind([.string(":memory:")])
        let opened = try Self.open.result(
            value: .int32(0), outputs: [.handle(FunctionHandle(kind: "sqlite3", id: 1))], errorNumber: nil, arguments: arguments)
        #expect(opened[output: "ppDb"] == .handle(FunctionHandle(kind: "sqlite3", id: 1)))
        #expect(throws: FunctionResultError.self) {
            try Self.open.result(
                value: .int32(0), outputs: [.handle(FunctionHandle(kind: "sqlite3_stmt", id: 1))], errorNumber: nil, arguments: arguments)
        }
        #expect(throws: FunctionResultError.self) {
            try Self.open.result(value: .int32(0), outputs: [.int64(1)], errorNumber: nil, arguments: arguments)
        }
        let statement = try Self.dbHandle.bind([.handle(FunctionHandle(kind: "sqlite3_stmt", id: 2))])
        #expect(throws: FunctionResultError.self) {
            try Self.dbHandle.result(
                value: .handle(FunctionHandle(kind: "sqlite3_stmt", id: 2)), outputs: [], errorNumber: nil, arguments: statement)
        }
        _ = try Self.dbHandle.result(value: .handle(.null(kind: "sqlite3")), outputs: [], errorNumber: nil, arguments: statement)
    }

    @Test("two handles are equal by kind and number")
    func handMade() {
        let handle = FunctionHandle(kind: "sqlite3", id: 5)
        #expect(handle == FunctionHandle(kind: "sqlite3", id: 5))
        #expect(handle != FunctionHandle(kind: "sqlite3_stmt", id: 5))
        #expect(Set([handle, FunctionHandle(kind: "sqlite3", id: 5)]).count == 1)
    }
}
