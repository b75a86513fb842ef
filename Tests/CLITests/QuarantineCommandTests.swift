import ExtensionFoundation
import Foundation
import PlugindEngine
import TestSupport
import Testing

@Suite("plugind quarantine", .tags(.process), .serialized, .timeLimit(.minutes(5)))
struct QuarantineCommandTests {
    @Test("list shows the quarantine and its crashes; clear lifts it")
    func listAndClear() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let fixture = PluginFixture(library: "FaultyAbort")
        try await installApproved(fixture, in: test)
        for _ in 0..<3 {
            #expect(try await plugind("run", fixture.identifier, "x", in: test).status == 70)
        }
        let refused = try await plugind("run", fixture.identifier, "x", in: test)
        #expect(refused.status == 77)
        #expect(refused.stderr.contains("is quarantined since"))
        let list = try await plugind("quarantine", "list", in: test)
        #expect(list.stdout.contains("\(fixture.identifier)  quarantined since"))
        #expect(list.stdout.contains("crashed with SIGABRT"))
        let json = try await plugind("quarantine", "list", "--json", in: test)
        let quarantine = try JSONSerialization.jsonObject(with: Data(json.standardOutput)) as? [String: Any]
        let entry = (quarantine?["plugins"] as? [[String: Any]])?.first { $0["identifier"] as? String == fixture.identifier }
        #expect(entry?["quarantined"] as? Bool == true, "\(json.stdout)")
        let all = try await plugind("list", "--all", in: test)
        #expect(all.stdout.contains("\(fixture.identifier)  1.0.0  FaultyAbort  [org.plugind.tests.point]  quarantined"))
        #expect(try await plugind("quarantine", "clear", fixture.identifier, in: test).status == 0)
        #expect(try await plugind("run", fixture.identifier, "x", in: test).status == 70)
        let again = try await plugind("quarantine", "clear", "org.plugind.tests.none", in: test)
        #expect(again.status == 1)
    }
}
