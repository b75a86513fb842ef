import PluginKit

/// The Swift twin of the C greeter, written as an app extension is on Apple platforms: asks its
/// host, on the connection each request came on, whom to greet, and answers
/// "Hello, <the host's answer>: <the request>".
struct Greeter: AppExtension {
    @AppExtensionPoint.Bind
    var extensionPoint: AppExtensionPoint {
        AppExtensionPoint.Identifier(host: "org.plugind.examples", name: "greeters")
    }

    var configuration: some AppExtensionConfiguration {
        ConnectionHandler { connection in
            connection.requestHandler = { request in
                let name: String
                do {
                    name = try await connection.ask("name?")
                } catch {
                    throw PluginError("could not ask the host whom to greet: \(error)")
                }
                return Array("Hello, \(name): ".utf8) + request
            }
            return true
        }
    }
}

@c(plugind_plugin_entry)
public func pluginEntry() -> UnsafeRawPointer { PluginExport.entry(Greeter.self) }
