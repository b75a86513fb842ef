import Dispatch
import FoundationEssentials
import Glibc
package import PlugindBundle
package import PlugindSystem
import PlugindWire

/// Sealed copies of plugin files, by the SHA-256 of their bytes. A sealed copy can never change,
/// so one verified copy serves every later launch of the same bytes: hashing stays off the launch
/// path after the first. Copies of files with an expected digest (an approval) are found by that
/// digest; those of plugins bundled with the host, which need no approval, by file identity, a
/// hint that costs at most a launch of the bytes that were there when the copy was made.
package final class SealedFileCache: Sendable {
    package static let shared = SealedFileCache()

    private struct Copy {
        let descriptor: FileDescriptor
        let size: UInt64
        var lastUse: UInt64
    }

    private struct IdentityKey: Hashable {
        var path: String
        var identity: FileIdentity

        init(_ source: SealedSource) {
            path = source.displayPath
            identity = source.identity
        }
    }

    private struct State {
        var copies: [String: Copy] = [:]
        var digestsByIdentity: [IdentityKey: String] = [:]
        var totalBytes: UInt64 = 0
        var clock: UInt64 = 0
    }

    private let state = Locked(State())
    /// Copies beyond this many bytes are closed, least recently used first.
    let capacityBytes: UInt64
    private let queue = DispatchQueue(label: "plugind.sealed-files", qos: .userInitiated)

    package init(capacityBytes: UInt64 = 512 << 20) {
        self.capacityBytes = capacityBytes
    }

    /// Why a file could not be handed over.
    package enum Failure: Error, Sendable {
        /// The bytes read are not the bytes approved.
        case changed(path: String, expected: String, found: String)
        case unreadable(path: String, reason: String)
        /// The host ran out of descriptors or memory while it read the file: its limit, not the
        /// plugin's fault.
        case hostResourceExhausted(path: String, reason: String)
        /// A system library reached through something a user other than root could change.
        case untrusted(TrustedLibraryPath.Refusal)
    }

    /// Duplicates of the sealed copies of `sources`, in order, made or reused; the caller closes
    /// them. Reading and hashing happen on a queue of their own, never on the caller's task.
    package func descriptors(for sources: [SealedSource]) async throws(Failure) -> [FileDescriptor] {
        let result: Result<[FileDescriptor], Failure> = await withCheckedContinuation { continuation in
            if let cached = cachedDescriptors(for: sources) {
                continuation.resume(returning: .success(cached))
                return
            }
            queue.async { continuation.resume(returning: self.makeDescriptors(for: sources)) }
        }
        return try result.get()
    }

    /// Every copy, duplicated, when all are cached already: the common case, without a thread hop.
    private func cachedDescriptors(for sources: [SealedSource]) -> [FileDescriptor]? {
        state.withLock { state in
            var descriptors: [FileDescriptor] = []
            for source in sources {
                guard let digest = source.expectedDigest ?? state.digestsByIdentity[IdentityKey(source)],
                    let copy = state.copies[digest], let duplicate = try? copy.descriptor.duplicate()
                else {
                    for descriptor in descriptors { descriptor.close() }
                    return nil
                }
                state.clock += 1
                state.copies[digest]?.lastUse = state.clock
                descriptors.append(duplicate)
            }
            return descriptors
        }
    }

    private func makeDescriptors(for sources: [SealedSource]) -> Result<[FileDescriptor], Failure> {
        var descriptors: [FileDescriptor] = []
        for source in sources {
            switch descriptor(for: source) {
            case .success(let descriptor): descriptors.append(descriptor)
            case .failure(let failure):
                for descriptor in descriptors { descriptor.close() }
                return .failure(failure)
            }
        }
        return .success(descriptors)
    }

    /// A duplicate of the copy of one file: cached, or read, hashed and sealed now.
    private func descriptor(for source: SealedSource) -> Result<FileDescriptor, Failure> {
        if let duplicate = cachedDescriptors(for: [source])?.first { return .success(duplicate) }
        let (copy, size, digest): (FileDescriptor, UInt64, String)
        do throws(SystemError) {
            let file: FileDescriptor
            if let bundlePath = source.bundlePath {
                file = try Self.open(source.path, beneath: bundlePath)
            } else {
                switch TrustedLibraryPath.open(source.path, rule: source.outsideRule) {
                case .success(let opened): file = FileDescriptor(rawValue: opened.descriptor)
                case .failure(let refusal): return .failure(.untrusted(refusal))
                }
            }
            defer { file.close() }
            var stream = SHA256Stream()
            (copy, size) = try SealedFile.copy(
                from: file, name: "plugind:" + source.path.lastPathComponent, maximumBytes: BundleContents.Limits.fileBytes
            ) { stream.update($0) }
            digest = stream.finish()
        } catch {
            if let exhausted = error.exhaustedHostResource {
                return .failure(.hostResourceExhausted(path: source.displayPath, reason: "\(error): \(exhausted)"))
            }
            return .failure(.unreadable(path: source.displayPath, reason: error.description))
        }
        if let expected = source.expectedDigest, expected != digest {
            copy.close()
            return .failure(.changed(path: source.displayPath, expected: expected, found: digest))
        }
        let duplicate = keep(copy, size: size, digest: digest, identity: IdentityKey(source))
        return duplicate.map { .success($0) } ?? .failure(.unreadable(path: source.displayPath, reason: "cannot duplicate its copy"))
    }

    /// Opens a bundle file beneath its bundle without following symlinks.
    private static func open(_ path: String, beneath bundlePath: String) throws(SystemError) -> FileDescriptor {
        let bundle = try FileDescriptor.open(bundlePath, [.readOnly, .directory])
        defer { bundle.close() }
        return try FileDescriptor.open(beneath: bundle, path, .readOnly)
    }

    /// Keeps `copy` (unless a copy of the same bytes arrived meanwhile) and returns a duplicate.
    private func keep(_ copy: FileDescriptor, size: UInt64, digest: String, identity: IdentityKey) -> FileDescriptor? {
        var evicted: [FileDescriptor] = []
        let duplicate = state.withLock { state -> FileDescriptor? in
            state.clock += 1
            state.digestsByIdentity[identity] = digest
            if let existing = state.copies[digest] {
                evicted.append(copy)
                state.copies[digest]?.lastUse = state.clock
                return try? existing.descriptor.duplicate()
            }
            state.copies[digest] = Copy(descriptor: copy, size: size, lastUse: state.clock)
            state.totalBytes += size
            while state.totalBytes > capacityBytes, state.copies.count > 1,
                let oldest = state.copies.min(by: { $0.value.lastUse < $1.value.lastUse }), oldest.key != digest
            {
                state.copies[oldest.key] = nil
                state.totalBytes -= oldest.value.size
                evicted.append(oldest.value.descriptor)
            }
            return try? state.copies[digest]?.descriptor.duplicate()
        }
        // Closed outside the lock; a launch holding a duplicate keeps its copy alive.
        for descriptor in evicted { descriptor.close() }
        return duplicate
    }

    /// Closes every copy. For tests that count descriptors.
    package func removeAll() {
        let copies = state.withLock { state in
            defer { state = State() }
            return Array(state.copies.values)
        }
        for copy in copies { copy.descriptor.close() }
    }

    /// How many copies are kept, and their bytes. For tests and the benchmark.
    package var statistics: (copies: Int, bytes: UInt64) {
        state.withLock { ($0.copies.count, $0.totalBytes) }
    }
}
