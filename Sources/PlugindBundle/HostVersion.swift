import PlugindTypes

/// A dotted version number ("1.2.0"), compared component by component.
package struct HostVersion: Comparable, Sendable, CustomStringConvertible {
    package var components: [Int]

    /// The version of this plugind; manifests compare `minimumHostVersion` against it.
    package static let current = HostVersion(PlugindRelease.version)!

    package init?(_ text: String) {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard !parts.isEmpty, parts.count <= 4 else { return nil }
        var components: [Int] = []
        for part in parts {
            guard let number = Int(part), number >= 0 else { return nil }
            components.append(number)
        }
        self.components = components
    }

    package static func < (left: HostVersion, right: HostVersion) -> Bool {
        let count = max(left.components.count, right.components.count)
        for index in 0..<count {
            let a = index < left.components.count ? left.components[index] : 0
            let b = index < right.components.count ? right.components[index] : 0
            if a != b { return a < b }
        }
        return false
    }

    package static func == (left: HostVersion, right: HostVersion) -> Bool {
        !(left < right) && !(right < left)
    }

    package var description: String {
        components.map(String.init).joined(separator: ".")
    }
}
