import CPlugindShims
import Glibc
import PlugindWire
import Synchronization

/// Drives one plugin of a LADSPA 1.1 library: `ladspa_descriptor(i)` until NULL to describe it;
/// `instantiate`, `connect_port` for every port into the data area (where the plugin reads and
/// writes on every later `run`, as the ABI requires), `activate` before the first run, `run`,
/// and `deactivate` and `cleanup` at the end. Blocks come as requests or through a doorbell
/// (`ForeignBlockDoorbell`) served by a thread of its own; `instanceLock` keeps the instance to
/// one thread at a time, as LADSPA requires.
final class LADSPAAdapter: ForeignAdapter {
    /// More descriptors or ports than this is a library that does not end its list.
    static let maximumDescriptors: UInt = 4096
    static let maximumPorts: UInt = 4096

    private let path: String
    private let entry: plugind_ladspa_descriptor_function
    /// The plugin the worker serves; nil for a scanning worker.
    private let descriptor: UnsafePointer<plugind_ladspa_descriptor>?
    private let label: String
    private let dataArea: UnsafeMutableRawBufferPointer?
    private var instance: UnsafeMutableRawPointer?
    private var active = false
    private var maximumFrames: UInt32 = 0
    /// Where the ports lie, after `instantiate`: the doorbell goes after them.
    private var layout: DataAreaLayout?
    private var hasDoorbell = false
    private let instanceLock = Mutex(())

    var displayName: String { label.isEmpty ? path : "\(path) (\(label))" }

    init(library: UnsafeMutableRawPointer, path: String, label: String, dataArea: UnsafeMutableRawBufferPointer?) throws(LoadFailure) {
        guard let entry = ForeignSymbol.function(library, "ladspa_descriptor", as: plugind_ladspa_descriptor_function.self) else {
            throw LoadFailure(kind: .symbolMissing, message: "\(path) does not export ladspa_descriptor: it is not a LADSPA library")
        }
        self.path = path
        self.entry = entry
        self.label = label
        self.dataArea = dataArea
        guard !label.isEmpty else {
            descriptor = nil
            return
        }
        let listed = Self.descriptors(entry)
        guard let candidate = listed.descriptors.first(where: { ForeignText.read($0.pointee.label) == label }) else {
            let labels = listed.descriptors.map { ForeignText.read($0.pointee.label) }
            throw LoadFailure(
                kind: .symbolMissing, message: "\(path) has no LADSPA plugin labelled '\(label)' (it has \(labels.joined(separator: ", ")))"
            )
        }
        guard candidate.pointee.instantiate != nil, candidate.pointee.connect_port != nil, candidate.pointee.run != nil,
            candidate.pointee.cleanup != nil
        else {
            throw LoadFailure(
                kind: .abiMismatch, message: "\(path) (\(label)): the descriptor lacks instantiate, connect_port, run or cleanup")
        }
        guard candidate.pointee.port_count <= Self.maximumPorts,
            candidate.pointee.port_count == 0 || candidate.pointee.port_descriptors != nil
        else {
            throw LoadFailure(kind: .abiMismatch, message: "\(path) (\(label)): \(candidate.pointee.port_count) ports without descriptors")
        }
        descriptor = candidate
    }

    /// `ladspa_descriptor(0)`, `(1)`, … up to the first NULL, at most `maximumDescriptors` of
    /// them; `complete` is false when the library gives more (a list that does not end).
    private static func descriptors(
        _ entry: plugind_ladspa_descriptor_function
    ) -> (descriptors: [UnsafePointer<plugind_ladspa_descriptor>], complete: Bool) {
        var found: [UnsafePointer<plugind_ladspa_descriptor>] = []
        while let candidate = entry(UInt(found.count)) {
            guard UInt(found.count) < maximumDescriptors else { return (found, false) }
            found.append(candidate)
        }
        return (found, true)
    }

    func answer(_ request: ForeignPluginRequest) throws(ForeignAdapterFailure) -> [UInt8] {
        switch request {
        case .describe:
            // A worker serving one plugin describes that one; a scanning worker, every one.
            let plugins = try describe().filter { label.isEmpty || $0.label == label }
            return ForeignLibraryDescription.ladspa(plugins).encoded
        case .instantiate(let sampleRate, let maximumFrames):
            return try instantiate(sampleRate: sampleRate, maximumFrames: maximumFrames).encoded
        case .run(let frames):
            try instanceLock.withLock { _ throws(ForeignAdapterFailure) in try run(frames) }
            return []
        case .reset:
            try instanceLock.withLock { _ throws(ForeignAdapterFailure) in
                guard let instance, let descriptor else { throw ForeignAdapterFailure(message: "reset before instantiate") }
                if active { descriptor.pointee.deactivate?(instance) }
                active = false
            }
            return []
        case .openDoorbell:
            return ForeignBlockDoorbell.encoded(offset: try openDoorbell())
        case .construct, .setParameter, .getParameter, .update:
            throw ForeignAdapterFailure(message: "a frei0r request to a LADSPA plugin")
        }
    }

    private func describe() throws(ForeignAdapterFailure) -> [LADSPAPluginDescription] {
        let listed = Self.descriptors(entry)
        guard listed.complete else { throw ForeignAdapterFailure(message: "more than \(Self.maximumDescriptors) descriptors") }
        var plugins: [LADSPAPluginDescription] = []
        for (index, candidate) in listed.descriptors.enumerated() {
            let count = candidate.pointee.port_count
            guard count <= Self.maximumPorts else {
                throw ForeignAdapterFailure(message: "descriptor \(index) declares \(count) ports")
            }
            var ports: [LADSPAPortDescription] = []
            if count > 0 {
                guard let flags = candidate.pointee.port_descriptors else {
                    throw ForeignAdapterFailure(message: "descriptor \(index) has \(count) ports and no port descriptors")
                }
                for port in 0..<Int(count) {
                    let hint = candidate.pointee.port_range_hints?[port]
                    ports.append(
                        LADSPAPortDescription(
                            name: ForeignText.read(candidate.pointee.port_names?[port]), flags: UInt32(bitPattern: flags[port]),
                            hints: UInt32(bitPattern: hint?.hint_descriptor ?? 0), lowerBound: hint?.lower_bound ?? 0,
                            upperBound: hint?.upper_bound ?? 0))
                }
            }
            plugins.append(
                LADSPAPluginDescription(
                    index: UInt32(index), uniqueID: UInt64(candidate.pointee.unique_id), label: ForeignText.read(candidate.pointee.label),
                    name: ForeignText.read(candidate.pointee.name), maker: ForeignText.read(candidate.pointee.maker),
                    copyright: ForeignText.read(candidate.pointee.copyright), properties: UInt32(bitPattern: candidate.pointee.properties),
                    ports: ports))
        }
        return plugins
    }

    private func instantiate(sampleRate: Double, maximumFrames: UInt32) throws(ForeignAdapterFailure) -> ForeignPortLayout {
        guard let descriptor else { throw ForeignAdapterFailure(message: "a scanning worker instantiates nothing") }
        guard instance == nil else { throw ForeignAdapterFailure(message: "instantiated already (one instance per worker)") }
        guard sampleRate >= 1, sampleRate <= 1_536_000, sampleRate.rounded() == sampleRate else {
            throw ForeignAdapterFailure(message: "sample rate \(sampleRate) is not a whole number of hertz from 1 to 1536000")
        }
        guard maximumFrames > 0 else { throw ForeignAdapterFailure(message: "a block of 0 frames") }
        guard let dataArea, dataArea.count > 0 else { throw ForeignAdapterFailure(message: "the worker has no data area for the ports") }
        var layout = DataAreaLayout(dataArea)
        var offsets: [UInt64] = []
        let ports = Int(descriptor.pointee.port_count)
        for port in 0..<ports {
            let flags = descriptor.pointee.port_descriptors?[port] ?? 0
            let bytes = flags & PLUGIND_LADSPA_PORT_AUDIO != 0 ? UInt64(maximumFrames) * 4 : 4
            guard let offset = layout.place(bytes) else {
                throw ForeignAdapterFailure(
                    message: "\(ports) ports of \(maximumFrames) frames do not fit the data area of \(dataArea.count) bytes")
            }
            offsets.append(offset)
        }
        guard let instantiate = descriptor.pointee.instantiate, let connect = descriptor.pointee.connect_port,
            let made = instantiate(descriptor, UInt(sampleRate))
        else {
            throw ForeignAdapterFailure(message: "instantiate at \(Int(sampleRate)) Hz returned NULL")
        }
        for (port, offset) in offsets.enumerated() {
            connect(made, UInt(port), layout.pointer(at: offset).assumingMemoryBound(to: Float.self))
        }
        instance = made
        self.maximumFrames = maximumFrames
        self.layout = layout
        return ForeignPortLayout(offsets: offsets)
    }

    /// Places the doorbell after the ports and starts its thread; once per instance.
    private func openDoorbell() throws(ForeignAdapterFailure) -> UInt64 {
        guard instance != nil, var layout else { throw ForeignAdapterFailure(message: "a doorbell before instantiate") }
        guard !hasDoorbell else { throw ForeignAdapterFailure(message: "the doorbell is open already") }
        guard let offset = layout.place(ForeignBlockDoorbell.bytes) else {
            throw ForeignAdapterFailure(message: "no room for a doorbell after the ports in the data area of \(layout.area.count) bytes")
        }
        let doorbell = layout.pointer(at: offset)
        doorbell.initializeMemory(as: UInt8.self, repeating: 0, count: Int(ForeignBlockDoorbell.bytes))
        try BlockDoorbellThread.start(at: doorbell) { [self] frames in
            instanceLock.withLock { _ in (try? run(frames)) != nil }
        }
        self.layout = layout
        hasDoorbell = true
        return offset
    }

    private func run(_ frames: UInt32) throws(ForeignAdapterFailure) {
        guard let instance, let descriptor, let run = descriptor.pointee.run else {
            throw ForeignAdapterFailure(message: "run before instantiate")
        }
        guard frames <= maximumFrames else {
            throw ForeignAdapterFailure(message: "run of \(frames) frames; the ports hold \(maximumFrames)")
        }
        if !active {
            descriptor.pointee.activate?(instance)
            active = true
        }
        run(instance, UInt(frames))
    }

    /// A block still running on the doorbell's thread (one the host gave up on) keeps the
    /// instance: the worker's exit ends both, rather than waiting for a run that may never end.
    func end() {
        _ = instanceLock.withLockIfAvailable { _ in
            guard let instance, let descriptor else { return }
            if active { descriptor.pointee.deactivate?(instance) }
            descriptor.pointee.cleanup?(instance)
            self.instance = nil
            active = false
        }
    }
}
