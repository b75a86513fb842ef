import Dispatch
import ExtensionFoundation
import Foundation
import Glibc
import PlugindSystem
import PlugindTypes

/// The handler `plugind call --callback NAME=COMMAND` gives a callback: a program of the user's,
/// started once for the call, that answers each time the library calls the callback.
///
/// A shell has no closure to hand over, so the handler is a co-process speaking lines: for each
/// call plugind writes one JSON object to its standard input,
/// `{"callback": "compar", "arguments": ["0100000000000000", "0200000000000000"]}` (arguments as
/// `plugind call --json` prints values: bytes in hexadecimal, NULL strings as null), and reads one
/// line from its standard output, the answer written as `plugind call` takes an argument of the
/// callback's return type (`-1`, `true`, `2.5`; anything, an empty line, for void). One process
/// for every call of the callback, not one per call: `qsort` of a thousand elements calls its
/// comparator about ten thousand times. Its standard error is the user's terminal.
///
/// Anything but a well-formed answer — the program exiting, an answer too long or of the wrong
/// type — fails the call with `callbackFailed` naming the callback, as a Swift handler that throws
/// does.
final class CallbackProgram: Sendable {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// `NAME=COMMAND` as given, split.
    struct Specification: Sendable {
        var name: String
        var command: String

        init(_ text: String) throws(UsageError) {
            guard let equals = text.firstIndex(of: "="), equals != text.startIndex, text.index(after: equals) != text.endIndex else {
                throw UsageError(
                    message: "--callback takes NAME=COMMAND (the callback's name in the manifest, then a shell command), got '\(text)'",
                    command: "call")
            }
            name = String(text[..<equals])
            command = String(text[text.index(after: equals)...])
        }
    }

    /// The longest answer line read: answers are scalars, so anything longer is a mistake.
    static let maximumAnswerBytes = 4096
    /// How long a handler may take to exit once its input ends after a call that succeeded.
    static let exitGrace: Duration = .seconds(10)

    let name: String
    private let signature: FunctionCallbackSignature
    /// `sh`, leading a process group of its own, so that what it started ends with it.
    private let process: SpawnedProcess
    private let input: FileDescriptor
    private let output: FileDescriptor
    /// Bytes read past the last answer's newline, whether the program closed its output, and
    /// which of its descriptors this side closed.
    private let pending = Locked((bytes: [UInt8](), ended: false, inputClosed: false, outputClosed: false))
    /// One call at a time, in order, on a thread of its own: each answer is a blocking read.
    private let queue: DispatchQueue

    /// Starts `command` with `/bin/sh -c`, in the caller's environment and working directory.
    init(_ specification: Specification, signature: FunctionCallbackSignature) throws(Failure) {
        name = specification.name
        self.signature = signature
        queue = DispatchQueue(label: "plugind.callback.\(specification.name)")
        do {
            let toHandler = try PlugindSystem.Pipe()
            let fromHandler: PlugindSystem.Pipe
            do { fromHandler = try PlugindSystem.Pipe() } catch {
                toHandler.close()
                throw error
            }
            defer {
                toHandler.readEnd.close()
                fromHandler.writeEnd.close()
            }
            let request = SpawnRequest(
                executablePath: "/bin/sh", arguments: ["sh", "-c", specification.command],
                environment: ProcessInfo.processInfo.environment.map { "\($0.key)=\($0.value)" },
                descriptors: [toHandler.readEnd, fromHandler.writeEnd, FileDescriptor(rawValue: STDERR_FILENO)],
                options: [.newSession, .keepDirectory])
            do {
                process = try spawnProcess(request)
            } catch {
                toHandler.writeEnd.close()
                fromHandler.readEnd.close()
                throw error
            }
            input = toHandler.writeEnd
            output = fromHandler.readEnd
        } catch {
            throw Failure(description: "cannot start the handler of callback '\(name)': \(error)")
        }
    }

    /// The handler the typed call runs for each call of the callback.
    var handler: FunctionCallbackHandler {
        { [self] arguments in
            try await withCheckedThrowingContinuation { continuation in
                queue.async {
                    do {
                        continuation.resume(returning: try self.answer(arguments))
                    } catch {
                        continuation.resume(throwing: error)
                    }
                }
            }
        }
    }

    /// Ends the program and waits for it, so that nothing is left behind. After a call that
    /// succeeded its input is closed (a loop over lines ends) and it has `exitGrace` to exit;
    /// after one that failed, or past the grace, its process group is killed (it may be stuck in
    /// an answer nobody reads, or have started programs of its own). Returns a complaint when it
    /// had to be killed or exited with a failure after a call that succeeded.
    func end(callSucceeded: Bool) -> String? {
        var complaint: String?
        if callSucceeded {
            // The call returned, so no answer is under way: its input can close here.
            closeDescriptors(input: true, output: false)
            if process.processDescriptor.awaitReadable(spinUntil: .now, sleepUntil: .after(Self.exitGrace)) == nil {
                complaint = "the handler of callback '\(name)' did not exit within \(Self.exitGrace) of its input ending; killed"
            }
        }
        if !callSucceeded || complaint != nil {
            // The group before the leader is reaped: its id is not given to another process
            // while the leader's pid is still unreaped.
            kill(-process.processIdentifier, SIGKILL)
        }
        let exit = try? process.processDescriptor.waitForProcessExit()
        process.processDescriptor.close()
        // On the queue, after an answer still under way there (the group's end ended it), so
        // that no descriptor is closed under a read or a write and its number given to another
        // file; an answer asked for later is refused.
        queue.async { [self] in closeDescriptors(input: !callSucceeded, output: true) }
        guard callSucceeded, complaint == nil, let exit else { return complaint }
        switch exit.reason {
        case .exited(status: 0): return nil
        case .exited(let status): return "the handler of callback '\(name)' exited with status \(status)"
        case .signaled(let signal, _): return "the handler of callback '\(name)' ended by signal \(signalName(signal))"
        }
    }

    /// Closes the program's input, output or both, once each; `answer` refuses to run after.
    private func closeDescriptors(input closeInput: Bool, output closeOutput: Bool) {
        let (input, output) = pending.withLock { state -> (Bool, Bool) in
            defer {
                if closeInput { state.inputClosed = true }
                if closeOutput { state.outputClosed = true }
            }
            return (closeInput && !state.inputClosed, closeOutput && !state.outputClosed)
        }
        if input { self.input.close() }
        if output { self.output.close() }
    }

    /// One call: the arguments out, the answer in. Runs on `queue`.
    private func answer(_ arguments: [FunctionValue]) throws(Failure) -> FunctionValue {
        guard !pending.withLock({ $0.inputClosed || $0.outputClosed }) else {
            throw Failure(description: "the handler of callback '\(name)' was called after its call ended")
        }
        let request = CallbackRequest(callback: name, arguments: arguments.map(JSONScalar.init))
        var line: Data
        do {
            line = try JSONEncoder().encode(request)
        } catch {
            throw Failure(description: "callback '\(name)': cannot encode its arguments: \(error)")
        }
        line.append(UInt8(ascii: "\n"))
        do {
            try input.writeAll(Array(line))
        } catch {
            throw Failure(description: "the handler of callback '\(name)' exited without answering (it no longer reads its input)")
        }
        let text = try readLine()
        if signature.returns == .void { return .void }
        do {
            return try ArgumentParsing.value(text, as: signature.returns)
        } catch {
            throw Failure(description: "the handler of callback '\(name)' answered '\(text.prefix(40))': \(error.message)")
        }
    }

    /// The next line of the program's output, without its newline (and a carriage return).
    private func readLine() throws(Failure) -> String {
        while true {
            let found = pending.withLock { state -> (line: [UInt8]?, ended: Bool) in
                guard let newline = state.bytes.firstIndex(of: UInt8(ascii: "\n")) else { return (nil, state.ended) }
                let line = Array(state.bytes[..<newline])
                state.bytes.removeSubrange(...newline)
                return (line, false)
            }
            if var line = found.line {
                if line.last == UInt8(ascii: "\r") { line.removeLast() }
                return String(decoding: line, as: UTF8.self)
            }
            if found.ended {
                throw Failure(description: "the handler of callback '\(name)' exited without answering")
            }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let count: Int
            do {
                count = try chunk.withUnsafeMutableBytes { buffer throws(SystemError) in try output.read(into: buffer) }
            } catch {
                throw Failure(description: "cannot read the answer of callback '\(name)''s handler: \(error)")
            }
            chunk.removeSubrange(count...)
            let tooLong = pending.withLock { state -> Bool in
                if chunk.isEmpty { state.ended = true }
                state.bytes.append(contentsOf: chunk)
                return state.bytes.count > Self.maximumAnswerBytes && !state.bytes.contains(UInt8(ascii: "\n"))
            }
            if tooLong {
                throw Failure(
                    description:
                        "the handler of callback '\(name)' wrote over \(Self.maximumAnswerBytes) bytes without ending an answer line")
            }
        }
    }
}

/// One line to a callback's handler program.
private struct CallbackRequest: Encodable {
    var callback: String
    var arguments: [JSONScalar]
}
