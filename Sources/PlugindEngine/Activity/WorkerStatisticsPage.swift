import CPlugindShims
import FoundationEssentials
import Glibc
import PlugindSystem

/// The page a host publishes for each running worker, for `plugind top`: a file of one page in
/// the host's runtime directory, mapped shared, whose counters the host bumps as requests start
/// and end. A page was chosen over asking the hosts (a socket each): reading costs the host
/// nothing — no thread, no wake-up — and a request costs two atomic adds; the kernel gives the
/// rest (CPU, memory) from /proc. The file is removed when the worker ends, and by `top` when the
/// host that wrote it is gone.
///
/// Layout (native byte order): magic "PLGDSTAT", u32 layout version, u32 state, i32 host pid,
/// i32 worker pid, u64 start (ns since 1970), u64 requests started, u64 answered, u64 failed,
/// u64 memory limit; then NUL-padded text: plugin identifier (128), plugin version (64), host
/// identifier (128), host executable (512).
package enum WorkerStatisticsLayout {
    static let magic = Array("PLGDSTAT".utf8)
    static let version: UInt32 = 1
    static let pageSize = 4096
    static let stateOffset = 12
    static let startedOffset = 32
    static let answeredOffset = 40
    static let failedOffset = 48
    static let fields: [(offset: Int, size: Int)] = [(64, 128), (192, 64), (256, 128), (384, 512)]
    static let headerSize = 896
    package static let fileSuffix = ".stats"

    package enum State: UInt32, Sendable {
        case starting = 0
        case running = 1
        case ending = 2

        package var name: String {
            switch self {
            case .starting: "starting"
            case .running: "running"
            case .ending: "ending"
            }
        }
    }
}

/// What one page says, read back; every string is the host's (and so possibly a plugin
/// author's), to be made inert where shown.
package struct WorkerStatistics: Sendable, Equatable {
    package var state: WorkerStatisticsLayout.State
    package var hostPID: Int32
    package var workerPID: Int32
    package var startedNanoseconds: UInt64
    package var requestsStarted: UInt64
    package var requestsAnswered: UInt64
    package var requestsFailed: UInt64
    package var memoryLimit: UInt64
    package var plugin: String
    package var pluginVersion: String
    package var hostIdentifier: String
    package var hostExecutable: String

    /// Requests that ended, answered or failed. The counters are the writer's, so any value:
    /// a sum past the largest stops there.
    package var requestsEnded: UInt64 { requestsAnswered.addingSaturating(requestsFailed) }

    /// Requests that started and have not ended; never below 0, whatever the page says.
    package var requestsInFlight: UInt64 { requestsStarted.subtractingSaturating(requestsEnded) }

    package init(
        state: WorkerStatisticsLayout.State, hostPID: Int32, workerPID: Int32, startedNanoseconds: UInt64, requestsStarted: UInt64 = 0,
        requestsAnswered: UInt64 = 0, requestsFailed: UInt64 = 0, memoryLimit: UInt64, plugin: String, pluginVersion: String,
        hostIdentifier: String, hostExecutable: String
    ) {
        self.state = state
        self.hostPID = hostPID
        self.workerPID = workerPID
        self.startedNanoseconds = startedNanoseconds
        self.requestsStarted = requestsStarted
        self.requestsAnswered = requestsAnswered
        self.requestsFailed = requestsFailed
        self.memoryLimit = memoryLimit
        self.plugin = plugin
        self.pluginVersion = pluginVersion
        self.hostIdentifier = hostIdentifier
        self.hostExecutable = hostExecutable
    }

    /// The page's bytes (`headerSize` of them).
    package var encoded: [UInt8] {
        var bytes = [UInt8](repeating: 0, count: WorkerStatisticsLayout.headerSize)
        func put<T: FixedWidthInteger>(_ value: T, at offset: Int) {
            withUnsafeBytes(of: value) { for (index, byte) in $0.enumerated() { bytes[offset + index] = byte } }
        }
        bytes.replaceSubrange(0..<8, with: WorkerStatisticsLayout.magic)
        put(WorkerStatisticsLayout.version, at: 8)
        put(state.rawValue, at: WorkerStatisticsLayout.stateOffset)
        put(hostPID, at: 16)
        put(workerPID, at: 20)
        put(startedNanoseconds, at: 24)
        put(requestsStarted, at: WorkerStatisticsLayout.startedOffset)
        put(requestsAnswered, at: WorkerStatisticsLayout.answeredOffset)
        put(requestsFailed, at: WorkerStatisticsLayout.failedOffset)
        put(memoryLimit, at: 56)
        for (text, field) in zip([plugin, pluginVersion, hostIdentifier, hostExecutable], WorkerStatisticsLayout.fields) {
            let utf8 = Array(text.utf8.prefix(field.size - 1))
            bytes.replaceSubrange(field.offset..<field.offset + utf8.count, with: utf8)
        }
        return bytes
    }

    /// A page read back; nil for bytes that are not one (short, another magic or version).
    package init?(page bytes: [UInt8]) {
        guard bytes.count >= WorkerStatisticsLayout.headerSize, Array(bytes[0..<8]) == WorkerStatisticsLayout.magic else { return nil }
        func get<T: FixedWidthInteger>(_: T.Type, at offset: Int) -> T {
            var value = T.zero
            withUnsafeMutableBytes(of: &value) { raw in
                for index in 0..<MemoryLayout<T>.size { raw[index] = bytes[offset + index] }
            }
            return value
        }
        guard get(UInt32.self, at: 8) == WorkerStatisticsLayout.version,
            let state = WorkerStatisticsLayout.State(rawValue: get(UInt32.self, at: WorkerStatisticsLayout.stateOffset))
        else { return nil }
        let texts = WorkerStatisticsLayout.fields.map { field -> String in
            let slice = bytes[field.offset..<field.offset + field.size]
            return String(decoding: slice.prefix { $0 != 0 }, as: UTF8.self)
        }
        self.init(
            state: state, hostPID: get(Int32.self, at: 16), workerPID: get(Int32.self, at: 20),
            startedNanoseconds: get(UInt64.self, at: 24), requestsStarted: get(UInt64.self, at: WorkerStatisticsLayout.startedOffset),
            requestsAnswered: get(UInt64.self, at: WorkerStatisticsLayout.answeredOffset),
            requestsFailed: get(UInt64.self, at: WorkerStatisticsLayout.failedOffset), memoryLimit: get(UInt64.self, at: 56),
            plugin: texts[0], pluginVersion: texts[1], hostIdentifier: texts[2], hostExecutable: texts[3])
    }
}

extension WorkerStatistics {
    /// The page at `path` and the user who owns the file; nil for anything that is not a page (a
    /// link, a FIFO, another file). Read with one bounded `pread`: a page is another user's input
    /// when root reads it.
    package static func read(at path: String) -> (statistics: WorkerStatistics, owner: UInt32)? {
        read(name: path, in: AT_FDCWD)
    }

    /// The page `name` in the directory open as `directory` (`openat`, no link followed).
    package static func read(name: String, in directory: Int32) -> (statistics: WorkerStatistics, owner: UInt32)? {
        let descriptor = openat(directory, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG else { return nil }
        var bytes = [UInt8](repeating: 0, count: 1024)
        let count = bytes.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, 0) }
        guard count > 0, let statistics = WorkerStatistics(page: Array(bytes[..<count])) else { return nil }
        return (statistics, status.st_uid)
    }
}

/// The host's side of one worker's page: created at the launch, counters bumped from the event
/// loop or any thread (atomic adds on the mapping), removed at the end. Where the page cannot be
/// published the same counters live in memory of this process alone, so the worker runs all the
/// same (unlisted by `top`) and its totals still reach the activity record.
final class WorkerStatisticsPage: Sendable {
    private nonisolated(unsafe) let address: UnsafeMutableRawPointer
    /// The published file; nil for counters in private memory.
    private let path: String?
    private let removed = Locked(false)

    /// Publishes `statistics` in `directory` (created 0700, and refused when another user owns
    /// it), or keeps the counters privately when `directory` is nil or that cannot be done.
    init(_ statistics: WorkerStatistics, directory: String?) {
        if let directory, let published = Self.publish(statistics, in: directory) {
            (address, path) = (published.address, published.path)
        } else {
            address = UnsafeMutableRawPointer.allocate(byteCount: WorkerStatisticsLayout.headerSize, alignment: 8)
            address.initializeMemory(as: UInt8.self, from: statistics.encoded, count: WorkerStatisticsLayout.headerSize)
            path = nil
        }
    }

    private static func publish(_ statistics: WorkerStatistics, in directory: String) -> (address: UnsafeMutableRawPointer, path: String)? {
        guard prepare(directory) else { return nil }
        let descriptor = open(directory, O_DIRECTORY | O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        let name = "\(statistics.hostPID)-\(statistics.workerPID)\(WorkerStatisticsLayout.fileSuffix)"
        var mapped: UnsafeMutableRawPointer?
        let result = statistics.encoded.withUnsafeBytes { bytes -> Int32 in
            guard let base = bytes.baseAddress else { return EINVAL }
            return plugind_shim_statistics_page_create(descriptor, name, base, bytes.count, WorkerStatisticsLayout.pageSize, &mapped)
        }
        guard result == 0, let mapped else { return nil }
        return (mapped, directory + "/" + name)
    }

    /// The directory exists, is a directory (not a link) and this user's alone.
    private static func prepare(_ directory: String) -> Bool {
        guard PrivateDirectory.make(directory) else { return false }
        var status = stat()
        guard lstat(directory, &status) == 0, (status.st_mode & S_IFMT) == S_IFDIR, status.st_uid == geteuid(),
            status.st_mode & 0o022 == 0
        else { return false }
        return true
    }

    func requestStarted() { plugind_shim_shared_counter_add(address + WorkerStatisticsLayout.startedOffset, 1) }
    func requestAnswered() { plugind_shim_shared_counter_add(address + WorkerStatisticsLayout.answeredOffset, 1) }
    func requestFailed() { plugind_shim_shared_counter_add(address + WorkerStatisticsLayout.failedOffset, 1) }

    var counts: (answered: UInt64, failed: UInt64) {
        (
            plugind_shim_shared_counter_load(address + WorkerStatisticsLayout.answeredOffset),
            plugind_shim_shared_counter_load(address + WorkerStatisticsLayout.failedOffset)
        )
    }

    func setState(_ state: WorkerStatisticsLayout.State) {
        (address + WorkerStatisticsLayout.stateOffset).storeBytes(of: state.rawValue, as: UInt32.self)
    }

    /// The worker ended: the published page goes (the counters stay readable).
    func remove() {
        guard let path,
            !removed.withLock({ removed in
                defer { removed = true }
                return removed
            })
        else { return }
        unlink(path)
    }

    deinit {
        if path != nil {
            remove()
            munmap(address, WorkerStatisticsLayout.pageSize)
        } else {
            address.deallocate()
        }
    }
}
