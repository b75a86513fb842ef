import Glibc
import PlugindPluginABI
import PlugindWire

/// A plugin library loaded into this worker. One of the two places (with the C shims) where
/// plugind handles raw pointers from plugin code.
struct LoadedPlugin {
    let handle: UnsafeMutableRawPointer
    /// The plugin's descriptor; nil for a function-only library.
    let descriptor: UnsafePointer<plugind_plugin>?
    let functions: ForeignFunctionTable
    let name: String
    let version: String

    var abiVersion: UInt32 { descriptor?.pointee.abi_version ?? UInt32(PLUGIND_PLUGIN_ABI_VERSION) }
    var hasRequestHandler: Bool { descriptor != nil }

    /// The fields of ABI 2, read only from a descriptor of that version (an ABI 1 descriptor
    /// ends before them).
    private var version2: plugind_plugin? {
        guard let descriptor, descriptor.pointee.abi_version >= 2 else { return nil }
        return descriptor.pointee
    }

    var accept: PluginAccept? { version2?.accept }
    var close: PluginClose? { version2?.close }

    /// How many requests the plugin can handle at once: the manifest's value when it gives one,
    /// never more than the descriptor's (when that gives one), at least 1, at most `maximum`.
    func concurrency(manifest: UInt32, maximum: UInt32) -> UInt32 {
        let declared = version2?.concurrency ?? 0
        var value = manifest > 0 ? manifest : max(declared, 1)
        if declared > 0 { value = min(value, declared) }
        return min(max(value, 1), maximum)
    }
}

typealias PluginAccept =
    @convention(c) (
        UnsafeMutableRawPointer?, UnsafePointer<plugind_plugin_connection>, UnsafeMutablePointer<UnsafeMutableRawPointer?>, OpaquePointer
    ) -> Int32
typealias PluginClose =
    @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<plugind_plugin_connection>, UnsafeMutableRawPointer?) ->
    Void

enum PluginLoader {
    /// Opens the sealed copy of the library the host hashed, finds the entry point, checks the ABI
    /// version and prepares the declared functions. In the view the library is opened by its path
    /// there, a symlink to the sealed copy, so that its run paths ($ORIGIN) find the sealed
    /// copies of its dependencies; without a view, through /proc/self/fd. The worker never opens
    /// the host's file by path. Every failure is a `LoadFailure` whose message names the library
    /// and the cause (`dlerror()` verbatim for dlopen).
    /// A foreign plugin (`load.adapter`) is served by its adapter, its buffers in `dataArea`.
    static func load(_ load: LoadConfiguration, inView: Bool, dataArea: UnsafeMutableRawBufferPointer?) throws(LoadFailure) -> LoadedPlugin
    {
        let path = load.libraryPath
        let openedPath = inView || load.libraryDescriptor < 0 ? path : "/proc/self/fd/\(load.libraryDescriptor)"
        guard let handle = dlopen(openedPath, RTLD_NOW | RTLD_LOCAL) else {
            throw LoadFailure(kind: .libraryOpenFailed, message: lastDynamicLinkerError() ?? "dlopen(\(path)) failed")
        }
        if let adapter = load.adapter {
            let served = try ForeignAdapterPlugin.load(adapter, library: handle, path: path, dataArea: dataArea)
            let functions = try ForeignFunctionTable(library: handle, path: path, signatures: [])
            return LoadedPlugin(handle: handle, descriptor: served.descriptor, functions: functions, name: served.name, version: "")
        }

        var descriptor: UnsafePointer<plugind_plugin>?
        if let entry = dlsym(handle, PLUGIND_PLUGIN_ENTRY_SYMBOL) {
            typealias Entry = @convention(c) () -> UnsafePointer<plugind_plugin>?
            let entryFunction = unsafeBitCast(entry, to: Entry.self)
            guard let returned = entryFunction() else {
                throw LoadFailure(kind: .abiMismatch, message: "\(PLUGIND_PLUGIN_ENTRY_SYMBOL) in \(path) returned NULL")
            }
            try checkABI(returned, path: path)
            descriptor = returned
        } else if load.requiresEntryPoint || load.functions.isEmpty {
            throw LoadFailure(
                kind: .symbolMissing,
                message:
                    "\(path) does not export \(PLUGIND_PLUGIN_ENTRY_SYMBOL) (build it with PLUGIND_PLUGIN_EXPORT or PluginKit's @c entry point)"
            )
        }
        let functions = try ForeignFunctionTable(library: handle, path: path, signatures: load.functions)
        let name = descriptor.flatMap { $0.pointee.name.map { String(cString: $0) } } ?? ""
        let version = descriptor.flatMap { $0.pointee.version.map { String(cString: $0) } } ?? ""
        return LoadedPlugin(handle: handle, descriptor: descriptor, functions: functions, name: name, version: version)
    }

    /// The plugin ABI versions this worker loads.
    static let supportedABIVersions: ClosedRange<UInt32> = 1...UInt32(PLUGIND_PLUGIN_ABI_VERSION)

    /// Reads the descriptor field by field: one of ABI 1 is shorter than this worker's struct.
    private static func checkABI(_ plugin: UnsafePointer<plugind_plugin>, path: String) throws(LoadFailure) {
        let header = UnsafeRawPointer(plugin)
        let version = header.load(as: UInt32.self)
        let size = header.load(fromByteOffset: 4, as: UInt32.self)
        guard supportedABIVersions.contains(version) else {
            throw LoadFailure(
                kind: .abiMismatch,
                message:
                    "\(path) was built for plugin ABI \(version); this worker supports ABI \(supportedABIVersions.lowerBound) to \(supportedABIVersions.upperBound)"
            )
        }
        let needed = version == 1 ? MemoryLayout<plugind_plugin>.offset(of: \.concurrency) ?? 0 : MemoryLayout<plugind_plugin>.size
        guard size >= UInt32(needed) else {
            throw LoadFailure(
                kind: .abiMismatch,
                message: "\(path) declares a descriptor of \(size) bytes; ABI \(version) needs \(needed)"
            )
        }
        // `handle` is declared non-null in the header, but the library is not trusted to honour it.
        let handlePointer = unsafeBitCast(plugin.pointee.handle, to: UnsafeRawPointer?.self)
        guard handlePointer != nil else {
            throw LoadFailure(kind: .abiMismatch, message: "\(path) has no handle function in its descriptor")
        }
    }

    /// Loads the libraries outside the bundle that the plugin needs (paths the host resolved and
    /// checked, bound read-only in the view), while a primed worker waits for its launch: the
    /// plugin's own `dlopen` then finds them loaded by their names and loads only the plugin.
    /// They stay loaded. One that does not load is left to the plugin's load, which reports it
    /// with its cause; a system library's initializers are what the plugin's load would run.
    static func preload(_ paths: [String]) {
        for path in paths where dlopen(path, RTLD_NOW | RTLD_LOCAL) == nil {
            _ = dlerror()
        }
    }

    /// Opens and closes a small system library, so that the dynamic loader's code and the symbol
    /// tables of the libraries already loaded are mapped in this process before a plugin is:
    /// after a fork they are not, and a plugin's `dlopen` in a spare would map them on the
    /// launch's path. glibc's libutil is a compatibility stub with no code that runs at load.
    static func warmUpDynamicLoader() {
        if let handle = dlopen("libutil.so.1", RTLD_NOW | RTLD_LOCAL) { dlclose(handle) }
        _ = dlerror()
    }

    static func lastDynamicLinkerError() -> String? {
        dlerror().map { String(cString: $0) }
    }
}
