public import CPlugindHostAPI
import ExtensionFoundation
import PlugindEngine

/// A `plugind_audio_chain`: the chain, and the effects' handles it was made of, so that a run
/// finds out an effect the caller released while it was in the chain. The chain holds the
/// effects themselves too: their ports stay mapped until the chain is released, whatever the
/// caller released first.
final class HostAudioChain: Sendable {
    let chain: AudioEffectChain
    let effects: [(handle: UInt, effect: HostAudioEffect)]

    init(_ chain: AudioEffectChain, effects: [(handle: UInt, effect: HostAudioEffect)]) {
        self.chain = chain
        self.effects = effects
    }
}

@_cdecl("plugind_audio_chain_create")
public func plugindAudioChainCreate(
    _ effects: UnsafePointer<OpaquePointer?>?, _ count: Int, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> OpaquePointer? {
    guard let effects, count > 0 else {
        HostError.invalidArgument("a chain of no effects").report(to: error)
        return nil
    }
    var held: [(handle: UInt, effect: HostAudioEffect)] = []
    for position in 0..<count {
        guard let effect = HandleRegistry.shared.object(effects[position], as: HostAudioEffect.self) else {
            HostError.invalidArgument("effect \(position) of the chain is not a plugind audio effect (NULL, or already released)")
                .report(to: error)
            return nil
        }
        // Run twice per block, an effect would take its own outputs as its inputs, overwriting
        // the chain's input: never what a host means.
        if let earlier = held.firstIndex(where: { $0.effect === effect }) {
            HostError.invalidArgument("effect \(position) of the chain is effect \(earlier) again; a chain takes each effect once")
                .report(to: error)
            return nil
        }
        held.append((handle: UInt(bitPattern: effects[position]), effect: effect))
    }
    do {
        return HandleRegistry.shared.insert(HostAudioChain(try AudioEffectChain(held.map(\.effect.effect)), effects: held))
    } catch let failure {
        HostError(failure).report(to: error)
        return nil
    }
}

@_cdecl("plugind_audio_chain_input_count")
public func plugindAudioChainInputCount(_ chain: OpaquePointer?) -> Int {
    HandleRegistry.shared.object(chain, as: HostAudioChain.self)?.chain.inputs.count ?? 0
}

@_cdecl("plugind_audio_chain_output_count")
public func plugindAudioChainOutputCount(_ chain: OpaquePointer?) -> Int {
    HandleRegistry.shared.object(chain, as: HostAudioChain.self)?.chain.outputs.count ?? 0
}

@_cdecl("plugind_audio_chain_input")
public func plugindAudioChainInput(_ chain: OpaquePointer?, _ channel: Int) -> UnsafeMutablePointer<Float>? {
    guard let held = HandleRegistry.shared.object(chain, as: HostAudioChain.self), held.chain.inputs.indices.contains(channel) else {
        return nil
    }
    return held.chain.effects[0].samplesPointer(port: held.chain.inputs[channel].index)
}

@_cdecl("plugind_audio_chain_output")
public func plugindAudioChainOutput(_ chain: OpaquePointer?, _ channel: Int) -> UnsafePointer<Float>? {
    guard let held = HandleRegistry.shared.object(chain, as: HostAudioChain.self), held.chain.outputs.indices.contains(channel) else {
        return nil
    }
    return held.chain.effects[held.chain.effects.count - 1].samplesPointer(port: held.chain.outputs[channel].index).map {
        UnsafePointer($0)
    }
}

@_cdecl("plugind_audio_chain_run")
public func plugindAudioChainRun(
    _ chain: OpaquePointer?, _ frames: UInt32, _ timeoutMilliseconds: UInt32, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    guard let held = registered(chain, as: HostAudioChain.self, "audio chain", error) else { return -1 }
    // The chain still holds a released effect, so running it would work; but the caller gave it
    // up, and may have done so to end its process: say so rather than run it behind their back.
    for (position, effect) in held.effects.enumerated()
    where HandleRegistry.shared.object(OpaquePointer(bitPattern: effect.handle), as: HostAudioEffect.self) !== effect.effect {
        HostError.invalidArgument("effect \(position) of the chain was released; release the chain before its effects")
            .report(to: error)
        return -1
    }
    let effectChain = held.chain
    return directStatus(error) { try effectChain.render(frames: Int(frames), timeout: timeout(timeoutMilliseconds)) }
}

@_cdecl("plugind_audio_chain_timing")
public func plugindAudioChainTiming(_ chain: OpaquePointer?, _ timing: UnsafeMutablePointer<plugind_audio_timing>?) -> Int32 {
    guard let held = HandleRegistry.shared.object(chain, as: HostAudioChain.self), let timing else { return -1 }
    timing.pointee = plugind_audio_timing(held.chain.timing)
    return 0
}

@_cdecl("plugind_audio_chain_release")
public func plugindAudioChainRelease(_ chain: OpaquePointer?) {
    _ = HandleRegistry.shared.remove(chain, as: HostAudioChain.self)
}
