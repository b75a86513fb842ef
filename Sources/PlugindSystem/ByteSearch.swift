extension StringProtocol {
    /// Whether `text` occurs in this string, compared byte by byte (UTF-8; unlike `contains(_:)`,
    /// an "e" is found in an "é" written as "e" and a combining accent). For code the worker
    /// executable links, which compares ASCII names: the standard library's `contains(_:)` for
    /// strings lives in `_StringProcessing`, which would link the regular-expression engine into
    /// every worker.
    package func containsBytes(of text: String) -> Bool {
        let haystack = Array(utf8)
        let needle = Array(text.utf8)
        guard needle.count <= haystack.count else { return false }
        if needle.isEmpty { return true }
        return (0...(haystack.count - needle.count)).contains { start in
            haystack[start..<start + needle.count].elementsEqual(needle)
        }
    }
}
