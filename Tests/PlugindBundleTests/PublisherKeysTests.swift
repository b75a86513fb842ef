import Foundation
import PlugindBundle
import TestSupport
import Testing

/// Publishers' key files as plugind reads them: `plugind sign --key` (a private key) and
/// `plugind trust add` (a public key, or the public half of a private key).
@Suite("Publisher key files", .tags(.unit))
struct PublisherKeysTests {
    /// An Ed25519 private key encrypted with the pass phrase "x" (`openssl genpkey -algorithm
    /// ed25519 -aes256 -pass pass:x`), from the publisher-key fuzz corpus (its first byte picks
    /// the kind of file).
    static func encryptedPrivateKey() throws -> [UInt8] {
        let path = BuiltProducts.packageRoot + "/Fuzz/Corpus/publisher-key/encrypted-private-key"
        return Array(try Data(contentsOf: URL(fileURLWithPath: path)).dropFirst())
    }

    @Test("an encrypted key file is refused as encrypted, for signing and for trust, without asking for its pass phrase")
    func encrypted() throws {
        let pem = try Self.encryptedPrivateKey()
        #expect(String(decoding: pem, as: UTF8.self).hasPrefix("-----BEGIN ENCRYPTED PRIVATE KEY-----"))
        let signing = #expect(throws: PublisherKeys.Failure.self) { try PublisherKeys.privateKey(pem: pem) }
        #expect(signing?.description.hasPrefix("the key file is encrypted; plugind keys are not") == true, "\(String(describing: signing))")
        let trust = #expect(throws: PublisherKeys.Failure.self) { try PublisherKeys.PublicKey(pem: pem) }
        #expect(trust?.description.hasPrefix("the key file is encrypted") == true, "\(String(describing: trust))")
    }

    @Test("keys that are not encrypted read as before; a file that is no key says what was expected")
    func plain() throws {
        let (privatePEM, publicKey) = try PublisherKeys.generate()
        let key = try PublisherKeys.privateKey(pem: Array(privatePEM.utf8))
        #expect(try key.publicKey == publicKey)
        #expect(try PublisherKeys.PublicKey(pem: Array(privatePEM.utf8)) == publicKey)
        #expect(try PublisherKeys.PublicKey(pem: Array(try publicKey.pem.utf8)) == publicKey)
        let garbage = Array("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n".utf8)
        let signing = #expect(throws: PublisherKeys.Failure.self) { try PublisherKeys.privateKey(pem: garbage) }
        #expect(signing?.description == "not a PEM private key (-----BEGIN PRIVATE KEY-----)")
        let trust = #expect(throws: PublisherKeys.Failure.self) { try PublisherKeys.PublicKey(pem: garbage) }
        #expect(trust?.description == "not a PEM Ed25519 public key (-----BEGIN PUBLIC KEY-----)")
    }

    @Test("the strings of a signature file reach the reason it does not hold escaped: none adds a line or moves the cursor")
    func signatureStringsInert() throws {
        let key = try PublisherKeys.privateKey(pem: Array(try PublisherKeys.generate().privatePEM.utf8))
        let digest = String(repeating: "ab", count: 32)
        let expiry = "2099-12-31\nsignature valid\u{1B}[2K"
        let expiring = try BundleSignature.sign(digest: digest, with: key, expires: expiry)
        var algorithm = try BundleSignature.sign(digest: digest, with: key)
        algorithm.algorithm = "ed25519\n(signature valid)"
        for signature in [expiring, algorithm] {
            guard case .invalid(let reason, _) = signature.check(digest: digest) else {
                Issue.record("\(signature) holds")
                continue
            }
            #expect(!reason.contains("\n") && !reason.contains("\u{1B}"), "\(reason)")
            #expect(reason.contains("\\n"), "\(reason)")
        }
    }
}
