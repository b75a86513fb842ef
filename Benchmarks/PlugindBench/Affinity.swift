import Foundation

/// Pins process `pid`, every thread of it, to one CPU (taskset(1), from util-linux; without `-a`
/// only the first thread moves, and a worker's request threads stayed where they were).
func pin(process pid: Int32, to cpu: Int) {
    let taskset = Process()
    taskset.executableURL = URL(fileURLWithPath: "/usr/bin/taskset")
    taskset.arguments = ["-a", "-p", "-c", String(cpu), String(pid)]
    taskset.standardOutput = FileHandle.nullDevice
    try? taskset.run()
    taskset.waitUntilExit()
}
