import Foundation
import Glibc
import PlugindBundle
import PlugindSystem
import TestSupport
import Testing

@Suite("a bundle's contents read through its open directory", .tags(.unit))
struct BundleContentsTests {
    /// A bundle of a manifest and the echo library; its path and the library's bytes.
    private func makeBundle(in directory: TemporaryDirectory) throws -> (path: String, library: [UInt8]) {
        let bundle = try directory.subdirectory("bundle")
        try Data(#"{"manifestVersion": 1}"#.utf8).write(to: URL(fileURLWithPath: bundle + "/manifest.json"))
        let library = [UInt8](try Data(contentsOf: URL(fileURLWithPath: try BuiltProducts.library("Echo"))))
        try Data(library).write(to: URL(fileURLWithPath: bundle + "/libEcho.so"))
        return (bundle, library)
    }

    /// Reads the bundle at `path` as the inspector does, through one descriptor.
    private func read(_ path: String, textFile: BundleContents.FileReadAsText?) throws -> (
        contents: BundleContents, header: [UInt8]?
    ) {
        let descriptor = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        try #require(descriptor >= 0)
        defer { close(descriptor) }
        let status = try #require(FileStatus(descriptor: FileDescriptor(rawValue: descriptor)))
        return try BundleContents.read(
            directory: descriptor, status: status, bundlePath: path, user: effectiveUserID, textFile: textFile,
            keepingHeaderOf: "libEcho.so")
    }

    @Test("the walk keeps the library's ELF header and reads the same contents as a walk from the path")
    func headerKept() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let (bundle, library) = try makeBundle(in: directory)
        let manifestStatus = try #require(FileStatus(path: bundle + "/manifest.json"))
        let read = try read(bundle, textFile: BundleContents.FileReadAsText(path: "manifest.json", status: manifestStatus))
        #expect(read.header == Array(library.prefix(64)))
        #expect(read.contents == (try BundleContents.read(bundleAt: bundle)))
        #expect(read.contents.entry("manifest.json")?.isLoadable == false)
        #expect(read.contents.entry("libEcho.so")?.isLoadable == true)
    }

    @Test("a file read as text and changed since is looked at again: ELF written over a manifest is loadable")
    func changedTextFileLookedAtAgain() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let (bundle, library) = try makeBundle(in: directory)
        let statusWhenRead = try #require(FileStatus(path: bundle + "/manifest.json"))
        try Data(library).write(to: URL(fileURLWithPath: bundle + "/manifest.json"))
        let read = try read(bundle, textFile: BundleContents.FileReadAsText(path: "manifest.json", status: statusWhenRead))
        #expect(read.contents.entry("manifest.json")?.isLoadable == true)
        #expect(read.contents.loadableFiles.count == 2)
    }

    @Test("a strict listing reads every name through the descriptor, over many reads; a name not UTF-8 or one past the limit ends it")
    func strictDirectoryListing() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.remove() }
        let directory = temporary.path
        // Long names, so that the listing takes more than one read of the kernel's records.
        let names = (0..<400).map { "entry-\($0)-" + String(repeating: "n", count: 200) }
        for name in names { #expect(FileManager.default.createFile(atPath: directory + "/" + name, contents: nil)) }
        func listing(limit: Int) throws -> StrictDirectoryListing.Listing {
            let descriptor = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            try #require(descriptor >= 0)
            defer { close(descriptor) }
            let first = try StrictDirectoryListing.read(descriptor, limit: limit)
            // The descriptor's own position was used up: listed whole, a second listing is empty.
            if !first.isTruncated && !first.foundNameNotUTF8 {
                #expect(try StrictDirectoryListing.read(descriptor, limit: limit).names.isEmpty)
            }
            return first
        }
        let whole = try listing(limit: names.count)
        #expect(Set(whole.names) == Set(names) && whole.names.count == names.count)
        #expect(!whole.isTruncated && !whole.foundNameNotUTF8)
        let truncated = try listing(limit: names.count - 1)
        #expect(truncated.isTruncated && truncated.names.count == names.count - 1)

        // A name that is not UTF-8 (a lone continuation byte) is reported, not repaired.
        let bytes = Array((directory + "/bad-").utf8) + [0x80, 0]
        let made = bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { creat($0.baseAddress!, 0o600) }
        }
        try #require(made >= 0)
        close(made)
        #expect(try listing(limit: names.count + 1).foundNameNotUTF8)
        #expect(throws: Errno(rawValue: EBADF)) { try StrictDirectoryListing.read(-1, limit: 1) }
    }
}
