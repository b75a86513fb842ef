import CCrypto
package import FoundationEssentials
import Glibc
import PlugindSystem

/// SHA-256 through OpenSSL's libcrypto.
package enum SHA256Digest {
    /// Lower-case hexadecimal digest of `data`.
    package static func hex(of data: Data) -> String {
        Libcrypto.prepare()
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        data.withUnsafeBytes { bytes in
            _ = EVP_Digest(bytes.baseAddress, bytes.count, &digest, &length, EVP_sha256(), nil)
        }
        return hexString(digest.prefix(Int(length)))
    }

    /// Digest of the file at `path`, read in 1 MiB pieces.
    package static func hex(ofFileAtPath path: String) throws -> String {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw SystemError("open \(path)", Errno.current) }
        defer { close(descriptor) }
        return try hex(ofDescriptor: descriptor)
    }

    /// Digest of everything `descriptor` reads from its current offset to its end.
    package static func hex(ofDescriptor descriptor: CInt) throws -> String {
        var stream = SHA256Stream()
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else {
                throw SystemError("read", Errno.current)
            }
            if count == 0 { break }
            buffer.withUnsafeBytes { stream.update(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
        }
        return stream.finish()
    }

    static func hexString(_ bytes: some Sequence<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}

/// SHA-256 of bytes that arrive in pieces (libcrypto's EVP interface).
package struct SHA256Stream: ~Copyable {
    private let context: OpaquePointer?

    package init() {
        Libcrypto.prepare()
        context = EVP_MD_CTX_new()
        EVP_DigestInit_ex(context, EVP_sha256(), nil)
    }

    deinit {
        EVP_MD_CTX_free(context)
    }

    package mutating func update(_ bytes: UnsafeRawBufferPointer) {
        _ = EVP_DigestUpdate(context, bytes.baseAddress, bytes.count)
    }

    /// The lower-case hexadecimal digest of everything given.
    package consuming func finish() -> String {
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        EVP_DigestFinal_ex(context, &digest, &length)
        return SHA256Digest.hexString(digest.prefix(Int(length)))
    }
}
