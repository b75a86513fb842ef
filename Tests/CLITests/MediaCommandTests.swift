import Foundation
import TestSupport
import Testing

/// `plugind scan`, `plugind audio apply` and `plugind video apply` on the plugins Debian ships:
/// LADSPA's amplifiers checked by arithmetic and by ladspa-sdk's own `applyplugin`, frei0r's
/// invert0r and addition by arithmetic; refusals before anything runs.
@Suite("plugind scan, audio apply, video apply", .tags(.process), .serialized, .timeLimit(.minutes(10)))
struct MediaCommandTests {
    static let environment = ["LADSPA_PATH": "/usr/lib/ladspa", "FREI0R_PATH": "/usr/lib/frei0r-1"]

    static func run(_ arguments: String..., in test: TestHost) async throws -> CommandRunner.Output {
        try await plugind(arguments, in: test, environment: environment)
    }

    /// A 16-bit PCM WAV (Python's wave module) of `channels` channels: libsndfile reads sample s
    /// as s / 32768 exactly.
    static func writeWAV(_ path: String, channels: Int, frames: Int) async throws -> [Int16] {
        let samples = (0..<frames * channels).map { Int16(truncatingIfNeeded: ($0 &* 7919) % 60000 - 30000) }
        let program = """
            import sys, wave
            w = wave.open(sys.argv[1], 'wb'); w.setnchannels(\(channels)); w.setsampwidth(2); w.setframerate(44100)
            w.writeframes(sys.stdin.buffer.read()); w.close()
            """
        let bytes = samples.withUnsafeBytes { Array($0) }
        let result = try await CommandRunner.run(
            "/usr/bin/env", ["python3", "-c", program, path], environment: ProcessInfo.processInfo.environment, input: bytes)
        guard result.status == 0 else { throw CLIFailure(message: result.stderr) }
        return samples
    }

    /// The float samples of a WAV of 32-bit floats (its data chunk), and its channel count.
    static func readFloatWAV(_ path: String) throws -> (channels: Int, samples: [Float]) {
        let data = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        func word(_ at: Int) -> UInt32 { data[at..<at + 4].reversed().reduce(0) { $0 << 8 | UInt32($1) } }
        var offset = 12
        var channels = 0
        while offset + 8 <= data.count {
            let id = String(decoding: data[offset..<offset + 4], as: UTF8.self)
            let size = Int(word(offset + 4))
            if id == "fmt " {
                #expect(data[offset + 8] == 3, "format tag 3: IEEE float")
                channels = Int(data[offset + 10])
            }
            if id == "data" {
                let body = Array(data[offset + 8..<min(offset + 8 + size, data.count)])
                return (channels, body.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) })
            }
            offset += 8 + size + (size & 1)
        }
        throw CLIFailure(message: "\(path) has no data chunk")
    }

    @Test(
        "scan lists the installed plugins; audio apply runs a file through LADSPA amplifiers, per channel or per file; refusals name the limit"
    )
    func audio() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let scan = try await Self.run("scan", "--json", in: test)
        #expect(scan.status == 0, "\(scan.stderr)")
        let document = try #require(try JSONSerialization.jsonObject(with: Data(scan.standardOutput)) as? [String: Any])
        let plugins = try #require(document["plugins"] as? [[String: Any]]).compactMap { $0["identifier"] as? String }
        #expect(plugins.contains("ladspa.amp.amp-mono") && plugins.contains("frei0r.invert0r"))
        // A whole library at once: every plugin the pattern matches, each reviewed and pinned.
        let approved = try await Self.run("approve", "ladspa.amp.*", "--yes", in: test)
        #expect(approved.status == 0, "\(approved.stderr)")
        #expect(approved.stderr.contains("Approved ladspa.amp.amp-mono.") && approved.stderr.contains("Approved ladspa.amp.amp-stereo."))
        let unmatched = try await Self.run("approve", "ladspa.no-such-library.*", "--yes", in: test)
        #expect(unmatched.status == 69)
        #expect(unmatched.stderr.contains("no installed plugin matches"), "\(unmatched.stderr)")
        // A later scan of the same packages rewrites nothing: the approvals hold.
        let rescan = try await Self.run("scan", "--json", in: test)
        #expect(rescan.status == 0, "\(rescan.stderr)")
        let listed = try await Self.run("list", "--json", in: test)
        let entries = try #require(try JSONSerialization.jsonObject(with: Data(listed.standardOutput)) as? [String: Any])["plugins"]
        let states = (entries as? [[String: Any]] ?? []).filter { ($0["identifier"] as? String)?.hasPrefix("ladspa.amp.") == true }
        #expect(states.count == 2 && states.allSatisfy { $0["state"] as? String == "available" }, "\(states)")
        let directory = test.directory.path
        let stereo = try await Self.writeWAV(directory + "/stereo.wav", channels: 2, frames: 5000)
        // A plugin of one input: each channel through an instance of its own.
        let perChannel = try await Self.run(
            "audio", "apply", "ladspa.amp.amp-mono", directory + "/stereo.wav", directory + "/half.wav", "--control", "Gain=0.5",
            "--block", "300", in: test)
        #expect(perChannel.status == 0, "\(perChannel.stderr)")
        let half = try Self.readFloatWAV(directory + "/half.wav")
        #expect(half.channels == 2)
        #expect(half.samples == stereo.map { Float($0) / 32768 * 0.5 })
        // As many channels as inputs: one instance; a control named by index.
        let doubled = try await Self.run(
            "audio", "apply", "ladspa.amp.amp-stereo", directory + "/stereo.wav", directory + "/double.wav", "--control", "0=2",
            in: test)
        #expect(doubled.status == 0, "\(doubled.stderr)")
        #expect(try Self.readFloatWAV(directory + "/double.wav").samples == stereo.map { Float($0) / 32768 * 2 })

        // ladspa-sdk's applyplugin, in-process, writes 16-bit PCM: within one step of it.
        let mono = try await Self.writeWAV(directory + "/mono.wav", channels: 1, frames: 4000)
        let ours = try await Self.run(
            "audio", "apply", "ladspa.amp.amp-mono", directory + "/mono.wav", directory + "/ours.wav", "--control", "Gain=0.5", in: test)
        #expect(ours.status == 0, "\(ours.stderr)")
        let reference = try await CommandRunner.run(
            "/usr/bin/applyplugin", [directory + "/mono.wav", directory + "/reference.wav", "amp.so", "amp_mono", "0.5"],
            environment: ProcessInfo.processInfo.environment.merging(Self.environment) { $1 })
        #expect(reference.status == 0, "\(reference.stderr)")
        let pcm = [UInt8](try Data(contentsOf: URL(fileURLWithPath: directory + "/reference.wav"))).dropFirst(44)
        let referenceSamples = stride(from: pcm.startIndex, to: pcm.endIndex - 1, by: 2).map {
            Float(Int16(bitPattern: UInt16(pcm[$0]) | UInt16(pcm[$0 + 1]) << 8)) / 32768
        }
        let confined = try Self.readFloatWAV(directory + "/ours.wav").samples
        #expect(confined.count == mono.count && referenceSamples.count == mono.count)
        #expect(zip(confined, referenceSamples).allSatisfy { abs($0 - $1) <= 1.0 / 32768 })

        // Refused before anything runs, naming the limit; nothing written.
        let channels = try await Self.run(
            "audio", "apply", "ladspa.amp.amp-stereo", directory + "/mono.wav", directory + "/x.wav", in: test)
        #expect(channels.status == 64)
        #expect(channels.stderr.contains("2 audio inputs") && channels.stderr.contains("1 channel"), "\(channels.stderr)")
        let range = try await Self.run(
            "audio", "apply", "ladspa.amp.amp-mono", directory + "/mono.wav", directory + "/x.wav", "--control", "Gain=-1", in: test)
        #expect(range.status != 0)
        #expect(range.stderr.contains("Gain") && range.stderr.contains("outside"), "\(range.stderr)")
        let unknown = try await Self.run(
            "audio", "apply", "ladspa.amp.amp-mono", directory + "/mono.wav", directory + "/x.wav", "--control", "Volume=1", in: test)
        #expect(unknown.status == 64)
        #expect(unknown.stderr.contains("'Volume'") && unknown.stderr.contains("Gain"), "\(unknown.stderr)")
        #expect(!FileManager.default.fileExists(atPath: directory + "/x.wav"))
    }

    @Test("video apply: invert0r and addition by arithmetic; sizes and inputs refused before anything runs")
    func video() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let scan = try await Self.run("scan", in: test)
        #expect(scan.status == 0, "\(scan.stderr)")
        for identifier in ["frei0r.invert0r", "frei0r.addition"] {
            let approved = try await Self.run("approve", identifier, "--yes", in: test)
            #expect(approved.status == 0, "\(approved.stderr)")
        }
        let directory = test.directory.path
        let frame = 64 * 48 * 4
        let first = (0..<frame * 2).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        let second = (0..<frame).map { UInt8(truncatingIfNeeded: $0 &* 17) }
        try Data(first).write(to: URL(fileURLWithPath: directory + "/a.raw"))
        try Data(second).write(to: URL(fileURLWithPath: directory + "/b.raw"))
        let inverted = try await Self.run(
            "video", "apply", "frei0r.invert0r", directory + "/a.raw", directory + "/inverted.raw", "--size", "64x48", in: test)
        #expect(inverted.status == 0, "\(inverted.stderr)")
        let output = [UInt8](try Data(contentsOf: URL(fileURLWithPath: directory + "/inverted.raw")))
        #expect(output == first.enumerated().map { $0.offset % 4 == 3 ? $0.element : 255 - $0.element })

        // A mixer of two: the second input's one frame repeats for both frames of the first.
        let added = try await Self.run(
            "video", "apply", "frei0r.addition", directory + "/a.raw", directory + "/added.raw", "--size", "64x48", "--second-input",
            directory + "/b.raw", in: test)
        #expect(added.status == 0, "\(added.stderr)")
        let sum = [UInt8](try Data(contentsOf: URL(fileURLWithPath: directory + "/added.raw")))
        let expected = first.enumerated().map { index, value -> UInt8 in
            let other = second[index % frame]
            return index % 4 == 3 ? min(value, other) : UInt8(min(Int(value) + Int(other), 255))
        }
        #expect(sum == expected)

        let size = try await Self.run(
            "video", "apply", "frei0r.invert0r", directory + "/a.raw", directory + "/x.raw", "--size", "60x48", in: test)
        #expect(size.status == 64)
        #expect(size.stderr.contains("multiples of 8"), "\(size.stderr)")
        let partial = try await Self.run(
            "video", "apply", "frei0r.invert0r", directory + "/b.raw", directory + "/x.raw", "--size", "64x64", in: test)
        #expect(partial.status == 64)
        #expect(partial.stderr.contains("not whole frames"), "\(partial.stderr)")
        let inputs = try await Self.run(
            "video", "apply", "frei0r.addition", directory + "/a.raw", directory + "/x.raw", "--size", "64x48", in: test)
        #expect(inputs.status == 64)
        #expect(inputs.stderr.contains("takes 2 inputs"), "\(inputs.stderr)")
        #expect(!FileManager.default.fileExists(atPath: directory + "/x.raw"))
    }

    @Test("verify checks a foreign plugin's bundle: the library's trust and the ABI's entry points, naming what is missing")
    func verifyForeignBundles() async throws {
        let test = try TestHost()
        defer { test.remove() }
        func bundle(_ name: String, library: String, adapter: [String: Any]) throws -> String {
            let path = try test.directory.subdirectory("work") + "/\(name).appex"
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            let manifest: [String: Any] = [
                "manifestVersion": 1, "identifier": "ladspa.tests.\(name)", "name": name, "version": "1",
                "extensionPoint": "org.plugind.ladspa", "library": library, "adapter": adapter,
            ]
            try JSONSerialization.data(withJSONObject: manifest).write(to: URL(fileURLWithPath: path + "/manifest.json"))
            return path
        }
        let good = try bundle("amp", library: "/usr/lib/ladspa/amp.so", adapter: ["abi": "ladspa", "plugin": "amp_mono", "buffers": 3])
        let passed = try await plugind("verify", good, in: test)
        #expect(passed.status == 0, "\(passed.stdout) \(passed.stderr)")
        let wrongABI = try bundle(
            "invert", library: "/usr/lib/frei0r-1/invert0r.so", adapter: ["abi": "ladspa", "plugin": "x", "buffers": 2])
        let failed = try await plugind("verify", wrongABI, in: test)
        #expect(failed.status == 1)
        #expect(failed.stdout.contains("does not export ladspa_descriptor"), "\(failed.stdout)")
        let mine = try test.directory.subdirectory("mine") + "/copy.so"
        try FileManager.default.copyItem(atPath: "/usr/lib/ladspa/amp.so", toPath: mine)
        let untrusted = try bundle("mine", library: mine, adapter: ["abi": "ladspa", "plugin": "amp_mono", "buffers": 3])
        let refused = try await plugind("verify", untrusted, in: test)
        if getuid() != 0 {
            #expect(refused.status == 1)
            #expect(refused.stdout.contains("is refused"), "\(refused.stdout)")
        }
    }
}
