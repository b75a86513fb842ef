import CPlugindShims
import Foundation
import Glibc
import PlugindSystem
import Synchronization
import TestSupport
import Testing

@testable import ExtensionFoundation
@testable import PlugindEngine

@Suite("Messages a reader has not taken yet are bounded", .tags(.unit))
struct MessageBufferTests {
    @Test("a reader that falls behind loses the oldest first and learns how many")
    func dropsOldest() async {
        let buffer = AppExtensionMessages.Buffer(byteBudget: 64 * 3 + 30, countBudget: 100)
        for index in 0..<10 { buffer.yield(.event(requestIdentifier: nil, bytes: [UInt8(index)])) }
        buffer.finish()
        var received: [AppExtensionMessage] = []
        for await message in AppExtensionMessages(buffer: buffer) { received.append(message) }
        // Three events of 65 bytes fit the budget: the seven oldest went.
        #expect(
            received == [
                .dropped(count: 7), .event(requestIdentifier: nil, bytes: [7]), .event(requestIdentifier: nil, bytes: [8]),
                .event(requestIdentifier: nil, bytes: [9]),
            ])
    }

    @Test("a message larger than the whole budget is dropped, not kept")
    func tooLarge() async {
        let buffer = AppExtensionMessages.Buffer(byteBudget: 1024, countBudget: 100)
        buffer.yield(.event(requestIdentifier: 1, bytes: [UInt8](repeating: 0, count: 4096)))
        buffer.yield(.log(level: .info, message: "small"))
        buffer.finish()
        var received: [AppExtensionMessage] = []
        for await message in AppExtensionMessages(buffer: buffer) { received.append(message) }
        #expect(received == [.dropped(count: 1), .log(level: .info, message: "small")])
    }

    @Test("a cancelled reader stops waiting")
    func cancellation() async throws {
        let buffer = AppExtensionMessages.Buffer()
        let reader = Task { () -> Int in
            var count = 0
            for await _ in AppExtensionMessages(buffer: buffer) { count += 1 }
            return count
        }
        buffer.yield(.log(level: .info, message: "one"))
        reader.cancel()
        let count = try await Deadline.wait("the reader to end") { await reader.value }
        #expect(count <= 1)
    }
}
