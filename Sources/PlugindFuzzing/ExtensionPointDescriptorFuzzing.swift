import Foundation
import PlugindBundle

/// The body of the extension-point-descriptor fuzz target, shared with the test that replays its
/// corpus: a file of an extension-points directory (`<identifier>.json`), which `plugind list
/// --all`, `verify`, `info` and `browse` read without running the host that installed it. The
/// bytes are the file, named after the identifier they declare when that is a usable name, so
/// that a well-formed descriptor gets past the check of its name. Any file must be read or refused
/// with a `Problem` that names it and says why; a descriptor that is read must be valid as the
/// readers rely on (reverse-DNS identifier and host, a known scope, a version, a bounded
/// description) and read back the same once written; and the directory's loader must come to the
/// same answer as the file's reader.
package enum ExtensionPointDescriptorFuzzing {
    package struct InvariantViolation: Error, CustomStringConvertible {
        package var description: String
    }

    private struct Declared: Decodable {
        var identifier: String
    }

    package static func run(_ input: [UInt8]) throws {
        let scratch = try FuzzScratch.emptyDirectory()
        let directory = scratch + "/points"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        let declared = (try? JSONDecoder().decode(Declared.self, from: Data(input)))?.identifier
        let name =
            declared.map(ExtensionPointDescriptor.fileName(of:)).flatMap {
                // Room for the temporary name the file is written under first.
                ManifestParser.isReverseDNS($0) && $0.utf8.count <= 240 ? $0 : nil
            } ?? "org.plugind.fuzz.json"
        let path = directory + "/" + name
        try FuzzScratch.write(input, to: path, mode: 0o644)

        let read: Result<ExtensionPointDescriptor, ExtensionPointDescriptor.Problem>
        do {
            read = .success(try ExtensionPointDescriptor.read(atPath: path))
        } catch {
            read = .failure(error)
        }
        let loaded = DeclaredExtensionPoints.load(from: [directory])
        switch read {
        case .failure(let problem):
            guard problem.path == path, !problem.reason.isEmpty else {
                throw InvariantViolation(description: "a refusal that does not name the file and why: \(problem)")
            }
            guard loaded.declarations.isEmpty, loaded.problems == [problem] else {
                throw InvariantViolation(description: "the directory's loader disagrees with the file's reader on \(problem)")
            }
        case .success(let descriptor):
            try checkValid(descriptor)
            guard input.count <= ExtensionPointDescriptor.maximumFileBytes else {
                throw InvariantViolation(description: "read a descriptor of \(input.count) bytes")
            }
            guard loaded.problems.isEmpty, loaded[descriptor.identifier]?.descriptor == descriptor,
                loaded[descriptor.identifier]?.path == path
            else {
                throw InvariantViolation(description: "the directory's loader disagrees with the file's reader on \(descriptor)")
            }
            let again = scratch + "/again"
            try FileManager.default.createDirectory(atPath: again, withIntermediateDirectories: false)
            let written = try descriptor.install(in: again)
            let reread = try ExtensionPointDescriptor.read(atPath: written)
            guard reread == descriptor else {
                throw InvariantViolation(description: "\(descriptor) was read back as \(reread) once written")
            }
        }
    }

    private static func checkValid(_ descriptor: ExtensionPointDescriptor) throws {
        guard descriptor.descriptorVersion == ExtensionPointDescriptor.currentVersion,
            ManifestParser.isReverseDNS(descriptor.identifier), ManifestParser.isReverseDNS(descriptor.host),
            descriptor.scope == "application" || descriptor.scope == "none",
            descriptor.version.map({ HostVersion($0) != nil }) ?? true,
            (descriptor.description?.utf8.count ?? 0) <= 4096
        else {
            throw InvariantViolation(description: "accepted a descriptor its readers cannot rely on: \(descriptor)")
        }
    }
}
