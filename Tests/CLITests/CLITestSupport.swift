import Foundation
import TestSupport

/// Runs the built `plugind` against a test host's directories.
func plugind(
    _ arguments: String...,
    in test: TestHost,
    input: [UInt8] = [],
    environment extra: [String: String] = [:]
) async throws -> CommandRunner.Output {
    try await plugind(arguments, in: test, input: input, environment: extra)
}

/// Runs the built `plugind` with an argument list made at run time.
func plugind(
    _ arguments: [String],
    in test: TestHost,
    input: [UInt8] = [],
    environment extra: [String: String] = [:]
) async throws -> CommandRunner.Output {
    var environment = test.environment
    environment["PLUGIND_WORKER"] = try BuiltProducts.worker()
    environment.merge(extra) { _, new in new }
    return try await CommandRunner.run(try BuiltProducts.plugind(), arguments, environment: environment, input: input)
}

/// Installs an external (approval-requiring) fixture and approves it through the CLI.
func installApproved(_ fixture: PluginFixture, in test: TestHost) async throws {
    try test.install(fixture, bundled: false)
    let approval = try await plugind("approve", fixture.identifier, "--yes", in: test)
    if approval.status != 0 {
        throw CLIFailure(message: "approve failed: \(approval.stderr)")
    }
}

struct CLIFailure: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}
