public import PluginKit

/// What an extension of the transformer implements. Authors conform a type and write
/// `transform`; the SDK does the rest.
public protocol TextTransformExtension: AppExtension, Sendable {
    /// The transformed text, or nil when this extension has nothing to offer for `input`.
    func transform(_ input: String) async -> String?
}

extension TextTransformExtension {
    public var configuration: TextTransformConfiguration<Self> {
        TextTransformConfiguration(self)
    }
}

/// Accepts every connection and answers its requests with `transform`. On the wire a request
/// is the input's UTF-8; an answer is 1 followed by the output's UTF-8, or 0 for nil.
public struct TextTransformConfiguration<Extension: TextTransformExtension>: AppExtensionConfiguration {
    let appExtension: Extension

    public init(_ appExtension: Extension) {
        self.appExtension = appExtension
    }

    public func accept(connection: PluginConnection) -> Bool {
        let appExtension = appExtension
        connection.requestHandler = { request in
            guard let output = await appExtension.transform(String(decoding: request, as: UTF8.self)) else { return [0] }
            return [1] + Array(output.utf8)
        }
        return true
    }
}
