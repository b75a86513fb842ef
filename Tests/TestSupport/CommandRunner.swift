import Foundation
import Glibc

/// Runs an executable with pipes for stdin, stdout and stderr, as argument-parser's
/// AssertExecuteCommand does, and returns what it printed and how it exited.
package enum CommandRunner {
    package struct Output: Sendable {
        package var status: Int32
        package var standardOutput: [UInt8]
        package var standardError: [UInt8]

        package var stdout: String { String(decoding: standardOutput, as: UTF8.self) }
        package var stderr: String { String(decoding: standardError, as: UTF8.self) }
    }

    package static func run(
        _ executable: String,
        _ arguments: [String],
        environment: [String: String],
        input: [UInt8] = [],
        currentDirectory: String? = nil
    ) async throws -> Output {
        // A child that exits without reading its input must not kill the test with SIGPIPE.
        signal(SIGPIPE, SIG_IGN)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = environment
        if let currentDirectory { process.currentDirectoryURL = URL(fileURLWithPath: currentDirectory) }
        let stdin = Pipe()
        let stdout = Pipe()
        let stderr = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = stderr
        let exited = AsyncStream<Int32>.makeStream()
        process.terminationHandler = { process in
            exited.continuation.yield(process.terminationStatus)
            exited.continuation.finish()
        }
        try process.run()
        // A test's deadline cancels this task: the child must not outlive it (a hung host would
        // hold the run past its limit). Until the termination handler reaps it, the pid is ours.
        let child = process.processIdentifier
        return try await withTaskCancellationHandler {
            try await collect(stdin: stdin, stdout: stdout, stderr: stderr, input: input, exited: exited.stream)
        } onCancel: {
            kill(child, SIGKILL)
        }
    }

    private static func collect(
        stdin: Pipe, stdout: Pipe, stderr: Pipe, input: [UInt8], exited: AsyncStream<Int32>
    ) async throws -> Output {
        // Feed stdin and drain both outputs on their own threads so that large outputs cannot
        // deadlock against a full pipe.
        let writer = Thread {
            try? stdin.fileHandleForWriting.write(contentsOf: Data(input))
            try? stdin.fileHandleForWriting.close()
        }
        writer.start()
        async let out = readAll(stdout.fileHandleForReading)
        async let err = readAll(stderr.fileHandleForReading)
        let (standardOutput, standardError) = await (out, err)
        var status: Int32 = -1
        for await value in exited { status = value }
        return Output(status: status, standardOutput: standardOutput, standardError: standardError)
    }

    private static func readAll(_ handle: FileHandle) async -> [UInt8] {
        await withCheckedContinuation { continuation in
            Thread {
                let data = (try? handle.readToEnd()) ?? Data()
                // Foundation closes a pipe's descriptors only when the handle is freed, which
                // for a handle kept by Process may be never: tests that poll a command every
                // few milliseconds would run out of descriptors.
                try? handle.close()
                continuation.resume(returning: [UInt8](data))
            }.start()
        }
    }
}
