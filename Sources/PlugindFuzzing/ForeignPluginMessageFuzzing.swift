import PlugindWire

/// The body of the foreign-plugin-messages fuzz target, shared with the test that replays its
/// corpus: what a LADSPA or frei0r adapter in a worker sends the host (a library's description, an
/// instance's port layout, a parameter's value, a doorbell's place) and what the host sends it
/// (requests). The first byte picks the reader, the rest is its input: each must decode or throw
/// `WireError`, never trap or allocate beyond what it received, and whatever decodes must encode
/// back to the same bytes.
package enum ForeignPluginMessageFuzzing {
    package struct InvariantViolation: Error, CustomStringConvertible {
        package var description: String
    }

    package static func run(_ input: [UInt8]) throws {
        guard let selector = input.first else { return }
        let bytes = Array(input.dropFirst())
        let reencoded: [UInt8]?
        switch selector % 5 {
        case 0: reencoded = (try? ForeignLibraryDescription(bytes))?.encoded
        case 1: reencoded = (try? ForeignPortLayout(bytes))?.encoded
        case 2: reencoded = (try? Frei0rParameterValue(bytes))?.encoded
        case 3: reencoded = (try? ForeignPluginRequest(bytes))?.encoded
        default: reencoded = (try? ForeignBlockDoorbell.offset(bytes)).map(ForeignBlockDoorbell.encoded(offset:))
        }
        if let reencoded, reencoded != bytes {
            throw InvariantViolation(
                description: "reader \(selector % 5): \(bytes.count) bytes decode but encode back to \(reencoded.count) others")
        }
    }
}
