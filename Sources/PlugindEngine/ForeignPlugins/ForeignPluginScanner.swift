import FoundationEssentials
package import PlugindBundle
import PlugindSystem
import PlugindTypes
package import PlugindWire

/// Describes a foreign plugin library in a worker of its own, confined as any plugin is and with
/// no permissions: the library's code (`ladspa_descriptor`, `f0r_init`, a probe instance for
/// frei0r's initial parameter values) never runs in the host. Nothing is approved for this: the
/// worker holds nothing of the owner's and ends after one answer.
package enum ForeignPluginScanner {
    /// The library at `canonicalPath` (`status` as discovery found it) described, or why not,
    /// naming the cause: a load failure, a crash, no answer within `timeout`.
    package static func describe(
        _ library: ForeignPluginLibrary, canonicalPath: String, status: FileStatus, host: AppExtensionHost, timeout: Duration
    ) async -> Result<ForeignLibraryDescription, ForeignPluginScanFailure> {
        guard let directory = FileStatus(path: host.stateDirectory.path) ?? FileStatus(path: "/") else {
            return .failure(ForeignPluginScanFailure(message: "cannot examine \(host.stateDirectory.path)"))
        }
        var manifest = Manifest(
            identifier: "org.plugind.scan." + ForeignPluginIdentity.component(library.stem), name: library.stem, version: "1",
            extensionPoint: ForeignPluginIdentity.extensionPoint(library.abi), library: canonicalPath)
        manifest.adapter = ForeignPluginDeclaration(abi: library.abi, plugin: "", buffers: 1)
        let bundle = InspectedBundle(
            manifest: manifest, warnings: [], bundlePath: scanBundlePath, manifestPath: scanBundlePath + "/" + Manifest.fileName,
            libraryPath: canonicalPath, libraryStatus: status, manifestStatus: directory, bundleStatus: directory,
            usesSystemLibrary: true, contents: BundleContents(entries: [], directory: directory))
        var plan = LaunchPlan(
            entry: CatalogEntry(bundle: bundle, root: SearchRoot(path: scanBundlePath, isBundledWithHost: false)), host: host,
            permissions: Manifest.Permissions())
        plan.load.adapter = ForeignPluginAdapter(abi: library.abi, plugin: "", dataBytes: 0)
        let launched: WorkerLauncher.Launched
        do {
            launched = try await WorkerLauncher.launch(plan, in: .current)
        } catch {
            return .failure(ForeignPluginScanFailure(message: "could not be loaded: \(reason(error))"))
        }
        let channel = launched.channel
        let answer: Result<[UInt8], ForeignPluginScanFailure>
        do {
            let connection = try await channel.openConnection(handler: nil, timeout: timeout)
            answer = .success(try await channel.request(ForeignPluginRequest.describe.encoded, connection: connection, timeout: timeout))
        } catch {
            answer = .failure(ForeignPluginScanFailure(message: "failed while being described: \(reason(error))"))
        }
        // Ended before the answer is read: the worker served its one request. One that did not
        // answer (hung, or still busy past the deadline) is killed now, not after a grace.
        channel.invalidate(grace: (try? answer.get()) != nil ? plan.shutdownGracePeriod : .zero)
        _ = await channel.termination()
        return answer.flatMap { bytes in
            do {
                return .success(try ForeignLibraryDescription(bytes))
            } catch {
                return .failure(ForeignPluginScanFailure(message: "described itself in bytes that do not decode: \(error)"))
            }
        }
    }

    /// Where the scanned library's bundle appears in the worker's view: a directory of no files.
    static let scanBundlePath = "/.plugind/scan"

    private static func reason(_ error: any Error) -> String {
        (error as? AppExtensionError)?.reason ?? "\(error)"
    }
}

/// Why a library could not be described.
package struct ForeignPluginScanFailure: Error, Sendable, Hashable {
    package var message: String

    package init(message: String) { self.message = message }
}
