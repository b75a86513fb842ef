import CTestSupport
import ExtensionFoundation
import Foundation
import Glibc
import PlugindEngine
import PlugindSystem
import TestSupport
import Testing

/// Limits that cover a plugin as a whole: with the `processes` permission, its children, memfds
/// and shared memory count too, where a control group can be made (as root here); elsewhere the
/// permission's per-process limits are what the owner approved, and `plugind info` says so.
@Suite("Security: limits that cover every process of a plugin", .tags(.process, .root), .serialized, .timeLimit(.minutes(5)))
struct WholePluginLimitTests {
    static var processes: [String: Any] { ["processes": true] }

    static var hasControlGroups: Bool { WorkerCgroups.available(delegated: nil) != nil }

    func failure(_ vector: String, _ argument: String, limits: [String: Any]) async throws -> AppExtensionError? {
        let test = try TestHost()
        defer { test.remove() }
        let process = try await test.launch(
            PluginFixture(library: "FaultyHostileProbe", extra: ["permissions": Self.processes, "limits": limits]))
        let error = await #expect(throws: AppExtensionError.self) {
            _ = try await process.makeConnection().send(Array("\(vector) \(argument)".utf8), timeout: TestHost.requestBackstop)
        }
        await process.invalidateAndWait()
        return error
    }

    @Test("memfd pages count against the memory limit", .enabled(if: hasControlGroups))
    func memfd() async throws {
        let error = try await failure("memfd", "512", limits: ["memoryBytes": 128 << 20])
        #expect(error?.code == .limitExceeded, "\(error.map { "\($0)" } ?? "")")
        #expect(error?.exceededLimit?.kind == .memory)
    }

    @Test(
        "children's memory counts against the limit: of ten children of 64 MiB under 128 MiB, at most two hold it",
        .enabled(if: hasControlGroups))
    func childrenMemory() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let process = try await test.launch(
            PluginFixture(library: "FaultyHostileProbe", extra: ["permissions": Self.processes, "limits": ["memoryBytes": 128 << 20]]))
        let connection = try await process.makeConnection()
        let reply = try await connection.send(Array("children-memory 64".utf8), timeout: TestHost.requestBackstop)
        let answer = String(decoding: reply, as: UTF8.self)
        await process.invalidateAndWait()
        var counts: [String: Int] = [:]
        for field in answer.dropFirst("done ".count).split(separator: " ") {
            let parts = field.split(separator: "=")
            if parts.count == 2, let value = Int(parts[1]) { counts[String(parts[0])] = value }
        }
        #expect(Set(counts.keys) == ["held", "died", "unallocated", "holding"], "\(answer)")
        // Without the group each child would hold its 64 MiB under its own address-space limit
        // and all ten would at the end; with it, what all hold together stays under 128 MiB: at
        // most two still hold theirs. (How many held it for a while varies: the kernel may kill
        // a child that held it already to let another finish; and a child whose inherited
        // mappings leave no room under the per-process limit cannot even allocate.)
        #expect((counts["holding"] ?? 99) <= 2, "\(answer)")
        // Something happened: children held memory, died or could not allocate.
        #expect((counts["held"] ?? 0) + (counts["unallocated"] ?? 0) + (counts["died"] ?? 0) > 0, "\(answer)")
    }

    @Test("children's CPU time counts against the limit: four children of a second each under one", .enabled(if: hasControlGroups))
    func childrenCPU() async throws {
        let error = try await failure("children-cpu", "1.5", limits: ["cpuSeconds": 1])
        #expect(error?.code == .limitExceeded, "\(error.map { "\($0)" } ?? "")")
        #expect(error?.exceededLimit == AppExtensionError.ExceededLimit(kind: .cpu, value: 1))
    }
}
