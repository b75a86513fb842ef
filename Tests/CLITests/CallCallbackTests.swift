import Foundation
import TestSupport
import Testing

/// `plugind call --callback NAME=COMMAND` (ExamplePlugins/Qsort): libc's qsort sorting with a
/// comparator answered by a program of the user's, checked against Swift's own sort; the
/// handler program ended with the call whatever happens; and every way a handler can go wrong
/// failing the call by name.
@Suite("plugind call: callbacks answered by a program", .tags(.process), .serialized, .timeLimit(.minutes(5)))
struct CallCallbackTests {
    static func qsort(in test: TestHost) async throws -> String {
        let path = BuiltProducts.packageRoot + "/ExamplePlugins/Qsort/manifest.json"
        let manifest = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any])
        return try await CallOutputsTests.approved(manifest, in: test)
    }

    /// A comparator of two little-endian int64s that records its pid and how many calls it
    /// answered, so the test can tell it ran and that it is gone.
    static func comparator(in test: TestHost) throws -> String {
        let script = test.directory.path + "/compare.py"
        let record = test.directory.path + "/compare.record"
        try Data(
            """
            import json, os, sys
            calls = 0
            for line in sys.stdin:
                request = json.loads(line)
                assert request["callback"] == "compar", request
                a, b = (int.from_bytes(bytes.fromhex(x), "little", signed=True) for x in request["arguments"])
                print((a > b) - (a < b), flush=True)
                calls += 1
            with open(\(String(reflecting: record)), "w") as out:
                out.write(f"{os.getpid()} {calls}")

            """.utf8
        ).write(to: URL(fileURLWithPath: script))
        return script
    }

    static func hex(_ values: [Int64]) -> String {
        values.map { value in
            (0..<8).map { String(format: "%02x", UInt8(truncatingIfNeeded: UInt64(bitPattern: value) >> ($0 * 8))) }.joined()
        }.joined()
    }

    @Test("qsort of 500 random int64s with a Python comparator sorts as Swift does; the comparator has exited when plugind does")
    func sortsWithAProgram() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let qsort = try await Self.qsort(in: test)
        let script = try Self.comparator(in: test)
        var generator = SystemRandomNumberGenerator()
        var values = (0..<500).map { _ in Int64.random(in: .min ... .max, using: &generator) }
        values += [.min, .max, 0, -1, 1, .min, .max]  // the extremes, and equal elements
        let input = test.directory.path + "/values"
        try Data(Self.hex(values).utf8).write(to: URL(fileURLWithPath: input))
        // A few thousand comparisons, each a round trip and a line to Python and back: seconds
        // alone, more beside the other suites; the deadline is a backstop, not a measure.
        let sorted = try await plugind(
            "call", qsort, "qsort", Self.hex(values), "8", "--callback", "compar=exec python3 \(script)", "--timeout", "600", in: test)
        #expect(sorted.status == 0, "\(sorted.stderr)")
        let inOrder = sorted.stdout == "base: \(Self.hex(values.sorted()))\n"
        #expect(inOrder, "not Swift's order: \(sorted.stdout.prefix(200))…")

        // The record is written when the comparator's input ends: plugind ended it and waited.
        let record = try String(contentsOfFile: test.directory.path + "/compare.record", encoding: .utf8).split(separator: " ")
        let pid = try #require(record.first.flatMap { Int32($0) })
        let calls = try #require(record.last.flatMap { Int($0) })
        #expect(calls >= values.count - 1, "qsort compared \(calls) times")
        #expect(kill(pid, 0) == -1 && errno == ESRCH, "the comparator \(pid) is still there")

        let json = try await plugind(
            "call", qsort, "qsort", Self.hex([3, -2, 1]), "8", "--callback", "compar=exec python3 \(script)", "--json", in: test)
        let document = try #require(try JSONSerialization.jsonObject(with: Data(json.standardOutput)) as? [String: Any])
        let outputs = try #require(document["outputs"] as? [String: Any], "\(json.stderr)")
        #expect(outputs["base"] as? String == Self.hex([-2, 1, 3]))
    }

    @Test(
        "a callback without a handler, a handler for no callback, and NAME=COMMAND written wrong are usage errors before any worker starts")
    func refusals() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let qsort = try await Self.qsort(in: test)
        let missing = try await plugind("call", qsort, "qsort", Self.hex([2, 1]), "8", in: test)
        #expect(missing.status == 64)
        #expect(missing.stderr.contains("qsort calls back 'compar': give its handler with --callback compar=COMMAND"), "\(missing.stderr)")
        let unknown = try await plugind(
            "call", qsort, "qsort", Self.hex([2, 1]), "8", "--callback", "compar=true", "--callback", "other=true", in: test)
        #expect(unknown.status == 64)
        #expect(unknown.stderr.contains("qsort has no callback 'other'; its callbacks: compar"), "\(unknown.stderr)")
        let none = try await plugind("call", qsort, "llabs", "-5", "--callback", "compar=true", in: test)
        #expect(none.status == 64)
        #expect(none.stderr.contains("llabs has no callback 'compar' (it takes none)"), "\(none.stderr)")
        let malformed = try await plugind("call", qsort, "qsort", Self.hex([2, 1]), "8", "--callback", "compar", in: test)
        #expect(malformed.status == 64)
        #expect(malformed.stderr.contains("--callback takes NAME=COMMAND"), "\(malformed.stderr)")
    }

    @Test(
        "a handler that exits, answers with the wrong type, floods its output or hangs fails the call naming the callback; one that outlives its input is killed"
    )
    func handlerFailures() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let qsort = try await Self.qsort(in: test)
        let cases: [(command: String, extra: [String], status: Int32, message: String)] = [
            ("exit 0", [], 1, "the handler of callback 'compar' exited without answering"),
            (
                "while read line; do echo maybe; done", [], 1,
                "the handler of callback 'compar' answered 'maybe': expected an integer (int32)"
            ),
            ("while read line; do echo 4294967296; done", [], 1, "4294967296 is out of range for int32"),
            ("yes 1 | tr -d '\\n'", [], 1, "wrote over 4096 bytes without ending an answer line"),
            // Never answers: the call's deadline ends it, and the handler is killed with it.
            ("exec sleep 600", ["--timeout", "2"], 75, "org.plugind.examples.qsort: request did not finish within 2 s"),
            // Answers, then ignores the end of its input: killed after the grace, with a warning.
            (
                "trap '' TERM; while read line; do echo 0; done; exec sleep 600", [], 0,
                "did not exit within 10.0 seconds of its input ending; killed"
            ),
        ]
        for (command, extra, status, message) in cases {
            let failed = try await plugind(
                ["call", qsort, "qsort", Self.hex([2, 1, 3]), "8", "--callback", "compar=" + command] + extra, in: test)
            #expect(failed.status == status, "\(command): \(failed.stderr)")
            #expect(failed.stderr.contains(message), "\(command): \(failed.stderr)")
        }
    }
}
