import CCrypto

/// The one-time set-up every use of libcrypto goes through.
///
/// By default libcrypto registers an `atexit` handler that frees its locks and tables. A host
/// that exits while another thread is still hashing a library (a crash record being written, a
/// discovery pass) then has that thread touch freed state: a crash at exit, or a hang under
/// AddressSanitizer. `OPENSSL_INIT_NO_ATEXIT` leaves the tables to the kernel, which reclaims
/// them with the process anyway.
enum Libcrypto {
    private static let initialized: Bool = OPENSSL_init_crypto(UInt64(OPENSSL_INIT_NO_ATEXIT), nil) == 1

    /// Runs libcrypto's initialisation (once per process) before its first use.
    static func prepare() {
        _ = initialized
    }
}
