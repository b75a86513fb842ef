import FoundationEssentials
import Glibc
import PlugindSystem
import PlugindTypes

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

/// Everything about a bundle that can be checked without running any of its code, read from its
/// files: manifest schema, what the bundle holds (no hard links, symlinks leading out, device
/// files, files others may write), where the library is, ELF class and machine, needed libraries
/// (inside the bundle and on the system), entry point, declared functions and the plugin ABI
/// version the library records.
package struct BundleVerification: Sendable {
    package var bundlePath: String
    package var manifest: Manifest?
    package var warnings: [String] = []
    package var problems: [VerificationProblem] = []
    /// Set when the bundle passed the checks a loader needs, so that a worker may open it (only
    /// with `plugind verify --load`).
    package var loadable: InspectedBundle?
    /// The plugin ABI version the library records, when it records one.
    package var abiVersion: UInt32?
    /// Checks that passed, by name.
    package var passed: [String] = []
}

package enum BundleVerifier {
    /// The plugin ABI versions this plugind's worker loads.
    package static let supportedABIVersions: ClosedRange<UInt32> = 1...2

    package static func verify(bundleAt path: String, resolver: LibraryResolver = LibraryResolver()) -> BundleVerification {
        var result = BundleVerification(bundlePath: path)
        func problem(_ check: String, _ message: String, _ fix: String) {
            result.problems.append(VerificationProblem(check: check, message: message, fix: fix))
        }

        var isDirectory = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory else {
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
        // What the bundle holds, file by file.
        var contents: BundleContents?
        do {
            contents = try BundleContents.read(bundleAt: bundlePath)
            result.passed.append("contents")
        } catch {
            let check = error.reason.contains("writable") || error.reason.contains("owned by") ? "permissions" : "contents"
            if check == "permissions" { permissionProblems += 1 }
            problem(check, error.description, error.fix)
        }

        // Where the library is.
        let libraryPath: String
        let candidate = bundlePath + "/" + manifest.library
        if let adapter = manifest.adapter {
            switch TrustedLibraryPath.resolve(manifest.library, rule: .systemPlugin) {
            case .success(let resolution): libraryPath = resolution.canonicalPath
            case .failure(let refusal):
                problem(
                    "library", "\(adapter.abi.name) library '\(manifest.library)' is refused: \(refusal)",
                    "name a library its package installed: root owns it and every directory on the way, and nobody else may write them")
                return result
            }
        } else if FileManager.default.fileExists(atPath: candidate) {
            guard let resolved = canonicalPath(candidate), resolved.hasPrefix(bundlePath + "/") else {
                problem(
                    "library",
                    "library '\(manifest.library)' resolves to \(canonicalPath(candidate) ?? candidate), outside the bundle",
                    "copy the library into the bundle instead of linking to it"
                )
                return result
            }
            libraryPath = resolved
        } else if manifest.librarySonameCandidate, !manifest.functions.isEmpty, let system = resolver.candidate(for: manifest.library) {
            switch TrustedLibraryPath.resolve(system, rule: .systemLibrary) {
            case .success(let resolution): libraryPath = resolution.canonicalPath
            case .failure(let refusal):
                problem(
                    "library", "system library '\(manifest.library)' is refused: \(refusal)",
                    "name a library that the package manager installed, or ship the library in the bundle")
                return result
            }
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
                "build it as a 64-bit shared library for \(ELFFile.Machine.host) Linux: -shared -fPIC in C and C++, crate-type = [\"cdylib\"] in Rust, go build -buildmode=c-shared in Go"
            )
            return result
        }

        // Needed libraries, resolved as the dynamic linker would, through the bundle's own
        // libraries too; a library of the bundle must be one of its files.
        var missing: [String] = []
        var refused = 0
        var pending = [(libraryPath, file)]
        var seen: Set<String> = [libraryPath]
        while let (path, current) = pending.popLast() {
            let directory = path.deletingLastPathComponent
            for name in current.needed {
                guard let candidate = resolver.candidate(for: name, runPaths: current.runPaths, origin: directory),
                    let resolved = canonicalPath(candidate)
                else {
                    missing.append(name)
                    continue
                }
                if !resolved.hasPrefix(bundlePath + "/"), seen.insert(resolved).inserted,
                    case .failure(let refusal) = TrustedLibraryPath.resolve(
                        candidate, rule: .dependency)
                {
                    refused += 1
                    problem(
                        "dependencies", "\(name), needed by \(path.lastPathComponent), is refused: \(refusal)",
                        "ship it in the bundle (-Wl,-rpath,'$ORIGIN'), or install it where only root can change it")
                }
                guard resolved.hasPrefix(bundlePath + "/"), seen.insert(resolved).inserted else { continue }
                if let contents, contents.entry(String(resolved.dropFirst(bundlePath.count + 1)))?.isLoadable != true {
                    problem(
                        "dependencies", "\(name) resolves to \(resolved), which is not a library file of the bundle",
                        "ship it as a regular file in the bundle")
                }
                if let dependency = try? ELFFile.inspect(atPath: resolved) { pending.append((resolved, dependency)) }
            }
        }
        for name in missing {
            let searched =
                (file.runPaths.isEmpty ? "" : "its run paths (\(file.runPaths.joined(separator: ":"))), ")
                + "/etc/ld.so.cache and the default directories"
            problem(
                "dependencies",
                "\(name), needed by \(libraryPath.lastPathComponent), is not found in \(searched)",
                "install the package that provides \(name), or ship it in the bundle and link with -Wl,-rpath,'$ORIGIN'"
            )
        }
        if missing.isEmpty && refused == 0 { result.passed.append("dependencies") }

        // Entry point and declared functions.
        let exportsEntry = file.exportedSymbols.contains("plugind_plugin_entry")
        if let adapter = manifest.adapter {
            // The foreign ABI's own entry points, which its adapter calls.
            let needed =
                switch adapter.abi {
                case .ladspa: ["ladspa_descriptor"]
                case .frei0r:
                    [
                        "f0r_init", "f0r_deinit", "f0r_get_plugin_info", "f0r_get_param_info", "f0r_construct", "f0r_destruct",
                        "f0r_set_param_value", "f0r_get_param_value",
                    ]
                }
            let absent = needed.filter { !file.exportedSymbols.contains($0) }
            if absent.isEmpty {
                result.passed.append("entry-point")
            } else {
                problem(
                    "entry-point",
                    "\(libraryPath.lastPathComponent) does not export \(absent.joined(separator: ", ")): it is not a \(adapter.abi.name) library",
                    "name the library of a \(adapter.abi.name) plugin, or correct 'adapter.abi'")
            }
        } else if manifest.functions.isEmpty && !exportsEntry {
            problem(
                "entry-point",
                "\(libraryPath.lastPathComponent) does not export plugind_plugin_entry and the manifest declares no functions",
                file.isBuiltByGo
                    ? "import plugind/kit and call kit.Register from an init function of package main (the kit defines the entry point)"
                    : "export the entry point: PLUGIND_PLUGIN_EXPORT in C, PLUGIND_CPP_PLUGIN in C++, export_plugin! in Rust, kit.Register in Go, @c(plugind_plugin_entry) with PluginKit"
            )
        } else {
            result.passed.append("entry-point")
        }
        let missingFunctions = manifest.functions.filter { !file.exportedSymbols.contains($0.name) }
        for function in missingFunctions {
            problem(
                "functions",
                "function '\(function.name)' declared in the manifest is not exported by \(libraryPath.lastPathComponent)",
                "export it (default visibility, PLUGIND_PLUGIN_EXPORT) or remove it from the manifest"
            )
        }
        if !manifest.functions.isEmpty && missingFunctions.isEmpty { result.passed.append("functions") }

        // The ABI version, from the note the header's export macro records; a library without
        // one was built with an older header.
        result.abiVersion = file.pluginABIVersion
        if exportsEntry {
            switch file.pluginABIVersion {
            case nil:
                result.warnings.append(
                    "\(libraryPath.lastPathComponent) records no plugin ABI version (built with an older plugind_plugin.h): the version is checked only when it loads; rebuild it to record one"
                )
            case let version? where !supportedABIVersions.contains(version):
                problem(
                    "abi",
                    "\(libraryPath.lastPathComponent) was built for plugin ABI \(version); this plugind supports \(supportedABIVersions.map(String.init).joined(separator: ", "))",
                    "rebuild it against this plugind's plugind_plugin.h (or its C++, Rust or Go kit)")
            case let version?:
                result.passed.append("abi (\(version))")
            }
        }

        // The binding the code states, recorded at build time: the manifest must agree.
        if let bound = file.boundExtensionPoint {
            if bound == manifest.extensionPoint {
                result.passed.append("binding")
            } else {
                problem(
                    "binding",
                    "the code binds to the extension point '\(bound)' but the manifest says '\(manifest.extensionPoint)'",
                    "make the manifest's extensionPoint '\(bound)' (for a Swift package: run 'plugind bind' or make, which writes it from the code)"
                )
            }
        }
        if let bound = file.boundCapabilities {
            if Set(bound) == Set(manifest.capabilities) {
                result.passed.append("capabilities")
            } else {
                let missing = bound.filter { !manifest.capabilities.contains($0) }
                let extra = manifest.capabilities.filter { !bound.contains($0) }
                let parts =
                    (missing.isEmpty ? [] : ["the code implements \(missing.joined(separator: ", ")), which the manifest leaves out"])
                    + (extra.isEmpty ? [] : ["the manifest claims \(extra.joined(separator: ", ")), which the code does not implement"])
                problem(
                    "capabilities",
                    parts.joined(separator: "; "),
                    "make the manifest's capabilities \(bound) (run 'plugind bind' or make, which writes them from the code)"
                )
            }
        }

        if missing.isEmpty, !manifest.functions.isEmpty || exportsEntry, missingFunctions.isEmpty,
            case .success(let inspected) = BundleInspector.inspect(bundleAt: bundlePath, resolver: resolver)
        {
            result.loadable = inspected
        }
        return result
    }
}
