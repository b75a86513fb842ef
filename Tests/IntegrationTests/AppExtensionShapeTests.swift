import ExtensionFoundation
import Foundation
import PlugindEngine
import PlugindSystem
import TestSupport
import Testing

/// Extensions written in Apple's shape (`AppExtension`, `ConnectionHandler`, a connection's
/// `requestHandler`), run by the real worker: SwiftExtensionProbe and the Swift greeter.
@Suite("Extensions in Apple's shape", .tags(.process), .timeLimit(.minutes(5)))
struct AppExtensionShapeTests {
    func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

    func launch(_ test: TestHost) async throws -> AppExtensionProcess {
        try test.install(PluginFixture(library: "SwiftExtensionProbe"))
        return try await AppExtensionProcess(configuration: test.configuration("org.plugind.tests.swiftextensionprobe"))
    }

    @Test("each accepted connection has state of its own and knows its host; errors keep their code")
    func connectionsAndErrors() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let process = try await launch(test)
        defer { process.invalidate() }
        let first = try await process.makeConnection()
        let second = try await process.makeConnection()
        #expect(text(try await first.send(Array("count".utf8))) == "1")
        #expect(text(try await first.send(Array("count".utf8))) == "2")
        #expect(text(try await second.send(Array("count".utf8))) == "1")
        #expect(text(try await second.send(Array("host".utf8))) == test.host.identifier)
        let error = await #expect(throws: AppExtensionError.self) { try await first.send(Array("fail".utf8)) }
        #expect(error?.code == .pluginError)
        #expect(error?.pluginErrorCode == 7)
        #expect(error?.reason.contains("asked to fail") == true)
    }

    @Test("a configuration that returns false refuses the connection")
    func refusal() async throws {
        let test = try TestHost(identifier: "org.plugind.untrusted")
        defer { test.remove() }
        let process = try await launch(test)
        defer { process.invalidate() }
        let error = await #expect(throws: AppExtensionError.self) { try await process.makeConnection() }
        #expect(error?.code == .connectionRefused)
        #expect(error?.reason.contains("ExtensionProbe did not accept the connection") == true, "\(error?.reason ?? "")")
    }

    @Test("an async handler asks the host; asks run at once; a request nested in an ask finds a thread")
    func asks() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let process = try await launch(test)
        defer { process.invalidate() }
        let box = Locked<AppExtensionConnection?>(nil)
        let connection = try await process.makeConnection(requestHandler: { question in
            guard String(decoding: question, as: UTF8.self) == "nested?", let connection = box.withLock({ $0 }) else {
                return Array("re: ".utf8) + question
            }
            // The host answers by asking the plugin, on the same connection, while it waits.
            return try await connection.send(Array("count".utf8))
        })
        box.withLock { $0 = connection }
        defer { box.withLock { $0 = nil } }
        #expect(text(try await connection.send(Array("ask:name?".utf8))) == "answer:re: name?")
        let answers = try await withThrowingTaskGroup(of: String.self) { group in
            for index in 0..<6 {
                group.addTask { self.text(try await connection.send(Array("ask:\(index)".utf8))) }
            }
            return try await group.reduce(into: Set<String>()) { $0.insert($1) }
        }
        #expect(answers == Set((0..<6).map { "answer:re: \($0)" }))
        // Eight requests so far on this connection: the nested one is the ninth.
        #expect(text(try await connection.send(Array("ask:nested?".utf8))) == "answer:9")

        // More nested asks at once than Swift's cooperative pool has threads: an ask must not
        // hold a pool thread while it waits, or the nested requests find none to run on.
        // A deadlock never ends: both deadlines are backstops, the wait's the shorter, to name it.
        let nested = try await Deadline.wait("six nested asks at once", seconds: 180) {
            try await withThrowingTaskGroup(of: String.self) { group in
                for _ in 0..<6 {
                    group.addTask { self.text(try await connection.send(Array("ask:nested?".utf8), timeout: TestHost.requestBackstop)) }
                }
                return try await group.reduce(into: [String]()) { $0.append($1) }
            }
        }
        #expect(nested.count == 6 && nested.allSatisfy { $0.hasPrefix("answer:") }, "\(nested)")
    }
}
