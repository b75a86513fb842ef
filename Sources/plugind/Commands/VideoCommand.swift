import ExtensionFoundation
import Foundation
import PlugindEngine
import PlugindSystem

/// `plugind video apply`: raw frames through a frei0r filter, source or mixer, confined.
struct VideoCommand: PlugindCommand {
    private enum Options {
        static let size = CommandOption.value("size", "<W>x<H>", "The frames' size: multiples of 8 from 8 to 2048 (required).")
        static let param = CommandOption.value(
            "param", "<name>=<value>",
            "Set a parameter by name or index (repeatable): a number, true or false, r,g,b for a colour, x,y for a position, or text.")
        static let timeStep = CommandOption.value("time-step", "<seconds>", "Time between frames (default 0.04).")
        static let frames = CommandOption.value(
            "frames", "<n>", "Frames to make (default: every frame of the input; required for a source).")
        static let secondInput = CommandOption.value("second-input", "<file>", "A mixer's second input.")
        static let thirdInput = CommandOption.value("third-input", "<file>", "A three-input mixer's third input.")
        static let quiet = CommandOption.flag("quiet", short: "-q", "No progress on stderr.")
    }

    static let description = CommandDescription(
        name: "video",
        abstract: "Run raw video frames through a confined frei0r plugin.",
        usage:
            "apply <identifier> <input|-> <output> --size <W>x<H> [--param <name>=<value>]... [--time-step <seconds>] [--frames <n>] [--second-input <file>] [--third-input <file>] [--quiet]",
        discussion: """
            Frames are raw, 4 bytes a pixel in the plugin's colour model ('plugind info' shows it:
            RGBA8888, BGRA8888 or packed 32-bit), top line first, one after another. The plugin
            (a frei0r plugin found by 'plugind scan', approved) runs in its own confined worker;
            the pixels travel through memory shared with it. Frame k is made at time k times the
            time step; an input shorter than the others repeats its last frame. A source takes
            no input ('-'). The output is written whole or not at all.
            """,
        arguments: [
            ("apply <identifier>", "The plugin, such as frei0r.invert0r."), ("<input|->", "Raw frames, or - for a source."),
            ("<output>", "The raw frames to write."),
        ],
        options: [Options.size, Options.param, Options.timeStep, Options.frames, Options.secondInput, Options.thirdInput, Options.quiet]
    )

    let identifier: String
    let inputs: [String]
    let output: String
    let width: Int
    let height: Int
    let parameters: [(name: String, value: String)]
    let timeStep: Double
    let frames: Int?
    let quiet: Bool

    init(_ arguments: ArgumentScanner) throws(UsageError) {
        let words = try arguments.positionals(["action", "identifier", "input", "output"])
        guard words[0] == "apply" else { throw UsageError(message: "unknown action '\(words[0])' (use apply)", command: "video") }
        identifier = words[1]
        output = words[3]
        inputs = ([words[2]] + [arguments.value(Options.secondInput), arguments.value(Options.thirdInput)].compactMap { $0 })
            .filter { $0 != "-" }
        guard let size = arguments.value(Options.size) else { throw UsageError(message: "--size <W>x<H> is required", command: "video") }
        let sides = size.split(separator: "x").compactMap { Int($0) }
        guard sides.count == 2, sides.allSatisfy({ (8...2048).contains($0) && $0 % 8 == 0 }) else {
            throw UsageError(message: "--size takes <W>x<H>, multiples of 8 from 8 to 2048, not '\(size)'", command: "video")
        }
        (width, height) = (sides[0], sides[1])
        parameters = try arguments.allValues(Options.param).map { (setting) throws(UsageError) in
            let parts = setting.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, !parts[0].isEmpty else {
                throw UsageError(message: "--param takes <name>=<value>, not '\(setting)'", command: "video")
            }
            return (parts[0], parts[1])
        }
        let step = arguments.value(Options.timeStep) ?? "0.04"
        guard let timeStep = Double(step), timeStep.isFinite, timeStep >= 0 else {
            throw UsageError(message: "--time-step takes seconds, not '\(step)'", command: "video")
        }
        self.timeStep = timeStep
        if let text = arguments.value(Options.frames) {
            guard let count = Int(text), count > 0 else {
                throw UsageError(message: "--frames takes a positive count, not '\(text)'", command: "video")
            }
            frames = count
        } else {
            frames = nil
        }
        quiet = arguments.flag(Options.quiet)
    }

    func run(_ context: CommandContext) async throws -> ExitStatus {
        let frameBytes = width * height * 4
        var sources: [[UInt8]] = []
        for path in inputs {
            guard let data = FileManager.default.contents(atPath: path) else {
                throw CommandFailure(message: "cannot read \(path.inert)", status: .noInput)
            }
            guard data.count >= frameBytes, data.count % frameBytes == 0 else {
                throw CommandFailure(
                    message: "\(path.inert) holds \(data.count) bytes, not whole frames of \(width)×\(height)×4 = \(frameBytes)",
                    status: .usage)
            }
            sources.append([UInt8](data))
        }
        let host = context.host
        let item = try PluginLookup.item(identifier, in: Inventory.take(host: host), host: host)
        var configuration = AppExtensionProcess.Configuration(appExtensionIdentity: item.identity(host: host), onInterruption: {})
        configuration.host = host
        let process = try await AppExtensionProcess(configuration: configuration)
        defer { process.invalidate() }
        let filter = try await VideoFilter(process: process, width: width, height: height)
        guard sources.count == filter.inputCount else {
            throw CommandFailure(
                message:
                    "\(identifier) takes \(filter.inputCount) input\(filter.inputCount == 1 ? "" : "s") (a \(filter.kind)); \(sources.count) given",
                status: .usage)
        }
        for parameter in parameters { try await Self.set(parameter, on: filter, plugin: identifier) }
        let count = frames ?? sources.map { $0.count / frameBytes }.max() ?? 0
        guard count > 0 else { throw CommandFailure(message: "a source needs --frames", status: .usage) }
        var result: [UInt8] = []
        result.reserveCapacity(count * frameBytes)
        let terminal = !quiet && context.console.standardErrorIsTerminal
        for frame in 0..<count {
            for (index, source) in sources.enumerated() {
                let at = min(frame, source.count / frameBytes - 1) * frameBytes
                try filter.withInput(index) { $0.copyBytes(from: source[at..<at + frameBytes]) }
            }
            try await filter.update(time: Double(frame) * timeStep)
            filter.withOutput { result += $0 }
            if terminal {
                context.console.errControl("\r")
                context.console.err(ProgressDisplay.bar(completed: UInt64(frame + 1), total: UInt64(count)))
            }
        }
        if terminal { context.console.errControl("\r\u{1B}[2K") }
        do {
            try AtomicFile.replace(output, with: result, mode: 0o644)
        } catch {
            throw CommandFailure(message: "cannot write \(output.inert): \(error)", status: .failure)
        }
        await process.invalidateAndWait()
        if !quiet {
            context.console.err(
                "\(count) frame\(count == 1 ? "" : "s") of \(width)×\(height) through \(identifier.inert) into \(output.inert).\n")
        }
        return .success
    }

    /// Parses a parameter's value by its declared type and sets it.
    private static func set(_ parameter: (name: String, value: String), on filter: VideoFilter, plugin: String) async throws {
        guard let declared = filter.parameters.first(where: { $0.name == parameter.name || String($0.index) == parameter.name }) else {
            let known = filter.parameters.map { "\($0.index) '\($0.name)'" }.joined(separator: ", ")
            throw CommandFailure(
                message: "\(plugin) has no parameter '\(parameter.name.inert)' (its parameters: \(known.inert))", status: .usage)
        }
        let text = parameter.value
        let numbers = text.split(separator: ",").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }
        let value: VideoFilter.Value?
        switch declared.type {
        case .bool: value = ["true", "1", "yes"].contains(text) ? .bool(true) : ["false", "0", "no"].contains(text) ? .bool(false) : nil
        case .double: value = numbers.count == 1 && !text.contains(",") ? .double(numbers[0]) : nil
        case .color: value = numbers.count == 3 ? .color(red: Float(numbers[0]), green: Float(numbers[1]), blue: Float(numbers[2])) : nil
        case .position: value = numbers.count == 2 ? .position(x: numbers[0], y: numbers[1]) : nil
        case .string: value = .string(text)
        case .unknown: value = nil
        }
        guard let value else {
            throw CommandFailure(
                message: "parameter '\(declared.name.inert)' of \(plugin) takes \(Self.describe(declared.type)), not '\(text.inert)'",
                status: .usage)
        }
        try await filter.setParameter(declared.index, to: value)
    }

    private static func describe(_ type: VideoFilter.Parameter.ParameterType) -> String {
        switch type {
        case .bool: "true or false"
        case .double: "a number from 0 to 1"
        case .color: "r,g,b, each from 0 to 1"
        case .position: "x,y"
        case .string: "text"
        case .unknown(let number): "a value of frei0r's type \(number), which plugind does not know"
        }
    }
}
