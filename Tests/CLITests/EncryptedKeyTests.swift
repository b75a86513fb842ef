import Foundation
import Glibc
import TestSupport
import Testing

/// An encrypted key file handed to `plugind sign` or `plugind trust add` in a terminal: OpenSSL
/// asks for a pass phrase on the terminal unless it is told not to, so a script run in one would
/// wait there for ever.
@Suite("Encrypted key files in a terminal", .tags(.process), .serialized, .timeLimit(.minutes(3)))
struct EncryptedKeyTests {
    @Test("sign and trust add refuse an encrypted key at once, naming the file, and ask for no pass phrase")
    func refusedWithoutPrompt() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let corpus = BuiltProducts.packageRoot + "/Fuzz/Corpus/publisher-key/encrypted-private-key"
        let key = test.directory.path + "/publisher.pem"
        try Data(try Data(contentsOf: URL(fileURLWithPath: corpus)).dropFirst()).write(to: URL(fileURLWithPath: key))
        #expect(chmod(key, 0o600) == 0)
        let commands = [
            ["sign", test.directory.path + "/no-bundle", "--key", key],
            ["trust", "add", key],
        ]
        for command in commands {
            let script = try BrowseTests.script([try BuiltProducts.plugind()] + command, test: test)
            try await TmuxTerminal.with(directory: test.directory.path, script: script, width: 200, height: 20) { terminal in
                let screen = try await terminal.waitForScreen(containing: "exited with")
                let flat = screen.replacingOccurrences(of: "\n", with: "")
                #expect(screen.contains("exited with 1"), "\(command): \(screen)")
                #expect(flat.contains("\(key): the key file is encrypted"), "\(command): \(screen)")
                #expect(!screen.contains("pass phrase"), "\(command): \(screen)")
            }
        }
    }
}
