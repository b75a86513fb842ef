import ExtensionFoundation
import Foundation
import PlugindEngine
import PlugindSystem

/// `plugind audio apply`: a sound file through a LADSPA effect, confined, into a WAV of 32-bit
/// floats, as ladspa-sdk's `applyplugin` does in-process.
struct AudioCommand: PlugindCommand {
    private enum Options {
        static let control = CommandOption.value(
            "control", "<name>=<value>", "Set a control input by its port name or index (repeatable); others keep their defaults.")
        static let block = CommandOption.value("block", "<frames>", "Frames per run (default 1024, at most 8192).")
        static let quiet = CommandOption.flag("quiet", short: "-q", "No progress on stderr.")
    }

    static let description = CommandDescription(
        name: "audio",
        abstract: "Run a sound file through a confined LADSPA effect.",
        usage: "apply <identifier> <sound-file> <output.wav> [--control <name>=<value>]... [--block <frames>] [--quiet]",
        discussion: """
            The plugin (a LADSPA plugin found by 'plugind scan', approved) runs in its own
            confined worker; the samples travel through memory shared with it, never through a
            pipe. A file with as many channels as the plugin has audio inputs goes through one
            instance; through a plugin of one input, each channel goes through an instance of its
            own. The output is a WAV of 32-bit floats at the input's rate, with the plugin's
            outputs (of every instance, in order) as its channels, written whole or not at all.
            Controls out of the port's range are refused, naming the range.
            """,
        arguments: [
            ("apply <identifier>", "The plugin, such as ladspa.amp.amp-mono."),
            ("<sound-file>", "The input: a sound file libsndfile reads (WAV, FLAC, …)."),
            ("<output.wav>", "The WAV to write."),
        ],
        options: [Options.control, Options.block, Options.quiet]
    )

    let identifier: String
    let input: String
    let output: String
    let controls: [(port: String, value: Float)]
    let block: Int
    let quiet: Bool

    init(_ arguments: ArgumentScanner) throws(UsageError) {
        let words = try arguments.positionals(["action", "identifier", "input", "output"])
        guard words[0] == "apply" else { throw UsageError(message: "unknown action '\(words[0])' (use apply)", command: "audio") }
        (identifier, input, output) = (words[1], words[2], words[3])
        var controls: [(String, Float)] = []
        for setting in arguments.allValues(Options.control) {
            let parts = setting.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, !parts[0].isEmpty, let value = Float(parts[1]), value.isFinite else {
                throw UsageError(message: "--control takes <name>=<number>, not '\(setting)'", command: "audio")
            }
            controls.append((parts[0], value))
        }
        self.controls = controls
        let blockText = arguments.value(Options.block) ?? "1024"
        guard let block = Int(blockText), (1...8192).contains(block) else {
            throw UsageError(message: "--block takes 1 to 8192 frames, not '\(blockText)'", command: "audio")
        }
        self.block = block
        quiet = arguments.flag(Options.quiet)
    }

    func run(_ context: CommandContext) async throws -> ExitStatus {
        let file: AudioFile
        do {
            file = try AudioFile.read(input)
        } catch {
            throw CommandFailure(message: error.description.inert, status: .noInput)
        }
        let host = context.host
        let item = try PluginLookup.item(identifier, in: Inventory.take(host: host), host: host)
        var configuration = AppExtensionProcess.Configuration(appExtensionIdentity: item.identity(host: host), onInterruption: {})
        configuration.host = host

        // One instance first: its ports decide how many the file needs.
        var processes = [try await AppExtensionProcess(configuration: configuration)]
        var effects: [AudioEffect] = []
        defer {
            for process in processes { process.invalidate() }
        }
        effects.append(try await AudioEffect(process: processes[0], sampleRate: file.sampleRate, maximumFrames: block))
        let inputs = effects[0].ports.filter { $0.kind == .audioInput }
        let instances: Int
        if inputs.count == file.channels {
            instances = 1
        } else if inputs.count == 1 {
            instances = file.channels
        } else {
            throw CommandFailure(
                message:
                    "\(identifier) has \(inputs.count) audio input\(inputs.count == 1 ? "" : "s"); \(input) has \(file.channels) channel\(file.channels == 1 ? "" : "s") (it takes as many channels as inputs, or any number through a plugin of one input)",
                status: .usage)
        }
        for control in controls { try Self.set(control, on: effects[0], plugin: identifier) }
        for _ in 1..<instances {
            let process = try await AppExtensionProcess(configuration: configuration)
            processes.append(process)
            let effect = try await AudioEffect(process: process, sampleRate: file.sampleRate, maximumFrames: block)
            for control in controls { try Self.set(control, on: effect, plugin: identifier) }
            effects.append(effect)
        }

        let outputs = effects[0].ports.filter { $0.kind == .audioOutput }
        let outputChannels = outputs.count * instances
        var result = [Float](repeating: 0, count: file.frames * outputChannels)
        let terminal = !quiet && context.console.standardErrorIsTerminal
        var start = 0
        while start < file.frames {
            let count = min(block, file.frames - start)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (instance, effect) in effects.enumerated() {
                    for (slot, port) in inputs.enumerated() {
                        let channel = instances == 1 ? slot : instance
                        try effect.withSamples(port: port.index) { buffer in
                            for frame in 0..<count { buffer[frame] = file.samples[(start + frame) * file.channels + channel] }
                        }
                    }
                    group.addTask { try await effect.run(frames: count) }
                }
                try await group.waitForAll()
            }
            for (instance, effect) in effects.enumerated() {
                for (slot, port) in outputs.enumerated() {
                    let channel = instance * outputs.count + slot
                    try effect.withSamples(port: port.index) { buffer in
                        for frame in 0..<count { result[(start + frame) * outputChannels + channel] = buffer[frame] }
                    }
                }
            }
            start += count
            if terminal {
                context.console.errControl("\r")
                context.console.err(ProgressDisplay.bar(completed: UInt64(start), total: UInt64(file.frames)))
            }
        }
        if terminal { context.console.errControl("\r\u{1B}[2K") }
        do {
            try AudioFile.writeWAV(output, sampleRate: file.sampleRate, channels: outputChannels, samples: result)
        } catch {
            throw CommandFailure(message: error.description.inert, status: .failure)
        }
        for process in processes { await process.invalidateAndWait() }
        if !quiet {
            context.console.err(
                "\(file.frames) frames of \(file.channels) channel\(file.channels == 1 ? "" : "s") through \(identifier.inert) (\(instances) instance\(instances == 1 ? "" : "s")) into \(output.inert): \(outputChannels) channel\(outputChannels == 1 ? "" : "s") of 32-bit floats.\n"
            )
        }
        return .success
    }

    /// Sets a control named by its port's name or index.
    private static func set(_ control: (port: String, value: Float), on effect: AudioEffect, plugin: String) throws {
        let controls = effect.ports.filter { $0.kind == .controlInput }
        guard let port = controls.first(where: { $0.name == control.port || String($0.index) == control.port }) else {
            let known = controls.map { "\($0.index) '\($0.name)'" }.joined(separator: ", ")
            throw CommandFailure(
                message: "\(plugin) has no control input '\(control.port.inert)' (its controls: \(known.inert))", status: .usage)
        }
        try effect.setControl(port.index, to: control.value)
    }
}
