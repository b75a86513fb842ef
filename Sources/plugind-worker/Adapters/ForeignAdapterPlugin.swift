import CPlugindShims
import Glibc
import PlugindPluginABI
import PlugindSystem
import PlugindWire
import Synchronization

/// Why an adapter refused a request: the message the host shows, naming the plugin and the cause.
struct ForeignAdapterFailure: Error {
    var message: String
}

/// A foreign plugin driven through its own ABI: one library, at most one instance, one request
/// at a time (both ABIs allow one thread per instance).
protocol ForeignAdapter: AnyObject {
    /// A name for messages: the library's path and, for LADSPA, the label.
    var displayName: String { get }
    func answer(_ request: ForeignPluginRequest) throws(ForeignAdapterFailure) -> [UInt8]
    /// Ends the instance and the library's global state (the worker is ending in order).
    func end()
}

/// The adapter presented to the worker as a plugin of plugind's own ABI, so that serving, limits,
/// deadlines, crash reports and shared-memory answers are the ones every plugin gets: the worker
/// loads the foreign library, then serves this descriptor, whose `handle` decodes an adapter
/// request and calls the library.
enum ForeignAdapterPlugin {
    /// What `init` takes over: the adapter made at load, before the server starts.
    private static let pending = Mutex<Box?>(nil)

    private final class Box: @unchecked Sendable {
        // Used by one request at a time (concurrency 1) on the serving threads, never at once.
        let adapter: any ForeignAdapter
        var host: UnsafePointer<plugind_host>?
        init(_ adapter: any ForeignAdapter) { self.adapter = adapter }
    }

    /// Opens the plugin `configuration` names in the loaded `library` and returns the descriptor
    /// that serves it.
    static func load(
        _ configuration: ForeignPluginAdapter, library: UnsafeMutableRawPointer, path: String, dataArea: UnsafeMutableRawBufferPointer?
    ) throws(LoadFailure) -> (descriptor: UnsafePointer<plugind_plugin>, name: String) {
        let adapter: any ForeignAdapter
        switch configuration.abi {
        case .ladspa: adapter = try LADSPAAdapter(library: library, path: path, label: configuration.plugin, dataArea: dataArea)
        case .frei0r: adapter = try Frei0rAdapter(library: library, path: path, dataArea: dataArea)
        }
        pending.withLock { $0 = Box(adapter) }
        let descriptor = UnsafeMutablePointer<plugind_plugin>.allocate(capacity: 1)
        descriptor.initialize(
            to: plugind_plugin(
                abi_version: UInt32(PLUGIND_PLUGIN_ABI_VERSION), size: UInt32(MemoryLayout<plugind_plugin>.size), name: nil,
                version: nil, init: initialize, handle: handle, deinit: finish, concurrency: 1, reserved: 0, accept: nil, close: nil))
        return (UnsafePointer(descriptor), adapter.displayName)
    }

    private static let initialize:
        @convention(c) (
            UnsafePointer<plugind_host>, UnsafeMutablePointer<UnsafeMutableRawPointer?>, OpaquePointer
        ) -> Int32 = { host, state, _ in
            guard
                let box = pending.withLock({ box in
                    defer { box = nil }
                    return box
                })
            else { return 1 }
            box.host = host
            state.pointee = Unmanaged.passRetained(box).toOpaque()
            return PLUGIND_PLUGIN_OK
        }

    private static let handle:
        @convention(c) (
            UnsafeMutableRawPointer?, UnsafePointer<plugind_plugin_request>, OpaquePointer
        ) -> Int32 = { state, request, response in
            guard let state else { return 1 }
            let box = Unmanaged<Box>.fromOpaque(state).takeUnretainedValue()
            guard let host = box.host else { return 1 }
            let bytes = Array(UnsafeBufferPointer(start: request.pointee.bytes, count: request.pointee.length))
            func fail(_ message: String) -> Int32 {
                message.withCString { host.pointee.set_error(response, $0) }
                return 1
            }
            let decoded: ForeignPluginRequest
            do {
                decoded = try ForeignPluginRequest(bytes)
            } catch {
                return fail("\(box.adapter.displayName): not an adapter request: \(error)")
            }
            do throws(ForeignAdapterFailure) {
                let answer = try box.adapter.answer(decoded)
                let status = answer.withUnsafeBufferPointer { host.pointee.append(response, $0.baseAddress, $0.count) }
                return status == 0
                    ? PLUGIND_PLUGIN_OK : fail("\(box.adapter.displayName): the answer did not fit: \(Errno(rawValue: status))")
            } catch {
                return fail("\(box.adapter.displayName): \(error.message)")
            }
        }

    private static let finish: @convention(c) (UnsafeMutableRawPointer?) -> Void = { state in
        guard let state else { return }
        Unmanaged<Box>.fromOpaque(state).takeRetainedValue().adapter.end()
    }
}

/// Text a foreign library points at: read up to `limit` bytes (a hostile library's string need
/// not end), NULL as "", invalid UTF-8 repaired.
enum ForeignText {
    static let limit = 4096

    static func read(_ pointer: UnsafePointer<CChar>?) -> String {
        guard let pointer else { return "" }
        let length = strnlen(pointer, limit)
        return pointer.withMemoryRebound(to: UInt8.self, capacity: length) {
            String(decoding: UnsafeBufferPointer(start: $0, count: length), as: UTF8.self)
        }
    }
}

/// A foreign library's entry points, which its ABI names.
enum ForeignSymbol {
    /// The symbol `name` of `library` as a function of type `T`, or nil.
    static func function<T>(_ library: UnsafeMutableRawPointer, _ name: String, as type: T.Type) -> T? {
        _ = dlerror()
        guard let address = dlsym(library, name) else { return nil }
        return unsafeBitCast(address, to: type)
    }
}

/// Lays buffers out one after another in a data area, each at `ForeignPluginAdapter`'s alignment.
struct DataAreaLayout {
    let area: UnsafeMutableRawBufferPointer
    private(set) var end: UInt64 = 0

    init(_ area: UnsafeMutableRawBufferPointer) { self.area = area }

    /// The offset of a new buffer of `bytes`, or nil when the area has no room for it.
    mutating func place(_ bytes: UInt64) -> UInt64? {
        guard let start = ForeignPluginAdapter.aligned(end) else { return nil }
        let (next, overflow) = start.addingReportingOverflow(max(bytes, 1))
        guard !overflow, next <= UInt64(area.count) else { return nil }
        end = next
        return start
    }

    func pointer(at offset: UInt64) -> UnsafeMutableRawPointer {
        area.baseAddress! + Int(offset)
    }
}
