import Foundation

/// A point in time as `plugind logs --since` takes it: "2026-12-01", "2026-12-01 14:30[:15]",
/// "2026-12-01T14:30:15Z" (without a zone: local time), "14:30" (today), "today", "yesterday",
/// or a time before now: "-30s", "-10m", "-2h", "-1d".
enum SinceTime {
    /// Microseconds since 1970; nil when `text` is none of the forms above.
    static func parse(_ text: String, now: Date = Date(), timeZone: TimeZone = .current) -> UInt64? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        func micro(_ date: Date) -> UInt64? {
            let value = date.timeIntervalSince1970 * 1_000_000
            return value >= 0 && value < 1e17 ? UInt64(value) : nil
        }
        switch trimmed {
        case "today": return micro(calendar.startOfDay(for: now))
        case "yesterday": return calendar.date(byAdding: .day, value: -1, to: calendar.startOfDay(for: now)).flatMap(micro)
        default: break
        }
        if trimmed.hasPrefix("-"), let unit = trimmed.last, let amount = Double(trimmed.dropFirst().dropLast()), amount >= 0 {
            let seconds: Double? =
                switch unit {
                case "s": amount
                case "m": amount * 60
                case "h": amount * 3600
                case "d": amount * 86400
                default: nil
                }
            return seconds.flatMap { micro(now.addingTimeInterval(-$0)) }
        }
        let formats = [
            "yyyy-MM-dd'T'HH:mm:ssXXXXX", "yyyy-MM-dd'T'HH:mm:ss", "yyyy-MM-dd HH:mm:ss", "yyyy-MM-dd'T'HH:mm", "yyyy-MM-dd HH:mm",
            "yyyy-MM-dd",
        ]
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = timeZone
        for format in formats {
            formatter.dateFormat = format
            if let date = formatter.date(from: trimmed) { return micro(date) }
        }
        for format in ["HH:mm:ss", "HH:mm"] {
            formatter.dateFormat = format
            guard let time = formatter.date(from: trimmed) else { continue }
            let parts = calendar.dateComponents([.hour, .minute, .second], from: time)
            return calendar.date(bySettingHour: parts.hour ?? 0, minute: parts.minute ?? 0, second: parts.second ?? 0, of: now).flatMap(
                micro)
        }
        return nil
    }
}
