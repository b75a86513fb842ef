import Glibc

/// The names in a directory another user may fill, read through a descriptor and bounded.
package enum DirectoryNames {
    /// What a listing found.
    package struct Listing: Sendable, Equatable {
        /// The names, "." and ".." left out, as UTF-8: a name that is not is left out (it is no
        /// name plugind writes, and repaired it would name another file).
        package var names: [String]
        /// The directory holds more than the limit: `names` are the first ones read.
        package var isTruncated: Bool
    }

    /// The first `limit` names in the directory open as `descriptor` (which stays open and
    /// unread: the listing reads a duplicate). An empty listing when the directory cannot be read.
    package static func list(_ descriptor: Int32, limit: Int) -> Listing {
        let copy = dup(descriptor)
        guard copy >= 0, let stream = fdopendir(copy) else {
            if copy >= 0 { close(copy) }
            return Listing(names: [], isTruncated: false)
        }
        defer { closedir(stream) }
        var names: [String] = []
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(validating: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard let name, name != ".", name != ".." else { continue }
            guard names.count < limit else { return Listing(names: names, isTruncated: true) }
            names.append(name)
        }
        return Listing(names: names, isTruncated: false)
    }
}
