import Foundation
import TestSupport
import Testing

@testable import ExtensionFoundation
@testable import PlugindEngine

@Suite("Executable locator: a host built anywhere finds an installed worker", .tags(.unit))
struct ExecutableLocatorTests {
    @Test("a host in a build folder looks beside itself, then the installed libexec locations, then PATH")
    func buildFolderOrder() {
        let candidates = ExecutableLocator.worker.candidates(executablePath: "/home/ada/host/.build/debug/host", path: "/opt/bin:/usr/bin")
        #expect(
            candidates == [
                "/home/ada/host/.build/debug/plugind-worker",
                "/usr/libexec/plugind/plugind-worker",
                "/usr/local/libexec/plugind/plugind-worker",
                "/opt/bin/plugind-worker",
                "/usr/bin/plugind-worker",
            ])
    }

    @Test("a host installed under a prefix's bin finds that prefix's libexec first, and no place twice")
    func prefixFirst() {
        let candidates = ExecutableLocator.worker.candidates(executablePath: "/usr/local/bin/host", path: "/usr/local/bin:/usr/bin")
        #expect(
            candidates == [
                "/usr/local/bin/plugind-worker",
                "/usr/local/libexec/plugind/plugind-worker",
                "/usr/libexec/plugind/plugind-worker",
                "/usr/bin/plugind-worker",
            ])
    }

    @Test("the tool is not looked for in libexec")
    func toolOnPath() {
        let candidates = ExecutableLocator.tool.candidates(executablePath: nil, path: "/usr/bin")
        #expect(candidates == ["/usr/bin/plugind"])
    }

    @Test("nothing found names every place looked at and how to install")
    func notFoundNamesPlaces() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("locator-\(UUID().uuidString)").path
        #expect(throws: ExecutableLocator.NotFound.self) {
            try ExecutableLocator(name: "plugind-missing-\(UUID().uuidString)", variable: "PLUGIND_MISSING", installedInLibexec: true)
                .locate(environment: ["PATH": directory], executablePath: directory + "/host")
        }
        do {
            _ = try ExecutableLocator(name: "plugind-missing", variable: "PLUGIND_MISSING", installedInLibexec: true)
                .locate(environment: ["PATH": directory], executablePath: directory + "/host")
        } catch {
            #expect(error.message.contains("/usr/libexec/plugind/plugind-missing"))
            #expect(error.message.contains(directory + "/plugind-missing"))
            #expect(error.message.contains("Scripts/install.sh"))
        }
    }

    @Test("a variable naming a file that is not executable is an error, not a fall-through")
    func variableMustBeExecutable() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("not-a-worker-\(UUID().uuidString)").path
        #expect(
            FileManager.default.createFile(
                atPath: file, contents: Array("#!/bin/sh\n".utf8).withUnsafeBytes { Data($0) }, attributes: [.posixPermissions: 0o644]))
        defer { try? FileManager.default.removeItem(atPath: file) }
        #expect(throws: ExecutableLocator.NotFound.self) {
            try ExecutableLocator.worker.locate(environment: ["PLUGIND_WORKER": file], executablePath: nil)
        }
    }
}
