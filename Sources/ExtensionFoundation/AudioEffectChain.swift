import PlugindEngine
import PlugindSystem

/// LADSPA effects run one after another on each block, each in its own confined worker: effect
/// k's audio outputs feed effect k + 1's audio inputs, in port order (Linux addition). The
/// samples move between the effects' shared buffers in this process; each call carries only the
/// frame count. An effect that crashes or misses its deadline fails the run with its own typed
/// error; the others are unharmed.
public final class AudioEffectChain: Sendable {
    public let effects: [AudioEffect]
    /// The first effect's audio inputs and the last effect's audio outputs, in port order.
    public let inputs: [AudioEffect.Port]
    public let outputs: [AudioEffect.Port]
    /// For each effect but the last: its audio outputs paired with the next effect's inputs, by
    /// port index.
    private let links: [[(output: Int, input: Int)]]
    private let timingState = Locked(AudioEffect.Timing())

    /// The chain's runs against their blocks' real-time period, as `AudioEffect.timing` counts
    /// an effect's: a block the whole chain took longer than it lasts missed it, even when each
    /// effect alone kept within it. Only runs that completed count.
    public var timing: AudioEffect.Timing { timingState.withLock { $0 } }

    /// Refuses (`invalidArguments`) an empty chain, effects of different sample rates or block
    /// sizes, and a link whose outputs and inputs differ in number, naming the link.
    public init(_ effects: [AudioEffect]) throws(AppExtensionError) {
        guard let first = effects.first, let last = effects.last else {
            throw AppExtensionError(.invalidArguments, plugin: nil, "a chain of no effects")
        }
        for (position, effect) in effects.enumerated() {
            let identifier = effect.process.plan.pluginIdentifier
            guard effect.sampleRate == first.sampleRate, effect.maximumFrames == first.maximumFrames else {
                throw AppExtensionError(
                    .invalidArguments, plugin: identifier,
                    "runs at \(effect.sampleRate) Hz with \(effect.maximumFrames)-frame ports; the chain's first effect at \(first.sampleRate) Hz with \(first.maximumFrames)"
                )
            }
            guard position > 0 else { continue }
            let given = effects[position - 1].ports.filter { $0.kind == .audioOutput }.count
            let taken = effect.ports.filter { $0.kind == .audioInput }.count
            guard given == taken else {
                throw AppExtensionError(
                    .invalidArguments, plugin: identifier,
                    "takes \(taken) audio input\(taken == 1 ? "" : "s"); effect \(position - 1) of the chain gives \(given)")
            }
        }
        self.effects = effects
        links = zip(effects, effects.dropFirst()).map { effect, next in
            Array(
                zip(
                    effect.ports.filter { $0.kind == .audioOutput }.map(\.index),
                    next.ports.filter { $0.kind == .audioInput }.map(\.index)
                ).map { (output: $0, input: $1) })
        }
        inputs = first.ports.filter { $0.kind == .audioInput }
        outputs = last.ports.filter { $0.kind == .audioOutput }
    }

    /// The chain's input `channel` (the first effect's audio input in that place).
    public func withInput<Result>(_ channel: Int, _ body: (UnsafeMutableBufferPointer<Float>) throws -> Result) throws -> Result {
        guard inputs.indices.contains(channel) else {
            throw AppExtensionError(.invalidArguments, plugin: nil, "the chain has \(inputs.count) input channels, not \(channel + 1)")
        }
        return try effects[0].withSamples(port: inputs[channel].index, body)
    }

    /// The chain's output `channel` as the last run left it.
    public func withOutput<Result>(_ channel: Int, _ body: (UnsafeMutableBufferPointer<Float>) throws -> Result) throws -> Result {
        guard outputs.indices.contains(channel) else {
            throw AppExtensionError(.invalidArguments, plugin: nil, "the chain has \(outputs.count) output channels, not \(channel + 1)")
        }
        return try effects[effects.count - 1].withSamples(port: outputs[channel].index, body)
    }

    /// Runs every effect over `frames`, in order, each within `timeout`, as requests.
    public func run(frames: Int, timeout: Duration? = nil) async throws {
        let started = ContinuousClock.now
        for (position, effect) in effects.enumerated() {
            try await effect.run(frames: frames, timeout: timeout)
            try pass(frames, from: position)
        }
        record(since: started, frames: frames)
    }

    /// Runs every effect over `frames`, in order, each within `timeout`, on the calling thread
    /// (`AudioEffect.render(frames:timeout:)`): for a real-time audio thread, not a task.
    public func render(frames: Int, timeout: Duration? = nil) throws {
        let started = ContinuousClock.now
        for position in effects.indices {
            try effects[position].render(frames: frames, timeout: timeout)
            try pass(frames, from: position)
        }
        record(since: started, frames: frames)
    }

    /// Copies effect `position`'s outputs into the next effect's inputs (none after the last).
    private func pass(_ frames: Int, from position: Int) throws {
        guard position < links.count else { return }
        let (effect, next) = (effects[position], effects[position + 1])
        for link in links[position] {
            try effect.withSamples(port: link.output) { source in
                try next.withSamples(port: link.input) { target in
                    _ = target.update(fromContentsOf: source.prefix(frames))
                }
            }
        }
    }

    private func record(since started: ContinuousClock.Instant, frames: Int) {
        let took = ContinuousClock.now - started
        timingState.withLock { $0.record(took, frames: frames, sampleRate: effects[0].sampleRate) }
    }
}
