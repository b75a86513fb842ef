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
}

enum PluginLoader {
    /// Opens the sealed copy of the library the host hashed, finds the entry point, checks the ABI
    /// version and prepares the declared functions. In the view the library is opened by its path
    /// there, a symlink to the sealed copy, so that its run paths ($ORIGIN) find the sealed
    /// copies of its dependencies; without a view, through /proc/self/fd. The worker never opens
    /// the host's file by path. Every failure is a `LoadFailure` whose message names the library
    /// and the cause (`dlerror()` verbatim for dlopen).
    static func load(_ load: LoadConfiguration, inView: Bool) throws(LoadFailure) -> LoadedPlugin {
        let path = load.libraryPath
        let openedPath = inView || load.libraryDescriptor < 0 ? path : "/proc/self/fd/\(load.libraryDescriptor)"
        guard let handle = dlopen(openedPath, RTLD_NOW | RTLD_LOCAL) else {
            throw LoadFailure(kind: .libraryOpenFailed, message: lastDynamicLinkerError() ?? "dlopen(\(path)) failed")
        }

        var descriptor: UnsafePointer<plugind_plugin>?
        if let entry = dlsym(handle, PLUGIND_PLUGIN_ENTRY_SYMBOL) {
            typealias Entry = @convention(c) () -> UnsafePointer<plugind_plugin>?
            let entryFunction = unsafeBitCast(entry, to: Entry.self)
            guard let returned = entryFunction() else {
                throw LoadFailure(kind: .abiMismatch, message: "\(PLUGIND_PLUGIN_ENTRY_SYMBOL) in \(path) returned NULL")
            }
            try checkABI(returned.pointee, path: path)
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

    private static func checkABI(_ plugin: plugind_plugin, path: String) throws(LoadFailure) {
        let expected = UInt32(PLUGIND_PLUGIN_ABI_VERSION)
        guard plugin.abi_version == expected else {
            throw LoadFailure(
                kind: .abiMismatch,
                message: "\(path) was built for plugin ABI \(plugin.abi_version); this worker supports ABI \(expected)"
            )
        }
        guard plugin.size >= UInt32(MemoryLayout<plugind_plugin>.size) else {
            throw LoadFailure(
                kind: .abiMismatch,
                message: "\(path) declares a descriptor of \(plugin.size) bytes; ABI \(expected) needs \(MemoryLayout<plugind_plugin>.size)"
            )
        }
        // `handle` is declared non-null in the header, but the library is not trusted to honour it.
        let handlePointer = unsafeBitCast(plugin.handle, to: UnsafeRawPointer?.self)
        guard handlePointer != nil else {
            throw LoadFailure(kind: .abiMismatch, message: "\(path) has no handle function in its descriptor")
        }
    }

    /// Opens and closes a small system library, so that the dynamic loader's code and the symbol
    /// tables of the libraries already loaded are mapped in this process before a plugin is:
    /// after a fork they are not (measured: a plugin's dlopen in a spare 0.13 ms without, 0.04 ms
    /// with). glibc's libutil is a compatibility stub with no code that runs at load.
    static func warmUpDynamicLoader() {
        if let handle = dlopen("libutil.so.1", RTLD_NOW | RTLD_LOCAL) { dlclose(handle) }
        _ = dlerror()
    }

    static func lastDynamicLinkerError() -> String? {
        dlerror().map { String(cString: $0) }
    }
}
