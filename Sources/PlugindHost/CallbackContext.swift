/// A C function pointer and its context, called from plugind's threads. The header makes the
/// host responsible for what the callback touches from another thread, so the pair crosses
/// concurrency domains as it is.
struct CallbackContext: @unchecked Sendable {
    let context: UnsafeMutableRawPointer?
}
