import Foundation
import Glibc

/// The author's loop: from a saved change of a C plugin's source to `plugind dev`'s answer from
/// the rebuilt plugin, beside what `make` alone takes for the same change (the build's share).
enum DevBenchmarks {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    private static func microseconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) * 1e6 + Double(duration.components.attoseconds) / 1e12
    }

    static func changeToAnswer(iterations: Int) throws {
        let plugind = BenchHost.productsDirectory + "/plugind"
        var template = Array("/tmp/plugind-bench-dev.XXXXXX".utf8CString)
        guard let created = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw CocoaError(.fileWriteUnknown)
        }
        let directory = String(cString: created)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let environment = [
            "HOME": directory, "XDG_CONFIG_HOME": directory + "/config", "XDG_STATE_HOME": directory + "/state",
            "XDG_DATA_HOME": directory + "/data", "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin",
            "PLUGIND_WORKER": BenchHost.productsDirectory + "/plugind-worker", "PLUGIND_PATH": directory + "/none",
        ]
        let scaffold = Process()
        scaffold.executableURL = URL(fileURLWithPath: plugind)
        scaffold.arguments = ["new", "Loop", "--lang", "c", "--dir", directory]
        scaffold.environment = environment
        scaffold.standardOutput = FileHandle.nullDevice
        try scaffold.run()
        scaffold.waitUntilExit()
        let project = directory + "/Loop"
        let source = project + "/src/Loop.c"
        let original = try String(contentsOfFile: source, encoding: .utf8)

        // The baseline: make alone, after the same kind of change.
        var builds: [Double] = []
        for index in 0..<iterations {
            try Data(original.replacingOccurrences(of: "Hello from", with: "Build \(index) from").utf8).write(
                to: URL(fileURLWithPath: source))
            let started = ContinuousClock.now
            let make = Process()
            make.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            make.arguments = ["make", "-s", "-C", project]
            make.standardOutput = FileHandle.nullDevice
            try make.run()
            make.waitUntilExit()
            builds.append(microseconds(ContinuousClock.now - started))
        }

        let dev = Process()
        dev.executableURL = URL(fileURLWithPath: plugind)
        dev.arguments = ["dev", project, "world", "--quiet"]
        dev.environment = environment
        let output = Pipe()
        dev.standardOutput = output
        dev.standardError = FileHandle.nullDevice
        try dev.run()
        defer {
            kill(dev.processIdentifier, SIGKILL)
            dev.waitUntilExit()
        }
        var pending: [UInt8] = []
        func nextLine() throws -> String {
            while true {
                if let newline = pending.firstIndex(of: 0x0A) {
                    let line = String(decoding: pending[..<newline], as: UTF8.self)
                    pending.removeSubrange(...newline)
                    return line
                }
                let data = output.fileHandleForReading.availableData
                guard !data.isEmpty else { throw Failure(description: "plugind dev ended") }
                pending += data
            }
        }
        _ = try nextLine()
        var samples: [Double] = []
        for index in 0..<iterations {
            let greeting = "Change \(index) from"
            let started = ContinuousClock.now
            try Data(original.replacingOccurrences(of: "Hello from", with: greeting).utf8).write(to: URL(fileURLWithPath: source))
            while !(try nextLine()).hasPrefix(greeting) {}
            samples.append(microseconds(ContinuousClock.now - started))
        }
        Measurement(name: "dev-change-to-answer", values: samples).report()
        Measurement(name: "dev-make-alone", values: builds).report()
    }
}
