import Dispatch
import FoundationEssentials
import Glibc
import PlugindSystem
import PlugindWire

/// Names the frames of a worker's stack report: the objects the host knows
/// (`StackObjectFiles`) go to `plugind-worker --symbolize`, which parses them confined and
/// answers within `deadline`; what it could not name keeps its object and offset. Blocking:
/// runs on its own queue, never on the event loop.
enum StackSymbolizer {
    /// What one symbolization may take before the helper is killed and the frames stay bare.
    static let deadline: Duration = .seconds(3)
    private static let queue = DispatchQueue(label: "plugind.stack-symbolizer", qos: .utility, attributes: .concurrent)

    /// Names `error`'s stack, if it carries one, then calls `completion` (on the symbolizer's
    /// queue; at once, on the caller's thread, when there is nothing to name).
    static func resolve(
        _ error: AppExtensionError, files: StackObjectFiles, completion: @escaping @Sendable (AppExtensionError) -> Void
    ) {
        guard error.unsymbolizedStack != nil else { return completion(error) }
        queue.async { completion(symbolized(error, files: files)) }
    }

    /// Names `report`'s frames, then calls `completion` on the symbolizer's queue.
    static func resolveFrames(
        of report: StackReport, files: StackObjectFiles, completion: @escaping @Sendable ([AppExtensionError.StackFrame]) -> Void
    ) {
        queue.async { completion(frames(of: report, files: files)) }
    }

    static func symbolized(_ error: AppExtensionError, files: StackObjectFiles) -> AppExtensionError {
        guard let report = error.unsymbolizedStack else { return error }
        var named = error
        named.backtrace = frames(of: report, files: files)
        named.unsymbolizedStack = nil
        return named
    }

    /// The report's frames, named where the helper (the worker executable `files` knows) could.
    static func frames(of report: StackReport, files: StackObjectFiles) -> [AppExtensionError.StackFrame] {
        var frames = report.frames.enumerated().map { index, frame in
            var named = AppExtensionError.StackFrame(index: index, address: frame.address)
            if let module = frame.module {
                let object = report.modules[module]
                named.object = object.path.isEmpty ? "plugind-worker" : object.path.lastPathComponent
                named.objectOffset = frame.address &- object.loadBias
            }
            return named
        }
        guard let executable = files.workerExecutable, !frames.isEmpty else { return frames }
        // Only the objects the host knows are named to the helper, by their host paths.
        var request = ""
        var objectIndex: [Int: Int] = [:]
        for (index, module) in report.modules.enumerated() {
            guard let path = files.hostPath(forWorkerPath: module.path), !path.contains("\n") else { continue }
            objectIndex[index] = objectIndex.count
            // The worker's own frames by name only: its line tables are large and of no use here.
            let lines = module.path.isEmpty ? "n" : "l"
            request += "object \(objectIndex.count - 1) \(String(module.loadBias, radix: 16)) \(lines) \(path)\n"
        }
        guard !objectIndex.isEmpty else { return frames }
        for (index, frame) in report.frames.enumerated() {
            let object = frame.module.flatMap { objectIndex[$0] }.map(String.init) ?? "-"
            request += "frame \(index) \(String(frame.address, radix: 16)) \(object)\n"
        }
        guard let answer = run(executable: executable, request: request) else { return frames }
        for line in answer.split(separator: "\n", omittingEmptySubsequences: true) {
            let fields = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            guard fields.count == 5, let index = Int(fields[0]), frames.indices.contains(index) else { continue }
            if !fields[1].isEmpty {
                frames[index].function = String(fields[1].prefix(1024))
                frames[index].functionOffset = UInt64(fields[2], radix: 16)
            }
            if !fields[3].isEmpty {
                frames[index].file = String(fields[3].prefix(1024))
                frames[index].line = Int(fields[4]).flatMap { $0 > 0 ? $0 : nil }
            }
        }
        return frames
    }

    /// Runs the helper on `request`; its answer, or nil when it failed or ran past `deadline`.
    private static func run(executable: String, request: String) -> String? {
        guard let input = try? PlugindSystem.Pipe() else { return nil }
        guard let output = try? PlugindSystem.Pipe() else {
            input.close()
            return nil
        }
        guard let null = try? FileDescriptor.openNullDevice(writable: true) else {
            input.close()
            output.close()
            return nil
        }
        defer {
            input.readEnd.close()
            output.readEnd.close()
        }
        // The request fits the pipe (at most 16 objects and 64 frames): written before the start.
        let bytes = Array(request.utf8)
        let written = (try? input.writeEnd.writeAll(bytes)) != nil
        input.writeEnd.close()
        guard written else {
            output.writeEnd.close()
            null.close()
            return nil
        }
        var request = SpawnRequest(
            executablePath: executable, arguments: [executable, "--symbolize"], environment: [],
            descriptors: [input.readEnd, output.writeEnd, null], options: [.newSession, .raiseOOMScore])
        // The most expendable of all: it parses a plugin's DWARF, and may be given a lot of it.
        request.oomScoreAdjustment = 1000
        let spawned = try? spawnProcess(request)
        output.writeEnd.close()
        null.close()
        guard let spawned else { return nil }
        let process = spawned.processDescriptor
        defer { process.killAndReap() }
        var answer: [UInt8] = []
        let end = MonotonicInstant.after(deadline)
        var buffer = [UInt8](repeating: 0, count: 16 << 10)
        while answer.count < 1 << 20 {
            guard output.readEnd.awaitReadable(spinUntil: .now, sleepUntil: end) != nil else { return nil }
            let count = buffer.withUnsafeMutableBytes { (try? output.readEnd.read(into: $0)) ?? -1 }
            if count < 0 { return nil }
            if count == 0 { break }
            answer += buffer.prefix(count)
        }
        return String(decoding: answer, as: UTF8.self)
    }
}
