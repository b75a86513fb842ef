import ExtensionFoundation
import Foundation
import PlugindEngine
import PlugindSystem
import TestSupport
import Testing

/// Under memory pressure the kernel's OOM killer must take a worker before its host. The
/// launcher, exec'd not dumpable, cannot raise its own score unless the host is root (its
/// `/proc/self/oom_score_adj` is then root's): the host's spawn raises it before the exec, so an
/// ordinary user's workers rank above their host as root's do.
@Suite("Workers rank above their host for the OOM killer", .tags(.process), .serialized, .timeLimit(.minutes(5)))
struct OOMScoreTests {
    static func score(of pid: Int32) -> Int? {
        Int(ProcessInspection.readProcFile("/proc/\(pid)/oom_score_adj").trimmingCharacters(in: .whitespacesAndNewlines))
    }

    @Test("a worker's OOM score adjustment is at least plugind's 500 and the host's own, as root and as an ordinary user")
    func workerRanksAboveHost() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let process = try await test.launch(PluginFixture(library: "Echo"))
        defer { process.invalidate() }
        let answer = try await process.makeConnection().send(Array("ping".utf8))
        #expect(answer == Array("ping".utf8))
        let host = try #require(Self.score(of: getpid()))
        let worker = try #require(Self.score(of: process.processIdentifier))
        #expect(worker >= max(host, Int(SpawnRequest.workerOOMScoreAdjustment)), "worker \(worker), host \(host)")
        // The host stays dumpable after its spawns (a spawned child shares its memory, and so the
        // flag): its /proc files stay its user's, which is how its later children raise theirs.
        var status = stat()
        #expect(stat("/proc/self/oom_score_adj", &status) == 0 && status.st_uid == geteuid(), "owner \(status.st_uid)")
        await process.invalidateAndWait()
    }
}
