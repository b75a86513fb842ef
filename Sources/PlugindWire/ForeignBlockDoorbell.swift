import PlugindTypes

/// A LADSPA instance's doorbell: two 32-bit words in its shared data area through which a host's
/// real-time thread runs blocks without the request path (no frame, no event loop, no task): the
/// host writes the frame count and rings with the next sequence number; the worker's doorbell
/// thread runs the block and answers with that number, or with it and `refusedBit` when it could
/// not run it. Each word has a cache line of its own. This type is the arithmetic both sides share;
/// the waits are theirs.
///
/// A worker writes the answer word, so the host trusts nothing in it: a word that is not the
/// answer to the block it rang is no answer, and the block's deadline still runs.
package enum ForeignBlockDoorbell {
    /// Byte offsets in the doorbell, and its size.
    package static let ringOffset = 0
    package static let framesOffset = 4
    package static let answerOffset = 64
    package static let bytes: UInt64 = ForeignABI.doorbellBytes
    /// Set in an answer when the worker refused the block (no instance, too many frames).
    package static let refusedBit: UInt32 = 0x8000_0000

    /// The number rung after `sequence`: 1 to 0x7FFF_FFFF and round again; never 0 (the ring
    /// word before the first block) and never with `refusedBit`.
    package static func sequence(after sequence: UInt32) -> UInt32 {
        let next = ((sequence & ~refusedBit) &+ 1) & ~refusedBit
        return next == 0 ? 1 : next
    }

    package enum Answer: Equatable, Sendable {
        /// Not (yet) the answer to the block rung.
        case pending
        case ran
        case refused
    }

    /// What the answer word says of the block rung with `sequence`.
    package static func answer(_ word: UInt32, to sequence: UInt32) -> Answer {
        if word == sequence { return .ran }
        if word == sequence | refusedBit { return .refused }
        return .pending
    }

    /// Whether a worker's `offset` for a doorbell is one: a cache line's start, inside an area
    /// of `areaBytes`.
    package static func isPlace(_ offset: UInt64, inAreaOf areaBytes: Int) -> Bool {
        offset % 64 == 0 && areaBytes >= 0 && offset <= UInt64(areaBytes) && UInt64(areaBytes) - offset >= bytes
    }

    /// The answer to `ForeignPluginRequest.openDoorbell`: the doorbell's offset in the data area.
    package static func encoded(offset: UInt64) -> [UInt8] {
        var writer = PayloadWriter(capacity: 8)
        writer.write(offset)
        return writer.bytes
    }

    package static func offset(_ bytes: [UInt8]) throws(WireError) -> UInt64 {
        var reader = PayloadReader(bytes)
        let offset = try reader.readUInt64()
        guard reader.remaining == 0 else { throw .malformedPayload("\(reader.remaining) bytes after a doorbell's offset") }
        return offset
    }
}
