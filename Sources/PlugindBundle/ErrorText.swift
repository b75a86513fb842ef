import FoundationEssentials
import Glibc
import PlugindSystem

/// What an error from Foundation's file calls says to a person, in the modules linked into hosts,
/// which do without the rest of Foundation (and its internationalisation data): the path and the
/// system's reason, as `strerror` words it.
package enum ErrorText {
    package static func describe(_ error: any Error) -> String {
        if let error = error as? CocoaError {
            let underlying = error.userInfo["NSUnderlyingError"] as? POSIXError
            let reason = underlying.map { systemReason($0.code.rawValue) } ?? "file operation failed (error \(error.code.rawValue))"
            if let path = error.userInfo["NSFilePath"] as? String { return "\(path): \(reason)" }
            return reason
        }
        if let error = error as? POSIXError { return systemReason(error.code.rawValue) }
        return String(describing: error)
    }

    private static func systemReason(_ errno: Int32) -> String {
        String(cString: strerror(errno))
    }
}
