import Foundation
import Glibc
import TestSupport
import Testing

/// `plugind-worker --symbolize`, which parses a plugin's files for the host: it names what it
/// can, never blocks on what is not a regular file, and can do nothing else once it parses.
@Suite("The stack symbolizer", .tags(.process), .timeLimit(.minutes(5)))
struct StackSymbolizerTests {
    private func symbolize(_ request: String) async throws -> CommandRunner.Output {
        try await CommandRunner.run(try BuiltProducts.worker(), ["--symbolize"], environment: [:], input: Array(request.utf8))
    }

    @Test("a library with debug information: its function, the offset and the source line")
    func names() async throws {
        let library = BuiltProducts.directory + "/libFaultySegfault.so"
        let symbols = try await CommandRunner.run("/usr/bin/nm", [library], environment: [:])
        let line = try #require(symbols.stdout.split(separator: "\n").first { $0.hasSuffix(" dereference_null_for_request") })
        let address = try #require(UInt64(line.split(separator: " ")[0], radix: 16))
        // Frame 1 is a return address: named from the byte before it, its offset as given.
        let output = try await symbolize(
            "object 0 0 l \(library)\nframe 0 \(String(address, radix: 16)) 0\nframe 1 \(String(address + 20, radix: 16)) 0\n")
        #expect(output.status == 0, "\(output.stderr)")
        let lines = output.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first == "0\tdereference_null_for_request\t0\tExamplePlugins/Faulty/FaultySegfault/segfault.c\t10", "\(lines)")
        #expect(lines.dropFirst().first?.hasPrefix("1\tdereference_null_for_request\t14\t") == true, "\(lines)")
    }

    @Test("a FIFO, a device, a directory or a missing file named as an object: nothing read, no hang, the others still named")
    func notRegularFiles() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("plugind-symbolizer-\(getpid())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let fifo = directory + "/fifo"
        #expect(mkfifo(fifo, 0o600) == 0)
        let library = BuiltProducts.directory + "/libFaultySegfault.so"
        // The library placed far above the addresses of the others.
        let request =
            [fifo, "/dev/zero", directory, directory + "/missing"].enumerated()
            .map { "object \($0.offset) 0 l \($0.element)\n" }.joined() + "object 4 40000000 l \(library)\n"
            + "frame 0 1 0\nframe 1 2 1\nframe 2 3 2\nframe 3 4 3\nframe 4 40000000 4\n"
        let output = try await symbolize(request)
        #expect(output.status == 0, "\(output.stderr)")
        #expect(output.stdout.split(separator: "\n").allSatisfy { $0.hasPrefix("4\t") }, "\(output.stdout)")
    }

    @Test("a request that is not one: refused with status 2, nothing opened")
    func malformed() async throws {
        for request in [
            "object 0 zz l /lib\n", "object 0 0 x /lib\n", "frame 0 1 7\n", "object 1 0 l /lib/x86_64-linux-gnu/libc.so.6\n", "anything\n",
        ] {
            let output = try await symbolize(request)
            #expect(output.status == 2, "\(request): \(output.stdout)")
            #expect(output.stdout.isEmpty)
        }
    }
}
