/// A number of bytes as people read it: "512 bytes", "64 KiB", "1.5 GiB".
package struct ByteCount: CustomStringConvertible, Sendable {
    package var bytes: UInt64

    package init(_ bytes: UInt64) {
        self.bytes = bytes
    }

    package init(_ bytes: Int) {
        self.bytes = UInt64(max(bytes, 0))
    }

    package var description: String {
        let units = ["bytes", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(bytes)
        var unit = 0
        while value >= 1024 && unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        if unit == 0 { return bytes == 1 ? "1 byte" : "\(bytes) bytes" }
        let rounded = (value * 10).rounded() / 10
        if rounded == rounded.rounded() { return "\(Int(rounded)) \(units[unit])" }
        return "\(rounded) \(units[unit])"
    }
}
