import Foundation
import PlugindPackages

/// The body of the package fuzz target, shared with the test that replays its corpus: the bytes
/// of a plugin package, unpacked the way `plugind install` unpacks one (libarchive, every header
/// checked, then the publisher's signature against what the archive holds, before a byte is
/// written). Any input must unpack or be refused with a `PluginPackage.Failure`; a refused
/// package must have written nothing; one that unpacks (only a correctly signed package can)
/// must hold only directories and regular files, all inside the directory it was unpacked into.
package enum PackageFuzzing {
    package struct InvariantViolation: Error, CustomStringConvertible {
        package var description: String
    }

    package static func run(_ input: [UInt8]) throws {
        _ = try unpacks(input)
    }

    /// Checks `input` as `run` does; returns whether it unpacked (the replay test checks that a
    /// seed reaches the unpacked side).
    package static func unpacks(_ input: [UInt8]) throws -> Bool {
        // A directory of its own for each input, removed after: the package is written to it and
        // unpacked into a fresh directory below it.
        var template = Array((NSTemporaryDirectory() + "/plugind-fuzz-package.XXXXXX").utf8CString)
        guard let scratch = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!).map { String(cString: $0) } }) else {
            throw InvariantViolation(description: "no scratch directory")
        }
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let package = scratch + "/input.plugin"
        let target = scratch + "/unpacked"
        try Data(input).write(to: URL(fileURLWithPath: package))
        try FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: false)
        do {
            try PluginPackage.unpack(package, into: target)
        } catch {
            let left = try FileManager.default.contentsOfDirectory(atPath: target)
            guard left.isEmpty else { throw InvariantViolation(description: "a refused package (\(error)) wrote \(left)") }
            return false
        }
        try expectOnlyFilesAndDirectories(below: target)
        return true
    }

    private static func expectOnlyFilesAndDirectories(below root: String) throws {
        guard let walk = FileManager.default.enumerator(atPath: root) else { return }
        let resolvedRoot = URL(fileURLWithPath: root).resolvingSymlinksInPath().path
        while let relative = walk.nextObject() as? String {
            let path = root + "/" + relative
            let type = try FileManager.default.attributesOfItem(atPath: path)[.type] as? FileAttributeType
            guard type == .typeRegular || type == .typeDirectory else {
                throw InvariantViolation(description: "an unpacked package holds \(relative), of type \(String(describing: type))")
            }
            let resolved = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
            guard resolved.hasPrefix(resolvedRoot + "/") else {
                throw InvariantViolation(description: "an unpacked package put \(relative) outside its directory, at \(resolved)")
            }
        }
    }
}
