import Foundation
import Glibc
import PlugindTypes

/// `plugind declare`: drafts the `functions` (and `handles`) of a function-only manifest from a
/// C header, through libclang, at authoring time.
struct DeclareCommand: PlugindCommand {
    /// Its options, each declared once.
    private enum Options {
        static let function = CommandOption.value(
            "function", "<name>",
            "Draft this function, wherever the header's includes declare it (repeatable; when absent, every function the header itself declares)."
        )
        static let include = CommandOption.value("include", "<dir>", "Search this directory for included headers, as -I does (repeatable).")
        static let define = CommandOption.value(
            "define", "<name[=value]>", "Define a macro before the header is read, as -D does (repeatable).")
        static let output = CommandOption.value(
            "output", "<file>", "Write the draft to this file instead of standard output (never replacing one).")
        static let json = CommandOption.flag("json", "Print the draft, what is left to complete and what cannot be declared, as JSON.")
    }

    static let description = CommandDescription(
        name: "declare",
        abstract: "Draft a manifest's function declarations from a C header.",
        usage: "<header> [--function <name>]... [--include <dir>]... [--define <name[=value]>]... [--output <file>] [--json]",
        discussion: """
            Reads the header with libclang (Debian's libclang1-14 and libclang-common-14-dev, or
            the libclang named by PLUGIND_LIBCLANG) and writes a manifest fragment,
            {"functions": [...], "handles": {...}, "structs": {...}}, with a declaration for each
            function it can express: scalars, strings, buffers, pointers to one value, handles to
            structs the header never completes (sqlite3 *, and sqlite3 ** as an out-handle),
            callbacks with their own arguments (qsort's comparator), and the layout of each struct
            a function points to, or passes or returns by value (div_t). What C does not say is
            left as a "TODO: …" value for you to complete: which way a pointer goes (out or
            inout), what counts a buffer (the next argument is suggested when it is an integer)
            or a callback's buffer, whether a struct lives for one call or between calls, and which
            function releases each handle kind (the header's candidates are named). plugind verify
            refuses a declaration until every TODO is gone. Functions a declaration cannot express
            (variadic, callbacks returning pointers or taking more than 6 integer or pointer
            arguments, unions or structs with pointers passed by value, static inline)
            and struct fields it cannot (function pointers, nested structs, arrays, bit-fields,
            opaque pointers) are listed on standard error with the reason, never dropped
            silently. Nothing is built or loaded: the library is not needed.
            """,
        arguments: [("<header>", "The C header that declares the library's functions.")],
        options: [Options.function, Options.include, Options.define, Options.output, Options.json]
    )

    let header: String
    let functions: [String]
    let compilerArguments: [String]
    let output: String?
    let json: Bool

    init(_ arguments: ArgumentScanner) throws(UsageError) {
        header = try arguments.positionals(["header"])[0]
        functions = arguments.allValues(Options.function)
        for name in functions where !FunctionSignature.isCIdentifier(name) {
            throw UsageError(message: "--function \(name.inert) is not a C identifier", command: "declare")
        }
        compilerArguments = arguments.allValues(Options.include).map { "-I" + $0 } + arguments.allValues(Options.define).map { "-D" + $0 }
        output = arguments.value(Options.output)
        json = arguments.flag(Options.json)
    }

    func run(_ context: CommandContext) async throws -> ExitStatus {
        guard access(header, R_OK) == 0 else {
            throw CommandFailure(message: "cannot read \(header.inert): \(String(cString: strerror(errno)))", status: .failure)
        }
        let declared: [HeaderFunction]
        do {
            // Named functions may be declared in a header it includes (math.h's are in bits/mathcalls.h).
            declared = try HeaderReader.functions(in: header, arguments: compilerArguments, mainFileOnly: functions.isEmpty)
        } catch {
            throw CommandFailure(message: "\(header.inert): \(error.message)", status: .failure)
        }
        let draft: DeclarationDraft
        do {
            draft = try DeclarationDraft(declared, selected: functions.isEmpty ? nil : functions)
        } catch {
            throw CommandFailure(
                message:
                    "\(header.inert) does not declare \(error.names.map { "'\($0)'" }.joined(separator: ", ")), nor do the headers it includes",
                status: .failure)
        }
        if json {
            try context.console.json(DeclareDocument(header: header, draft: draft))
        } else if let output {
            try KeygenCommand.create(output, contents: draft.fragment.rendered() + "\n", mode: 0o644)
            context.console.err("Wrote \(draft.functions.count) declaration(s) to \(output.inert).\n")
        } else {
            context.console.out(draft.fragment.rendered() + "\n")
        }
        if !json { context.console.err(Self.summary(draft)) }
        return .success
    }

    /// What is left to the author and what could not be declared, for standard error.
    static func summary(_ draft: DeclarationDraft) -> String {
        var lines: [String] = []
        let complete = draft.functions.filter(\.toComplete.isEmpty).map(\.name)
        if !complete.isEmpty { lines.append("Complete: \(complete.joined(separator: ", ")).") }
        let left = draft.allToComplete
        if !left.isEmpty {
            lines.append("To complete (\(left.count); plugind verify refuses the manifest until none is left):")
            for item in left {
                let place = item.argument.map { "\(item.function) \($0).\(item.field)" } ?? "\(item.function).\(item.field)"
                lines.append("  \(place): \(item.note)")
            }
        }
        if !draft.notDeclarable.isEmpty {
            lines.append("Not declarable (\(draft.notDeclarable.count)):")
            for refusal in draft.notDeclarable { lines.append("  \(refusal.name): \(refusal.reason)") }
        }
        if draft.functions.isEmpty && draft.notDeclarable.isEmpty { lines.append("The header declares no function.") }
        return lines.map { $0 + "\n" }.joined()
    }
}

/// `plugind declare --json`.
struct DeclareDocument: JSONDocument {
    static let formatVersion = 1

    struct Function: Encodable {
        var name: String
        var declaration: DraftJSON
        var complete: Bool
    }

    struct ToComplete: Encodable {
        var function: String
        var argument: String?
        var field: String
        var note: String
    }

    struct NotDeclarable: Encodable {
        var name: String
        var reason: String
    }

    struct Handle: Encodable {
        var kind: String
        var releaseCandidates: [String]
    }

    var header: String
    var fragment: DraftJSON
    var functions: [Function]
    var toComplete: [ToComplete]
    var notDeclarable: [NotDeclarable]
    var handles: [Handle]

    init(header: String, draft: DeclarationDraft) {
        self.header = header
        fragment = draft.fragment
        functions = draft.functions.map { Function(name: $0.name, declaration: $0.declaration, complete: $0.toComplete.isEmpty) }
        toComplete = draft.allToComplete.map { ToComplete(function: $0.function, argument: $0.argument, field: $0.field, note: $0.note) }
        notDeclarable = draft.notDeclarable.map { NotDeclarable(name: $0.name, reason: $0.reason) }
        handles = draft.handles.map { Handle(kind: $0.kind, releaseCandidates: $0.releaseCandidates) }
    }
}
