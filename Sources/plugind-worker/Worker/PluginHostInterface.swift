import Glibc
import PlugindPluginABI
import PlugindWire
import PlugindWorkerCore

/// The `plugind_host` table a plugin receives in `init`: C callbacks that route plugin output
/// to the host through the worker's transport. Allocated once; lives as long as the process, and
/// so does the server it reaches: a plugin's threads may call back until the process ends, after
/// serving ended too (with the server released there, a thread still logging wrote into freed
/// memory and the shared ring unmapped under it: SIGSEGV as the worker exited).
/// Part of the worker's loader: it converts raw pointers from plugin code.
enum PluginHostInterface {
    static func make(for session: PluginServer) -> UnsafeMutablePointer<plugind_host> {
        let table = UnsafeMutablePointer<plugind_host>.allocate(capacity: 1)
        table.initialize(
            to: plugind_host(
                abi_version: UInt32(PLUGIND_PLUGIN_ABI_VERSION),
                size: UInt32(MemoryLayout<plugind_host>.size),
                // Retained for good (see above); the process's end frees it.
                context: Unmanaged.passRetained(session).toOpaque(),
                log: { context, level, message in
                    guard let session = PluginServer.from(context) else { return }
                    let text = String(cString: message)
                    session.sendLog(PluginLogLevel(rawValue: UInt8(clamping: level.rawValue)) ?? .error, text)
                },
                post_message: { context, requestID, bytes, length in
                    guard let session = PluginServer.from(context) else { return EINVAL }
                    return session.sendEvent(
                        requestID: requestID, bytes: UnsafeRawBufferPointer(start: bytes, count: bytes == nil ? 0 : length))
                },
                report_progress: { context, requestID, completed, total in
                    guard let session = PluginServer.from(context) else { return EINVAL }
                    return session.sendProgress(requestID: requestID, completed: completed, total: total)
                },
                is_cancelled: { context, requestID in
                    PluginServer.from(context)?.isCancelled(requestID) ?? true
                },
                append: { response, bytes, length in
                    ResponseBuffer.from(response).append(bytes, length)
                },
                reserve: { response, length in
                    ResponseBuffer.from(response).reserve(length)?.assumingMemoryBound(to: UInt8.self)
                },
                set_error: { response, message in
                    ResponseBuffer.from(response).setError(String(cString: message))
                },
                ask: { context, connection, bytes, length, timeout, answer in
                    guard let session = PluginServer.from(context) else { return EINVAL }
                    let request = UnsafeRawBufferPointer(start: bytes, count: bytes == nil ? 0 : length)
                    answer.pointee = plugind_plugin_answer(bytes: nil, length: 0, code: 0, message: nil)
                    switch session.ask(connection: connection, bytes: request, timeoutMilliseconds: timeout) {
                    case .answered(let reply):
                        // malloc'd, so that release_answer frees it whatever thread calls it.
                        guard let copy = malloc(max(reply.count, 1)) else { return ENOMEM }
                        reply.withUnsafeBytes { copy.copyMemory(from: $0.baseAddress ?? UnsafeRawPointer(copy), byteCount: reply.count) }
                        answer.pointee.bytes = UnsafePointer(copy.assumingMemoryBound(to: UInt8.self))
                        answer.pointee.length = reply.count
                        return 0
                    case .failed(let error, let code, let message):
                        answer.pointee.code = code
                        answer.pointee.message = message.flatMap { UnsafePointer(strdup($0)) }
                        return error
                    }
                },
                release_answer: { _, answer in
                    free(UnsafeMutableRawPointer(mutating: answer.pointee.bytes))
                    free(UnsafeMutableRawPointer(mutating: answer.pointee.message))
                    answer.pointee = plugind_plugin_answer(bytes: nil, length: 0, code: 0, message: nil)
                }
            )
        )
        return table
    }
}
