extension [String] {
    /// The names joined with `separator`, as `joined(separator:)` joins them. The standard
    /// library's `joined` is generic code that is not inlined: it looks the array's collection
    /// conformance up at run time and caches it in a page of its own, which every worker would
    /// write for the confinement report it makes.
    func joinedSpecialized(separator: String) -> String {
        var text = ""
        for (index, name) in enumerated() {
            if index > 0 { text += separator }
            text += name
        }
        return text
    }
}
