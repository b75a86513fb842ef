import Foundation

/// Pins process `pid` to one CPU (taskset(1), from util-linux).
func pin(process pid: Int32, to cpu: Int) {
    let taskset = Process()
    taskset.executableURL = URL(fileURLWithPath: "/usr/bin/taskset")
    taskset.arguments = ["-p", "-c", String(cpu), String(pid)]
    taskset.standardOutput = FileHandle.nullDevice
    try? taskset.run()
    taskset.waitUntilExit()
}
