/// Why a manifest was rejected: the file, the key (a path such as `functions[2].returns`) and
/// what is wrong with it.
package struct ManifestError: Error, Equatable, Sendable, CustomStringConvertible {
    package var file: String
    /// The offending key path, or nil when the document as a whole is wrong (e.g. bad JSON).
    package var key: String?
    package var problem: String

    package init(file: String, key: String?, problem: String) {
        self.file = file
        self.key = key
        self.problem = problem
    }

    package var description: String {
        if let key { return "\(file): key '\(key)' \(problem)" }
        return "\(file): \(problem)"
    }
}

/// Something in a manifest that is accepted but probably a mistake (an unknown key).
package struct ManifestWarning: Equatable, Sendable, CustomStringConvertible {
    package var file: String
    package var key: String
    package var problem: String

    package var description: String { "\(file): key '\(key)' \(problem)" }
}
