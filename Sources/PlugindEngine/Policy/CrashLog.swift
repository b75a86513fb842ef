package import FoundationEssentials
import Glibc
package import PlugindBundle
package import PlugindSystem
import PlugindWire

/// Crashes of each plugin, kept in `crashes.json` in the host's state directory, and the
/// quarantine that follows repeated ones. A quarantine holds until the library's bytes change or
/// the owner clears it (`plugind quarantine clear ID`).
package struct CrashLog: Sendable {
    package static let fileName = "crashes.json"

    package struct Document: Codable, Sendable {
        var version = 1
        package var plugins: [String: PluginCrashes] = [:]
    }

    package struct PluginCrashes: Codable, Sendable {
        package var crashes: [CrashRecord] = []
        package var quarantine: Quarantine?
        /// Calls the sandbox refused the plugin (every process of it together) and the last one.
        package var refusals: Refusals?
    }

    package struct Refusals: Codable, Sendable {
        package var count: Int
        package var last: String
        package var time: Date
    }

    package struct CrashRecord: Codable, Sendable {
        package var time: Date
        /// How the worker ended, e.g. "crashed with SIGSEGV".
        package var reason: String
        /// The last lines of its output.
        package var output: String
        package var librarySHA256: String
        package var libraryFile: FileIdentity
        /// The crashed thread's frames, named where the host could (none in older logs).
        package var backtrace: [AppExtensionError.StackFrame]?
    }

    /// Crashes kept per plugin, whatever their age: the quarantine counts those of its window.
    package static let keptCrashes = 10

    /// The most of the log read: the user's own file (`TrustedPath`), but read at every launch,
    /// so a FIFO or a file grown without end must not stop the host. A plugin's entry is at most
    /// about 1.5 MiB (10 crashes of 2 KiB of output and 64 frames with names of 1 KiB), usually
    /// a few KiB; a crash that would take the log past this is not recorded (`updateEntry`),
    /// since a log hosts refuse quarantines every plugin.
    package static let maximumFileBytes = 64 << 20

    package struct Quarantine: Codable, Sendable {
        package var since: Date
        package var reason: String
        package var librarySHA256: String
        package var libraryFile: FileIdentity
    }

    let path: String
    let policy: AppExtensionHost.QuarantinePolicy

    package init(host: AppExtensionHost) {
        path = HostFiles.of(host).crashLogFile
        policy = host.quarantine
    }

    /// Why the crash log cannot be used: it fails closed, like the policy. A plugin cannot be told
    /// apart from a quarantined one while the log is unusable.
    package struct Problem: Error, Sendable, CustomStringConvertible {
        package var path: String
        package var reason: String

        package var description: String {
            "the crash log \(path) \(reason); until it is fixed every plugin counts as quarantined (move it aside with 'plugind quarantine reset')"
        }
    }

    /// The log, or why it cannot be used: unreadable, corrupt, or writable by another user.
    package func read() -> Result<Document, Problem> {
        if let problem = TrustedPath.problem(path) {
            return .failure(Problem(path: path, reason: "cannot be trusted: \(problem)"))
        }
        return Self.decoded.value(at: path) { path in
            let bytes: [UInt8]
            do throws(RegularFileReadError) {
                bytes = try FileDescriptor.readRegularFile(path, limit: Self.maximumFileBytes, followingLinks: true)
            } catch .absent {
                return .contents(.success(Document()))
            } catch .unreadable(let error) {
                // Present but unreadable must not hide a quarantine.
                return .unreadable(.failure(Problem(path: path, reason: "cannot be read (\(error))")))
            } catch {
                return .contents(.failure(Problem(path: path, reason: error.description)))
            }
            do {
                return .contents(.success(try Self.decoder.decode(Document.self, from: Data(bytes))))
            } catch {
                return .contents(.failure(Problem(path: path, reason: "is corrupt")))
            }
        }
    }

    private static let decoded = DecodedFileCache<Result<Document, Problem>>()

    /// The quarantine in force for `bundle`, or nil (none, or the library changed since). An
    /// unusable log yields a quarantine that names the log's problem.
    package func quarantine(of identifier: String, bundle: InspectedBundle, document: Result<Document, Problem>? = nil) -> Quarantine? {
        let log: Document
        switch document ?? read() {
        case .success(let read): log = read
        case .failure(let problem):
            return Quarantine(since: Date(), reason: problem.description, librarySHA256: "", libraryFile: bundle.libraryStatus.identity)
        }
        guard let quarantine = log.plugins[identifier]?.quarantine else { return nil }
        if quarantine.libraryFile == bundle.libraryStatus.identity { return quarantine }
        let digest = try? ContentHashes.shared.digest(ofFileAtPath: bundle.libraryPath, identity: bundle.libraryStatus.identity)
        return digest == quarantine.librarySHA256 ? quarantine : nil
    }

    /// Moves an unusable log aside (kept, renamed crashes.json.corrupt-<time>); returns where it
    /// went, or nil when the log was fine or absent.
    package func moveAside() throws -> String? {
        guard FileManager.default.fileExists(atPath: path), case .failure = read() else { return nil }
        let stamp = Date().formatted(.iso8601).replacing(":", with: "")
        let destination = "\(path).corrupt-\(stamp)"
        try FileManager.default.moveItem(atPath: path, toPath: destination)
        return destination
    }

    /// Records a crash; returns the quarantine when this crash starts one.
    @discardableResult
    package func record(
        identifier: String, bundle: InspectedBundle, reason: String, output: String, backtrace: [AppExtensionError.StackFrame] = []
    ) -> Quarantine? {
        guard let digest = try? ContentHashes.shared.digest(ofFileAtPath: bundle.libraryPath, identity: bundle.libraryStatus.identity)
        else {
            return nil
        }
        let now = Date()
        let window = Double(policy.window.components.seconds)
        return updateEntry(of: identifier) { entry -> Quarantine? in
            // Crashes of other bytes are forgotten; the last few of these bytes are kept for
            // 'plugind crashes', and those within the window count toward a quarantine.
            entry.crashes.removeAll { $0.librarySHA256 != digest }
            entry.crashes.append(
                CrashRecord(
                    time: now, reason: reason, output: String(output.suffix(2048)), librarySHA256: digest,
                    libraryFile: bundle.libraryStatus.identity, backtrace: backtrace.isEmpty ? nil : Array(backtrace.prefix(64)))
            )
            entry.crashes = Array(entry.crashes.suffix(Self.keptCrashes))
            let recent = entry.crashes.filter { now.timeIntervalSince($0.time) <= window }.count
            var started: Quarantine?
            if entry.quarantine == nil && recent >= policy.crashes {
                started = Quarantine(
                    since: now,
                    reason: "\(recent) crashes within \(DurationText(policy.window)), last: \(reason)",
                    librarySHA256: digest,
                    libraryFile: bundle.libraryStatus.identity
                )
                entry.quarantine = started
            }
            return started
        } ?? nil
    }

    /// Adds `count` refusals of a process of `identifier` that ended, `last` the last one. Not for
    /// a log that cannot be used, which is never overwritten.
    package func recordRefusals(identifier: String, count: Int, last: String) {
        updateEntry(of: identifier) { entry in
            // The count on disk is any process's of the user, and a worker's count is the sum of
            // what its frames claim: neither may trap the host that adds them.
            let before = max(0, entry.refusals?.count ?? 0)
            entry.refusals = Refusals(count: before.addingSaturating(max(0, count)), last: String(last.prefix(1024)), time: Date())
        }
    }

    /// Changes the entry of `identifier` under the log's lock; nil when the log cannot be used or
    /// written. A log that does not decode is never overwritten: its quarantines would be lost.
    @discardableResult
    private func updateEntry<Result>(of identifier: String, _ change: (inout PluginCrashes) -> Result) -> Result? {
        guard TrustedPath.problem(path) == nil else { return nil }
        return try? LockedFileUpdate.update(path, limit: Self.maximumFileBytes) { existing -> (data: Data?, result: Result) in
            var document = try existing.map { try Self.decoder.decode(Document.self, from: $0) } ?? Document()
            var entry = document.plugins[identifier] ?? PluginCrashes()
            let result = change(&entry)
            document.plugins[identifier] = entry
            let encoded = try Self.encoder.encode(document)
            guard encoded.count <= Self.maximumFileBytes else {
                throw LockedFileUpdate.Failure(path: path, reason: "would grow past \(ByteCount(Self.maximumFileBytes))")
            }
            return (encoded, result)
        }
    }

    /// Forgets the crashes and quarantine of `identifier`. Returns false when there were none.
    /// Throws `Problem` when the log cannot be used (it is left untouched).
    package func clear(_ identifier: String) throws -> Bool {
        if case .failure(let problem) = read() { throw problem }
        return try LockedFileUpdate.update(path, limit: Self.maximumFileBytes) { existing -> (data: Data?, result: Bool) in
            var document = try existing.map { try Self.decoder.decode(Document.self, from: $0) } ?? Document()
            guard document.plugins.removeValue(forKey: identifier) != nil else { return (nil, false) }
            return (try Self.encoder.encode(document), true)
        }
    }

    private static var encoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        return encoder
    }

    private static let decoder = StrictJSONDecoder(dateDecodingStrategy: .iso8601)
}
