/// "250 ms", "2 s", "1.5 s".
struct DurationText: CustomStringConvertible {
    let duration: Duration

    init(_ duration: Duration) {
        self.duration = duration
    }

    var description: String {
        let (seconds, attoseconds) = duration.components
        let milliseconds = seconds * 1000 + attoseconds / 1_000_000_000_000_000
        if milliseconds == 0 { return "\(attoseconds / 1_000_000_000_000) µs" }
        if milliseconds < 1000 { return "\(milliseconds) ms" }
        if milliseconds % 1000 == 0 { return "\(milliseconds / 1000) s" }
        return "\(Double(milliseconds) / 1000) s"
    }
}
