public import ExtensionFoundation
public import PlugindEngine

/// The host side of the SDK: calls an extension's `transform` through a connection.
public struct TextTransformer: Sendable {
    public struct MalformedAnswer: Error, CustomStringConvertible {
        public var description: String { "the extension's answer is not a transform answer" }
    }

    let connection: AppExtensionConnection

    public init(process: AppExtensionProcess) async throws {
        connection = try await process.makeConnection()
    }

    public func transform(_ input: String) async throws -> String? {
        let answer = try await connection.send(Array(input.utf8))
        switch answer.first {
        case 0: return nil
        case 1: return String(decoding: answer.dropFirst(), as: UTF8.self)
        default: throw MalformedAnswer()
        }
    }
}
