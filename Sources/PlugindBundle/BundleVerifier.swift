import Foundation
import PlugindWire

/// One thing `plugind verify` found wrong, with how to fix it.
package struct VerificationProblem: Sendable, Hashable, Encodable {
    /// The check that found it: bundle, manifest, permissions, library, elf, dependencies,
    /// entry-point, functions, load.
    package var check: String
    package var message: String
    package var fix: String

    package init(check: String, message: String, fix: String) {
        self.check = check
        self.message = message
        self.fix = fix
    }
}

/// Everything about a bundle that can be checked without loading it: manifest schema, where the
/// library is, file permissions, ELF class and machine, needed libraries, entry point and
/// declared functions.
package struct BundleVerification: Sendable {
    package var bundlePath: String
    package var manifest: Manifest?
    package var warnings: [String] = []
    package var problems: [VerificationProblem] = []
    /// Set when the bundle passed the checks a loader needs, so that a worker may open it.
    package var loadable: InspectedBundle?
    /// Checks that passed, by name.
    package var passed: [String] = []
}

package enum BundleVerifier {
    package static func verify(bundleAt path: String, resolver: LibraryResolver = LibraryResolver()) -> BundleVerification {
        var result = BundleVerification(bundlePath: path)
        func problem(_ check: String, _ message: String, _ fix: String) {
            result.problems.append(VerificationProblem(check: check, message: message, fix: fix))
        }

        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue else {
            problem("bundle", "\(path) is not a directory", "pass the bundle directory, the one that holds manifest.json")
            return result
        }
        let bundlePath = canonicalPath(path) ?? path
        result.bundlePath = bundlePath
        let manifestPath = bundlePath + "/" + Manifest.fileName
        let manifest: Manifest
        do {
            let parsed = try ManifestParser.parse(contentsOf: manifestPath)
            manifest = parsed.manifest
            result.warnings = parsed.warnings.map(\.description)
            result.manifest = manifest
            result.passed.append("manifest")
        } catch {
            problem("manifest", error.description, "correct manifest.json (Documentation/ManifestReference.md lists every key)")
            return result
        }

        // Permissions of everything a loader trusts.
        var permissionProblems = 0
        for (what, itemPath) in [("bundle directory", bundlePath), ("manifest", manifestPath)] {
            if let reason = FileStatus(path: itemPath)?.writableByOthersProblem {
                permissionProblems += 1
                problem("permissions", "the \(what) \(itemPath) \(reason)", "chmod go-w '\(itemPath)'")
            }
        }

        // Where the library is.
        let libraryPath: String
        let candidate = bundlePath + "/" + manifest.library
        if FileManager.default.fileExists(atPath: candidate) {
            guard let resolved = canonicalPath(candidate), resolved.hasPrefix(bundlePath + "/") else {
                problem(
                    "library",
                    "library '\(manifest.library)' resolves to \(canonicalPath(candidate) ?? candidate), outside the bundle",
                    "copy the library into the bundle instead of linking to it"
                )
                return result
            }
            libraryPath = resolved
        } else if manifest.librarySonameCandidate, !manifest.functions.isEmpty, let system = resolver.resolve(manifest.library) {
            libraryPath = system
        } else {
            problem(
                "library",
                "library '\(manifest.library)' is not in the bundle\(manifest.librarySonameCandidate && !manifest.functions.isEmpty ? " and no system library has that soname" : "")",
                "build the library and copy it to \(candidate), or correct 'library' in manifest.json"
            )
            return result
        }
        result.passed.append("library")
        if let reason = FileStatus(path: libraryPath)?.writableByOthersProblem {
            permissionProblems += 1
            problem("permissions", "the library \(libraryPath) \(reason)", "chmod go-w '\(libraryPath)'")
        }
        if permissionProblems == 0 { result.passed.append("permissions") }

        // The ELF file itself.
        let file: ELFFile
        do {
            file = try ELFFile.inspect(atPath: libraryPath)
            result.passed.append("elf")
        } catch {
            problem(
                "elf", "the library \(libraryPath) \(error)",
                "build it as a 64-bit shared library for \(ELFFile.Machine.host) Linux (-shared -fPIC)")
            return result
        }

        // Needed libraries, resolved as the dynamic linker would.
        let origin = (libraryPath as NSString).deletingLastPathComponent
        let missing = file.needed.filter { resolver.resolve($0, runPaths: file.runPaths, origin: origin) == nil }
        for name in missing {
            let searched =
                (file.runPaths.isEmpty ? "" : "its run paths (\(file.runPaths.joined(separator: ":"))), ")
                + "/etc/ld.so.cache and the default directories"
            problem(
                "dependencies",
                "\(name), needed by \((libraryPath as NSString).lastPathComponent), is not found in \(searched)",
                "install the package that provides \(name), or ship it in the bundle and link with -Wl,-rpath,'$ORIGIN'"
            )
        }
        if missing.isEmpty { result.passed.append("dependencies") }

        // Entry point and declared functions.
        let exportsEntry = file.exportedSymbols.contains("plugind_plugin_entry")
        if manifest.functions.isEmpty && !exportsEntry {
            problem(
                "entry-point",
                "\((libraryPath as NSString).lastPathComponent) does not export plugind_plugin_entry and the manifest declares no functions",
                "export the entry point: PLUGIND_PLUGIN_EXPORT in C, @c(plugind_plugin_entry) with PluginKit"
            )
        } else {
            result.passed.append("entry-point")
        }
        let missingFunctions = manifest.functions.filter { !file.exportedSymbols.contains($0.name) }
        for function in missingFunctions {
            problem(
                "functions",
                "function '\(function.name)' declared in the manifest is not exported by \((libraryPath as NSString).lastPathComponent)",
                "export it (default visibility, PLUGIND_PLUGIN_EXPORT) or remove it from the manifest"
            )
        }
        if !manifest.functions.isEmpty && missingFunctions.isEmpty { result.passed.append("functions") }

        if missing.isEmpty, !manifest.functions.isEmpty || exportsEntry, missingFunctions.isEmpty,
            case .success(let inspected) = BundleInspector.inspect(bundleAt: bundlePath, resolver: resolver)
        {
            result.loadable = inspected
        }
        return result
    }
}
