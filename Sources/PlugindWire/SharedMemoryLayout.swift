/// The memory host and worker share: a sealed memfd the host creates and passes to the worker as
/// descriptor 5, mapped by both.
///
///     offset                  size         content
///     0                       8            shared responses the host has finished reading
///                                          (written by the host only)
///     64                      448          the host → worker ring's words (`SharedRingLayout`: 5
///                                          words of 64 bytes each, one cache line apiece)
///     512                     448          the worker → host ring's words
///     960                     8            the data area's size (written by the host before the
///                                          worker maps the region)
///     968                     3128         reserved, zero
///     4096                    ringSize     the host → worker ring's bytes
///     4096 + ringSize         ringSize     the worker → host ring's bytes
///     headerSize              regionSize   host → worker payloads (written by the host only)
///     headerSize + regionSize regionSize   worker → host payloads (written by the worker only)
///     dataOffset              dataSize     a foreign plugin's buffers (`ForeignPluginAdapter`):
///                                          ports and frames at the addresses the plugin keeps;
///                                          absent (0) for every other worker
///
/// Once both sides agreed to `ProtocolFeature.ring`, every frame travels through the rings (see
/// `SharedRing`) and the pipes carry only wake-ups. Large payloads travel in the regions instead:
/// a frame whose payload lives there carries `FrameFlags.sharedMemory` and only a
/// `SharedMemoryLocation` in the sender's region. Each side writes a region only while the other
/// is not reading it: the host reuses its region once every request placed there has been
/// answered; the worker reuses its region once the counter shows that the host has read every
/// response placed there. The receiver checks each location against the region before using it.
package struct SharedMemoryLayout: Equatable, Sendable {
    /// The counters, the rings' words and the rings' bytes: where the payload regions start.
    package static let headerSize = 4096 + 2 * ringSize
    package static let consumedResponsesOffset = 0
    package static let dataSizeOffset = 960
    /// Each ring's bytes: a pipe's worth of small frames is a quarter of a pipe's default buffer,
    /// and every page of it ends up mapped by both processes.
    package static let ringSize = 16 << 10
    /// The host → worker ring.
    package static let toWorkerRing = SharedRingLayout(wordsOffset: 64, bytesOffset: 4096, capacity: ringSize)
    /// The worker → host ring.
    package static let toHostRing = SharedRingLayout(wordsOffset: 512, bytesOffset: 4096 + ringSize, capacity: ringSize)
    /// Payloads below this size take the pipe: for them the copy into shared memory and the
    /// bookkeeping cost more than the pipe's copies.
    package static let threshold = 16 << 10
    /// Larger regions would only reserve address space; bigger messages take the pipe.
    package static let maximumRegionSize = 16 << 20
    private static let pageSize = 4096

    package let regionSize: Int
    /// The data area's bytes, a whole number of pages; 0 for a worker without an adapter.
    package let dataSize: Int

    package init(regionSize: Int, dataSize: Int = 0) {
        self.regionSize = regionSize
        self.dataSize = dataSize
    }

    /// The layout of a mapping of `totalSize` bytes whose header says `dataSize`, or nil when no
    /// layout has those sizes (the header is the host's, but checked all the same).
    package init?(totalSize: Int, dataSize: UInt64) {
        guard dataSize <= UInt64(totalSize), Int(dataSize) % Self.pageSize == 0 else { return nil }
        let regions = totalSize - Self.headerSize - Int(dataSize)
        guard regions > 0, regions % (2 * Self.pageSize) == 0 else { return nil }
        regionSize = regions / 2
        self.dataSize = Int(dataSize)
    }

    /// The layout for a worker with these limits, or nil when shared memory is not worth it: the
    /// messages allowed are small, or the address-space limit leaves no room for the regions. A
    /// worker with a data area (`dataBytes` > 0) always has one: its plugin's buffers live there.
    package init?(limits: ResourceLimits, dataBytes: UInt64 = 0) {
        var region = min(Int(clamping: limits.maxMessageBytes), Self.maximumRegionSize)
        if limits.addressSpaceBytes > 0 {
            region = min(region, Int(clamping: limits.addressSpaceBytes / 8))
        }
        region = (region + Self.pageSize - 1) / Self.pageSize * Self.pageSize
        if dataBytes > 0 {
            guard dataBytes <= ForeignPluginAdapter.maximumDataBytes else { return nil }
            region = max(region, Self.threshold)
        } else {
            guard region >= Self.threshold else { return nil }
        }
        regionSize = region
        dataSize = (Int(dataBytes) + Self.pageSize - 1) / Self.pageSize * Self.pageSize
    }

    package var totalSize: Int { Self.headerSize + 2 * regionSize + dataSize }
    package var dataOffset: Int { Self.headerSize + 2 * regionSize }
    package var toWorkerOffset: Int { Self.headerSize }
    package var toHostOffset: Int { Self.headerSize + regionSize }
}

/// Where in the sender's region a payload lies: the whole pipe payload of a shared-memory frame.
package struct SharedMemoryLocation: Equatable, Sendable {
    package static let encodedSize = 16

    package var offset: UInt64
    package var length: UInt64

    package init(offset: UInt64, length: UInt64) {
        self.offset = offset
        self.length = length
    }

    package init(_ payload: [UInt8]) throws(WireError) {
        guard payload.count == Self.encodedSize else {
            throw .malformedPayload("a shared-memory location takes \(Self.encodedSize) bytes, found \(payload.count)")
        }
        var reader = PayloadReader(payload)
        offset = try reader.readUInt64()
        length = try reader.readUInt64()
    }

    package var encoded: [UInt8] {
        var writer = PayloadWriter(capacity: Self.encodedSize)
        writer.write(offset)
        writer.write(length)
        return writer.bytes
    }

    /// The byte range in a region of `regionSize` bytes, or nil when it does not lie inside.
    package func range(inRegionOf regionSize: Int) -> Range<Int>? {
        guard offset <= UInt64(regionSize), length <= UInt64(regionSize) - offset else { return nil }
        return Int(offset)..<Int(offset + length)
    }
}
