import Foundation
import PlugindBundle

/// The body of the publisher-key fuzz target, shared with the test that replays its corpus: what
/// a publisher hands an owner, read without running anything. The first byte picks the file, the
/// rest is its contents. Even: a key file for `plugind trust add FILE` (PEM). Odd: a bundle's
/// `plugind-signature.json`, checked against a digest the second byte picks (the one it names, or
/// another). Any input must be read or refused without trapping; a key read is an Ed25519 key of
/// 32 bytes named by its fingerprint; a signature holds only for the digest it names, and only
/// when its key verifies it.
package enum PublisherKeyFuzzing {
    package struct InvariantViolation: Error, CustomStringConvertible {
        package var description: String
    }

    package static func run(_ input: [UInt8]) throws {
        guard let kind = input.first else { return }
        let contents = Array(input.dropFirst())
        if kind % 2 == 0 {
            guard let key = try? PublisherKeys.PublicKey(pem: contents) else { return }
            try checkKey(key)
        } else {
            guard contents.count <= BundleSignature.maximumBytes,
                let signature = try? JSONDecoder().decode(BundleSignature.self, from: Data(contents))
            else { return }
            let digest = kind & 2 == 0 ? signature.bundleDigest : signature.bundleDigest + "0"
            let status = signature.check(digest: digest)
            _ = status.description
            if case .valid(let key) = status {
                try checkKey(key)
                guard digest == signature.bundleDigest, signature.format == 1, signature.algorithm == "ed25519",
                    Data(base64Encoded: signature.publicKey).map({ [UInt8]($0) }) == key.raw
                else {
                    throw InvariantViolation(description: "a signature holds for \(digest) that it does not sign: \(signature)")
                }
            }
        }
    }

    private static func checkKey(_ key: PublisherKeys.PublicKey) throws {
        let hex = key.fingerprint.dropFirst("ed25519:".count)
        guard key.raw.count == 32, key.fingerprint.hasPrefix("ed25519:"), hex.count == 32,
            hex.allSatisfy({ $0.isHexDigit && !$0.isUppercase })
        else {
            throw InvariantViolation(description: "a key read as \(key.raw.count) bytes named \(key.fingerprint)")
        }
        guard !key.verifies([UInt8](repeating: 0, count: 64), of: Array("plugind".utf8)) else {
            throw InvariantViolation(description: "\(key.fingerprint) verifies a signature of zeros")
        }
    }
}
