import Foundation
import PlugindEngine
import PlugindSystem
import PlugindWire

/// The body of the worker-reports fuzz target, shared with the test that replays its corpus: the
/// two reports a worker sends about its plugin, as the host turns them into what the owner reads.
/// The first byte picks the report, the rest is its payload. Even: a stack report (the crashed
/// thread, or where a late request is), whose frames become `StackFrame`s shown by `plugind
/// crashes` and kept in the crash log. Odd: a refusal of the sandbox, which becomes an
/// `AppExtensionMessage.SandboxRefusal`, a sentence, and an entry of the plugin log. A payload
/// must decode or be refused with a `WireError`; one that decodes must encode back to its bytes
/// (an object path that is not UTF-8 is refused, never repaired), name only the objects it
/// carries, show inert, and make a log entry that the journal and the log file record as exactly
/// its own fields. The host names frames from its own copies of the
/// objects in `StackSymbolizer`, internal to ExtensionFoundation; the frames here are what it
/// makes of a report before it names them (object and offset).
package enum WorkerReportFuzzing {
    package struct InvariantViolation: Error, CustomStringConvertible {
        package var description: String
    }

    package static func run(_ input: [UInt8]) throws {
        guard let kind = input.first else { return }
        let payload = Array(input.dropFirst())
        if kind % 2 == 0 {
            try checkStackReport(payload)
        } else {
            try checkRefusal(payload)
        }
    }

    private static func checkStackReport(_ payload: [UInt8]) throws {
        let message: WorkerMessage
        do {
            message = try WorkerMessage(
                Frame(header: FrameHeader(kind: .stackReport, requestID: 1, payloadLength: payload.count), payload: payload))
        } catch {
            return
        }
        guard case .stackReport(_, let report) = message else {
            throw InvariantViolation(description: "a stack report decoded as \(message)")
        }
        guard report.encoded == payload else {
            throw InvariantViolation(description: "a stack report does not encode back to its bytes")
        }
        guard report.frames.count <= StackReport.maximumFrames, report.modules.count <= StackReport.maximumModules,
            report.modules.allSatisfy({ $0.path.utf8.count <= StackReport.maximumPathLength })
        else {
            throw InvariantViolation(
                description: "a stack report past its bounds: \(report.frames.count) frames, \(report.modules.count) objects")
        }
        var shown: [String] = []
        for (index, frame) in report.frames.enumerated() {
            var named = AppExtensionError.StackFrame(index: index, address: frame.address)
            if let module = frame.module {
                guard report.modules.indices.contains(module) else {
                    throw InvariantViolation(description: "frame \(index) names object \(module) of \(report.modules.count)")
                }
                let object = report.modules[module]
                named.object = object.path.isEmpty ? "plugind-worker" : (object.path as NSString).lastPathComponent
                named.objectOffset = frame.address &- object.loadBias
                // What the symbolizer may add: names from the plugin's own files.
                named.function = object.path
                named.file = object.path
                named.line = index
            }
            shown.append(named.description)
        }
        for text in shown { try HostFuzzChecks.expectInert(text, "a stack frame") }
    }

    private static func checkRefusal(_ payload: [UInt8]) throws {
        let message: WorkerMessage
        do {
            message = try WorkerMessage(Frame(header: FrameHeader(kind: .sandboxRefusal, payloadLength: payload.count), payload: payload))
        } catch {
            return
        }
        guard case .sandboxRefusal(let refusal) = message else { throw InvariantViolation(description: "a refusal decoded as \(message)") }
        guard message.encode().payload == payload else {
            throw InvariantViolation(description: "a refusal does not encode back to its bytes")
        }
        let shown = AppExtensionMessage.SandboxRefusal(refusal)
        guard shown.droppedBefore >= 0, shown.droppedBefore == Int(refusal.dropped) else {
            throw InvariantViolation(description: "\(refusal.dropped) dropped became \(shown.droppedBefore)")
        }
        let sentence = shown.description
        try HostFuzzChecks.expectInert(sentence, "a refusal")
        // As the host records it in the plugin log (`WorkerActivity.record`).
        let entry = PluginLogEntry(priority: 4, event: .refusal, message: PluginLogEntry.bounded(sentence), plugin: "org.plugind.fuzz")
        try HostFuzzChecks.expectRecordable(entry)
    }
}
