/// Numbers as people read them, without Foundation's formatters (which bring ICU's data with them).
package enum DecimalText {
    /// `value` rounded to `digits` decimals, always showing them: `fixed(2.345, digits: 1)` is
    /// "2.3", `fixed(7, digits: 2)` is "7.00". Not finite: its name ("inf", "nan").
    package static func fixed(_ value: Double, digits: Int) -> String {
        guard value.isFinite else { return "\(value)" }
        let digits = min(max(digits, 0), 9)
        var scale: Double = 1
        for _ in 0..<digits { scale *= 10 }
        let scaled = (abs(value) * scale).rounded()
        guard scaled < 9e18 else { return "\(value)" }
        let whole = UInt64(scaled)
        let unit = UInt64(scale)
        let sign = value < 0 && whole != 0 ? "-" : ""
        guard digits > 0 else { return sign + String(whole) }
        let fraction = String(whole % unit)
        return sign + String(whole / unit) + "." + String(repeating: "0", count: digits - fraction.count) + fraction
    }
}
