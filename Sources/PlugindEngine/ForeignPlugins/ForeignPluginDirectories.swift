import FoundationEssentials
import Glibc
package import PlugindTypes

/// A directory of LADSPA or frei0r libraries that discovery enumerates.
package struct ForeignPluginDirectory: Sendable, Hashable {
    package var abi: ForeignABI
    package var path: String

    package init(abi: ForeignABI, path: String) {
        self.abi = abi
        self.path = path
    }

    /// Where the two ABIs' hosts look, in their order: `LADSPA_PATH` (else the user's
    /// `~/.ladspa`), `/usr/local/lib/ladspa`, `/usr/lib/ladspa`; `FREI0R_PATH` (else
    /// `~/.frei0r-1/lib`), `/usr/local/lib/frei0r-1`, `/usr/lib/frei0r-1`. A directory that does
    /// not exist is skipped when it is enumerated.
    package static func defaults(environment: [String: String]) -> [ForeignPluginDirectory] {
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 }
        func listed(_ variable: String) -> [String]? {
            guard let value = environment[variable], !value.isEmpty else { return nil }
            return value.split(separator: ":").map(String.init).filter { $0.hasPrefix("/") }
        }
        var directories: [ForeignPluginDirectory] = []
        let ladspa = listed("LADSPA_PATH") ?? home.map { [$0 + "/.ladspa"] } ?? []
        for path in ladspa + ["/usr/local/lib/ladspa", "/usr/lib/ladspa"] {
            directories.append(ForeignPluginDirectory(abi: .ladspa, path: path))
        }
        let frei0r = listed("FREI0R_PATH") ?? home.map { [$0 + "/.frei0r-1/lib"] } ?? []
        for path in frei0r + ["/usr/local/lib/frei0r-1", "/usr/lib/frei0r-1"] {
            directories.append(ForeignPluginDirectory(abi: .frei0r, path: path))
        }
        var seen: Set<ForeignPluginDirectory> = []
        return directories.filter { seen.insert($0).inserted }
    }
}

/// One library file a directory holds.
package struct ForeignPluginLibrary: Sendable, Hashable {
    package var abi: ForeignABI
    /// The path as found in its directory.
    package var path: String

    package init(abi: ForeignABI, path: String) {
        self.abi = abi
        self.path = path
    }

    /// The `.so` files of `directories`, each path once (the first directory that has it wins),
    /// in directory order and then by name. Hidden files and other files are skipped.
    package static func enumerate(_ directories: [ForeignPluginDirectory]) -> [ForeignPluginLibrary] {
        var seen: Set<String> = []
        var libraries: [ForeignPluginLibrary] = []
        for directory in directories {
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory.path) else { continue }
            for name in names.sorted() where name.hasSuffix(".so") && !name.hasPrefix(".") {
                let path = directory.path + "/" + name
                let key = realpath(path, nil).map { resolved in
                    defer { free(resolved) }
                    return String(cString: resolved)
                }
                guard seen.insert(key ?? path).inserted else { continue }
                libraries.append(ForeignPluginLibrary(abi: directory.abi, path: path))
            }
        }
        return libraries
    }

    /// The library's file name without `.so`.
    package var stem: String {
        let name = path.split(separator: "/").last.map(String.init) ?? path
        return name.hasSuffix(".so") ? String(name.dropLast(3)) : name
    }
}

/// The identity a foreign plugin is listed, approved and launched under: `ladspa.<library>.<label>`
/// (`ladspa.amp.amp-mono`, `ladspa.cmt.delay-0-01s`) and `frei0r.<library>` (`frei0r.invert0r`),
/// each character outside `[A-Za-z0-9-]` replaced by `-`.
package enum ForeignPluginIdentity {
    package static func of(_ library: ForeignPluginLibrary, label: String?) -> String {
        ([library.abi.name, library.stem] + (label.map { [$0] } ?? [])).map(component).joined(separator: ".")
    }

    static func component(_ text: String) -> String {
        let replaced = String(
            text.unicodeScalars.map { scalar -> Character in
                scalar.isASCII
                    && (("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar) || ("0"..."9").contains(scalar) || scalar == "-")
                    ? Character(scalar) : "-"
            })
        return replaced.isEmpty ? "-" : replaced
    }

    /// The extension point every plugin of an ABI serves.
    package static func extensionPoint(_ abi: ForeignABI) -> String {
        "org.plugind.\(abi.name)"
    }
}
