import Glibc

/// An error number reported by the system, named after the failing call by `SystemError`.
package struct Errno: RawRepresentable, Error, Hashable, Sendable, CustomStringConvertible {
    package var rawValue: CInt

    package init(rawValue: CInt) {
        self.rawValue = rawValue
    }

    /// The calling thread's current `errno`.
    package static var current: Errno {
        Errno(rawValue: errno)
    }

    package static let interrupted = Errno(rawValue: EINTR)
    package static let wouldBlock = Errno(rawValue: EAGAIN)
    package static let brokenPipe = Errno(rawValue: EPIPE)
    package static let noSuchProcess = Errno(rawValue: ESRCH)
    package static let noSuchFileOrDirectory = Errno(rawValue: ENOENT)
    package static let permissionDenied = Errno(rawValue: EACCES)
    package static let operationNotPermitted = Errno(rawValue: EPERM)
    package static let badFileDescriptor = Errno(rawValue: EBADF)
    package static let invalidArgument = Errno(rawValue: EINVAL)
    package static let protocolError = Errno(rawValue: EPROTO)

    /// The message `strerror_r` gives, e.g. "No such file or directory".
    package var description: String {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: 256) { buffer in
            // Swift sees the XSI strerror_r, which fills `buffer` and returns 0.
            guard let base = buffer.baseAddress, strerror_r(rawValue, base, buffer.count) == 0 else {
                return "errno \(rawValue)"
            }
            return String(cString: base)
        }
    }
}

/// A failed system call: which call and why.
package struct SystemError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The name of the call that failed, e.g. "pipe2".
    package var function: String
    package var errno: Errno

    package init(_ function: String, _ errno: Errno) {
        self.function = function
        self.errno = errno
    }

    package var description: String {
        "\(function): \(errno)"
    }
}

/// Runs `body` until it returns something other than -1 with EINTR; the one place plugind retries
/// interrupted calls. Throws `SystemError` named `function` for any other failure. Not generic:
/// called from every module, a generic function runs unspecialized there, looking up `Int`'s
/// conformances on every system call (and caching them in a page that each worker writes).
@discardableResult
package func retryingInterrupts(_ function: String, _ body: () -> Int) throws(SystemError) -> Int {
    while true {
        let result = body()
        if result != -1 { return result }
        let error = Errno.current
        if error != .interrupted { throw SystemError(function, error) }
    }
}

/// `retryingInterrupts` for a call that returns a C `int`.
@discardableResult
package func retryingInterrupts(_ function: String, _ body: () -> CInt) throws(SystemError) -> CInt {
    CInt(truncatingIfNeeded: try retryingInterrupts(function) { Int(body()) })
}

/// Converts a shim result (0 or an errno value) into a thrown `SystemError`.
package func checkShim(_ function: String, _ result: CInt) throws(SystemError) {
    if result != 0 { throw SystemError(function, Errno(rawValue: result)) }
}

/// Runs `body`, whose only possible error is a `SystemError` but whose closure-taking callee
/// (`withUnsafeBytes` and friends) erases the type, and restores the type.
package func keepingSystemError<Result>(_ body: () throws -> Result) throws(SystemError) -> Result {
    do {
        return try body()
    } catch let error as SystemError {
        throw error
    } catch {
        preconditionFailure("only SystemError can be thrown here, got \(error)")
    }
}
