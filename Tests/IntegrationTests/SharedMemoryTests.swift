import ExtensionFoundation
import PlugindEngine
import PlugindWire
import TestSupport
import Testing

@Suite("Large messages through shared memory", .tags(.process), .serialized, .timeLimit(.minutes(5)))
struct SharedMemoryTests {
    /// Bytes that differ from request to request (xorshift), so that a mix-up shows.
    static func pattern(_ count: Int, seed: UInt64) -> [UInt8] {
        var state = seed | 1
        var words: [UInt64] = []
        words.reserveCapacity(count / 8 + 1)
        for _ in 0...(count / 8) {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            words.append(state)
        }
        return words.withUnsafeBytes { Array($0.prefix(count)) }
    }

    @Test("payloads from empty to past the region come back byte for byte; those in between travel in shared memory")
    func sizes() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let process = try await test.launch(PluginFixture(library: "Echo"))
        let connection = try await process.makeConnection()
        let threshold = SharedMemoryLayout.threshold
        let region = SharedMemoryLayout.maximumRegionSize
        let pattern = Self.pattern(region + 1, seed: 5)
        for size in [0, 1, threshold - 1, threshold, threshold + 1, 1 << 20, region, region + 1] {
            let before = process.sharedMemoryTransfers
            // Each size starts elsewhere in the pattern, so that a stale answer cannot match.
            let payload = Array(pattern[(region + 1 - size)...])
            let answer = try await connection.send(payload)
            // Compared to a Bool: a failed #expect on two large arrays would compute their diff.
            let identical = answer == payload
            #expect(identical, "\(answer.count) bytes came back for \(size)")
            let after = process.sharedMemoryTransfers
            let shared = size >= threshold && size <= region
            #expect(after.requests - before.requests == (shared ? 1 : 0), "request of \(size) bytes")
            #expect(after.responses - before.responses == (shared ? 1 : 0), "response of \(size) bytes")
        }
        await process.invalidateAndWait()
    }

    @Test("concurrent large requests each get their own answer; the region is reused once all are answered")
    func concurrent() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let process = try await test.launch(PluginFixture(library: "Echo"))
        let connection = try await process.makeConnection()
        let mismatches = try await withThrowingTaskGroup(of: Bool.self) { group in
            for index in 0..<24 {
                group.addTask {
                    let payload = Self.pattern(1_000_000 + index, seed: UInt64(index + 1))
                    return try await connection.send(payload) != payload
                }
            }
            return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(mismatches == 0)
        // How many found room depends on timing (the rest took the pipe); at least the first did.
        let during = process.sharedMemoryTransfers
        #expect(during.requests > 0)
        let payload = Self.pattern(1 << 20, seed: 99)
        let identical = try await connection.send(payload) == payload
        #expect(identical)
        #expect(process.sharedMemoryTransfers.requests == during.requests + 1)
        await process.invalidateAndWait()
    }

    @Test("a worker whose message limit is below the threshold gets no shared memory and uses the pipe")
    func smallLimit() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let process = try await test.launch(PluginFixture(library: "Echo", extra: ["limits": ["maxMessageBytes": 12 << 10]]))
        let payload = Self.pattern(12 << 10, seed: 7)
        let identical = try await process.makeConnection().send(payload) == payload
        #expect(identical)
        #expect(process.sharedMemoryTransfers == (0, 0))
        await process.invalidateAndWait()
    }
}
