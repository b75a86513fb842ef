import CDirectoryEntries
import Glibc
package import PlugindSystem

/// Every name in a bundle's directory, read strictly: none left out, none repaired.
package enum StrictDirectoryListing {
    /// What a listing found.
    package struct Listing: Sendable, Equatable {
        /// The names, "." and ".." left out, in the order the kernel lists them.
        package var names: [String]
        /// A name is not UTF-8: the listing stopped there (repaired, it would name another file).
        package var foundNameNotUTF8: Bool
        /// The directory holds more than the limit: `names` are the first ones read.
        package var isTruncated: Bool
    }

    /// The first `limit` names in the directory open as `descriptor`, read through the
    /// descriptor itself (`getdents64`), whose position moves past what was read: for a directory
    /// listed once, no duplicate descriptor and no stream (`fdopendir` made four system calls
    /// more per directory, a visible share of a first scan of many bundles).
    package static func read(_ descriptor: Int32, limit: Int) throws(Errno) -> Listing {
        var listing = Listing(names: [], foundNameNotUTF8: false, isTruncated: false)
        try withUnsafeTemporaryAllocation(byteCount: 16 << 10, alignment: 8) { (buffer) throws(Errno) in
            guard let base = buffer.baseAddress else { return }
            while true {
                var length = 0
                let error = plugind_read_directory_entries(descriptor, base, buffer.count, &length)
                guard error == 0 else { throw Errno(rawValue: error) }
                guard length > 0 else { return }
                let entries = UnsafeRawBufferPointer(start: base, count: min(length, buffer.count))
                switch collect(entries, into: &listing, limit: limit) {
                case .readMore: continue
                case .finished: return
                case .malformed: throw Errno(rawValue: EIO)
                }
            }
        }
        return listing
    }

    private enum Progress { case readMore, finished, malformed }

    /// Appends the names of the `struct dirent64` records in `entries`: finished at a name not
    /// UTF-8 or one past the limit. Every record is checked against the bytes read before
    /// anything of it is.
    private static func collect(_ entries: UnsafeRawBufferPointer, into listing: inout Listing, limit: Int) -> Progress {
        // d_ino (8), d_off (8), d_reclen (2), d_type (1), then the name and its terminating zero.
        let nameOffset = 19
        var offset = 0
        while offset + nameOffset < entries.count {
            let recordLength = Int(entries.loadUnaligned(fromByteOffset: offset + 16, as: UInt16.self))
            guard recordLength > nameOffset, recordLength <= entries.count - offset else { return .malformed }
            let record = UnsafeRawBufferPointer(rebasing: entries[offset + nameOffset..<offset + recordLength])
            offset += recordLength
            let nameBytes = record.prefix { $0 != 0 }
            guard let name = String(validating: nameBytes, as: UTF8.self) else {
                listing.foundNameNotUTF8 = true
                return .finished
            }
            if name == "." || name == ".." { continue }
            guard listing.names.count < limit else {
                listing.isTruncated = true
                return .finished
            }
            listing.names.append(name)
        }
        return offset == entries.count ? .readMore : .malformed
    }
}
