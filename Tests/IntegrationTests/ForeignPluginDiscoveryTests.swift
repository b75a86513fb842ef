import ExtensionFoundation
import Foundation
import Glibc
import PlugindEngine
import PlugindTypes
import TestSupport
import Testing

/// Discovery of the machine's LADSPA and frei0r plugins: every library described by a confined
/// scanning worker, checked against the reference hosts' own listing; libraries that crash, hang
/// or are not libraries reported by name while the rest are listed; the cache reused while the
/// bytes stay and a changed file described again.
@Suite("Discovery of LADSPA and frei0r plugins", .tags(.process), .serialized, .timeLimit(.minutes(10)))
struct ForeignPluginDiscoveryTests {
    static let system = [
        ForeignPluginDirectory(abi: .ladspa, path: ForeignPluginTests.ladspaDirectory),
        ForeignPluginDirectory(abi: .frei0r, path: ForeignPluginTests.frei0rDirectory),
    ]

    @Test("Every installed plugin is listed under its identity, as many as the reference host counts; warm, nothing is scanned")
    func everyInstalledPlugin() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let reference = try await ForeignPluginTests.reference("ladspa_reference", in: test.directory.path)
        var expected: Set<String> = []
        for library in ForeignPluginLibrary.enumerate([Self.system[0]]) {
            let listed = try await ForeignPluginTests.run(reference, ["--list", library.path])
            for line in listed.stdout.split(separator: "\n") {
                expected.insert(ForeignPluginIdentity.of(library, label: String(line.split(separator: "\t")[2])))
            }
        }
        for library in ForeignPluginLibrary.enumerate([Self.system[1]]) { expected.insert(ForeignPluginIdentity.of(library, label: nil)) }

        let first = try await ForeignPluginDiscovery.refresh(host: test.host, directories: Self.system)
        #expect(first.failures.isEmpty, "\(first.failures)")
        #expect(Set(first.plugins.map(\.identifier)) == expected)
        #expect(first.plugins.contains { $0.identifier == "ladspa.amp.amp-mono" && $0.name == "Mono Amplifier" })
        #expect(first.plugins.contains { $0.identifier == "ladspa.cmt.delay-0-01s" })
        #expect(first.plugins.contains { $0.identifier == "frei0r.invert0r" })
        #expect(first.scanned == ForeignPluginLibrary.enumerate(Self.system).count)

        let warm = try await ForeignPluginDiscovery.refresh(host: test.host, directories: Self.system)
        #expect(warm.scanned == 0)
        #expect(warm.reused == first.scanned)
        #expect(warm.plugins == first.plugins)

        // The catalog lists them through their bundles; nothing runs before it is approved.
        await #expect(throws: AppExtensionError.self) {
            _ = try await AppExtensionProcess(configuration: try test.configuration("ladspa.amp.amp-mono"))
        }
        // An administrator's rule approves a whole library: its plugins run, the others do not.
        let rules = #"{"formatVersion": 1, "rules": [{"name": "sdk-amp", "effect": "allow", "identifier": "ladspa.amp.*"}]}"#
        try FileManager.default.createDirectory(at: test.host.administratorPolicyDirectory, withIntermediateDirectories: true)
        try Data(rules.utf8).write(to: test.host.administratorPolicyDirectory.appendingPathComponent("rules.json"))
        let process = try await AppExtensionProcess(configuration: try test.configuration("ladspa.amp.amp-stereo"))
        let effect = try await AudioEffect(process: process, sampleRate: 44_100, maximumFrames: 16)
        #expect(effect.label == "amp_stereo")
        try effect.setControl(0, to: 0.5)
        try effect.withSamples(port: 1) { $0.update(repeating: 0.5) }
        try effect.withSamples(port: 3) { $0.update(repeating: -1) }
        try await effect.run(frames: 16)
        #expect(try effect.withSamples(port: 2) { Array($0) } == [Float](repeating: 0.25, count: 16))
        #expect(try effect.withSamples(port: 4) { Array($0) } == [Float](repeating: -0.5, count: 16))
        await process.invalidateAndWait()
        await #expect(throws: AppExtensionError.self) {
            _ = try await AppExtensionProcess(configuration: try test.configuration("ladspa.cmt.amp-mono"))
        }
    }

    static let crashingSource = """
        #include <stddef.h>
        const void *ladspa_descriptor(unsigned long index) { volatile int *volatile p = NULL; *p = (int)index; return NULL; }
        """
    static let hangingSource = """
        const void *ladspa_descriptor(unsigned long index) { volatile unsigned long n = index; for (;;) n++; return 0; }
        """

    @Test("A library that crashes, hangs or is no library while being described is named; the others are listed")
    func hostileLibraries() async throws {
        var test = try TestHost()
        defer { test.remove() }
        test.host.cancellationGracePeriod = .milliseconds(200)
        let directory = test.directory.path + "/ladspa"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try await CCompiler.sharedLibrary(Self.crashingSource, output: directory + "/crashes.so")
        try await CCompiler.sharedLibrary(Self.hangingSource, output: directory + "/hangs.so")
        try Data("not a library".utf8).write(to: URL(fileURLWithPath: directory + "/text.so"))
        _ = try FileManager.default.copyItem(atPath: ForeignPluginTests.ladspaDirectory + "/amp.so", toPath: directory + "/amp.so")
        let directories = [ForeignPluginDirectory(abi: .ladspa, path: directory)]
        let report = try await ForeignPluginDiscovery.refresh(host: test.host, directories: directories, scanTimeout: .seconds(3))
        let failed = Dictionary(
            uniqueKeysWithValues: report.failures.map { ($0.library.split(separator: "/").last.map(String.init) ?? "", $0.reason) })
        guard getuid() == 0 else {
            // The user's own files are not a package's: refused, each by name.
            #expect(Set(failed.keys) == ["crashes.so", "hangs.so", "text.so", "amp.so"])
            #expect(failed["amp.so"]?.contains("owned by") == true, "\(failed)")
            #expect(report.plugins.isEmpty)
            return
        }
        #expect(Set(failed.keys) == ["crashes.so", "hangs.so", "text.so"], "\(report.failures)")
        #expect(failed["crashes.so"]?.contains("crash") == true || failed["crashes.so"]?.contains("SIGSEGV") == true, "\(failed)")
        #expect(failed["hangs.so"]?.contains("timed out") == true || failed["hangs.so"]?.contains("within") == true, "\(failed)")
        #expect(report.plugins.map(\.identifier).sorted() == ["ladspa.amp.amp-mono", "ladspa.amp.amp-stereo"])

        // Same bytes, new identity: reused. New bytes: described again.
        let amp = directory + "/amp.so"
        #expect(utimes(amp, nil) == 0)
        let touched = try await ForeignPluginDiscovery.refresh(host: test.host, directories: directories, scanTimeout: .seconds(3))
        #expect(touched.plugins.count == 2)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: amp))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data([0]))
        try handle.close()
        let changed = try await ForeignPluginDiscovery.refresh(host: test.host, directories: directories, scanTimeout: .seconds(3))
        #expect(changed.plugins.count == 2)
        #expect(changed.scanned >= 1, "the changed library is described again")
        // The crashing and hanging ones are remembered (their bytes did not change): not run again.
        #expect(touched.scanned == 0, "touched: \(touched.scanned) scanned")
    }

    @Test("A host scans through the public API: the plugins it lists are identities of the catalog")
    func hostScan() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let environment = ["LADSPA_PATH": ForeignPluginTests.ladspaDirectory, "FREI0R_PATH": ForeignPluginTests.frei0rDirectory]
        let scan = try await test.host.scanForeignPlugins(environment: environment)
        #expect(scan.failures.isEmpty, "\(scan.failures)")
        let amp = try #require(scan.plugins.first { $0.identifier == "ladspa.amp.amp-mono" })
        #expect(amp.abi == "ladspa" && amp.library == "/usr/lib/ladspa/amp.so" && amp.name == "Mono Amplifier")
        #expect(amp.summary.contains("Gain (0…, default 1, logarithmic)"), "\(amp.summary)")
        let identity = try test.identity("frei0r.invert0r")
        #expect(identity.extensionPointIdentifier == "org.plugind.frei0r")
        let again = try await test.host.scanForeignPlugins(environment: environment)
        #expect(again.scanned == 0 && again.reused == scan.scanned + scan.reused)
    }
}
