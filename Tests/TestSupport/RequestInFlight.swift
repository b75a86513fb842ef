package import ExtensionFoundation

extension AppExtensionConnection {
    /// Sends `request` (to a plugin that reports progress as it works, such as Countdown) and
    /// returns its task once the plugin has reported progress: the request is then in the
    /// worker's hands, not merely queued, for tests that cancel, invalidate or kill under it.
    /// With a `timeout`, the request has that deadline instead of the connection's.
    package func sendInFlight(_ request: [UInt8], timeout: Duration? = nil) async -> Task<[UInt8], any Error> {
        let messages = messages()
        let pending = Task { try await send(request, timeout: timeout) }
        for await message in messages {
            if case .progress = message { break }
        }
        return pending
    }
}
