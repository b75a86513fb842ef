import Foundation
import PlugindBundle

/// Stripping the bundle's ELF files, as Debian strips its own (lintian's
/// unstripped-binary-or-object): the symbol table and the debug information go, the dynamic
/// symbols stay, and the names of the functions the dynamic symbols do not cover go back in as
/// MiniDebugInfo, an xz-compressed symbol table in a section `.gnu_debugdata`, which the host's
/// crash reports read through libdw as they read the symbol table (a C plugin's static functions
/// keep their names in its stack; only the source lines are lost). The signature covers these
/// bytes, so a bundle that needs stripping is signed again, with the key that signed it.
extension DebianPackage {
    /// The sections of an ELF file that say whether it is stripped, and how many libraries it
    /// names (DT_NEEDED): read from the file's headers with bounds checked, for files of the
    /// bundle, which are the publisher's.
    struct ELFSections: Equatable {
        /// ET_EXEC or ET_DYN: what strip and lintian treat as a program or library.
        var isLoadable: Bool
        var names: [String]
        var hasSymbolTable: Bool
        var neededCount: Int

        /// A symbol table, or debug information (`.debug_*`, compressed `.zdebug_*`).
        var needsStripping: Bool {
            hasSymbolTable || names.contains { $0.hasPrefix(".debug") || $0.hasPrefix(".zdebug") }
        }

        /// The sections of the ELF file at `path`; nil when it is not an ELF file.
        static func read(atPath path: String) throws(Failure) -> ELFSections? {
            guard let file = FileHandle(forReadingAtPath: path) else { throw Failure(description: "cannot open \(path)") }
            defer { try? file.close() }
            let size: UInt64
            do {
                size = try file.seekToEnd()
            } catch {
                throw Failure(description: "cannot read \(path): \(error.localizedDescription)")
            }
            func bytes(_ offset: UInt64, _ count: UInt64) throws(Failure) -> [UInt8] {
                guard count <= 64 << 20 else {
                    throw Failure(description: "\(path) has a header or section of \(count) bytes, more than the 64 MiB plugind reads")
                }
                guard offset <= size, count <= size - offset else {
                    throw Failure(
                        description: "\(path) is not a whole ELF file: \(count) bytes at \(offset) are beyond its end (\(size) bytes)")
                }
                do {
                    try file.seek(toOffset: offset)
                    let data = try file.read(upToCount: Int(count)) ?? Data()
                    guard data.count == Int(count) else { throw CocoaError(.fileReadCorruptFile) }
                    return [UInt8](data)
                } catch {
                    throw Failure(description: "\(path) is not a whole ELF file: \(count) bytes at \(offset) are beyond its end")
                }
            }
            guard let identification = try? bytes(0, 16), identification.starts(with: [0x7F, 0x45, 0x4C, 0x46]) else { return nil }
            let is64 = identification[4] == 2
            let little = identification[5] == 1
            func number(_ bytes: ArraySlice<UInt8>) -> UInt64 {
                let ordered = little ? Array(bytes.reversed()) : Array(bytes)
                return ordered.reduce(0) { $0 << 8 | UInt64($1) }
            }
            let header = try bytes(0, is64 ? 64 : 52)
            func field(_ offset: Int, _ size: Int) -> UInt64 { number(header[offset..<offset + size]) }
            let type = field(16, 2)
            let sectionOffset = is64 ? field(0x28, 8) : field(0x20, 4)
            let entrySize = is64 ? field(0x3A, 2) : field(0x2E, 2)
            var count = is64 ? field(0x3C, 2) : field(0x30, 2)
            var namesIndex = is64 ? field(0x3E, 2) : field(0x32, 2)
            var sections: [(name: UInt64, type: UInt64, offset: UInt64, size: UInt64)] = []
            if sectionOffset != 0 {
                guard entrySize >= (is64 ? 64 : 40) else { throw Failure(description: "\(path) has section headers of \(entrySize) bytes") }
                func section(_ index: UInt64) throws(Failure) -> (name: UInt64, type: UInt64, offset: UInt64, size: UInt64) {
                    let (start, overflow) = sectionOffset.addingReportingOverflow(index * entrySize)
                    guard !overflow else { throw Failure(description: "\(path) has its section headers beyond any file's end") }
                    let entry = try bytes(start, entrySize)
                    func value(_ offset: Int, _ size: Int) -> UInt64 { number(entry[offset..<offset + size]) }
                    return is64
                        ? (value(0, 4), value(4, 4), value(0x18, 8), value(0x20, 8))
                        : (value(0, 4), value(4, 4), value(0x10, 4), value(0x14, 4))
                }
                // More than 65,279 sections: the count and the names' index are in section 0.
                if count == 0 || namesIndex == 0xFFFF {
                    let first = try section(0)
                    if count == 0 { count = first.size }
                    // SHN_XINDEX: the index is section 0's sh_link.
                    if namesIndex == 0xFFFF { namesIndex = number(try bytes(sectionOffset + (is64 ? 0x28 : 0x18), 4)[...]) }
                }
                guard count <= 1 << 20 else { throw Failure(description: "\(path) claims \(count) sections") }
                sections = try (0..<count).map { (index) throws(Failure) in try section(index) }
            }
            var names: [String] = []
            if namesIndex < sections.count {
                let table = sections[Int(namesIndex)]
                let strings = try bytes(table.offset, table.size)
                names = sections.map { section in
                    guard section.name < strings.count else { return "" }
                    let start = Int(section.name)
                    let end = strings[start...].firstIndex(of: 0) ?? strings.count
                    return String(decoding: strings[start..<end], as: UTF8.self)
                }
            }
            var needed = 0
            for dynamic in sections where dynamic.type == 6 {  // SHT_DYNAMIC
                let entries = try bytes(dynamic.offset, dynamic.size)
                let size = is64 ? 16 : 8
                for start in stride(from: 0, through: entries.count - size, by: size) {
                    let tag = number(entries[start..<start + size / 2])
                    if tag == 0 { break }
                    if tag == 1 { needed += 1 }  // DT_NEEDED
                }
            }
            return ELFSections(
                isLoadable: type == 2 || type == 3, names: names, hasSymbolTable: sections.contains { $0.type == 2 }, neededCount: needed)
        }
    }

    /// The bundle's ELF programs and libraries (paths relative to `bundle`) and their sections.
    static func elfFiles(in bundle: String) throws(Failure) -> [(path: String, sections: ELFSections)] {
        var found: [(String, ELFSections)] = []
        for relative in (FileManager.default.subpaths(atPath: bundle) ?? []).sorted() {
            let path = bundle + "/" + relative
            guard let attributes = try? FileManager.default.attributesOfItem(atPath: path),
                attributes[.type] as? FileAttributeType == .typeRegular
            else { continue }
            if let sections = try ELFSections.read(atPath: path), sections.isLoadable { found.append((relative, sections)) }
        }
        return found
    }

    /// Strips the ELF file at `path` in place, keeping its dynamic symbols, and its other
    /// function symbols as MiniDebugInfo; `work` is a directory for the intermediate files.
    static func strip(_ path: String, work: String) throws(Failure) {
        let symbols = try run("nm", ["--format=posix", "--defined-only", path], package: "binutils")
        let dynamic = try run("nm", ["--dynamic", "--format=posix", "--defined-only", path], package: "binutils")
        func names(_ listing: String, types: Set<Substring>?) -> Set<String> {
            var names: Set<String> = []
            for line in listing.split(separator: "\n") {
                let fields = line.split(separator: " ")
                guard fields.count >= 2, types.map({ $0.contains(fields[1]) }) ?? true else { continue }
                // nm -D writes versioned symbols as name@@VERSION; the symbol table has the name.
                names.insert(String(fields[0].prefix { $0 != "@" }))
            }
            return names
        }
        let functions = names(symbols, types: ["T", "t"]).subtracting(names(dynamic, types: nil)).sorted()
        let mini = work + "/mini-debuginfo"
        if !functions.isEmpty {
            let keep = work + "/keep-symbols"
            do {
                try Data(functions.joined(separator: "\n").appending("\n").utf8).write(to: URL(fileURLWithPath: keep))
            } catch {
                throw Failure(description: "cannot write \(keep): \(error.localizedDescription)")
            }
            try run("objcopy", ["--only-keep-debug", path, work + "/debug"], package: "binutils")
            try run(
                "objcopy",
                [
                    "--strip-all", "--remove-section=.gdb_index", "--remove-section=.comment", "--keep-symbols=\(keep)",
                    work + "/debug", mini,
                ],
                package: "binutils")
            try run("xz", ["--threads=1", "--force", mini], package: "xz-utils")
        }
        // As Debian's dh_strip: .comment (the compiler's version) is of no use at run time.
        try run("strip", ["--strip-unneeded", "--remove-section=.comment", path], package: "binutils")
        if !functions.isEmpty {
            try run("objcopy", ["--add-section", ".gnu_debugdata=\(mini).xz", path], package: "binutils")
        }
        for file in ["keep-symbols", "debug", "mini-debuginfo", "mini-debuginfo.xz"] {
            try? FileManager.default.removeItem(atPath: work + "/" + file)
        }
    }

    /// Strips the staged bundle at `bundle` where it needs it and, when anything changed, signs
    /// it again with `signingKey` (keeping the signature's expiry); returns the files stripped.
    /// The staged copy must hold what the publisher signed (the bundle may have changed since it
    /// was checked), and a bundle that needs stripping without a key is refused, both before
    /// anything is changed or signed.
    func stripAndSign(bundle: String, work: String) throws(Failure) -> [String] {
        guard try Self.signatureStatus(ofStagedBundle: bundle) == .valid(key) else {
            throw Failure(description: "the bundle changed while it was packed: its copy no longer holds what \(key.fingerprint) signed")
        }
        let unstripped = try Self.elfFiles(in: bundle).filter { $0.sections.needsStripping }.map(\.path)
        guard !unstripped.isEmpty else { return [] }
        guard let signingKey else {
            let names = unstripped.joined(separator: ", ")
            throw Failure(
                description:
                    "\(names) \(unstripped.count == 1 ? "has" : "have") a symbol table or debug information, which lintian refuses in a package (unstripped-binary-or-object), and stripping changes the bytes the publisher signed: pass --key with the private key of \(key.fingerprint) to strip and sign again, or strip before signing (strip --strip-unneeded \(unstripped[0]), then plugind sign)"
            )
        }
        for relative in unstripped {
            try Self.strip(bundle + "/" + relative, work: work)
            guard let after = try ELFSections.read(atPath: bundle + "/" + relative), !after.needsStripping else {
                throw Failure(description: "strip left a symbol table or debug information in \(relative)")
            }
        }
        let signaturePath = bundle + "/" + BundleContents.signatureFileName
        let expires: String?
        do {
            expires = try JSONDecoder().decode(BundleSignature.self, from: Data(contentsOf: URL(fileURLWithPath: signaturePath))).expires
        } catch {
            throw Failure(description: "cannot read the bundle's signature: \(error.localizedDescription)")
        }
        let digest = try Self.digest(ofStagedBundle: bundle, what: "the stripped bundle")
        do {
            try BundleSignature.sign(digest: digest, with: signingKey, expires: expires).fileContents
                .write(to: URL(fileURLWithPath: signaturePath))
        } catch {
            throw Failure(description: "cannot sign the stripped bundle: \(error)")
        }
        guard try Self.signatureStatus(ofStagedBundle: bundle) == .valid(key) else {
            throw Failure(description: "the signature of the stripped bundle does not hold")
        }
        return unstripped
    }

    /// The digest of the staged bundle at `bundle`, checked as `verify` checks a bundle.
    private static func digest(ofStagedBundle bundle: String, what: String) throws(Failure) -> String {
        let inspected: InspectedBundle
        switch BundleInspector.inspect(bundleAt: bundle) {
        case .success(let result): inspected = result
        case .failure(let problem): throw Failure(description: "\(what) does not verify: \(problem.message)")
        }
        do {
            // Each file read again: the staged files change in place, which a cache by file
            // identity need not see.
            return try BundleDigest.compute(inspected.contents) { try SHA256Digest.hex(ofFileAtPath: bundle + "/" + $0.path) }.digest
        } catch {
            throw Failure(description: "cannot read \(what): \(error.localizedDescription)")
        }
    }

    /// What the signature of the staged bundle at `bundle` says of its bytes.
    private static func signatureStatus(ofStagedBundle bundle: String) throws(Failure) -> BundleSignature.Status {
        BundleSignature.status(ofBundleAt: bundle, digest: try digest(ofStagedBundle: bundle, what: "the bundle's copy"))
    }
}
