import ExtensionFoundation
import Glibc
import PlugindEngine
import PlugindPolicyEditing
import PlugindSystem

/// What reaches the browser's loop from other threads (the monitor, the tasks that gather
/// details), and the pipe that wakes its poll. Signal handlers write to the same pipe.
final class BrowserMailbox: Sendable {
    enum Message: Sendable {
        case inventory(Inventory)
        case details(identifier: String, lines: [String])
        /// The review of an approval, or nil with lines that say why there is none.
        case review(identifier: String, ApprovalReview?, lines: [String])
    }

    private let messages = Locked<[Message]>([])
    let wakeReadEnd: Int32
    let wakeWriteEnd: Int32

    init() throws(CommandFailure) {
        do {
            let pipe = try PlugindSystem.Pipe()
            try pipe.readEnd.setNonBlocking()
            try pipe.writeEnd.setNonBlocking()
            wakeReadEnd = pipe.readEnd.rawValue
            wakeWriteEnd = pipe.writeEnd.rawValue
        } catch {
            throw CommandFailure(message: "cannot create the browser's wake-up pipe: \(error)", status: .failure)
        }
    }

    deinit {
        close(wakeReadEnd)
        close(wakeWriteEnd)
    }

    func post(_ message: Message) {
        messages.withLock { $0.append(message) }
        // A full pipe already holds a wake-up; nothing is lost.
        var byte: UInt8 = 1
        _ = write(wakeWriteEnd, &byte, 1)
    }

    /// Everything posted so far, oldest first; empties the pipe too.
    func take() -> [Message] {
        var buffer = [UInt8](repeating: 0, count: 64)
        while read(wakeReadEnd, &buffer, buffer.count) > 0 {}
        return messages.withLock { messages in
            defer { messages.removeAll() }
            return messages
        }
    }
}
