import FoundationEssentials
import Glibc
import PlugindSystem

/// One thing a host records about a plugin for the owner: a line the plugin logged, a crash, a
/// quarantine, a limit it hit, a refusal of the sandbox, or an owner's decision. Written to the
/// system journal (one entry, with the fields below) or to the per-user log file (one JSON line),
/// and read back by `plugind logs`.
package struct PluginLogEntry: Sendable, Equatable, Codable {
    package enum Event: String, Sendable, Codable, CaseIterable {
        case log, crash, killed, quarantine, limit, refusal, dropped
        case approve, disable, enable, revoke
    }

    /// When it happened, in microseconds since 1970 (the journal's resolution).
    package var time: UInt64
    /// syslog's priority: 3 error, 4 warning, 5 notice, 6 info, 7 debug.
    package var priority: Int
    package var event: Event
    /// The plugin's text (inert only where it is shown) or plugind's own sentence.
    package var message: String
    package var plugin: String
    package var pluginVersion: String?
    package var bundleDigest: String?
    package var hostIdentifier: String?
    package var hostExecutable: String?
    package var hostPID: Int32?
    package var workerPID: Int32?
    /// The plugin's own level name for a logged line ("debug", "info", "warning", "error").
    package var level: String?
    /// The user whose process sent the entry, as the journal stamped it (`_UID`, which no sender
    /// can choose): who wrote it, not that a plugind host did. Nil for an entry written, or of
    /// the log file, whose lines say nothing trustworthy about their writer.
    package var uid: UInt32?

    package init(
        time: UInt64 = PluginLogEntry.now(), priority: Int, event: Event, message: String, plugin: String,
        pluginVersion: String? = nil, bundleDigest: String? = nil, hostIdentifier: String? = nil, hostExecutable: String? = nil,
        hostPID: Int32? = nil, workerPID: Int32? = nil, level: String? = nil, uid: UInt32? = nil
    ) {
        self.time = time
        self.priority = priority
        self.event = event
        self.message = message
        self.plugin = plugin
        self.pluginVersion = pluginVersion
        self.bundleDigest = bundleDigest
        self.hostIdentifier = hostIdentifier
        self.hostExecutable = hostExecutable
        self.hostPID = hostPID
        self.workerPID = workerPID
        self.level = level
        self.uid = uid
    }

    package static func now() -> UInt64 {
        var clock = timespec()
        clock_gettime(CLOCK_REALTIME, &clock)
        return UInt64(clock.tv_sec) * 1_000_000 + UInt64(clock.tv_nsec) / 1000
    }

    /// The identifier every plugind entry carries in the journal (`SYSLOG_IDENTIFIER`), which
    /// `plugind logs` matches on.
    package static let syslogIdentifier = "plugind"
    /// The most of a message kept: longer ones are cut, saying so, so that one entry always fits
    /// one datagram and one line of the log file stays small.
    package static let maximumMessageBytes = 8192

    /// The journal fields, in the order written: the journal's own, then plugind's.
    package var journalFields: [(String, String)] {
        var fields: [(String, String)] = [
            ("MESSAGE", message), ("PRIORITY", String(priority)), ("SYSLOG_IDENTIFIER", Self.syslogIdentifier),
            ("PLUGIND_EVENT", event.rawValue), ("PLUGIND_PLUGIN", plugin), ("PLUGIND_TIME", String(time)),
        ]
        func add(_ name: String, _ value: String?) { if let value { fields.append((name, value)) } }
        add("PLUGIND_PLUGIN_VERSION", pluginVersion)
        add("PLUGIND_BUNDLE_DIGEST", bundleDigest)
        add("PLUGIND_HOST", hostIdentifier)
        add("PLUGIND_HOST_EXECUTABLE", hostExecutable)
        add("PLUGIND_HOST_PID", hostPID.map(String.init))
        add("PLUGIND_WORKER_PID", workerPID.map(String.init))
        add("PLUGIND_LEVEL", level)
        return fields
    }

    /// The entry as one datagram of the journal's native protocol: `NAME=value` lines, and for a
    /// value holding a line break the binary form (the name, a line break, the length as 64-bit
    /// little-endian, the bytes, a line break), so that no text of the plugin can add a field.
    package var journalDatagram: [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(256 + message.utf8.count)
        for (name, value) in journalFields {
            bytes += name.utf8
            if value.utf8.contains(UInt8(ascii: "\n")) {
                bytes.append(UInt8(ascii: "\n"))
                var length = UInt64(value.utf8.count).littleEndian
                withUnsafeBytes(of: &length) { bytes += $0 }
                bytes += value.utf8
            } else {
                bytes.append(UInt8(ascii: "="))
                bytes += value.utf8
            }
            bytes.append(UInt8(ascii: "\n"))
        }
        return bytes
    }

    /// An entry read back from `journalctl -o json`: nil for one that is not plugind's, with the
    /// uid the journal stamped. A value the journal could not show as text arrives as an array of
    /// bytes. Any process can send an entry with plugind's fields: only the uid tells them apart.
    package init?(journalObject object: [String: Any]) {
        func text(_ name: String) -> String? {
            switch object[name] {
            case let string as String: return string
            case let bytes as [Int]: return String(decoding: bytes.map { UInt8(truncatingIfNeeded: $0) }, as: UTF8.self)
            // A field given more than once: the first.
            case let values as [Any]: return values.first.flatMap { $0 as? String }
            default: return nil
            }
        }
        guard text("SYSLOG_IDENTIFIER") == Self.syslogIdentifier, let plugin = text("PLUGIND_PLUGIN"),
            let event = text("PLUGIND_EVENT").flatMap(Event.init(rawValue:))
        else { return nil }
        let time = text("PLUGIND_TIME").flatMap(UInt64.init) ?? text("__REALTIME_TIMESTAMP").flatMap(UInt64.init) ?? 0
        self.init(
            time: time, priority: text("PRIORITY").flatMap(Int.init) ?? 6, event: event, message: text("MESSAGE") ?? "",
            plugin: plugin, pluginVersion: text("PLUGIND_PLUGIN_VERSION"), bundleDigest: text("PLUGIND_BUNDLE_DIGEST"),
            hostIdentifier: text("PLUGIND_HOST"), hostExecutable: text("PLUGIND_HOST_EXECUTABLE"),
            hostPID: text("PLUGIND_HOST_PID").flatMap(Int32.init), workerPID: text("PLUGIND_WORKER_PID").flatMap(Int32.init),
            level: text("PLUGIND_LEVEL"), uid: text("_UID").flatMap(UInt32.init))
    }

    /// The message cut to `maximumMessageBytes` on a character boundary, saying how much was cut.
    package static func bounded(_ message: String) -> String {
        guard message.utf8.count > maximumMessageBytes else { return message }
        var kept = Substring(message)
        while kept.utf8.count > maximumMessageBytes { kept = kept.dropLast(max(1, (kept.utf8.count - maximumMessageBytes) / 4)) }
        return kept + " [… \(message.utf8.count - kept.utf8.count) more bytes cut]"
    }
}
