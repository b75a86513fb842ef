package import ExtensionFoundation
import PlugindEngine

extension AppExtensionConnection {
    /// Sends `request` (to a plugin that reports progress as it works, such as Countdown) and
    /// returns its task once the plugin has reported progress: the request is then in the
    /// worker's hands, not merely queued, for tests that cancel, invalidate or kill under it.
    /// With a `timeout`, the request has that deadline instead of the connection's. A request
    /// that ends before any progress returns too, so that the caller learns how it ended instead
    /// of waiting for a report that never comes.
    package func sendInFlight(_ request: [UInt8], timeout: Duration? = nil) async -> Task<[UInt8], any Error> {
        let messages = messages()
        let pending = Task { try await send(request, timeout: timeout) }
        // Whichever comes first: the first progress, or the request's end. Neither watcher is
        // waited for: the request's runs on until the request ends.
        let (first, arrived) = AsyncStream<Void>.makeStream()
        let progress = Task {
            for await message in messages {
                if case .progress = message { break }
            }
            arrived.finish()
        }
        Task {
            _ = await pending.result
            arrived.finish()
        }
        for await _ in first {}
        progress.cancel()
        return pending
    }
}
