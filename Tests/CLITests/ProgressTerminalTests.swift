import Foundation
import Glibc
import TestSupport
import Testing

@Suite("Progress under a terminal", .tags(.process), .serialized, .timeLimit(.minutes(1)))
struct ProgressTerminalTests {
    @Test("plugind run draws a progress bar when stderr is a terminal")
    func progressBar() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let fixture = PluginFixture(library: "Countdown")
        try await installApproved(fixture, in: test)
        var environment = test.environment
        environment["PLUGIND_WORKER"] = try BuiltProducts.worker()
        // script(1) (util-linux) runs the command on a pseudo-terminal and copies what it drew.
        let command = "'\(try BuiltProducts.plugind())' run \(fixture.identifier) 4"
        let result = try await CommandRunner.run(
            "/usr/bin/script", ["--quiet", "--return", "--command", command, "/dev/null"], environment: environment)
        #expect(result.status == 0, "\(result.stderr)")
        let screen = result.stdout
        #expect(screen.contains("\r[------------------------------]   0% (0/4)"), "\(screen.debugDescription)")
        #expect(screen.contains("\r[##############################] 100% (4/4)"), "\(screen.debugDescription)")
        #expect(screen.contains("counted down 4 steps"))
        #expect(!screen.contains("progress: "))
    }

}
