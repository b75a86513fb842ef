import Foundation
import PlugindBundle

/// The texts of a plugin's package besides the bundle: the control file's description, the
/// changelog, the machine-readable copyright file and lintian's overrides. What comes from the
/// manifest is the publisher's text: it is made one plain line (no control or format
/// characters, which could end a field or change what a reader sees) before it is wrapped.
extension DebianPackage {
    /// The width lintian allows a line of a description or a changelog entry.
    static let lineWidth = 80

    /// `text` in one line: controls and separators as spaces, format characters (bidirectional
    /// overrides, zero-width ones) left out, each run of whitespace one space.
    static func plainText(_ text: String) -> String {
        var plain = ""
        var space = false
        for scalar in text.unicodeScalars {
            if scalar.properties.generalCategory == .format { continue }
            if scalar.properties.isWhitespace || DebianMaintainer.isControl(scalar) {
                space = !plain.isEmpty
                continue
            }
            if space { plain += " " }
            space = false
            plain.unicodeScalars.append(scalar)
        }
        return plain
    }

    /// `text`, made plain, in lines of at most `width` characters, the first after `first`, the
    /// others after `rest`; a word longer than a line is cut.
    static func wrap(_ text: String, width: Int = lineWidth, first: String, rest: String) -> [String] {
        var lines: [String] = []
        var line = first
        var lineHasWord = false
        for word in plainText(text).split(separator: " ") {
            var word = Substring(word)
            while !word.isEmpty {
                let prefix = lineHasWord ? " " : ""
                if line.unicodeScalars.count + prefix.count + word.unicodeScalars.count <= width {
                    line += prefix + word
                    lineHasWord = true
                    break
                }
                if lineHasWord {
                    lines.append(line)
                    line = rest
                    lineHasWord = false
                    continue
                }
                // Longer than a whole line: as much as fits, the rest on the next.
                let room = max(1, width - line.unicodeScalars.count)
                let cut = word.unicodeScalars.index(word.unicodeScalars.startIndex, offsetBy: room)
                line += String(word.unicodeScalars[..<cut])
                word = Substring(word.unicodeScalars[cut...])
                lines.append(line)
                line = rest
            }
        }
        if lineHasWord { lines.append(line) }
        return lines
    }

    /// The extended description's lines of `text`, each after the field's one space: a line
    /// that lintian or dpkg would read as markup (starting with '.', '-' or '*') is indented
    /// once more, which shows it as it is.
    static func descriptionLines(_ text: String) -> [String] {
        wrap(text, width: lineWidth - 2, first: "", rest: "").map { line in
            line.hasPrefix(".") || line.hasPrefix("-") || line.hasPrefix("*") ? "  " + line : " " + line
        }
    }

    /// The manifest's name as plain text, or the identifier when nothing of it is left.
    var plainName: String {
        let name = Self.plainText(inspected.manifest.name)
        return name.isEmpty ? inspected.manifest.identifier : name
    }

    /// The Description field: the plugin's name as the synopsis, then what the package holds,
    /// then the manifest's description.
    var descriptionField: String {
        let manifest = inspected.manifest
        let synopsis = String(("plugind plugin: " + plainName).unicodeScalars.prefix(Self.lineWidth))
        var lines = Self.descriptionLines(
            "The plugind plugin \(manifest.identifier) \(manifest.version) for the extension point \(manifest.extensionPoint), signed by the publisher key \(key.fingerprint), installed in \(Self.pluginDirectory)/\(manifest.identifier)."
        )
        if let description = manifest.description.map(Self.plainText), !description.isEmpty {
            lines += [" ."] + Self.descriptionLines(description)
        }
        return "Description: \(synopsis)\n" + lines.joined(separator: "\n")
    }

    /// A version without a Debian revision (no '-') is a native package's, whose changelog is
    /// changelog.gz; any other has changelog.Debian.gz (lintian's wrong-name-for-…).
    var changelogName: String {
        inspected.manifest.version.contains("-") ? "changelog.Debian.gz" : "changelog.gz"
    }

    /// RFC 2822's date, in UTC, as Debian's changelog trailer has it.
    static func changelogDate(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss Z"
        return formatter.string(from: date)
    }

    /// The time of the package: SOURCE_DATE_EPOCH (reproducible builds) when it is set, else now.
    static func packageDate(sourceDateEpoch: String?) throws(Failure) -> Date {
        guard let sourceDateEpoch, !sourceDateEpoch.isEmpty else { return Date() }
        guard let seconds = UInt64(sourceDateEpoch), seconds <= 253_402_300_799 else {
            throw Failure(
                description:
                    "SOURCE_DATE_EPOCH is '\(sourceDateEpoch)', not a number of seconds since 1970 (unset it, or set it as reproducible builds do)"
            )
        }
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }

    /// The changelog (before gzip): one entry for this version, by the maintainer.
    var changelog: String {
        let manifest = inspected.manifest
        let entry = Self.wrap(
            "\(plainName) \(manifest.version) (\(manifest.identifier)), packed by plugind from the bundle signed by the publisher key \(key.fingerprint).",
            first: "  * ", rest: "    ")
        return """
            \(packageName) (\(manifest.version)) unstable; urgency=medium

            \(entry.joined(separator: "\n"))

             -- \(maintainer)  \(Self.changelogDate(date))

            """
    }

    /// The copyright file, DEP-5: the maintainer as the holder, in the year of the package, and
    /// the licence from --license, or a paragraph saying that the publisher stated none.
    func copyright(licenceFiles: [String]) -> String {
        let manifest = inspected.manifest
        var year = Calendar(identifier: .gregorian)
        year.timeZone = TimeZone(identifier: "UTC") ?? year.timeZone
        func field(_ name: String, _ value: String) -> String {
            (Self.wrap(value, first: name + ": ", rest: " ")).joined(separator: "\n")
        }
        var text = """
            Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
            \(field("Upstream-Name", plainName))
            Upstream-Contact: \(maintainer)
            \(field("Comment", "Written by plugind pack for the plugin \(manifest.identifier) \(manifest.version), signed by the publisher key \(key.fingerprint): the copyright holder is the package's maintainer, the year the package's, and the licence the one the publisher stated (plugind pack --license)."))

            Files: *
            Copyright: \(year.component(.year, from: date)) \(maintainer.name)
            License: \(license?.shortName ?? "NOASSERTION")

            """
        if let license {
            for identifier in license.identifiers {
                let name = DebianLicense.common[identifier]?.shortName ?? identifier
                text +=
                    "\nLicense: \(name)\n"
                    + Self.wrap(DebianLicense.paragraph(for: identifier, licenceFiles: licenceFiles), first: " ", rest: " ")
                    .joined(separator: "\n") + "\n"
            }
        } else {
            let files = licenceFiles.isEmpty ? "" : " The bundle holds \(licenceFiles.joined(separator: ", ")), which may say."
            text +=
                "\nLicense: NOASSERTION\n"
                + Self.wrap(
                    "The publisher stated no licence when this package was made (plugind pack --license): ask them on what terms the plugin may be used and passed on.\(files)",
                    first: " ", rest: " "
                ).joined(separator: "\n") + "\n"
        }
        return text
    }

    /// The bundle's own licence texts (LICENSE, LICENCE, COPYING, any extension, at its top),
    /// as installed.
    static func licenceFiles(in bundle: String, installedAt directory: String) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: bundle)) ?? []
        return names.filter { name in
            let stem = name.split(separator: ".", maxSplits: 1).first.map { $0.uppercased() } ?? ""
            return ["LICENSE", "LICENCE", "COPYING"].contains(stem)
        }.sorted().map { directory + "/" + $0 }
    }

    /// lintian's overrides for what does not apply to a plugin; nil when none does.
    /// - `withoutNeeded`: the installed paths of libraries that name no library they need. A
    ///   plugin is a module plugind-worker loads into a process that has the C library; one that
    ///   calls no library function (a C plugin that only uses its host's callbacks) needs none,
    ///   and lintian would take it for a library linked without its dependencies.
    /// - A single changelog entry whose version ends in -1 is, to lintian, a first upload to
    ///   Debian that should close an ITP bug; a plugin's package is not uploaded to Debian.
    func lintianOverrides(withoutNeeded: [String]) -> String? {
        var lines: [String] = []
        // A path lintian could read as more than a path (a bracket, a wildcard, a line break) is
        // not overridden: the warning then stays.
        let overridable = withoutNeeded.filter { path in
            path.unicodeScalars.allSatisfy {
                ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || "._+-/".unicodeScalars.contains($0)
            }
        }
        if !overridable.isEmpty {
            lines.append("# A plugin is a module plugind-worker loads into a process that has the C library: one that calls")
            lines.append("# no library function needs none.")
            lines += overridable.sorted().map { "shared-library-lacks-prerequisites [\($0)]" }
        }
        if inspected.manifest.version.hasSuffix("-1") {
            lines.append("# Not a package of Debian's archive: there is no ITP bug to close.")
            lines.append("initial-upload-closes-no-bugs")
        }
        return lines.isEmpty ? nil : lines.joined(separator: "\n") + "\n"
    }
}
