import ExtensionFoundation
import PlugindEngine

extension AppExtensionProcess {
    /// A connection for `plugind run` and `plugind dev`: each of the plugin's questions gets
    /// `answer`; without one, the plugin's asks fail as unsupported.
    func connection(answering answer: String?) async throws -> AppExtensionConnection {
        guard let answer else { return try await makeConnection() }
        let bytes = Array(answer.utf8)
        return try await makeConnection(requestHandler: { _ in bytes })
    }
}
