import PlugindSystem
import PlugindWire
import TestSupport
import Testing

@testable import ExtensionFoundation
@testable import PlugindEngine

/// What a launch that failed before `ready` tells the host, for each reason the worker can give.
@Suite("A launch's failure, as the worker reported it", .tags(.unit))
struct WorkerTerminationTests {
    func launchError(_ failure: LoadFailure) -> AppExtensionError {
        WorkerTermination(
            exit: ProcessExit(reason: .exited(status: 1)), fatalReport: nil, stopCause: nil, loadFailure: failure, output: "",
            wasInvalidated: false
        ).launchError(plugin: "org.example.p", limits: ResourceLimits())
    }

    @Test("a bundle removed or replaced while its worker started is bundleChanged, not the machine's confinement")
    func bundleGone() {
        // The chaos soak found an uninstall racing a launch reported as confinementUnavailable.
        let error = launchError(LoadFailure(kind: .bundleChanged, message: "its bundle was removed or replaced while its worker started"))
        #expect(error.code == .bundleChanged)
        #expect(error.description.contains("org.example.p") && error.description.contains("removed or replaced"))
    }

    @Test("a confinement layer that cannot be applied is confinementUnavailable")
    func confinement() {
        #expect(
            launchError(LoadFailure(kind: .confinementFailed, message: "cannot build the plugin's view")).code == .confinementUnavailable)
    }
}
