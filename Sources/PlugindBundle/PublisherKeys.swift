import CCrypto
import FoundationEssentials
import Glibc
import PlugindSystem

/// Ed25519 keys of plugin publishers, through OpenSSL's libcrypto. A private key file is a PEM
/// PKCS#8 "PRIVATE KEY" (the format `openssl genpkey -algorithm ed25519` writes); a public key
/// file is a PEM "PUBLIC KEY".
package enum PublisherKeys {
    package struct Failure: Error, CustomStringConvertible {
        package var description: String
        init(_ description: String) { self.description = description }
    }

    /// A private key, loaded for signing.
    package final class PrivateKey {
        fileprivate let key: OpaquePointer

        fileprivate init(_ key: OpaquePointer) { self.key = key }

        deinit { EVP_PKEY_free(key) }

        /// The public half.
        package var publicKey: PublicKey {
            get throws(Failure) { try PublicKey(raw: rawPublicKey(of: key)) }
        }

        /// The Ed25519 signature of `message`.
        package func sign(_ message: [UInt8]) throws(Failure) -> [UInt8] {
            guard let context = EVP_MD_CTX_new() else { throw Failure("cannot create a signing context") }
            defer { EVP_MD_CTX_free(context) }
            guard EVP_DigestSignInit(context, nil, nil, nil, key) == 1 else { throw Failure("the key cannot sign (is it an Ed25519 key?)") }
            var signature = [UInt8](repeating: 0, count: 64)
            var length = signature.count
            guard EVP_DigestSign(context, &signature, &length, message, message.count) == 1 else { throw Failure("signing failed") }
            return Array(signature.prefix(length))
        }
    }

    /// A publisher's public key: 32 raw bytes, named by a fingerprint.
    package struct PublicKey: Sendable, Hashable {
        package let raw: [UInt8]

        package init(raw: [UInt8]) throws(Failure) {
            guard raw.count == 32 else { throw Failure("an Ed25519 public key has 32 bytes, this one \(raw.count)") }
            self.raw = raw
        }

        /// "ed25519:" and the first 16 bytes of the key's SHA-256, in hex: what owners compare.
        package var fingerprint: String {
            "ed25519:" + SHA256Digest.hex(of: Data(raw)).prefix(32)
        }

        /// Whether `signature` is this key's signature of `message`.
        package func verifies(_ signature: [UInt8], of message: [UInt8]) -> Bool {
            Libcrypto.prepare()
            guard let key = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nil, raw, raw.count) else { return false }
            defer { EVP_PKEY_free(key) }
            guard let context = EVP_MD_CTX_new() else { return false }
            defer { EVP_MD_CTX_free(context) }
            guard EVP_DigestVerifyInit(context, nil, nil, nil, key) == 1 else { return false }
            return EVP_DigestVerify(context, signature, signature.count, message, message.count) == 1
        }

        /// The PEM "PUBLIC KEY" text of the key.
        package var pem: String {
            get throws(Failure) {
                Libcrypto.prepare()
                guard let key = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nil, raw, raw.count) else {
                    throw Failure("not an Ed25519 public key")
                }
                defer { EVP_PKEY_free(key) }
                return try writePEM { bio in PEM_write_bio_PUBKEY(bio, key) }
            }
        }

        /// Reads a PEM "PUBLIC KEY" (or the public half of a PEM "PRIVATE KEY"). An encrypted
        /// file is refused, not decrypted: plugind's keys are not encrypted.
        package init(pem: [UInt8]) throws(Failure) {
            var key: OpaquePointer?
            var encrypted = false
            for read in [readPublicKey, readPrivateKey] where key == nil {
                switch readPEM(pem, read) {
                case .key(let found): key = found
                case .encrypted: encrypted = true
                case .unreadable: break
                }
            }
            guard let key else {
                throw Failure(
                    encrypted
                        ? "the key file is encrypted, and a publisher's public key is not: trust the public key the publisher hands out (the <file>.pub 'plugind keygen' writes)"
                        : "not a PEM Ed25519 public key (-----BEGIN PUBLIC KEY-----)")
            }
            defer { EVP_PKEY_free(key) }
            try self.init(raw: try rawPublicKey(of: key))
        }
    }

    /// A new key pair: the private key's PEM and the public key.
    package static func generate() throws(Failure) -> (privatePEM: String, publicKey: PublicKey) {
        Libcrypto.prepare()
        guard let context = EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, nil) else { throw Failure("Ed25519 is not available in this libcrypto") }
        defer { EVP_PKEY_CTX_free(context) }
        var key: OpaquePointer?
        guard EVP_PKEY_keygen_init(context) == 1, EVP_PKEY_keygen(context, &key) == 1, let key else {
            throw Failure("cannot generate an Ed25519 key")
        }
        defer { EVP_PKEY_free(key) }
        let pem = try writePEM { bio in PEM_write_bio_PrivateKey(bio, key, nil, nil, 0, nil, nil) }
        return (pem, try PublicKey(raw: try rawPublicKey(of: key)))
    }

    /// Reads a PEM PKCS#8 Ed25519 private key.
    package static func privateKey(pem: [UInt8]) throws(Failure) -> PrivateKey {
        let key: OpaquePointer
        switch readPEM(pem, readPrivateKey) {
        case .key(let read): key = read
        case .encrypted:
            throw Failure(
                "the key file is encrypted; plugind keys are not (write it decrypted, mode 0600, with 'openssl pkey -in <file> -out <new file>', or make one with 'plugind keygen')"
            )
        case .unreadable: throw Failure("not a PEM private key (-----BEGIN PRIVATE KEY-----)")
        }
        guard EVP_PKEY_get_id(key) == EVP_PKEY_ED25519 else {
            EVP_PKEY_free(key)
            throw Failure("not an Ed25519 key; make one with 'plugind keygen'")
        }
        return PrivateKey(key)
    }
}

private func rawPublicKey(of key: OpaquePointer) throws(PublisherKeys.Failure) -> [UInt8] {
    var raw = [UInt8](repeating: 0, count: 32)
    var length = raw.count
    guard EVP_PKEY_get_id(key) == EVP_PKEY_ED25519, EVP_PKEY_get_raw_public_key(key, &raw, &length) == 1, length == 32 else {
        throw PublisherKeys.Failure("not an Ed25519 key")
    }
    return raw
}

/// What a PEM read made of a file: a key, a key behind a pass phrase, or nothing it reads.
private enum PEMRead {
    case key(OpaquePointer)
    case encrypted
    case unreadable
}

/// Reads a key from `pem` with `read`, handing it the pass-phrase callback. Without a callback,
/// OpenSSL asks for the pass phrase of an encrypted file on the terminal and waits for it: a
/// script or a host would hang on a file another person handed over.
private func readPEM(
    _ pem: [UInt8], _ read: (_ bio: OpaquePointer, _ passPhraseAsked: UnsafeMutableRawPointer) -> OpaquePointer?
) -> PEMRead {
    Libcrypto.prepare()
    guard pem.count < 1 << 16, let bio = pem.withUnsafeBytes({ BIO_new_mem_buf($0.baseAddress, Int32($0.count)) }) else {
        return .unreadable
    }
    defer { BIO_free(bio) }
    var asked = false
    let key = withUnsafeMutableBytes(of: &asked) { flag in flag.baseAddress.flatMap { read(bio, $0) } }
    if let key { return .key(key) }
    return asked ? .encrypted : .unreadable
}

/// The pass-phrase callback of every PEM read: refuses (so that nothing is decrypted, and no
/// key derivation a file asks for runs) and records, in the Bool `asked` points at, that the
/// file wanted one.
private func refusePassPhrase(
    _ buffer: UnsafeMutablePointer<CChar>?, _ size: Int32, _ writing: Int32, _ asked: UnsafeMutableRawPointer?
) -> Int32 {
    asked?.storeBytes(of: true, as: Bool.self)
    return -1
}

private func readPublicKey(_ bio: OpaquePointer, _ passPhraseAsked: UnsafeMutableRawPointer) -> OpaquePointer? {
    PEM_read_bio_PUBKEY(bio, nil, refusePassPhrase, passPhraseAsked)
}

private func readPrivateKey(_ bio: OpaquePointer, _ passPhraseAsked: UnsafeMutableRawPointer) -> OpaquePointer? {
    PEM_read_bio_PrivateKey(bio, nil, refusePassPhrase, passPhraseAsked)
}

private func writePEM(_ write: (OpaquePointer) -> Int32) throws(PublisherKeys.Failure) -> String {
    guard let bio = BIO_new(BIO_s_mem()) else { throw PublisherKeys.Failure("cannot allocate") }
    defer { BIO_free(bio) }
    guard write(bio) == 1 else { throw PublisherKeys.Failure("cannot write the key") }
    var bytes = [UInt8](repeating: 0, count: Int(BIO_ctrl_pending(bio)))
    let count = BIO_read(bio, &bytes, Int32(bytes.count))
    return String(decoding: bytes.prefix(Int(max(count, 0))), as: UTF8.self)
}
