import ExtensionFoundation
import Foundation
import PlugindEngine
import TestSupport
import Testing

/// The machine's OpenSSL libcrypto through the confined worker (ExamplePlugins/Digest, by
/// soname): algorithms fetched by name and digest contexts kept as handles, input in pieces, the
/// digest written into a buffer whose length the library sets. Every digest is compared with
/// Python's hashlib on the same bytes.
@Suite("Typed calls into libcrypto (EVP digests)", .tags(.process), .serialized, .timeLimit(.minutes(5)))
struct TypedCallDigestTests {
    static func launch(in test: TestHost) async throws -> AppExtensionProcess {
        let bundle = test.bundledRoot + "/digest.appex"
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        try FileManager.default.copyItem(
            atPath: BuiltProducts.packageRoot + "/ExamplePlugins/Digest/manifest.json", toPath: bundle + "/manifest.json")
        return try await AppExtensionProcess(configuration: try test.configuration("org.plugind.examples.digest"))
    }

    /// hashlib's digest of each input, for each algorithm (hex, one a line, in order).
    static func hashlib(_ algorithms: [String], _ inputs: [[UInt8]]) async throws -> [String] {
        var framed: [UInt8] = []
        for input in inputs {
            withUnsafeBytes(of: UInt32(input.count).littleEndian) { framed += $0 }
            framed += input
        }
        let names = algorithms.map { "'\($0)'" }.joined(separator: ", ")
        let program = """
            import hashlib, struct, sys
            data = sys.stdin.buffer.read(); offset = 0
            while offset < len(data):
                (n,) = struct.unpack_from('<I', data, offset); piece = data[offset + 4:offset + 4 + n]; offset += 4 + n
                for name in [\(names)]:
                    print(hashlib.new(name, piece).hexdigest())
            """
        let output = try await TypedCallBufferTests.python(program, input: framed)
        return String(decoding: output, as: UTF8.self).split(separator: "\n").map(String.init)
    }

    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    @Test("SHA-2, SHA-3 and BLAKE2 of 0 B to 1 MiB, in pieces and in one call, equal hashlib's; an unknown algorithm is the NULL handle")
    func digests() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let process = try await Self.launch(in: test)
        let connection = try await process.makeConnection()
        guard case .string(let version) = try await connection.call("OpenSSL_version", arguments: [.int32(0)]) else {
            throw TestFailure("OpenSSL_version")
        }
        #expect(version.hasPrefix("OpenSSL 3"))
        // OpenSSL's names, and hashlib's for the same algorithms.
        let algorithms = [("SHA256", "sha256"), ("SHA512", "sha512"), ("SHA3-256", "sha3_256"), ("BLAKE2B-512", "blake2b")]
        var generator = SystemRandomNumberGenerator()
        let inputs = [0, 1, 1000, 65_539, 1 << 20].map { size in (0..<size).map { _ in UInt8.random(in: 0...255, using: &generator) } }
        let expected = try await Self.hashlib(algorithms.map(\.1), inputs)
        var confined: [String] = []
        var oneShot: [String] = []
        var handles: [FunctionValue] = []
        for (name, _) in algorithms {
            let md = try await connection.call("EVP_MD_fetch", arguments: [.string(name)])
            guard case .handle(let handle) = md, !handle.isNull else { throw TestFailure("EVP_MD_fetch(\(name)): \(md)") }
            handles.append(md)
        }
        for input in inputs {
            for md in handles {
                let ctx = try await connection.call("EVP_MD_CTX_new")
                #expect(try await connection.call("EVP_DigestInit_ex", arguments: [ctx, md]) == .int32(1))
                for start in stride(from: 0, to: input.count, by: 100_000) {
                    let piece = Array(input[start..<min(start + 100_000, input.count)])
                    #expect(try await connection.call("EVP_DigestUpdate", arguments: [ctx, .bytes(piece)]) == .int32(1))
                }
                let final = try await connection.callWithOutputs("EVP_DigestFinal_ex", arguments: [ctx, .uint32(64)])
                #expect(final.value == .int32(1))
                guard case .bytes(let digest)? = final[output: "md"], case .uint32(let length)? = final[output: "s"] else {
                    throw TestFailure("EVP_DigestFinal_ex: \(final)")
                }
                #expect(digest.count == Int(length))
                #expect(try await connection.call("EVP_MD_get_size", arguments: [md]) == .int32(Int32(length)))
                confined.append(Self.hex(digest))
                _ = try await connection.call("EVP_MD_CTX_free", arguments: [ctx])

                let whole = try await connection.callWithOutputs("EVP_Digest", arguments: [.bytes(input), .uint32(64), md])
                guard case .bytes(let again)? = whole[output: "md"] else { throw TestFailure("EVP_Digest: \(whole)") }
                oneShot.append(Self.hex(again))
            }
        }
        #expect(confined == expected)
        #expect(oneShot == expected)
        // An algorithm OpenSSL does not have: NULL, which is the NULL handle, not an error.
        guard case .handle(let unknown) = try await connection.call("EVP_MD_fetch", arguments: [.string("NO-SUCH-DIGEST")]) else {
            throw TestFailure("EVP_MD_fetch of an unknown name")
        }
        #expect(unknown.isNull)
        await process.invalidateAndWait()
    }
}
