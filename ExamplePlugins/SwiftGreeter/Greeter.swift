import PluginKit

/// The Swift twin of the C greeter: asks its host, on the connection each request came on, whom
/// to greet, and answers "Hello, <the host's answer>: <the request>".
final class Greeter: Plugin {
    static let name = "Greeter (Swift)"

    init(host: PluginHost) {}

    func handle(_ request: PluginRequest) throws -> [UInt8] {
        guard let connection = request.connection else {
            throw PluginError("the request came on no connection, so there is nobody to ask")
        }
        let name: String
        do {
            name = try connection.ask("name?")
        } catch {
            throw PluginError("could not ask the host whom to greet: \(error)")
        }
        return Array("Hello, \(name): ".utf8) + Array(request.bytes)
    }
}

@c(plugind_plugin_entry)
public func pluginEntry() -> UnsafeRawPointer { PluginExport.entry(Greeter.self) }
