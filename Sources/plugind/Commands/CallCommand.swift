import ExtensionFoundation
import Foundation
import PlugindBundle
import PlugindEngine

/// `plugind call`: calls a C function a plugin's manifest declares, parsing each argument by its
/// declared type.
struct CallCommand: PlugindCommand {
    /// Its options, each declared once.
    private enum Options {
        static let json = CommandOption.flag("json", "Print the result as JSON.")
        static let timeout = CommandOption.value("timeout", "<seconds>", "Deadline for the call.")
        static let callback = CommandOption.value(
            "callback", "<name>=<command>", "The shell command that answers callback <name> (once per callback).")
    }

    static let description = CommandDescription(
        name: "call",
        abstract: "Call a function a plugin declares, with typed arguments.",
        usage: "<id> <function> [<argument> ...] [--callback <name>=<command> ...] [--json] [--timeout <seconds>]",
        discussion: """
            Each argument is parsed as the type the manifest declares: bool (true/false), int8 …
            uint64 (decimal or 0x hex, range-checked), float and double (also nan, inf, -inf),
            string (as given), bytes (hexadecimal, or @FILE for a file's contents, @- for stdin).
            An in or inout buffer takes bytes; an inout pointer the value it points to; a
            length (a buffer counted by *len) the capacity. NULL, out pointers, out buffers and
            the counts of in buffers take none. The value the function returns is printed
            first, then each out value as NAME: VALUE (buffers in hexadecimal) and errno
            where declared. A handle (an opaque pointer of a kind the manifest declares) is
            printed as KIND#ID (KIND#null for NULL) and taken as the same; each call runs in a
            worker of its own, whose handles end with it, so a handle printed by one call names
            nothing in the next: plugind call is for single calls. 'plugind info ID' lists the
            functions and their signatures.

            A callback (qsort's comparator) is answered by a program of yours, started once with
            /bin/sh -c COMMAND for the call: each time the library calls it, the program reads one
            JSON line, {"callback": NAME, "arguments": [...]} (values as --json prints them), and
            writes one line, the answer as an argument of the callback's return type would be
            written here (an empty line for void). Its standard error is yours; it is ended with
            the call, and a handler that exits or answers badly fails the call.
            """,
        arguments: [
            ("<id>", "The plugin's identifier."),
            ("<function>", "The function's name."),
            ("<argument>", "One per declared argument."),
        ],
        options: [Options.json, Options.timeout, Options.callback]
    )

    let identifier: String
    let function: String
    let rawArguments: [String]
    let json: Bool
    let timeout: Duration?
    let callbacks: [CallbackProgram.Specification]

    init(_ arguments: ArgumentScanner) throws(UsageError) {
        let positionals = try arguments.positionals(["id", "function"], variadic: true)
        identifier = positionals[0]
        function = positionals[1]
        rawArguments = Array(positionals.dropFirst(2))
        json = arguments.flag(Options.json)
        timeout = try arguments.seconds(Options.timeout)
        var callbacks: [CallbackProgram.Specification] = []
        for text in arguments.allValues(Options.callback) { callbacks.append(try CallbackProgram.Specification(text)) }
        self.callbacks = callbacks
    }

    func run(_ context: CommandContext) async throws -> ExitStatus {
        // One launch, then exit: no pool for later launches, the launcher exec'd while the
        // catalog and the policy are read, and no process left behind.
        try await PlugindRuntime.current.oneShot(host: context.host) { host in try await run(context, host: host) }
    }

    private func run(_ context: CommandContext, host: AppExtensionHost) async throws -> ExitStatus {
        let item = try PluginLookup.item(identifier, in: Inventory.take(host: host), host: host)
        guard let signature = item.entry.manifest.functions.first(where: { $0.name == function }) else {
            let declared = item.entry.manifest.functions.map(\.name)
            throw CommandFailure(
                message: "plugin \(identifier) declares no function '\(function)'"
                    + (declared.isEmpty ? " (it declares none)" : "; it declares: \(declared.joined(separator: ", "))"),
                status: .usage
            )
        }
        guard rawArguments.count == signature.arguments.count else {
            throw UsageError(
                message: "\(signature) takes \(signature.arguments.count) argument(s), got \(rawArguments.count)", command: "call")
        }
        var values: [FunctionValue] = []
        for (position, (text, input)) in zip(rawArguments, signature.inputs).enumerated() {
            do {
                values.append(try ArgumentParsing.value(text, as: input.type, kind: input.kind))
            } catch {
                throw UsageError(message: "argument \(position + 1) of \(signature): \(error.message)", command: "call")
            }
        }
        // Buffer lengths against their counts, before any worker starts.
        do {
            _ = try signature.bind(values)
        } catch {
            throw UsageError(message: error.message, command: "call")
        }
        let handlers = try startHandlers(for: signature)
        var configuration = AppExtensionProcess.Configuration(appExtensionIdentity: item.identity(host: host), onInterruption: {})
        configuration.host = host
        let result: FunctionResult
        do {
            result = try await AppExtensionProcess.withProcess(configuration: configuration) { process in
                try await process.makeConnection().callWithOutputs(
                    function, arguments: values, callbacks: Dictionary(uniqueKeysWithValues: handlers.map { ($0.name, $0.handler) }),
                    timeout: timeout)
            }
        } catch {
            for handler in handlers { _ = handler.end(callSucceeded: false) }
            throw error
        }
        for handler in handlers {
            if let complaint = handler.end(callSucceeded: true) { context.console.err("warning: \(complaint.inert)\n") }
        }
        if json {
            try context.console.json(CallResult(signature: signature, result: result))
        } else {
            var text = signature.returns != .void ? "\(result.value)\n" : ""
            for output in result.outputs { text += "\(output.name): \(output.value)\n" }
            if let errorNumber = result.errorNumber { text += "errno: \(errorNumber)\n" }
            context.console.out(text)
        }
        return .success
    }
}

extension CallCommand {
    /// A handler program for each callback of `signature`, started before the worker: every
    /// callback must have one, and every --callback must name one.
    fileprivate func startHandlers(for signature: FunctionSignature) throws -> [CallbackProgram] {
        let declared = signature.callbacks
        let names = Set(declared.map(\.name))
        for specification in callbacks where !names.contains(specification.name) {
            throw UsageError(
                message: "\(signature.name) has no callback '\(specification.name)'"
                    + (names.isEmpty ? " (it takes none)" : "; its callbacks: \(declared.map(\.name).joined(separator: ", "))"),
                command: "call")
        }
        for callback in declared {
            let given = callbacks.filter { $0.name == callback.name }.count
            guard given == 1 else {
                throw UsageError(
                    message: given == 0
                        ? "\(signature.name) calls back '\(callback.name)': give its handler with --callback \(callback.name)=COMMAND (see plugind call --help)"
                        : "--callback \(callback.name) is given \(given) times",
                    command: "call")
            }
        }
        var handlers: [CallbackProgram] = []
        for callback in declared {
            guard let specification = callbacks.first(where: { $0.name == callback.name }) else { continue }
            do {
                handlers.append(try CallbackProgram(specification, signature: callback.signature))
            } catch {
                for handler in handlers { _ = handler.end(callSucceeded: false) }
                throw CommandFailure(message: error.description, status: .unavailable)
            }
        }
        return handlers
    }
}

/// Parses command-line text as a typed function argument.
enum ArgumentParsing {
    struct Failure: Error {
        var message: String
    }

    static func value(_ text: String, as type: FunctionValueType, kind: String? = nil) throws(Failure) -> FunctionValue {
        switch type {
        case .void: throw Failure(message: "void is not an argument type")
        case .bool:
            switch text.lowercased() {
            case "true", "1", "yes": return .bool(true)
            case "false", "0", "no": return .bool(false)
            default: throw Failure(message: "expected true or false, got '\(text)'")
            }
        case .int8: return .int8(try integer(text, Int8.self))
        case .uint8: return .uint8(try integer(text, UInt8.self))
        case .int16: return .int16(try integer(text, Int16.self))
        case .uint16: return .uint16(try integer(text, UInt16.self))
        case .int32: return .int32(try integer(text, Int32.self))
        case .uint32: return .uint32(try integer(text, UInt32.self))
        case .int64: return .int64(try integer(text, Int64.self))
        case .uint64: return .uint64(try integer(text, UInt64.self))
        case .float:
            guard let value = Float(text) else { throw Failure(message: "expected a float, got '\(text)'") }
            if value.isInfinite, let wide = Double(text), wide.isFinite {
                throw Failure(message: "\(text) is out of range for float")
            }
            return .float(value)
        case .double:
            guard let value = Double(text) else { throw Failure(message: "expected a double, got '\(text)'") }
            return .double(value)
        case .string:
            guard !text.utf8.contains(0) else { throw Failure(message: "strings cannot contain NUL") }
            return .string(text)
        case .bytes:
            return .bytes(try bytes(text))
        case .handle:
            guard let handle = FunctionHandle.parse(text), kind == nil || handle.kind == kind else {
                throw Failure(message: "expected a handle \(kind ?? "KIND")#ID, got '\(text)'")
            }
            return .handle(handle)
        }
    }

    static func integer<Value: FixedWidthInteger>(_ text: String, _ type: Value.Type) throws(Failure) -> Value {
        // Parse the magnitude as UInt64, then fit it into the type, so that every type gets the
        // same messages and Int64.min is accepted.
        let negative = text.hasPrefix("-")
        let unsigned = negative ? String(text.dropFirst()) : text
        let isHex = unsigned.lowercased().hasPrefix("0x")
        let digits = isHex ? String(unsigned.dropFirst(2)) : unsigned
        let name = String(describing: Value.self).lowercased()
        guard !digits.isEmpty, let magnitude = UInt64(digits, radix: isHex ? 16 : 10) else {
            throw Failure(message: "expected an integer (\(name)), got '\(text)'")
        }
        let outOfRange = Failure(message: "\(text) is out of range for \(name) (\(Value.min) … \(Value.max))")
        if negative {
            guard Value.isSigned, magnitude <= UInt64(Value.max) + 1 else { throw outOfRange }
            return magnitude == UInt64(Value.max) + 1 ? Value.min : 0 - Value(magnitude)
        }
        guard let value = Value(exactly: magnitude) else { throw outOfRange }
        return value
    }

    static func bytes(_ text: String) throws(Failure) -> [UInt8] {
        if text.hasPrefix("@") {
            let path = String(text.dropFirst())
            do {
                return try StandardInput.read(from: path == "-" ? nil : path)
            } catch {
                throw Failure(message: error.message)
            }
        }
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0 else { throw Failure(message: "hexadecimal bytes need an even number of digits") }
        var result: [UInt8] = []
        result.reserveCapacity(digits.count / 2)
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let high = hexValue(digits[index]), let low = hexValue(digits[index + 1]) else {
                throw Failure(message: "expected hexadecimal bytes (or @FILE), got '\(text.prefix(40))'")
            }
            result.append(high << 4 | low)
        }
        return result
    }

    private static func hexValue(_ digit: UInt8) -> UInt8? {
        switch digit {
        case 0x30...0x39: digit - 0x30
        case 0x61...0x66: digit - 0x61 + 10
        case 0x41...0x46: digit - 0x41 + 10
        default: nil
        }
    }
}

/// A function result in JSON: numbers as numbers (exact for 64-bit integers), non-finite floats
/// as the strings "nan", "inf", "-inf", bytes as hexadecimal, a handle as
/// `{"kind": "sqlite3", "id": 1}` (`"id": null` for NULL).
enum JSONScalar: Encodable {
    case null
    case bool(Bool)
    case signed(Int64)
    case unsigned(UInt64)
    case number(Double)
    case string(String)
    case handle(kind: String, id: UInt64?)

    private enum HandleKeys: String, CodingKey {
        case kind, id
    }

    init(_ value: FunctionValue) {
        switch value {
        case .void: self = .null
        case .bool(let value): self = .bool(value)
        case .int8(let value): self = .signed(Int64(value))
        case .int16(let value): self = .signed(Int64(value))
        case .int32(let value): self = .signed(Int64(value))
        case .int64(let value): self = .signed(value)
        case .uint8(let value): self = .unsigned(UInt64(value))
        case .uint16(let value): self = .unsigned(UInt64(value))
        case .uint32(let value): self = .unsigned(UInt64(value))
        case .uint64(let value): self = .unsigned(value)
        case .float(let value): self = value.isFinite ? .number(Double(value)) : .string(Self.nonFinite(Double(value)))
        case .double(let value): self = value.isFinite ? .number(value) : .string(Self.nonFinite(value))
        case .string(let value): self = .string(value)
        case .bytes: self = .string(value.description)
        case .handle(let handle): self = .handle(kind: handle.kind, id: handle.isNull ? nil : handle.id)
        }
    }

    private static func nonFinite(_ value: Double) -> String {
        value.isNaN ? "nan" : (value > 0 ? "inf" : "-inf")
    }

    func encode(to encoder: any Encoder) throws {
        if case .handle(let kind, let id) = self {
            var object = encoder.container(keyedBy: HandleKeys.self)
            try object.encode(kind, forKey: .kind)
            try object.encode(id, forKey: .id)
            return
        }
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .signed(let value): try container.encode(value)
        case .unsigned(let value): try container.encode(value)
        case .number(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .handle: break
        }
    }
}

/// `plugind call --json`. `outputs` (each out value by argument name) and `errno` are there
/// only when the function declares them.
struct CallResult: JSONDocument {
    static let formatVersion = 1
    var function: String
    var returns: String
    var value: JSONScalar
    var outputs: [String: JSONScalar]?
    var errno: Int32?

    init(signature: FunctionSignature, result: FunctionResult) {
        function = signature.description
        returns = signature.returns.rawValue
        value = JSONScalar(result.value)
        if !signature.outputs.isEmpty {
            outputs = Dictionary(result.outputs.map { ($0.name, JSONScalar($0.value)) }) { first, _ in first }
        }
        errno = result.errorNumber
    }
}
