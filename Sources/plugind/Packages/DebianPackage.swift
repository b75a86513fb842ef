import Foundation
import PlugindBundle
import PlugindSystem
import PlugindWire

/// `plugind pack --format deb`: a signed bundle as a Debian package that installs it under
/// /usr/lib/plugind/plugins/<identifier>/ with its signature, for an organisation's apt
/// repository, in the shape lintian accepts without an error or a warning. The architecture
/// comes from the library's ELF header and `Depends` from the system libraries it needs, through
/// dpkg-shlibdeps (the tool Debian's own packages use, which knows each library's package and the
/// oldest version that provides the symbols used); the bundle's ELF files are stripped (and the
/// bundle signed again) as DebianPackage+Strip.swift says; the changelog, the copyright file and
/// the description are DebianPackage+Documents.swift's; dpkg-deb writes the archive.
struct DebianPackage {
    /// The directory packages install plugins into: the system plugin directory plugind searches.
    static let pluginDirectory = "/usr/lib/plugind/plugins"

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    var inspected: InspectedBundle
    /// The key the bundle is signed with.
    var key: PublisherKeys.PublicKey
    var maintainer: DebianMaintainer
    /// The licence the publisher stated; nil: the copyright file says none was.
    var license: DebianLicense?
    /// The private half of `key`, to sign the bundle again once stripped; nil: a bundle that
    /// needs stripping is refused.
    var signingKey: PublisherKeys.PrivateKey?
    /// The time of the changelog entry and the copyright year.
    var date: Date

    /// `plugind-plugin-<identifier>`, in the characters Debian allows in a package name.
    var packageName: String { Self.packageName(for: inspected.manifest.identifier) }

    /// `plugind-plugin-` and the identifier spelled in Debian's package-name alphabet (a-z, 0-9,
    /// '+', '-', '.'): lower-case letters, digits, '.' and '-' as they are, an upper-case letter
    /// as '+' and the letter in lower case, '_' as '++'. Identifiers are compared exactly, so
    /// `org.a_b`, `org.a-b` and `Org.A-B` are three plugins: the spelling keeps them three
    /// packages, as no two codes begin alike ('+' never stands alone), and one apt repository
    /// cannot hold a package that replaces another plugin's.
    static func packageName(for identifier: String) -> String {
        var name = "plugind-plugin-"
        for byte in identifier.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "-"):
                name.unicodeScalars.append(Unicode.Scalar(byte))
            case UInt8(ascii: "A")...UInt8(ascii: "Z"):
                name += "+"
                name.unicodeScalars.append(Unicode.Scalar(byte + 0x20))
            case UInt8(ascii: "_"):
                name += "++"
            default:
                // Not in a manifest's identifier (the parser refuses it); '+' and three digits
                // keep the spelling one-to-one all the same.
                let digits = String(byte)
                name += "+" + String(repeating: "0", count: 3 - digits.count) + digits
            }
        }
        return name
    }

    /// The Debian architecture of the plugin's library.
    static func architecture(of header: ELFFile.Header) -> String? {
        switch header.machine {
        case .x8664: "amd64"
        case .aarch64: "arm64"
        case .i386: "i386"
        case .arm: "armhf"
        case .riscv: "riscv64"
        case .powerpc64: header.isLittleEndian ? "ppc64el" : "ppc64"
        case .s390x: "s390x"
        case .other: nil
        }
    }

    /// Debian's version syntax, checked before dpkg-deb would refuse it with less to go on.
    static func isValidVersion(_ version: String) -> Bool {
        guard let first = version.first, first.isASCII, first.isNumber else { return false }
        return version.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || ".+-~:".contains($0)) }
    }

    /// What `write` made: the package's path and the bundle's files it stripped.
    struct Written {
        var path: String
        var stripped: [String]
    }

    /// Writes the package; `output` nil: `<name>_<version>_<arch>.deb` here.
    func write(output: String?) throws(Failure) -> Written {
        let manifest = inspected.manifest
        let libraryPath = inspected.bundlePath + "/" + manifest.library
        let header: ELFFile.Header
        do {
            header = try ELFFile.checkHeader(atPath: libraryPath)
        } catch {
            throw Failure(description: "cannot read the ELF header of \(libraryPath): \(error)")
        }
        guard let architecture = Self.architecture(of: header) else {
            throw Failure(description: "the library is built for \(header.machine), which has no Debian architecture plugind knows")
        }
        guard Self.isValidVersion(manifest.version) else {
            throw Failure(
                description:
                    "the manifest's version '\(manifest.version)' is not a Debian version (it must start with a digit and hold only letters, digits and . + - ~ :)"
            )
        }
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("plugind-deb-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: work) }
        let root = work + "/root"
        let installed = root + Self.pluginDirectory + "/" + manifest.identifier
        let documentation = root + "/usr/share/doc/" + packageName
        do {
            try FileManager.default.createDirectory(
                atPath: (installed as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try FileManager.default.copyItem(atPath: inspected.bundlePath, toPath: installed)
            try FileManager.default.createDirectory(atPath: root + "/DEBIAN", withIntermediateDirectories: true)
            try FileManager.default.createDirectory(atPath: documentation, withIntermediateDirectories: true)
            try FileManager.default.createDirectory(atPath: work + "/strip", withIntermediateDirectories: true)
        } catch {
            throw Failure(description: "cannot stage the bundle in \(work): \(error.localizedDescription)")
        }
        // Before anything reads the bundle's bytes for the package: the signature, the md5sums
        // and dpkg-shlibdeps all see the stripped files.
        let stripped = try stripAndSign(bundle: installed, work: work + "/strip")
        let installedDirectory = Self.pluginDirectory + "/" + manifest.identifier
        let withoutNeeded = try Self.elfFiles(in: installed).filter { $0.sections.neededCount == 0 }
            .map { String((installedDirectory + "/" + $0.path).dropFirst()) }
        try writeDocuments(
            documentation: documentation, root: root,
            licenceFiles: Self.licenceFiles(in: installed, installedAt: installedDirectory), withoutNeeded: withoutNeeded)
        try normalizeModes(root)
        let dependencies = try systemDependencies(of: installed + "/" + manifest.library, work: work)
        let control = controlFile(architecture: architecture, dependencies: dependencies, installedSize: try installedKilobytes(root))
        let sums = try md5sums(root)
        do {
            try Data(control.utf8).write(to: URL(fileURLWithPath: root + "/DEBIAN/control"))
            try Data(sums.utf8).write(to: URL(fileURLWithPath: root + "/DEBIAN/md5sums"))
        } catch {
            throw Failure(description: "cannot write the package's control files: \(error.localizedDescription)")
        }
        let path = output ?? "\(packageName)_\(manifest.version)_\(architecture).deb"
        try Self.run("dpkg-deb", ["--root-owner-group", "-Zxz", "--build", root, path], package: "dpkg")
        return Written(path: path, stripped: stripped)
    }

    /// The changelog (gzip -9n: no name, no time, as lintian wants it), the copyright file and
    /// lintian's overrides.
    private func writeDocuments(documentation: String, root: String, licenceFiles: [String], withoutNeeded: [String]) throws(Failure) {
        let changelog = documentation + "/" + changelogName
        let plainChangelog = String(changelog.dropLast(".gz".count))
        do {
            try Data(self.changelog.utf8).write(to: URL(fileURLWithPath: plainChangelog))
            try Data(copyright(licenceFiles: licenceFiles).utf8).write(to: URL(fileURLWithPath: documentation + "/copyright"))
            if let overrides = lintianOverrides(withoutNeeded: withoutNeeded) {
                let directory = root + "/usr/share/lintian/overrides"
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
                try Data(overrides.utf8).write(to: URL(fileURLWithPath: directory + "/" + packageName))
            }
        } catch {
            throw Failure(description: "cannot write the package's documentation: \(error.localizedDescription)")
        }
        try Self.run("gzip", ["-9", "-n", "--force", plainChangelog], package: "gzip")
    }

    private func controlFile(architecture: String, dependencies: [String], installedSize: Int) -> String {
        let manifest = inspected.manifest
        let minimum = manifest.minimumHostVersion.flatMap { Self.isValidVersion($0) ? $0 : nil } ?? PlugindRelease.version
        let depends = ["plugind (>= \(minimum))"] + dependencies
        return """
            Package: \(packageName)
            Version: \(manifest.version)
            Architecture: \(architecture)
            Maintainer: \(maintainer)
            Installed-Size: \(installedSize)
            Depends: \(depends.joined(separator: ", "))
            Section: misc
            Priority: optional
            \(descriptionField)

            """
    }

    /// Root's files readable by all and writable only by root, executables and directories 0755.
    private func normalizeModes(_ root: String) throws(Failure) {
        guard let walker = FileManager.default.enumerator(atPath: root) else { return }
        for case let relative as String in walker {
            let path = root + "/" + relative
            guard let attributes = try? FileManager.default.attributesOfItem(atPath: path),
                let type = attributes[.type] as? FileAttributeType, type != .typeSymbolicLink
            else { continue }
            let mode = (attributes[.posixPermissions] as? Int) ?? 0o644
            let normalized = type == .typeDirectory || mode & 0o111 != 0 ? 0o755 : 0o644
            do {
                try FileManager.default.setAttributes([.posixPermissions: normalized], ofItemAtPath: path)
            } catch {
                throw Failure(description: "cannot set the mode of \(path): \(error.localizedDescription)")
            }
        }
    }

    private func installedKilobytes(_ root: String) throws(Failure) -> Int {
        var bytes = 0
        for relative in FileManager.default.subpaths(atPath: root) ?? [] where !relative.hasPrefix("DEBIAN") {
            bytes += ((try? FileManager.default.attributesOfItem(atPath: root + "/" + relative))?[.size] as? Int) ?? 0
        }
        return (bytes + 1023) / 1024
    }

    private func md5sums(_ root: String) throws(Failure) -> String {
        let files = (FileManager.default.subpaths(atPath: root) ?? []).filter { relative in
            var isDirectory: ObjCBool = false
            return !relative.hasPrefix("DEBIAN") && FileManager.default.fileExists(atPath: root + "/" + relative, isDirectory: &isDirectory)
                && !isDirectory.boolValue
        }.sorted()
        guard !files.isEmpty else { return "" }
        return try Self.run("md5sum", files, package: "coreutils", in: root)
    }

    /// What dpkg-shlibdeps says the library needs from the system, e.g. ["libc6 (>= 2.34)",
    /// "zlib1g (>= 1:1.2.0)"]; the bundle's own libraries are not dependencies.
    private func systemDependencies(of library: String, work: String) throws(Failure) -> [String] {
        // dpkg-shlibdeps works in a source tree: it needs a debian/control naming the package.
        do {
            try FileManager.default.createDirectory(atPath: work + "/debian", withIntermediateDirectories: true)
            try Data("Source: \(packageName)\n\nPackage: \(packageName)\nArchitecture: any\n".utf8)
                .write(to: URL(fileURLWithPath: work + "/debian/control"))
        } catch {
            throw Failure(description: "cannot prepare dpkg-shlibdeps in \(work): \(error.localizedDescription)")
        }
        let bundle = (library as NSString).deletingLastPathComponent
        let output = try Self.run(
            "dpkg-shlibdeps", ["-O", "--ignore-missing-info", "-l" + bundle, "-e" + library], package: "dpkg-dev", in: work)
        guard let line = output.split(separator: "\n").first(where: { $0.hasPrefix("shlibs:Depends=") }) else { return [] }
        return line.dropFirst("shlibs:Depends=".count).split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }
    }

    @discardableResult
    static func run(_ tool: String, _ arguments: [String], package: String, in directory: String? = nil) throws(Failure) -> String {
        do {
            return try ExternalTool.run(tool, arguments, package: package, in: directory)
        } catch {
            throw Failure(description: error.description)
        }
    }
}
