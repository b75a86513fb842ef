import FoundationEssentials
import Glibc
import PlugindSystem

/// What plugind reads from a shared library without loading it: the ELF header (class, byte
/// order, type, machine) and, for 64-bit little-endian files, the dynamic section (needed
/// libraries, run paths, soname) and the exported dynamic symbols.
///
/// One file with the reading it needs (`ELFOpenFile`, `ELFFilePages`, `ELFReader`, below): they
/// serve only this type and throw its `Problem`, and every bounds check the inspection trusts is
/// read beside the code that trusts it.
package struct ELFFile: Sendable {
    package enum Machine: Equatable, Sendable, CustomStringConvertible {
        case x8664, aarch64, i386, arm, riscv, powerpc64, s390x
        case other(UInt16)

        init(_ value: UInt16) {
            switch value {
            case 62: self = .x8664
            case 183: self = .aarch64
            case 3: self = .i386
            case 40: self = .arm
            case 243: self = .riscv
            case 21: self = .powerpc64
            case 22: self = .s390x
            default: self = .other(value)
            }
        }

        package var description: String {
            switch self {
            case .x8664: "x86-64"
            case .aarch64: "AArch64"
            case .i386: "i386"
            case .arm: "ARM"
            case .riscv: "RISC-V"
            case .powerpc64: "PowerPC64"
            case .s390x: "s390x"
            case .other(let value): "machine \(value)"
            }
        }

        /// The machine this plugind was built for.
        package static var host: Machine {
            #if arch(x86_64)
                .x8664
            #elseif arch(arm64)
                .aarch64
            #else
                .other(0)
            #endif
        }
    }

    package struct Header: Equatable, Sendable {
        package var is64Bit: Bool
        package var isLittleEndian: Bool
        /// ET_DYN (3) for shared objects.
        package var type: UInt16
        package var machine: Machine

        package var isSharedObject: Bool { type == 3 }
    }

    /// Why a file is not a library this host can load.
    package enum Problem: Error, Equatable, Sendable, CustomStringConvertible {
        case unreadable(String)
        case notELF
        case wrongClass
        case wrongByteOrder
        case notSharedObject(type: UInt16)
        case wrongMachine(found: Machine, expected: Machine)
        case malformed(String)

        package var description: String {
            switch self {
            case .unreadable(let reason): "cannot be read: \(reason)"
            case .notELF: "is not an ELF file"
            case .wrongClass: "is a 32-bit ELF file; this host loads 64-bit libraries"
            case .wrongByteOrder: "is big-endian; this host is little-endian"
            case .notSharedObject(let type): "is not a shared library (ELF type \(type))"
            case .wrongMachine(let found, let expected): "is built for \(found), this host is \(expected)"
            case .malformed(let reason): "is a malformed ELF file: \(reason)"
            }
        }
    }

    package var header: Header
    package var needed: [String] = []
    package var runPaths: [String] = []
    package var soname: String?
    /// Defined, globally visible dynamic symbols.
    package var exportedSymbols: Set<String> = []
    /// The plugin ABI version the library records in its "plugind" note, when it has one (the
    /// header's `PLUGIND_PLUGIN_ABI_VERSION` at build time).
    package var pluginABIVersion: UInt32?
    /// Whether Go's linker built the library (a "Go" build-id note): `plugind verify` then names
    /// the Go kit in its fixes.
    package var isBuiltByGo = false
    /// Every "plugind" note of the file: type and contents.
    package var pluginNotes: [(type: UInt32, description: [UInt8])] = []

    /// The extension point the plugin's code binds to, from its binding note, when it has one.
    package var boundExtensionPoint: String? { bindingFields?["extensionPoint"] }

    /// The capabilities the plugin's code implements, from its binding note, when the note
    /// records them (`plugind bind` always does; a C plugin's `PLUGIND_PLUGIN_BINDING` does not,
    /// and its manifest is then the only statement of them).
    package var boundCapabilities: [String]? {
        bindingFields?["capabilities"].map { $0.split(separator: " ").map(String.init) }
    }

    /// The binding note's lines, "key=value" each: `extensionPoint`, then `capabilities`
    /// (space-separated, since a capability has no spaces).
    private var bindingFields: [String: String]? {
        guard let note = pluginNotes.last(where: { $0.type == Self.bindingNoteType }) else { return nil }
        var fields: [String: String] = [:]
        for line in String(decoding: note.description, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false) {
            guard let equals = line.firstIndex(of: "=") else { continue }
            fields[String(line[..<equals])] = String(line[line.index(after: equals)...])
        }
        return fields
    }

    // MARK: Header only

    /// Reads the first 64 bytes and checks that the file is a 64-bit little-endian shared library
    /// for this machine. Cheap enough for every catalog scan.
    package static func checkHeader(atPath path: String) throws(Problem) -> Header {
        let file = try ELFOpenFile.open(path)
        defer { file.descriptor.close() }
        let bytes: [UInt8]
        do {
            bytes = try file.descriptor.read(count: min(64, file.size), at: 0)
        } catch {
            throw .unreadable("\(error)")
        }
        return try checkHeader(bytes: bytes)
    }

    /// `checkHeader(atPath:)` of a file's first bytes (up to 64) already read.
    package static func checkHeader(bytes: [UInt8]) throws(Problem) -> Header {
        let header = try parseHeader(bytes)
        try validate(header)
        return header
    }

    static func parseHeader(_ bytes: [UInt8]) throws(Problem) -> Header {
        guard bytes.count >= 20, bytes[0] == 0x7F, bytes[1] == 0x45, bytes[2] == 0x4C, bytes[3] == 0x46 else {
            throw .notELF
        }
        let littleEndian = bytes[5] == 1
        func half(_ offset: Int) -> UInt16 {
            littleEndian
                ? UInt16(bytes[offset]) | UInt16(bytes[offset + 1]) << 8
                : UInt16(bytes[offset]) << 8 | UInt16(bytes[offset + 1])
        }
        return Header(is64Bit: bytes[4] == 2, isLittleEndian: littleEndian, type: half(16), machine: Machine(half(18)))
    }

    static func validate(_ header: Header) throws(Problem) {
        guard header.is64Bit else { throw .wrongClass }
        guard header.isLittleEndian else { throw .wrongByteOrder }
        guard header.isSharedObject else { throw .notSharedObject(type: header.type) }
        guard header.machine == .host else { throw .wrongMachine(found: header.machine, expected: .host) }
    }

    // MARK: Whole file

    /// Checks the header and reads the dynamic section, the exported symbols and the notes: only
    /// those parts of the file, through `pread` (a file mapped instead would raise SIGBUS in the
    /// reader if its owner truncated it meanwhile). A file that shrinks while it is read is
    /// refused.
    ///
    /// With `.dependencies`, the dynamic section alone (`needed`, `runPaths`, `soname`): what
    /// following a library's dependencies takes, without the symbol table, which in a runtime
    /// library such as libswiftCore holds tens of thousands of names.
    package static func inspect(atPath path: String, extent: Extent = .whole) throws(Problem) -> ELFFile {
        try inspect(atPath: path, extent: extent, afterOpening: {})
    }

    /// How much of a file an inspection reads.
    package enum Extent: Sendable {
        /// The dynamic section, the exported symbols and the notes.
        case whole
        /// The dynamic section.
        case dependencies
    }

    /// `inspect(atPath:)`, running `afterOpening` once the file is open and its size known: the
    /// tests change the file there.
    static func inspect(atPath path: String, extent: Extent = .whole, afterOpening: () -> Void) throws(Problem) -> ELFFile {
        let file = try ELFOpenFile.open(path)
        defer { file.descriptor.close() }
        afterOpening()
        let reader = ELFReader(file: ELFFilePages(descriptor: file.descriptor, size: file.size))
        let header = try parseHeader(Array(try reader.bytes(at: 0, count: min(64, reader.count))))
        try validate(header)
        return try inspect(reader, header: header, extent: extent)
    }

    /// The whole-file inspection of bytes already read; for the fuzzer and the tests.
    package static func inspect(bytes: [UInt8]) throws(Problem) -> ELFFile {
        let header = try parseHeader(bytes)
        try validate(header)
        return try inspect(ELFReader(bytes: bytes), header: header, extent: .whole)
    }

    private static func inspect(_ reader: ELFReader, header: Header, extent: Extent) throws(Problem) -> ELFFile {
        var file = ELFFile(header: header)
        try file.readDynamicSection(reader)
        guard extent == .whole else { return file }
        try file.readDynamicSymbols(reader)
        try file.readPluginNotes(reader)
        return file
    }

    /// The name notes of plugind carry, NUL included.
    static let noteName: [UInt8] = Array("plugind".utf8) + [0]
    /// Note type of the ABI version.
    static let abiNoteType: UInt32 = 1
    /// Note type of the binding ("extensionPoint=<identifier>").
    static let bindingNoteType: UInt32 = 2

    /// Reads the notes named "plugind" from every SHT_NOTE section.
    private mutating func readPluginNotes(_ reader: ELFReader) throws(Problem) {
        for section in try reader.sections() where section.type == 7 {  // SHT_NOTE
            let start = try reader.offset(section.offset)
            let end = try reader.end(of: start, count: section.size)
            var offset = start
            while offset <= end - 12 {
                let nameSize = Int(try reader.u32(offset))
                let descriptionSize = Int(try reader.u32(offset + 4))
                let type = try reader.u32(offset + 8)
                let nameStart = offset + 12
                guard nameSize <= end - nameStart else { throw .malformed("a note's name runs past its section") }
                let descriptionStart = nameStart + ((nameSize + 3) & ~3)
                guard descriptionStart <= end, descriptionSize <= end - descriptionStart else {
                    throw .malformed("a note's contents run past its section")
                }
                // Go's linker records its build id in a note named "Go": a library built by Go.
                // (Go writes the name padded, "Go\0\0", as size 4.)
                if nameSize == 3 || nameSize == 4, try reader.bytes(at: nameStart, count: 3).elementsEqual("Go\0".utf8) {
                    isBuiltByGo = true
                }
                if nameSize == Self.noteName.count, try reader.bytes(at: nameStart, count: nameSize).elementsEqual(Self.noteName) {
                    pluginNotes.append((type, Array(try reader.bytes(at: descriptionStart, count: descriptionSize))))
                    if type == Self.abiNoteType, descriptionSize == 4 { pluginABIVersion = try reader.u32(descriptionStart) }
                }
                offset = min(descriptionStart + ((descriptionSize + 3) & ~3), end)
                if offset == end { break }
            }
        }
    }

    private mutating func readDynamicSection(_ reader: ELFReader) throws(Problem) {
        let segments = try reader.segments()
        guard let dynamic = segments.first(where: { $0.type == 2 }) else { return }

        var entries: [(tag: Int64, value: UInt64)] = []
        var offset = try reader.offset(dynamic.offset)
        let end = try reader.end(of: offset, count: dynamic.fileSize)
        while offset <= end - 16 {
            let tag = Int64(bitPattern: try reader.u64(offset))
            if tag == 0 { break }
            entries.append((tag, try reader.u64(offset + 8)))
            offset += 16
        }
        guard let stringTableAddress = entries.first(where: { $0.tag == 5 })?.value else { return }
        // DT_STRTAB holds a virtual address; find the loaded segment that contains it.
        guard
            let load = segments.first(where: {
                $0.type == 1 && stringTableAddress >= $0.virtualAddress && stringTableAddress - $0.virtualAddress < $0.fileSize
            })
        else { throw .malformed("string table outside every loaded segment") }
        let stringTable = try reader.offset(load.offset, plus: stringTableAddress - load.virtualAddress)
        for (tag, value) in entries {
            switch tag {
            case 1: needed.append(try reader.string(try reader.offset(UInt64(stringTable), plus: value)))
            case 14: soname = try reader.string(try reader.offset(UInt64(stringTable), plus: value))
            case 15, 29:
                runPaths += try reader.string(try reader.offset(UInt64(stringTable), plus: value)).split(separator: ":").map(String.init)
            default: break
            }
        }
    }

    private mutating func readDynamicSymbols(_ reader: ELFReader) throws(Problem) {
        let sections = try reader.sections()
        for section in sections where section.type == 11 {  // SHT_DYNSYM
            guard Int(section.link) < sections.count else { throw .malformed("a symbol table links to no section") }
            let strings = try reader.offset(sections[Int(section.link)].offset)
            let start = try reader.offset(section.offset)
            let end = try reader.end(of: start, count: section.size)
            var symbol = start
            while symbol <= end - 24 {
                let nameOffset = try reader.u32(symbol)
                let info = try reader.u8(symbol + 4)
                let other = try reader.u8(symbol + 5)
                let sectionIndex = try reader.u16(symbol + 6)
                let binding = info >> 4
                let visibility = other & 3
                if sectionIndex != 0 && (binding == 1 || binding == 2) && (visibility == 0 || visibility == 3) {
                    exportedSymbols.insert(try reader.string(try reader.offset(UInt64(strings), plus: UInt64(nameOffset))))
                }
                symbol += 24
            }
        }
    }
}

/// An open file the ELF reader reads: a regular file (not a FIFO, whose open or read would wait
/// for a writer, nor a device) and its size when it was opened.
struct ELFOpenFile {
    let descriptor: FileDescriptor
    let size: Int

    static func open(_ path: String) throws(ELFFile.Problem) -> ELFOpenFile {
        let descriptor: FileDescriptor
        do {
            descriptor = try FileDescriptor.open(path, [.readOnly, .nonBlocking])
        } catch {
            throw .unreadable("\(error)")
        }
        var status = stat()
        guard fstat(descriptor.rawValue, &status) == 0, status.st_mode & S_IFMT == S_IFREG, status.st_size >= 0 else {
            descriptor.close()
            throw .unreadable("\(path) is not a regular file")
        }
        return ELFOpenFile(descriptor: descriptor, size: Int(status.st_size))
    }
}

/// The pages of a file the reader asked for, each read once with `pread`: what the reader needs
/// (headers, the dynamic section and its strings, the symbol tables, the notes), not the whole
/// file. Not shared between threads: one inspection owns it.
final class ELFFilePages {
    static let pageSize = 64 << 10

    private let descriptor: FileDescriptor
    /// The file's size when it was opened: the reader checks every offset against it.
    let size: Int
    private var pages: [Int: [UInt8]] = [:]

    init(descriptor: FileDescriptor, size: Int) {
        self.descriptor = descriptor
        self.size = size
    }

    /// Bytes `start..<start + count`, which the caller checked are inside the file.
    func bytes(at start: Int, count: Int) throws(ELFFile.Problem) -> ArraySlice<UInt8> {
        let first = start / Self.pageSize
        let last = count == 0 ? first : (start + count - 1) / Self.pageSize
        if first == last {
            let page = try self.page(first)
            let offset = start - first * Self.pageSize
            guard offset + count <= page.count else { throw shrunk(to: first * Self.pageSize + page.count) }
            return page[offset..<offset + count]
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count)
        for index in first...last {
            let page = try self.page(index)
            let pageStart = index * Self.pageSize
            let from = max(start, pageStart) - pageStart
            let to = min(start + count, pageStart + page.count) - pageStart
            bytes += page[from..<to]
        }
        return bytes[...]
    }

    private func page(_ index: Int) throws(ELFFile.Problem) -> [UInt8] {
        if let page = pages[index] { return page }
        let start = index * Self.pageSize
        let expected = min(Self.pageSize, size - start)
        let page: [UInt8]
        do {
            page = try descriptor.read(count: expected, at: start)
        } catch {
            throw .unreadable("\(error)")
        }
        // A short read: the file was truncated since it was opened.
        guard page.count == expected else { throw shrunk(to: start + page.count) }
        pages[index] = page
        return page
    }

    /// The refusal of a file found shorter than when it was opened (a read ended at `length`),
    /// with its size now.
    private func shrunk(to length: Int) -> ELFFile.Problem {
        var status = stat()
        let now = fstat(descriptor.rawValue, &status) == 0 ? Int(status.st_size) : length
        return .unreadable("it shrank while it was read (\(size) bytes when it was opened, \(now) now)")
    }
}

/// Bounds-checked little-endian reads from a file's bytes, in memory (the fuzzer's) or read from
/// the file as they are asked for. Every offset and size read from the file is checked against
/// the file before it is used, with no arithmetic that could overflow.
struct ELFReader {
    private enum Source {
        case memory([UInt8])
        case file(ELFFilePages)
    }

    private let source: Source
    /// The file's size.
    let count: Int

    init(bytes: [UInt8]) {
        source = .memory(bytes)
        count = bytes.count
    }

    init(file: ELFFilePages) {
        source = .file(file)
        count = file.size
    }

    struct Segment {
        var type: UInt32
        var offset: UInt64
        var virtualAddress: UInt64
        var fileSize: UInt64
    }

    struct Section {
        var type: UInt32
        var offset: UInt64
        var size: UInt64
        var link: UInt32
    }

    /// At most this many program or section headers are read (ELF allows 65,535).
    static let maximumHeaders = 4096

    func check(_ offset: Int, _ count: Int) throws(ELFFile.Problem) {
        guard offset >= 0, count >= 0, offset <= self.count, count <= self.count - offset else {
            throw .malformed("reference to \(count) bytes at offset \(offset), beyond the end of the file (\(self.count) bytes)")
        }
    }

    /// The `count` bytes at `offset`, inside the file.
    func bytes(at offset: Int, count: Int) throws(ELFFile.Problem) -> ArraySlice<UInt8> {
        try check(offset, count)
        switch source {
        case .memory(let bytes): return bytes[offset..<offset + count]
        case .file(let pages): return try pages.bytes(at: offset, count: count)
        }
    }

    /// `value` (+ `plus`) as an offset inside the file.
    func offset(_ value: UInt64, plus: UInt64 = 0) throws(ELFFile.Problem) -> Int {
        let (sum, overflow) = value.addingReportingOverflow(plus)
        guard !overflow, sum <= UInt64(count) else {
            throw .malformed("offset \(value)+\(plus) beyond the end of the file (\(count) bytes)")
        }
        return Int(sum)
    }

    /// The end of `count` bytes from `start`, inside the file.
    func end(of start: Int, count: UInt64) throws(ELFFile.Problem) -> Int {
        guard count <= UInt64(self.count - start) else {
            throw .malformed("\(count) bytes at offset \(start) run past the end of the file (\(self.count) bytes)")
        }
        return start + Int(count)
    }

    func segments() throws(ELFFile.Problem) -> [Segment] {
        let offset = try self.offset(try u64(0x20))
        let entrySize = Int(try u16(0x36))
        let count = Int(try u16(0x38))
        guard count <= Self.maximumHeaders else { throw .malformed("\(count) program headers") }
        guard count == 0 || entrySize >= 56 else { throw .malformed("program headers of \(entrySize) bytes") }
        return try (0..<count).map { (index) throws(ELFFile.Problem) -> Segment in
            let base = try self.offset(UInt64(offset), plus: UInt64(index * entrySize))
            return Segment(type: try u32(base), offset: try u64(base + 8), virtualAddress: try u64(base + 16), fileSize: try u64(base + 32))
        }
    }

    func sections() throws(ELFFile.Problem) -> [Section] {
        let offset = try self.offset(try u64(0x28))
        let entrySize = Int(try u16(0x3A))
        let count = Int(try u16(0x3C))
        guard offset > 0, count > 0 else { return [] }
        guard count <= Self.maximumHeaders else { throw .malformed("\(count) section headers") }
        guard entrySize >= 64 else { throw .malformed("section headers of \(entrySize) bytes") }
        return try (0..<count).map { (index) throws(ELFFile.Problem) -> Section in
            let base = try self.offset(UInt64(offset), plus: UInt64(index * entrySize))
            return Section(type: try u32(base + 4), offset: try u64(base + 24), size: try u64(base + 32), link: try u32(base + 40))
        }
    }

    func u8(_ offset: Int) throws(ELFFile.Problem) -> UInt8 {
        let bytes = try self.bytes(at: offset, count: 1)
        return bytes[bytes.startIndex]
    }

    func u16(_ offset: Int) throws(ELFFile.Problem) -> UInt16 {
        UInt16(truncatingIfNeeded: try littleEndian(offset, 2))
    }

    func u32(_ offset: Int) throws(ELFFile.Problem) -> UInt32 {
        UInt32(truncatingIfNeeded: try littleEndian(offset, 4))
    }

    func u64(_ offset: Int) throws(ELFFile.Problem) -> UInt64 {
        try littleEndian(offset, 8)
    }

    /// The `width` bytes at `offset` as a little-endian number.
    private func littleEndian(_ offset: Int, _ width: Int) throws(ELFFile.Problem) -> UInt64 {
        var value: UInt64 = 0
        for byte in try bytes(at: offset, count: width).reversed() { value = value << 8 | UInt64(byte) }
        return value
    }

    /// A NUL-terminated string of at most 4096 bytes.
    func string(_ offset: Int) throws(ELFFile.Problem) -> String {
        try check(offset, 0)
        let bytes = try self.bytes(at: offset, count: min(count - offset, 4096))
        guard let end = bytes.firstIndex(of: 0) else { throw .malformed("unterminated string") }
        return String(decoding: bytes[..<end], as: UTF8.self)
    }
}
