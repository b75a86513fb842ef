/// A call of the plugin's that a confinement layer refused, as the worker saw it fail: the call,
/// what it named (an address family, a path), the layer, the errno the plugin got, and how many
/// reports the worker's rate limit dropped before this one.
package struct SandboxRefusal: Equatable, Sendable {
    package enum Layer: UInt8, Sendable {
        case seccomp = 1
        case landlock = 2
        case view = 3
    }

    package var call: String
    package var detail: String
    package var layer: Layer
    package var errorNumber: Int32
    package var dropped: UInt32

    package init(call: String, detail: String, layer: Layer, errorNumber: Int32, dropped: UInt32) {
        self.call = call
        self.detail = detail
        self.layer = layer
        self.errorNumber = errorNumber
        self.dropped = dropped
    }
}
