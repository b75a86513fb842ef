import Foundation
import PlugindBundle
import TestSupport
import Testing

@Suite("ELF inspection without loading")
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

    @Test("sonames resolve through ld.so.cache to system libraries")
    func resolver() throws {
        let resolver = LibraryResolver()
        let libc = try #require(resolver.resolve("libc.so.6"))
        #expect(libc.hasPrefix("/"))
        #expect(try ELFFile.checkHeader(atPath: libc).isSharedObject)
        #expect(resolver.resolve("libdoes-not-exist.so.9") == nil)
    }
}
