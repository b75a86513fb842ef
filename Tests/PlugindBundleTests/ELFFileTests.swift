import Foundation
import Glibc
import TestSupport
import Testing

@testable import PlugindBundle

@Suite("ELF inspection without loading", .tags(.unit), .timeLimit(.minutes(1)))
struct ELFFileTests {
    @Test("an example plugin is a 64-bit shared object for this machine, exporting its entry point")
    func examplePlugin() throws {
        let file = try ELFFile.inspect(atPath: try BuiltProducts.library("CTextFilter"))
        #expect(file.header.is64Bit)
        #expect(file.header.isSharedObject)
        #expect(file.header.machine == ELFFile.Machine.host)
        #expect(file.exportedSymbols.contains("plugind_plugin_entry"))
        #expect(file.needed.contains { $0.hasPrefix("libc.so") })
    }

    @Test("the Swift plugin exports the unmangled entry point and needs the Swift runtime")
    func swiftPlugin() throws {
        let file = try ELFFile.inspect(atPath: try BuiltProducts.library("SwiftTextFilter"))
        #expect(file.exportedSymbols.contains("plugind_plugin_entry"))
        #expect(file.needed.contains("libswiftCore.so"))
        #expect(!file.runPaths.isEmpty)
    }

    @Test("a patched machine field and a text file are rejected with the reason")
    func rejections() throws {
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: try BuiltProducts.library("Echo"))))
        bytes[18] = 183  // EM_AARCH64
        bytes[19] = 0
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let patched = directory.path + "/libArm.so"
        try Data(bytes).write(to: URL(fileURLWithPath: patched))
        #expect(throws: ELFFile.Problem.wrongMachine(found: .aarch64, expected: .host)) { try ELFFile.checkHeader(atPath: patched) }
        let text = directory.path + "/libText.so"
        try Data("not a library".utf8).write(to: URL(fileURLWithPath: text))
        #expect(throws: ELFFile.Problem.notELF) { try ELFFile.checkHeader(atPath: text) }
    }

    @Test("a library truncated by its owner while it is read is refused as changed, not read past its end")
    func truncatedWhileRead() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let library = try BuiltProducts.library("SwiftTextFilter")
        let size = try #require(FileManager.default.attributesOfItem(atPath: library)[.size] as? Int)
        #expect(size > ELFFilePages.pageSize, "the truncation below must cut pages the reader has not read yet")
        for length in [0, 4096, size / 2] {
            let copy = directory.path + "/libCopy\(length).so"
            try FileManager.default.copyItem(atPath: library, toPath: copy)
            // Between the open (which took the size) and the first read, as an owner could.
            let problem = #expect(throws: ELFFile.Problem.self) {
                try ELFFile.inspect(atPath: copy, afterOpening: { #expect(truncate(copy, off_t(length)) == 0) })
            }
            #expect(problem == .unreadable("it shrank while it was read (\(size) bytes when it was opened, \(length) now)"))
        }
        // Untouched, a copy read page by page reads as the whole library in memory does.
        let untouched = directory.path + "/libUntouched.so"
        try FileManager.default.copyItem(atPath: library, toPath: untouched)
        let read = try ELFFile.inspect(atPath: untouched)
        let whole = try ELFFile.inspect(bytes: [UInt8](try Data(contentsOf: URL(fileURLWithPath: library))))
        #expect(read.exportedSymbols.contains("plugind_plugin_entry"))
        #expect(read.exportedSymbols == whole.exportedSymbols && read.needed == whole.needed && read.runPaths == whole.runPaths)
        #expect(read.pluginABIVersion == whole.pluginABIVersion)
        #expect(read.pluginNotes.map(\.description) == whole.pluginNotes.map(\.description))
    }

    @Test("a file shorter than its headers say is refused with the offset and the file's size; a FIFO is refused unopened")
    func shorterThanItsHeaders() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: try BuiltProducts.library("Echo"))))
        let short = directory.path + "/libShort.so"
        try Data(bytes.prefix(bytes.count / 2)).write(to: URL(fileURLWithPath: short))
        let problem = #expect(throws: ELFFile.Problem.self) { try ELFFile.inspect(atPath: short) }
        guard case .malformed(let reason) = problem else {
            Issue.record("not refused as malformed: \(String(describing: problem))")
            return
        }
        #expect(reason.contains("the end of the file (\(bytes.count / 2) bytes)"), "\(reason)")
        // A FIFO would block an open or a read until a writer came: refused without waiting.
        let fifo = directory.path + "/libFIFO.so"
        #expect(mkfifo(fifo, 0o600) == 0)
        #expect(throws: ELFFile.Problem.unreadable("\(fifo) is not a regular file")) { try ELFFile.inspect(atPath: fifo) }
        #expect(throws: ELFFile.Problem.unreadable("\(fifo) is not a regular file")) { try ELFFile.checkHeader(atPath: fifo) }
    }

    @Test("sonames resolve through ld.so.cache to system libraries")
    func resolver() throws {
        let resolver = LibraryResolver()
        let libc = try #require(resolver.resolve("libc.so.6"))
        #expect(libc.hasPrefix("/"))
        #expect(try ELFFile.checkHeader(atPath: libc).isSharedObject)
        #expect(resolver.resolve("libdoes-not-exist.so.9") == nil)
    }
}
