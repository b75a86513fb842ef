public import CPlugindHostAPI
import ExtensionFoundation
import PlugindEngine
import PlugindSystem

/// A `plugind_audio_effect`: the effect and the port names the C caller holds.
final class HostAudioEffect: Sendable {
    let effect: AudioEffect
    let names: [OwnedCString]

    init(_ effect: AudioEffect) {
        self.effect = effect
        names = effect.ports.map { OwnedCString($0.name) }
    }
}

/// A `plugind_video_filter`: the filter and the parameter names the C caller holds.
final class HostVideoFilter: Sendable {
    let filter: VideoFilter
    let names: [OwnedCString]

    init(_ filter: VideoFilter) {
        self.filter = filter
        names = filter.parameters.map { OwnedCString($0.name) }
    }
}

func timeout(_ milliseconds: UInt32) -> Duration? {
    milliseconds == 0 ? nil : .milliseconds(Int64(milliseconds))
}

/// The object behind `handle`, or nil with an invalid-argument error naming `what` it should be.
func registered<Object>(
    _ handle: OpaquePointer?, as type: Object.Type, _ what: String, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Object? {
    guard let object = HandleRegistry.shared.object(handle, as: type) else {
        HostError.invalidArgument("not a plugind \(what) (NULL, or already released)").report(to: error)
        return nil
    }
    return object
}

/// Runs `work`, which blocks the caller's thread by itself (no task): 0, or -1 with its error
/// in `*error`.
func directStatus(_ error: UnsafeMutablePointer<OpaquePointer?>?, _ work: () throws -> Void) -> Int32 {
    do {
        try work()
        return 0
    } catch let failure {
        HostError(failure).report(to: error)
        return -1
    }
}

/// Runs `work` on the caller's thread until it ends: 0, or -1 with its error in `*error`.
func blockingStatus(_ error: UnsafeMutablePointer<OpaquePointer?>?, _ work: @escaping @Sendable () async throws -> Void) -> Int32 {
    switch BlockingCall.run(work) {
    case .success: return 0
    case .failure(let failure):
        HostError(failure).report(to: error)
        return -1
    }
}

@_cdecl("plugind_audio_effect_create")
public func plugindAudioEffectCreate(
    _ process: OpaquePointer?, _ sampleRate: UInt32, _ maximumFrames: UInt32, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> OpaquePointer? {
    guard let process = registered(process, as: HostProcess.self, "process", error) else { return nil }
    let made = BlockingCall.run {
        try await AudioEffect(process: process.process, sampleRate: Int(sampleRate), maximumFrames: Int(maximumFrames))
    }
    switch made {
    case .success(let effect): return HandleRegistry.shared.insert(HostAudioEffect(effect))
    case .failure(let failure):
        HostError(failure).report(to: error)
        return nil
    }
}

@_cdecl("plugind_audio_effect_port_count")
public func plugindAudioEffectPortCount(_ effect: OpaquePointer?) -> Int {
    HandleRegistry.shared.object(effect, as: HostAudioEffect.self)?.effect.ports.count ?? 0
}

@_cdecl("plugind_audio_effect_port")
public func plugindAudioEffectPort(_ effect: OpaquePointer?, _ index: Int, _ port: UnsafeMutablePointer<plugind_audio_port>?) -> Int32 {
    guard let held = HandleRegistry.shared.object(effect, as: HostAudioEffect.self), let port,
        held.effect.ports.indices.contains(index)
    else { return -1 }
    let described = held.effect.ports[index]
    let kind: plugind_port_kind =
        switch described.kind {
        case .audioInput: PLUGIND_PORT_AUDIO_INPUT
        case .audioOutput: PLUGIND_PORT_AUDIO_OUTPUT
        case .controlInput: PLUGIND_PORT_CONTROL_INPUT
        case .controlOutput: PLUGIND_PORT_CONTROL_OUTPUT
        }
    port.pointee = plugind_audio_port(
        name: held.names[index].constPointer, kind: kind, has_lower_bound: described.lowerBound == nil ? 0 : 1,
        has_upper_bound: described.upperBound == nil ? 0 : 1, lower_bound: described.lowerBound ?? 0,
        upper_bound: described.upperBound ?? 0, default_value: described.defaultValue ?? 0)
    return 0
}

@_cdecl("plugind_audio_effect_samples")
public func plugindAudioEffectSamples(_ effect: OpaquePointer?, _ port: Int) -> UnsafeMutablePointer<Float>? {
    HandleRegistry.shared.object(effect, as: HostAudioEffect.self)?.effect.samplesPointer(port: port)
}

@_cdecl("plugind_audio_effect_set_control")
public func plugindAudioEffectSetControl(
    _ effect: OpaquePointer?, _ port: Int, _ value: Float, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    guard let held = registered(effect, as: HostAudioEffect.self, "audio effect", error) else { return -1 }
    do {
        try held.effect.setControl(port, to: value)
        return 0
    } catch let failure {
        HostError(failure).report(to: error)
        return -1
    }
}

@_cdecl("plugind_audio_effect_control")
public func plugindAudioEffectControl(_ effect: OpaquePointer?, _ port: Int, _ value: UnsafeMutablePointer<Float>?) -> Int32 {
    guard let held = HandleRegistry.shared.object(effect, as: HostAudioEffect.self), let value,
        let current = try? held.effect.control(port)
    else { return -1 }
    value.pointee = current
    return 0
}

@_cdecl("plugind_audio_effect_run")
public func plugindAudioEffectRun(
    _ effect: OpaquePointer?, _ frames: UInt32, _ timeoutMilliseconds: UInt32, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    guard let held = registered(effect, as: HostAudioEffect.self, "audio effect", error) else { return -1 }
    let effect = held.effect
    return directStatus(error) { try effect.render(frames: Int(frames), timeout: timeout(timeoutMilliseconds)) }
}

extension plugind_audio_timing {
    init(_ timing: AudioEffect.Timing) {
        let (seconds, attoseconds) = timing.longestRun.components
        // Saturating: a duration is never worth a trap in the C ABI.
        let (whole, overflowed) = UInt64(clamping: seconds).multipliedReportingOverflow(by: 1_000_000_000)
        let (sum, carried) = whole.addingReportingOverflow(UInt64(clamping: attoseconds / 1_000_000_000))
        let nanoseconds = overflowed || carried ? UInt64.max : sum
        self.init(
            blocks: UInt64(clamping: timing.blocks), missed_blocks: UInt64(clamping: timing.missedBlocks),
            longest_run_ns: nanoseconds)
    }
}

@_cdecl("plugind_audio_effect_timing")
public func plugindAudioEffectTiming(_ effect: OpaquePointer?, _ timing: UnsafeMutablePointer<plugind_audio_timing>?) -> Int32 {
    guard let held = HandleRegistry.shared.object(effect, as: HostAudioEffect.self), let timing else { return -1 }
    timing.pointee = plugind_audio_timing(held.effect.timing)
    return 0
}

@_cdecl("plugind_audio_effect_release")
public func plugindAudioEffectRelease(_ effect: OpaquePointer?) {
    _ = HandleRegistry.shared.remove(effect, as: HostAudioEffect.self)
}

@_cdecl("plugind_video_filter_create")
public func plugindVideoFilterCreate(
    _ process: OpaquePointer?, _ width: UInt32, _ height: UInt32, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> OpaquePointer? {
    guard let process = registered(process, as: HostProcess.self, "process", error) else { return nil }
    switch BlockingCall.run({ try await VideoFilter(process: process.process, width: Int(width), height: Int(height)) }) {
    case .success(let filter): return HandleRegistry.shared.insert(HostVideoFilter(filter))
    case .failure(let failure):
        HostError(failure).report(to: error)
        return nil
    }
}

@_cdecl("plugind_video_filter_input_count")
public func plugindVideoFilterInputCount(_ filter: OpaquePointer?) -> Int {
    HandleRegistry.shared.object(filter, as: HostVideoFilter.self)?.filter.inputCount ?? 0
}

@_cdecl("plugind_video_filter_input")
public func plugindVideoFilterInput(_ filter: OpaquePointer?, _ index: Int) -> UnsafeMutablePointer<UInt8>? {
    guard let held = HandleRegistry.shared.object(filter, as: HostVideoFilter.self), (0..<held.filter.inputCount).contains(index) else {
        return nil
    }
    return held.filter.framePointer(index)
}

@_cdecl("plugind_video_filter_output")
public func plugindVideoFilterOutput(_ filter: OpaquePointer?) -> UnsafePointer<UInt8>? {
    guard let held = HandleRegistry.shared.object(filter, as: HostVideoFilter.self) else { return nil }
    return held.filter.framePointer(held.filter.inputCount).map { UnsafePointer($0) }
}

@_cdecl("plugind_video_filter_parameter_count")
public func plugindVideoFilterParameterCount(_ filter: OpaquePointer?) -> Int {
    HandleRegistry.shared.object(filter, as: HostVideoFilter.self)?.filter.parameters.count ?? 0
}

@_cdecl("plugind_video_filter_parameter")
public func plugindVideoFilterParameter(
    _ filter: OpaquePointer?, _ index: Int, _ name: UnsafeMutablePointer<UnsafePointer<CChar>?>?,
    _ type: UnsafeMutablePointer<plugind_parameter_type>?
) -> Int32 {
    guard let held = HandleRegistry.shared.object(filter, as: HostVideoFilter.self), held.filter.parameters.indices.contains(index) else {
        return -1
    }
    name?.pointee = held.names[index].constPointer
    switch held.filter.parameters[index].type {
    case .bool: type?.pointee = PLUGIND_PARAMETER_BOOL
    case .double: type?.pointee = PLUGIND_PARAMETER_DOUBLE
    case .color: type?.pointee = PLUGIND_PARAMETER_COLOR
    case .position: type?.pointee = PLUGIND_PARAMETER_POSITION
    case .string: type?.pointee = PLUGIND_PARAMETER_STRING
    case .unknown: return -1
    }
    return 0
}

@_cdecl("plugind_video_filter_set_parameter")
public func plugindVideoFilterSetParameter(
    _ filter: OpaquePointer?, _ index: Int, _ values: UnsafePointer<Double>?, _ count: Int, _ text: UnsafePointer<CChar>?,
    _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    guard let held = registered(filter, as: HostVideoFilter.self, "video filter", error) else { return -1 }
    guard held.filter.parameters.indices.contains(index) else {
        HostError(code: PLUGIND_ERROR_INVALID_ARGUMENTS, message: "no parameter \(index): the plugin has \(held.filter.parameters.count)")
            .report(to: error)
        return -1
    }
    // At most one more than any type takes: a larger count is refused as wrong without reading it all.
    let numbers = values.map { Array(UnsafeBufferPointer(start: $0, count: min(max(count, 0), 4))) } ?? []
    let value: VideoFilter.Value?
    switch held.filter.parameters[index].type {
    case .bool: value = numbers.count == 1 ? .bool(numbers[0] >= 0.5) : nil
    case .double: value = numbers.count == 1 ? .double(numbers[0]) : nil
    case .color: value = numbers.count == 3 ? .color(red: Float(numbers[0]), green: Float(numbers[1]), blue: Float(numbers[2])) : nil
    case .position: value = numbers.count == 2 ? .position(x: numbers[0], y: numbers[1]) : nil
    case .string: value = text.flatMap { String(validatingCString: $0) }.map { .string($0) }
    case .unknown: value = nil
    }
    guard let value else {
        HostError(
            code: PLUGIND_ERROR_INVALID_ARGUMENTS,
            message:
                "parameter \(index) (\(held.filter.parameters[index].name)) of type \(held.filter.parameters[index].type) takes other values"
        )
        .report(to: error)
        return -1
    }
    let videoFilter = held.filter
    return blockingStatus(error) { try await videoFilter.setParameter(index, to: value) }
}

@_cdecl("plugind_video_filter_update")
public func plugindVideoFilterUpdate(
    _ filter: OpaquePointer?, _ time: Double, _ timeoutMilliseconds: UInt32, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    guard let held = registered(filter, as: HostVideoFilter.self, "video filter", error) else { return -1 }
    let videoFilter = held.filter
    return blockingStatus(error) { try await videoFilter.update(time: time, timeout: timeout(timeoutMilliseconds)) }
}

@_cdecl("plugind_video_filter_release")
public func plugindVideoFilterRelease(_ filter: OpaquePointer?) {
    _ = HandleRegistry.shared.remove(filter, as: HostVideoFilter.self)
}
