import TestSupport
import Testing

@testable import PlugindWire

@Suite("Stack reports from the worker", .tags(.unit))
struct StackReportTests {
    private let report = StackReport(
        reason: .fatalSignal, truncated: true,
        modules: [
            .init(path: "", loadBias: 0x5555_0000_0000, start: 0x5555_0000_0000),
            .init(path: "/plugins/p.bundle/libp.so", loadBias: 0x7f00_0000_0000, start: 0x7f00_0000_1000),
        ],
        frames: [.init(address: 0x7f00_0000_1234, module: 1), .init(address: 0x5555_0000_0042, module: 0), .init(address: 8, module: nil)])

    @Test("a report survives its encoding, inside a frame of its kind with its request")
    func roundTrip() throws {
        let frame = WorkerMessage.stackReport(requestID: 7, report).encode()
        #expect(frame.header.kind == .stackReport)
        #expect(frame.header.requestID == 7)
        #expect(try WorkerMessage(frame) == .stackReport(requestID: 7, report))
    }

    @Test("bytes a hostile worker may send instead are refused, never trusted beyond their bounds")
    func malformed() {
        let good = report.encoded
        var unknownReason = good
        unknownReason[0] = 9
        var unknownFlags = good
        unknownFlags[1] = 2
        var tooManyFrames = good
        tooManyFrames[3] = UInt8(StackReport.maximumFrames + 1)
        var moduleOutOfRange = good
        moduleOutOfRange[moduleOutOfRange.count - 1] = 5
        var pathPastTheEnd = good
        // The second module's path length (after 4 + 18 bytes of the first, empty path, and 16 of its own).
        pathPastTheEnd[4 + 18 + 16] = 0xFF
        pathPastTheEnd[4 + 18 + 17] = 0xFF
        for bytes in [unknownReason, unknownFlags, tooManyFrames, moduleOutOfRange, pathPastTheEnd, Array(good.dropLast()), good + [0]] {
            #expect(throws: WireError.self) { try StackReport(payload: bytes) }
        }
    }

    @Test("an object path that is not UTF-8 is refused, never repaired: every report encodes back to the bytes it came as")
    func objectPathsAreUTF8() throws {
        func report(path: [UInt8]) -> [UInt8] {
            // Reason, flags, one object, one frame; the object's bias and start, its path; the frame.
            [0, 0, 1, 1] + [UInt8](repeating: 0, count: 16) + [UInt8(path.count), 0] + path + [UInt8](repeating: 0, count: 8) + [0]
        }
        // Bytes of no character, a surrogate, an overlong slash, a character cut short; and at the
        // bound, a path that repaired would be three times as long.
        let hostile: [[UInt8]] = [
            Array("/lib/a".utf8) + [0xFF], [0xED, 0xA0, 0x80], [0xC0, 0xAF], Array("/lib/".utf8) + [0xE2, 0x82],
            [UInt8](repeating: 0x80, count: StackReport.maximumPathLength),
        ]
        for path in hostile {
            #expect(throws: WireError.self, "\(path)") { try StackReport(payload: report(path: path)) }
        }
        let plain = report(path: Array("/usr/lib/libé.so".utf8))
        #expect(try StackReport(payload: plain).encoded == plain)
    }
}
