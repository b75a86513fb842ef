import FoundationEssentials
import Glibc
import PlugindSystem

/// Finds shared libraries the way the dynamic linker would, without loading them: run paths of
/// the requesting library (with `$ORIGIN`), then `/etc/ld.so.cache`, then the default
/// directories. Used for function-only bundles that name a system library by soname, and by
/// `plugind verify` to name a `DT_NEEDED` library that cannot be found.
package struct LibraryResolver: Sendable {
    private let cache: [String: [String]]
    package let defaultDirectories: [String]

    /// Reads the system's ld.so.cache once. `directories` replaces the default directories
    /// (tests point it at directories they made).
    package init(cachePath: String = "/etc/ld.so.cache", defaultDirectories directories: [String]? = nil) {
        cache = (try? LdSoCache.read(atPath: cachePath)) ?? [:]
        #if arch(x86_64)
            let multiarch = "x86_64-linux-gnu"
        #elseif arch(arm64)
            let multiarch = "aarch64-linux-gnu"
        #else
            let multiarch = ""
        #endif
        defaultDirectories = directories ?? ["/lib/\(multiarch)", "/usr/lib/\(multiarch)", "/lib64", "/usr/lib64", "/lib", "/usr/lib"]
    }

    /// The canonical path of the file `name` resolves to, or nil. `origin` is the directory of
    /// the library asking (for `$ORIGIN` in its run paths). Candidates for another machine or
    /// class are skipped.
    package func resolve(_ name: String, runPaths: [String] = [], origin: String? = nil) -> String? {
        candidate(for: name, runPaths: runPaths, origin: origin).flatMap(canonicalPath)
    }

    /// The path the dynamic linker would open for `name`, as it found it (symlinks not followed),
    /// or nil: what `TrustedLibraryPath` walks.
    package func candidate(for name: String, runPaths: [String] = [], origin: String? = nil) -> String? {
        if name.contains("/") {
            return FileManager.default.fileExists(atPath: name) ? name : nil
        }
        var candidates: [String] = []
        for runPath in runPaths {
            let directory =
                origin.map { runPath.replacing("${ORIGIN}", with: $0).replacing("$ORIGIN", with: $0) }
                ?? runPath
            candidates.append(directory + "/" + name)
        }
        candidates += cache[name] ?? []
        candidates += defaultDirectories.map { $0 + "/" + name }
        for candidate in candidates where FileManager.default.fileExists(atPath: candidate) {
            if (try? ELFFile.checkHeader(atPath: candidate)) != nil {
                return candidate
            }
        }
        return nil
    }
}

/// Reader of glibc's `/etc/ld.so.cache` ("glibc-ld.so.cache1.1" format, possibly after an old
/// "ld.so-1.7.0" table): soname → paths.
enum LdSoCache {
    static func read(atPath path: String) throws -> [String: [String]] {
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let newMagic = Array("glibc-ld.so.cache1.1".utf8)
        let oldMagic = Array("ld.so-1.7.0".utf8)
        var start = 0
        if bytes.starts(with: oldMagic), bytes.count >= 16 {
            let oldCount = Int(u32(bytes, 12))
            start = (16 + oldCount * 12 + 7) & ~7
        }
        guard start + 48 <= bytes.count, Array(bytes[start..<start + newMagic.count]) == newMagic else { return [:] }
        let count = Int(u32(bytes, start + 20))
        var result: [String: [String]] = [:]
        for index in 0..<count {
            let entry = start + 48 + index * 24
            guard entry + 24 <= bytes.count else { break }
            guard let key = string(bytes, Int(u32(bytes, entry + 4))),
                let value = string(bytes, Int(u32(bytes, entry + 8)))
            else { continue }
            result[key, default: []].append(value)
        }
        return result
    }

    private static func u32(_ bytes: [UInt8], _ offset: Int) -> UInt32 {
        UInt32(bytes[offset]) | UInt32(bytes[offset + 1]) << 8 | UInt32(bytes[offset + 2]) << 16 | UInt32(bytes[offset + 3]) << 24
    }

    private static func string(_ bytes: [UInt8], _ offset: Int) -> String? {
        guard offset < bytes.count, let end = bytes[offset...].firstIndex(of: 0) else { return nil }
        return String(decoding: bytes[offset..<end], as: UTF8.self)
    }
}
