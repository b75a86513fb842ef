/// Why bytes on the wire could not be turned into a message. The host reports any of these as a
/// protocol violation, naming the plugin.
package enum WireError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The stream ended inside a frame header.
    case truncatedHeader(received: Int)
    /// The stream ended inside a payload.
    case truncatedPayload(expected: Int, received: Int)
    /// The header announces a payload above the agreed maximum; nothing was allocated for it.
    case frameTooLarge(length: Int, maximum: Int)
    /// The header does not start with the plugind magic number.
    case badMagic(UInt32)
    /// The header carries a frame format this side does not speak.
    case unsupportedFrameVersion(UInt8)
    /// The kind byte names no message, or a message the sender may not send.
    case unknownKind(UInt8)
    /// Flag bits or reserved fields that must be zero are not.
    case invalidHeader(String)
    /// The payload does not decode as its kind requires.
    case malformedPayload(String)
    /// A well-formed message that is not allowed at this point of the conversation.
    case unexpectedMessage(String)

    package var description: String {
        switch self {
        case .truncatedHeader(let received):
            "stream ended inside a frame header (\(received) of \(FrameHeader.size) bytes)"
        case .truncatedPayload(let expected, let received):
            "stream ended inside a payload (\(received) of \(expected) bytes)"
        case .frameTooLarge(let length, let maximum):
            "frame of \(length) bytes exceeds the maximum of \(maximum) bytes"
        case .badMagic(let magic):
            "frame does not start with the plugind magic (found 0x\(String(magic, radix: 16)))"
        case .unsupportedFrameVersion(let version):
            "unsupported frame format version \(version)"
        case .unknownKind(let kind):
            "unknown message kind 0x\(String(kind, radix: 16))"
        case .invalidHeader(let reason):
            "invalid frame header: \(reason)"
        case .malformedPayload(let reason):
            "malformed payload: \(reason)"
        case .unexpectedMessage(let reason):
            "unexpected message: \(reason)"
        }
    }
}
