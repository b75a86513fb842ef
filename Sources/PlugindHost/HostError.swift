public import CPlugindHostAPI
import ExtensionFoundation
import Glibc
import PlugindEngine

/// A `plugind_error`: its code, its message and a plugin's own code.
final class HostError: Error, Sendable {
    let code: plugind_error_code
    let message: OwnedCString
    let pluginCode: Int32
    /// The error's stack frames, one line each.
    let frames: [OwnedCString]

    init(code: plugind_error_code, message: String, pluginCode: Int32 = 0, frames: [String] = []) {
        self.code = code
        self.message = OwnedCString(message)
        self.pluginCode = pluginCode
        self.frames = frames.map(OwnedCString.init)
    }

    /// Misuse of the C API: a NULL or released handle, an index out of range, text not UTF-8.
    static func invalidArgument(_ message: String) -> HostError {
        HostError(code: PLUGIND_ERROR_INVALID_ARGUMENT, message: message)
    }

    /// Any error of the host API, with its code.
    convenience init(_ error: any Error) {
        if let error = error as? AppExtensionPoint.Error {
            self.init(code: PLUGIND_ERROR_CONFIGURATION_ERROR, message: error.description)
            return
        }
        guard let error = error as? AppExtensionError else {
            self.init(code: PLUGIND_ERROR_PLUGIN_ERROR, message: String(describing: error))
            return
        }
        self.init(
            code: Self.codes[error.code] ?? PLUGIND_ERROR_PLUGIN_ERROR, message: error.description,
            pluginCode: error.pluginErrorCode ?? 0, frames: error.backtrace.map(\.description))
    }

    private static let codes: [AppExtensionError.Code: plugind_error_code] = [
        .workerNotFound: PLUGIND_ERROR_WORKER_NOT_FOUND, .spawnFailed: PLUGIND_ERROR_SPAWN_FAILED,
        .incompatibleProtocol: PLUGIND_ERROR_INCOMPATIBLE_PROTOCOL, .pluginLoadFailed: PLUGIND_ERROR_PLUGIN_LOAD_FAILED,
        .symbolMissing: PLUGIND_ERROR_SYMBOL_MISSING, .abiMismatch: PLUGIND_ERROR_ABI_MISMATCH,
        .confinementUnavailable: PLUGIND_ERROR_CONFINEMENT_UNAVAILABLE, .workerCrashed: PLUGIND_ERROR_WORKER_CRASHED,
        .workerExited: PLUGIND_ERROR_WORKER_EXITED, .limitExceeded: PLUGIND_ERROR_LIMIT_EXCEEDED,
        .timedOut: PLUGIND_ERROR_TIMED_OUT, .cancelled: PLUGIND_ERROR_CANCELLED,
        .protocolViolation: PLUGIND_ERROR_PROTOCOL_VIOLATION, .pluginError: PLUGIND_ERROR_PLUGIN_ERROR,
        .notFound: PLUGIND_ERROR_NOT_FOUND, .notApproved: PLUGIND_ERROR_NOT_APPROVED, .quarantined: PLUGIND_ERROR_QUARANTINED,
        .unknownFunction: PLUGIND_ERROR_UNKNOWN_FUNCTION, .invalidArguments: PLUGIND_ERROR_INVALID_ARGUMENTS,
        .unsupported: PLUGIND_ERROR_UNSUPPORTED, .invalidated: PLUGIND_ERROR_INVALIDATED,
        .configurationError: PLUGIND_ERROR_CONFIGURATION_ERROR, .bundleChanged: PLUGIND_ERROR_BUNDLE_CHANGED,
        .connectionRefused: PLUGIND_ERROR_CONNECTION_REFUSED, .connectionClosed: PLUGIND_ERROR_CONNECTION_CLOSED,
        .disabledByOwner: PLUGIND_ERROR_DISABLED_BY_OWNER, .workerKilled: PLUGIND_ERROR_WORKER_KILLED,
        .callbackFailed: PLUGIND_ERROR_CALLBACK_FAILED,
    ]

    /// Stores `self` in `*slot` as a new handle when the caller asked for errors.
    func report(to slot: UnsafeMutablePointer<OpaquePointer?>?) {
        slot?.pointee = HandleRegistry.shared.insert(self)
    }
}

@_cdecl("plugind_error_code_of")
public func plugindErrorCodeOf(_ error: OpaquePointer?) -> plugind_error_code {
    HandleRegistry.shared.object(error, as: HostError.self)?.code ?? PLUGIND_ERROR_INVALID_ARGUMENT
}

private let invalidErrorMessage = OwnedCString("not a plugind error (NULL, or already freed)")

@_cdecl("plugind_error_message")
public func plugindErrorMessage(_ error: OpaquePointer?) -> UnsafePointer<CChar>? {
    (HandleRegistry.shared.object(error, as: HostError.self)?.message ?? invalidErrorMessage).constPointer
}

@_cdecl("plugind_error_plugin_code")
public func plugindErrorPluginCode(_ error: OpaquePointer?) -> Int32 {
    HandleRegistry.shared.object(error, as: HostError.self)?.pluginCode ?? 0
}

@_cdecl("plugind_error_frame_count")
public func plugindErrorFrameCount(_ error: OpaquePointer?) -> Int {
    HandleRegistry.shared.object(error, as: HostError.self)?.frames.count ?? 0
}

@_cdecl("plugind_error_frame")
public func plugindErrorFrame(_ error: OpaquePointer?, _ index: Int) -> UnsafePointer<CChar>? {
    guard let frames = HandleRegistry.shared.object(error, as: HostError.self)?.frames, frames.indices.contains(index) else { return nil }
    return frames[index].constPointer
}

@_cdecl("plugind_error_free")
public func plugindErrorFree(_ error: OpaquePointer?) {
    _ = HandleRegistry.shared.remove(error, as: HostError.self)
}

@_cdecl("plugind_bytes_free")
public func plugindBytesFree(_ bytes: UnsafeMutableRawPointer?) {
    free(bytes)
}
