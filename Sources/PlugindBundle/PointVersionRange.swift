/// The versions of its extension point a plugin supports (the manifest's
/// `extensionPointVersions`): from `minimum` (included) up to `below` (excluded), either bound
/// optional. A host whose point declares a version outside the range does not list the plugin.
package struct PointVersionRange: Equatable, Sendable, CustomStringConvertible {
    package var minimum: HostVersion?
    package var below: HostVersion?

    package init(minimum: HostVersion?, below: HostVersion?) {
        self.minimum = minimum
        self.below = below
    }

    package func contains(_ version: HostVersion) -> Bool {
        if let minimum, version < minimum { return false }
        if let below, !(version < below) { return false }
        return true
    }

    package var description: String {
        switch (minimum, below) {
        case (let minimum?, let below?): "\(minimum) or later, before \(below)"
        case (let minimum?, nil): "\(minimum) or later"
        case (nil, let below?): "before \(below)"
        case (nil, nil): "any"
        }
    }
}
