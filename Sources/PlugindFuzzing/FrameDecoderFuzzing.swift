import PlugindWire

/// The body of the frame-decoder fuzz target, shared with the regression test that replays the
/// corpus. Feeds arbitrary bytes, in arbitrary pieces, to the decoder in both directions and
/// checks that every message that decodes encodes back to exactly the frame it came from (the
/// encoding is canonical, so this also holds for NaN payloads, which compare unequal as values).
package enum FrameDecoderFuzzing {
    package struct InvariantViolation: Error, CustomStringConvertible {
        package var description: String
    }

    package static func run(_ input: [UInt8]) throws {
        guard let first = input.first else { return }
        // The first byte chooses how the rest arrives: in pieces of 1 to 256 bytes.
        let pieceSize = Int(first) + 1
        let stream = Array(input.dropFirst())
        for direction in [FrameKind.Direction.workerToHost, .hostToWorker] {
            var decoder = FrameDecoder(direction: direction, maximumPayload: 1 << 16)
            var offset = 0
            decoding: while offset < stream.count {
                let end = min(offset + pieceSize, stream.count)
                decoder.append(Array(stream[offset..<end]))
                offset = end
                while true {
                    let frame: Frame
                    do {
                        guard let next = try decoder.nextFrame() else { break }
                        frame = next
                    } catch {
                        break decoding
                    }
                    try checkRoundTrip(frame)
                }
            }
            _ = try? decoder.finish()
        }
    }

    private static func checkRoundTrip(_ frame: Frame) throws {
        let reencoded: Frame
        switch frame.header.kind.direction {
        case .workerToHost:
            guard let message = try? WorkerMessage(frame) else { return }
            reencoded = message.encode()
        case .hostToWorker:
            guard let message = try? HostMessage(frame) else { return }
            reencoded = message.encode()
        }
        guard reencoded == frame else {
            throw InvariantViolation(description: "\(frame.header.kind) frame does not encode back to its own bytes")
        }
    }
}
