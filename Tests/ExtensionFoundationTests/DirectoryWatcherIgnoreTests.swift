import Foundation
import Observation
import PlugindSystem
import TestSupport
import Testing

@testable import ExtensionFoundation
@testable import PlugindEngine

@Suite("Directory watcher: plugind's own writes are no change", .tags(.unit))
struct DirectoryWatcherIgnoreTests {
    /// One inotify event record: watch descriptor, mask, cookie, name length, the name padded.
    func event(watch: Int32, name: String) -> [UInt8] {
        var nameBytes = Array(name.utf8) + [0]
        while nameBytes.count % 16 != 0 { nameBytes.append(0) }
        var record: [UInt8] = []
        withUnsafeBytes(of: watch.littleEndian) { record += $0 }
        withUnsafeBytes(of: UInt32(0x100).littleEndian) { record += $0 }
        withUnsafeBytes(of: UInt32(0).littleEndian) { record += $0 }
        withUnsafeBytes(of: UInt32(nameBytes.count).littleEndian) { record += $0 }
        return record + nameBytes
    }

    @Test("events for the catalog cache and its temporary files in the state directory are ignored; any other event is not")
    func ignores() {
        let directories: [Int32: String] = [1: "/state", 2: "/plugins"]
        let ignored = [(directory: "/state", namePrefix: "catalog.cache")]
        let own = event(watch: 1, name: "catalog.cache.Ab12Cd") + event(watch: 1, name: "catalog.cache")
        #expect(DirectoryWatcher.onlyIgnored(own[...], directories: directories, ignored: ignored))
        #expect(
            !DirectoryWatcher.onlyIgnored((own + event(watch: 1, name: "crashes.json"))[...], directories: directories, ignored: ignored))
        #expect(!DirectoryWatcher.onlyIgnored(event(watch: 2, name: "catalog.cache")[...], directories: directories, ignored: ignored))
        // An event on the directory itself names no file: a change.
        #expect(!DirectoryWatcher.onlyIgnored(event(watch: 1, name: "")[...], directories: directories, ignored: ignored))
    }
}
