import CPlugindSymbolizer
import Glibc

// plugind-worker: loads one plugin in its own process and serves the host over descriptors 3
// (host → worker) and 4 (worker → host). Started by the host library, never by hand.
let arguments = CommandLine.arguments.dropFirst()
if arguments.contains("--help") || arguments.contains("-h") {
    print(WorkerUsage.help)
    exit(0)
}
if arguments.contains("--version") {
    print("plugind-worker \(WorkerUsage.version)")
    exit(0)
}
if arguments.first == "--launcher" && arguments.count == 1 {
    exit(Launcher.run())
}
if arguments.first == "--symbolize" && arguments.count == 1 {
    // Names the frames of a stack report for the host (see CPlugindSymbolizer).
    exit(plugind_symbolizer_run(0, 1))
}
if !arguments.isEmpty {
    WorkerUsage.fail("unexpected argument '\(arguments.first ?? "")'")
}
// Started directly (not forked by the launcher), the worker has no namespaces, so no view; its
// host may turn confinement off, so it restricts nothing before the hello. It loads what compiles
// its seccomp filters now, before limits and a new identity apply (a failure is reported then).
Confinement.loadFilterCompiler()
exit(WorkerMain.run(prepared: Confinement.prepare(hasNamespaces: false, hasNetworkNamespace: false, restrictingAhead: false)))
