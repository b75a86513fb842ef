package import ExtensionFoundation
import Foundation
package import PlugindEngine

/// A host configuration confined to a temporary directory: its own bundled-plugins root, an
/// external root, policy, administrator policy and state, and the built worker.
package struct TestHost: Sendable {
    package let directory: TemporaryDirectory
    package let bundledRoot: String
    package let externalRoot: String
    package var host: AppExtensionHost

    package init(identifier: String = "org.plugind.tests") throws {
        directory = try TemporaryDirectory()
        bundledRoot = try directory.subdirectory("bundled")
        externalRoot = try directory.subdirectory("external")
        host = AppExtensionHost(identifier: identifier, environment: ["HOME": directory.path])
        host.bundledPluginsDirectory = URL(fileURLWithPath: bundledRoot)
        host.searchPaths = [URL(fileURLWithPath: externalRoot)]
        // The owner's extension points and a stand-in for the system's, never the machine's own.
        host.extensionPointDirectories = [directory.url("data/plugind/extension-points"), directory.url("system-points")]
        host.policyDirectory = directory.url("config/plugind")
        host.administratorPolicyDirectory = directory.url("admin")
        host.stateDirectory = directory.url("state/plugind")
        // Pages for `plugind top` and plugin log entries stay in the test's directory, never in
        // the machine's runtime directory or journal (a test that wants the journal says so).
        host.runtimeDirectory = directory.url("run/plugind")
        host.pluginLog = .file
        host.workerExecutable = URL(fileURLWithPath: try BuiltProducts.worker())
        // Every deadline of the host is a backstop here, never a guess at how long a launch, an
        // answer, a cancel or an exit takes: on a 2-core machine running every suite at once, one
        // that takes milliseconds alone has taken over 20 seconds. A test of one of these
        // deadlines (a plugin that hangs is timedOut, a worker that ignores a cancel is killed)
        // sets it short itself.
        host.launchTimeout = .seconds(120)
        host.limits.requestTimeout = Self.requestBackstop
        host.shutdownGracePeriod = .seconds(60)
        host.cancellationGracePeriod = .seconds(60)
    }

    /// The default deadline of this host's requests, and the one tests give explicitly to
    /// requests that do heavy work: minutes, a backstop for a request that never ends.
    package static let requestBackstop: Duration = .seconds(300)

    /// Environment for running the `plugind` executable against this host.
    package var environment: [String: String] {
        [
            "HOME": directory.path,
            "PLUGIND_PATH": externalRoot,
            "XDG_CONFIG_HOME": directory.path + "/config",
            "XDG_STATE_HOME": directory.path + "/state",
            "XDG_DATA_HOME": directory.path + "/data",
            "PLUGIND_ADMIN_POLICY_DIR": directory.path + "/admin",
            "PLUGIND_EXTENSION_POINTS_PATH": host.extensionPointDirectories.map(\.path).joined(separator: ":"),
            "PLUGIND_RUNTIME_DIR": host.runtimeDirectory.path,
            "PLUGIND_LOG": host.pluginLog.rawValue,
            "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin",
        ]
    }

    package func remove() {
        directory.remove()
    }
}

extension TestHost {
    package struct NotInstalled: Error, CustomStringConvertible {
        package var identifier: String
        package var problems: [String]
        package var description: String { "\(identifier) is not in the catalog; problems: \(problems)" }
    }

    /// Installs `fixture` in the host's bundled root (no approval needed) or its external root.
    @discardableResult
    package func install(_ fixture: PluginFixture, bundled: Bool = true) throws -> String {
        try fixture.install(in: bundled ? bundledRoot : externalRoot)
    }

    /// The identity of an installed plugin, as a monitor would hand it out.
    package func identity(_ identifier: String) throws -> AppExtensionIdentity {
        let inventory = Inventory.take(host: host)
        guard let item = inventory.item(identifier) else {
            throw NotInstalled(identifier: identifier, problems: inventory.problems.map(\.description))
        }
        return item.identity(host: host)
    }

    /// Installs a bundled fixture and launches it.
    package func launch(
        _ fixture: PluginFixture,
        onInterruption: @escaping @Sendable () -> Void = {}
    ) async throws -> AppExtensionProcess {
        try install(fixture)
        return try await AppExtensionProcess(configuration: configuration(fixture.identifier, onInterruption: onInterruption))
    }

    package func configuration(
        _ identifier: String,
        onInterruption: @escaping @Sendable () -> Void = {}
    ) throws -> AppExtensionProcess.Configuration {
        var configuration = AppExtensionProcess.Configuration(
            appExtensionIdentity: try identity(identifier), onInterruption: onInterruption)
        configuration.host = host
        return configuration
    }
}
