package import FoundationEssentials
import Glibc
import PlugindSystem
import PlugindTypes

/// Reads and strictly validates `manifest.json` (version 1). Missing keys and wrong types are
/// errors that name the key and the file; unknown keys are warnings.
package enum ManifestParser {
    package struct Result: Sendable {
        package var manifest: Manifest
        package var warnings: [ManifestWarning]
    }

    static let knownKeys: Set<String> = [
        "manifestVersion", "identifier", "name", "version", "extensionPoint", "library", "description",
        "localizedNames", "localizedDescriptions", "extensionPointVersions", "capabilities", "functions", "handles", "structs",
        "limits",
        "permissions",
        "minimumHostVersion",
        "concurrency", "adapter",
    ]
    static let limitKeys: Set<String> = [
        "memoryBytes", "cpuSeconds", "openFiles", "requestTimeoutMilliseconds", "maxMessageBytes", "threads", "scratchBytes",
    ]
    static let permissionKeys: Set<String> = ["network", "processes", "read", "write", "symlinks"]

    /// The largest manifest plugind reads: a manifest is a few hundred bytes; a larger file is
    /// refused before it is read, so that a huge (or sparse) file cannot make a scanning host
    /// allocate for it.
    package static let maximumBytes = 256 << 10
    /// The longest string a manifest may hold in any field.
    package static let maximumStringBytes = 4096
    /// The most paths a manifest may ask to read or write, and functions it may declare.
    package static let maximumListCount = 256
    package static let maximumCapabilityLength = 128

    /// Whether `text` can name a capability: 1 to 128 printable ASCII characters, no spaces,
    /// quotes or backslashes (so that it is the same word in JSON, C and the binding note).
    package static func isCapabilityIdentifier(_ text: String) -> Bool {
        let bytes = text.utf8
        return (1...maximumCapabilityLength).contains(bytes.count)
            && bytes.allSatisfy { (0x21...0x7E).contains($0) && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }
    }
    static let functionKeys: Set<String> = ["name", "arguments", "returns", "errno"]
    static let argumentKeys: Set<String> = [
        "name", "type", "to", "direction", "element", "count", "kind", "struct", "by", "set", "get", "arguments", "returns",
    ]
    static let returnKeys: Set<String> = ["type", "kind", "struct", "get"]
    static let handleKeys: Set<String> = ["release", "struct"]
    static let structKeys: Set<String> = ["size", "alignment", "fields"]
    static let callbackArgumentKeys: Set<String> = ["name", "type", "element", "count"]
    static let fieldKeys: Set<String> = ["name", "offset", "type", "direction", "element", "count", "advances"]

    /// Parses manifest bytes; `file` names the source in every message.
    package static func parse(_ data: Data, file: String) throws(ManifestError) -> Result {
        let document: JSONValue
        do {
            document = try JSONValue.parse(data)
        } catch {
            throw ManifestError(file: file, key: nil, problem: "is not valid JSON: \(error)")
        }
        var reader = ObjectReader(file: file, path: "", value: document)
        return try reader.readManifest()
    }

    /// Reads and parses the manifest at `path`: a regular file of at most `maximumBytes`, checked
    /// on the open descriptor before anything is read.
    package static func parse(contentsOf path: String) throws(ManifestError) -> Result {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard descriptor >= 0 else {
            throw ManifestError(file: path, key: nil, problem: "cannot be read: \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { throw ManifestError(file: path, key: nil, problem: "is not a regular file") }
        return try parse(descriptor: descriptor, status: status, path: path)
    }

    /// Reads and parses the manifest open as `descriptor` (`path` names it in messages), whose
    /// status `status` was taken on the descriptor before anything was read: a regular file of
    /// at most `maximumBytes`.
    static func parse(descriptor: CInt, status: stat, path: String) throws(ManifestError) -> Result {
        guard status.st_mode & S_IFMT == S_IFREG else {
            throw ManifestError(file: path, key: nil, problem: "is not a regular file")
        }
        guard status.st_size <= maximumBytes else {
            throw ManifestError(
                file: path, key: nil, problem: "is \(status.st_size) bytes; a manifest may have at most \(maximumBytes) bytes")
        }
        var bytes = [UInt8](repeating: 0, count: Int(status.st_size) + 1)
        var count = 0
        while count < bytes.count {
            let read = bytes.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress! + count, $0.count - count) }
            if read < 0 && errno == EINTR { continue }
            guard read >= 0 else {
                throw ManifestError(file: path, key: nil, problem: "cannot be read: \(String(cString: strerror(errno)))")
            }
            if read == 0 { break }
            count += read
        }
        // One byte more than the size said means it grew while it was read.
        guard count <= maximumBytes else {
            throw ManifestError(file: path, key: nil, problem: "grew past \(maximumBytes) bytes while it was read")
        }
        return try parse(Data(bytes[..<count]), file: path)
    }

    /// Reverse DNS: at least two dot-separated labels of letters, digits, '-' and '_'. One pass
    /// over the bytes: every manifest of a scan is checked twice, and splitting into labels was
    /// a visible share of a first scan of many bundles.
    package static func isReverseDNS(_ text: String) -> Bool {
        var labels = 1
        var labelLength = 0
        for byte in text.utf8 {
            if byte == UInt8(ascii: ".") {
                guard labelLength > 0 else { return false }
                labels += 1
                labelLength = 0
            } else if (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == 0x2D || byte == 0x5F
            {
                labelLength += 1
            } else {
                return false
            }
        }
        return labels >= 2 && labelLength > 0
    }

    /// A C identifier.
    package static func isCIdentifier(_ text: String) -> Bool {
        guard let first = text.utf8.first, !(first >= 0x30 && first <= 0x39) else { return false }
        return text.utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || byte == 0x5F
        }
    }
}

/// Walks one JSON object, turning type mismatches into `ManifestError`s with full key paths and
/// collecting unknown keys as warnings. (Function declarations: ManifestParser+Functions.swift.)
struct ObjectReader {
    let file: String
    let path: String
    let members: [String: JSONValue]
    let isObject: Bool
    let foundType: String
    var warnings: [ManifestWarning] = []

    init(file: String, path: String, value: JSONValue) {
        self.file = file
        self.path = path
        if case .object(let members) = value {
            self.members = members
            self.isObject = true
        } else {
            self.members = [:]
            self.isObject = false
        }
        self.foundType = value.typeName
    }

    func keyPath(_ key: String) -> String {
        path.isEmpty ? key : "\(path).\(key)"
    }

    func error(_ key: String, _ problem: String) -> ManifestError {
        ManifestError(file: file, key: keyPath(key), problem: problem)
    }

    func requireObject() throws(ManifestError) {
        guard isObject else {
            if path.isEmpty {
                throw ManifestError(file: file, key: nil, problem: "must contain a JSON object, found \(foundType)")
            }
            throw ManifestError(file: file, key: path, problem: "must be an object, found \(foundType)")
        }
    }

    mutating func warnUnknownKeys(_ known: Set<String>) {
        for key in members.keys.sorted() where !known.contains(key) {
            warnings.append(ManifestWarning(file: file, key: keyPath(key), problem: "is not part of manifest version 1 and is ignored"))
        }
    }

    func requiredString(_ key: String) throws(ManifestError) -> String {
        guard members[key] != nil else { throw error(key, "is missing (a string is required)") }
        let text = try optionalString(key) ?? ""
        if text.allSatisfy(\.isWhitespace) { throw error(key, "must not be empty") }
        return text
    }

    func optionalString(_ key: String) throws(ManifestError) -> String? {
        guard let value = members[key] else { return nil }
        guard case .string(let text) = value else { throw error(key, "must be a string, found \(value.typeName)") }
        try checkLength(key, text)
        return text
    }

    func checkLength(_ key: String, _ text: String) throws(ManifestError) {
        guard text.utf8.count <= ManifestParser.maximumStringBytes else {
            throw error(key, "is \(text.utf8.count) bytes long; at most \(ManifestParser.maximumStringBytes) are allowed")
        }
    }

    func positiveInteger(_ key: String) throws(ManifestError) -> UInt64? {
        guard let value = members[key] else { return nil }
        switch value {
        case .integer(let number) where number > 0: return UInt64(number)
        case .unsignedInteger(let number) where number > 0: return number
        case .integer, .unsignedInteger: throw error(key, "must be a positive integer")
        default: throw error(key, "must be a positive integer, found \(value.typeName)")
        }
    }

    func stringArray(_ key: String) throws(ManifestError) -> [String]? {
        guard let value = members[key] else { return nil }
        guard case .array(let elements) = value else { throw error(key, "must be an array of strings, found \(value.typeName)") }
        guard elements.count <= ManifestParser.maximumListCount else {
            throw error(key, "has \(elements.count) entries; at most \(ManifestParser.maximumListCount) are allowed")
        }
        var strings: [String] = []
        for (index, element) in elements.enumerated() {
            guard case .string(let text) = element else {
                throw error("\(key)[\(index)]", "must be a string, found \(element.typeName)")
            }
            try checkLength("\(key)[\(index)]", text)
            strings.append(text)
        }
        return strings
    }

    mutating func readManifest() throws(ManifestError) -> ManifestParser.Result {
        try requireObject()
        warnUnknownKeys(ManifestParser.knownKeys)

        guard let versionValue = members["manifestVersion"] else {
            throw error("manifestVersion", "is missing (must be \(Manifest.currentVersion))")
        }
        guard case .integer(let version) = versionValue else {
            throw error("manifestVersion", "must be a number, found \(versionValue.typeName)")
        }
        guard version == Manifest.currentVersion else {
            throw error("manifestVersion", "is \(version); this plugind reads version \(Manifest.currentVersion)")
        }

        let identifier = try requiredString("identifier")
        guard ManifestParser.isReverseDNS(identifier) else {
            throw error("identifier", "must be a reverse-DNS name such as com.example.my-plugin, found '\(identifier)'")
        }
        let extensionPoint = try requiredString("extensionPoint")
        guard ManifestParser.isReverseDNS(extensionPoint) else {
            throw error("extensionPoint", "must be a reverse-DNS name such as com.example.app.filters, found '\(extensionPoint)'")
        }
        let library = try requiredString("library")
        let adapter = try readAdapter(library: library)

        var manifest = Manifest(
            manifestVersion: Int(version),
            identifier: identifier,
            name: try requiredString("name"),
            version: try requiredString("version"),
            extensionPoint: extensionPoint,
            library: library,
            description: try optionalString("description"),
            minimumHostVersion: try optionalString("minimumHostVersion")
        )
        if let minimum = manifest.minimumHostVersion, HostVersion(minimum) == nil {
            throw error("minimumHostVersion", "must be a version such as 1.2.0, found '\(minimum)'")
        }
        manifest.extensionPointVersions = try readPointVersions()
        manifest.capabilities = try readCapabilities()
        manifest.localizedNames = try readTranslations("localizedNames")
        manifest.localizedDescriptions = try readTranslations("localizedDescriptions")
        manifest.functions = try readFunctions()
        if let concurrency = try positiveInteger("concurrency") {
            guard concurrency <= Manifest.maximumConcurrency else {
                throw error("concurrency", "is \(concurrency); at most \(Manifest.maximumConcurrency) requests run at once")
            }
            manifest.concurrency = Int(concurrency)
        }
        manifest.limits = try readLimits()
        manifest.permissions = try readPermissions()
        manifest.adapter = adapter
        if adapter != nil, !manifest.functions.isEmpty {
            throw error("functions", "must be absent: a foreign plugin is served by its adapter")
        }
        return ManifestParser.Result(manifest: manifest, warnings: warnings)
    }

    /// `["text/markdown", "text/plain"]`: identifiers a host can match exactly, so printable ASCII
    /// without spaces (they are also the words of the library's binding note), each once.
    private func readCapabilities() throws(ManifestError) -> [String] {
        let key = "capabilities"
        guard let capabilities = try stringArray(key) else { return [] }
        var seen: Set<String> = []
        for (index, capability) in capabilities.enumerated() {
            guard ManifestParser.isCapabilityIdentifier(capability) else {
                throw error(
                    "\(key)[\(index)]",
                    "is '\(InertText.escape(capability))'; a capability is 1 to \(ManifestParser.maximumCapabilityLength) printable ASCII characters without spaces, quotes or backslashes, such as text/markdown"
                )
            }
            guard seen.insert(capability).inserted else {
                throw error("\(key)[\(index)]", "repeats '\(capability)'; name each capability once")
            }
        }
        return capabilities
    }

    /// `{"minimum": "2.0", "below": "3.0"}`: either bound, at least one.
    private func readPointVersions() throws(ManifestError) -> PointVersionRange? {
        let key = "extensionPointVersions"
        guard let value = members[key] else { return nil }
        guard case .object(let bounds) = value else {
            throw error(key, "must be an object such as {\"minimum\": \"2.0\", \"below\": \"3.0\"}, found \(value.typeName)")
        }
        for name in bounds.keys where name != "minimum" && name != "below" {
            throw error(key, "has '\(InertText.escape(name))'; the bounds are 'minimum' (included) and 'below' (excluded)")
        }
        func bound(_ name: String) throws(ManifestError) -> HostVersion? {
            guard let bound = bounds[name] else { return nil }
            guard case .string(let text) = bound else {
                throw error("\(key).\(name)", "must be a version such as 2.0, found \(bound.typeName)")
            }
            guard let version = HostVersion(text) else {
                throw error("\(key).\(name)", "must be a version such as 2.0, found '\(InertText.escape(text))'")
            }
            return version
        }
        let range = PointVersionRange(minimum: try bound("minimum"), below: try bound("below"))
        guard range.minimum != nil || range.below != nil else { throw error(key, "must give 'minimum', 'below' or both") }
        if let minimum = range.minimum, let below = range.below, !(minimum < below) {
            throw error(key, "is empty: 'minimum' \(minimum) is not before 'below' \(below)")
        }
        return range
    }

    /// An object of language tag to text, e.g. `{"de": "Großbuchstaben", "pt_BR": "Maiúsculas"}`.
    private func readTranslations(_ key: String) throws(ManifestError) -> [String: String] {
        guard let value = members[key] else { return [:] }
        guard case .object(let entries) = value else {
            throw error(key, "must be an object of language tag to text, such as {\"de\": \"…\"}, found \(value.typeName)")
        }
        guard entries.count <= ManifestParser.maximumListCount else {
            throw error(key, "has \(entries.count) translations; at most \(ManifestParser.maximumListCount) are allowed")
        }
        var translations: [String: String] = [:]
        for (tag, text) in entries {
            guard LanguagePreference.isLanguageTag(tag) else {
                throw error(key, "has '\(InertText.escape(tag))', which is not a language tag such as de, pt_BR or pt-BR")
            }
            guard case .string(let translation) = text else {
                throw error("\(key).\(tag)", "must be a string, found \(text.typeName)")
            }
            try checkLength("\(key).\(tag)", translation)
            guard !translation.allSatisfy(\.isWhitespace) else { throw error("\(key).\(tag)", "must not be empty") }
            translations[tag] = translation
        }
        return translations
    }

    private mutating func readLimits() throws(ManifestError) -> Manifest.Limits {
        guard let value = members["limits"] else { return Manifest.Limits() }
        var limits = ObjectReader(file: file, path: keyPath("limits"), value: value)
        try limits.requireObject()
        limits.warnUnknownKeys(ManifestParser.limitKeys)
        warnings += limits.warnings
        return Manifest.Limits(
            memoryBytes: try limits.positiveInteger("memoryBytes"),
            cpuSeconds: try limits.positiveInteger("cpuSeconds"),
            openFiles: try limits.positiveInteger("openFiles"),
            requestTimeoutMilliseconds: try limits.positiveInteger("requestTimeoutMilliseconds"),
            maxMessageBytes: try limits.positiveInteger("maxMessageBytes"),
            threads: try limits.positiveInteger("threads"),
            scratchBytes: try limits.positiveInteger("scratchBytes")
        )
    }

    private mutating func readPermissions() throws(ManifestError) -> Manifest.Permissions {
        guard let value = members["permissions"] else { return Manifest.Permissions() }
        var permissions = ObjectReader(file: file, path: keyPath("permissions"), value: value)
        try permissions.requireObject()
        permissions.warnUnknownKeys(ManifestParser.permissionKeys)
        warnings += permissions.warnings
        func flag(_ key: String) throws(ManifestError) -> Bool {
            guard let value = permissions.members[key] else { return false }
            guard case .bool(let allowed) = value else {
                throw permissions.error(key, "must be true or false, found \(value.typeName)")
            }
            return allowed
        }
        var result = Manifest.Permissions(network: try flag("network"), processes: try flag("processes"), symlinks: try flag("symlinks"))
        for key in ["read", "write"] {
            let paths = try permissions.stringArray(key) ?? []
            for (index, path) in paths.enumerated() where !path.hasPrefix("/") {
                throw permissions.error("\(key)[\(index)]", "must be an absolute path, found '\(path)'")
            }
            if key == "read" { result.read = paths } else { result.write = paths }
        }
        return result
    }
}
