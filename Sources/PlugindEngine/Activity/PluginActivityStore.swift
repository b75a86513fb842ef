import Dispatch
package import FoundationEssentials
import Glibc
import PlugindBundle
import PlugindSystem

/// Each plugin's last activity for `plugind info`: when a worker of it last started, how many
/// have, and the requests they answered and failed, over every host of the user. One small JSON
/// file per plugin under `<state>/activity`, changed under a lock (hosts of one user update it at
/// once), on a queue of its own: never on a launch's or a request's path.
package struct PluginActivityStore: Sendable {
    package struct Record: Codable, Sendable, Equatable {
        package var lastLaunch: Date?
        package var launches: UInt64 = 0
        package var lastEnd: Date?
        package var requestsAnswered: UInt64 = 0
        package var requestsFailed: UInt64 = 0
    }

    package let directory: String

    package init(directory: String) {
        self.directory = directory
    }

    package init(host: AppExtensionHost) {
        self.init(directory: host.stateDirectory.appendingPathComponent("activity").path)
    }

    private static let queue = DispatchQueue(label: "plugind.plugin-activity", qos: .utility)

    /// What happened since the last write, per file: launches come in bursts (a benchmark
    /// launches hundreds a second), so changes are gathered and written at most once a second.
    private struct Delta {
        var launches: UInt64 = 0
        var lastLaunch: Date?
        var lastEnd: Date?
        var answered: UInt64 = 0
        var failed: UInt64 = 0
    }
    private struct Pending {
        var deltas: [String: (store: PluginActivityStore, plugin: String, delta: Delta)] = [:]
        var scheduled = false
    }
    private static let pending = Locked(Pending())

    /// A worker of `plugin` started.
    func noteLaunch(of plugin: String) {
        note(plugin) { delta in
            delta.launches = delta.launches.addingSaturating(1)
            delta.lastLaunch = Date()
        }
    }

    /// A worker of `plugin` ended after answering and failing these many requests.
    func noteEnd(of plugin: String, answered: UInt64, failed: UInt64) {
        note(plugin) { delta in
            delta.lastEnd = Date()
            // The counts come from the worker's statistics page, which other processes of the
            // user can write.
            delta.answered = delta.answered.addingSaturating(answered)
            delta.failed = delta.failed.addingSaturating(failed)
        }
    }

    private func note(_ plugin: String, _ change: (inout Delta) -> Void) {
        let key = directory + "/" + plugin
        let schedule = Self.pending.withLock { pending -> Bool in
            var entry = pending.deltas[key] ?? (self, plugin, Delta())
            change(&entry.delta)
            pending.deltas[key] = entry
            defer { pending.scheduled = true }
            return !pending.scheduled
        }
        if schedule { Self.queue.asyncAfter(deadline: .now() + 1) { Self.writePending() } }
    }

    /// Writes what was gathered. On the queue only.
    private static func writePending() {
        let deltas = pending.withLock { pending in
            defer {
                pending.deltas.removeAll()
                pending.scheduled = false
            }
            return pending.deltas
        }
        for (store, plugin, delta) in deltas.values {
            store.update(plugin) { record in
                // The record on disk is any process's of the user: its counts may be anything.
                record.launches = record.launches.addingSaturating(delta.launches)
                if let launched = delta.lastLaunch { record.lastLaunch = launched }
                if let ended = delta.lastEnd { record.lastEnd = ended }
                record.requestsAnswered = record.requestsAnswered.addingSaturating(delta.answered)
                record.requestsFailed = record.requestsFailed.addingSaturating(delta.failed)
            }
        }
    }

    /// Writes every change noted so far, and returns once it is on disk.
    package static func waitForPendingUpdates() async {
        await withCheckedContinuation { continuation in
            queue.async {
                writePending()
                continuation.resume()
            }
        }
    }

    package func record(of plugin: String) -> Record? {
        // Any process of the user can replace the record: a regular file of a record's size only.
        guard let name = Self.fileName(plugin),
            let bytes = try? FileDescriptor.readRegularFile(directory + "/" + name, limit: Self.maximumRecordBytes)
        else { return nil }
        return try? StrictJSONDecoder(dateDecodingStrategy: .iso8601).decode(Record.self, from: Data(bytes))
    }

    /// A record is a few hundred bytes; a larger file is not one.
    static let maximumRecordBytes = 64 << 10

    /// Identifiers are reverse-DNS names; anything else (a path) gets no file.
    private static func fileName(_ plugin: String) -> String? {
        guard !plugin.isEmpty, plugin.utf8.count <= 200, !plugin.hasPrefix("."),
            plugin.unicodeScalars.allSatisfy({
                $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "-_.".unicodeScalars.contains($0))
            })
        else { return nil }
        return plugin + ".json"
    }

    private func update(_ plugin: String, _ change: (inout Record) -> Void) {
        guard let name = Self.fileName(plugin) else { return }
        if !PrivateDirectory.make(directory) { return }
        let lock = open(directory + "/.lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard lock >= 0 else { return }
        defer { close(lock) }
        guard flock(lock, LOCK_EX) == 0 else { return }
        var record = self.record(of: plugin) ?? Record()
        change(&record)
        guard let data = try? JSONEncoder.activityRecords.encode(record) else { return }
        try? AtomicFile.replace(directory + "/" + name, with: [UInt8](data), mode: 0o600)
    }
}

extension JSONEncoder {
    /// How the plugin log file and the activity records are written: one compact line, keys
    /// sorted, dates as ISO 8601.
    static var activityRecords: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }
}
