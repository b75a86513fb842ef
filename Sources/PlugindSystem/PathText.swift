/// A path's components as text, for the modules that do without Foundation's `NSString`: the
/// same answers as `NSString`'s path methods for the absolute and relative paths plugind builds.
extension String {
    /// The last component (`"b"` for `"/a/b/"`); `"/"` for the root, `""` for an empty path.
    package var lastPathComponent: String {
        let trimmed = trimmingTrailingSlashes
        if trimmed == "/" || trimmed.isEmpty { return trimmed }
        guard let slash = trimmed.lastIndex(of: "/") else { return trimmed }
        return String(trimmed[trimmed.index(after: slash)...])
    }

    /// Everything before the last component (`"/a"` for `"/a/b"`, `"/"` for `"/a"`, `""` for `"a"`).
    package var deletingLastPathComponent: String {
        let trimmed = trimmingTrailingSlashes
        if trimmed == "/" { return "/" }
        guard let slash = trimmed.lastIndex(of: "/") else { return "" }
        if slash == trimmed.startIndex { return "/" }
        return String(trimmed[..<slash])
    }

    /// `self` and `component` joined by one slash.
    package func appendingPathComponent(_ component: String) -> String {
        if isEmpty { return component }
        if component.isEmpty { return self }
        let head = hasSuffix("/") ? String(dropLast()) : self
        let tail = component.hasPrefix("/") ? String(component.dropFirst()) : component
        return head + "/" + tail
    }

    private var trimmingTrailingSlashes: String {
        var text = Substring(self)
        while text.count > 1, text.hasSuffix("/") { text = text.dropLast() }
        return String(text)
    }
}
