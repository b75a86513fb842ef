import Glibc
import PlugindPluginABI
import PlugindWire

/// What the worker says to a person who runs it directly.
enum WorkerUsage {
    static let version = "\(PlugindRelease.version) (protocol \(ProtocolVersion.current), plugin ABI \(PLUGIND_PLUGIN_ABI_VERSION))"

    static let help = """
        OVERVIEW: The plugind worker process: loads one plugin and serves its host.

        The host library (ExtensionFoundation) starts this program with the protocol on
        descriptors 3 and 4, stdin from /dev/null and stdout/stderr captured. It is not meant to
        be run by hand; use 'plugind run ID' to run a plugin from a shell.

        USAGE: plugind-worker
               plugind-worker --symbolize   (names a stack report's frames for the host:
                                             request on stdin, one line per frame on stdout)

        OPTIONS:
          -h, --help              Show this help.
          --version               Show the worker, protocol and plugin ABI versions.
        """

    static func fail(_ message: String) -> Never {
        let text = "error: \(message)\nUsage: plugind-worker (started by the plugind host library)\n"
        _ = text.withCString { write(2, $0, strlen($0)) }
        exit(64)
    }
}
