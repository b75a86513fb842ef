import PluginKit
import Synchronization

/// An app extension in Apple's shape for the tests of that shape. It refuses connections from
/// hosts whose identifier ends in ".untrusted", keeps a request count per connection, and
/// answers:
/// - "count": how many requests this connection has had, this one included;
/// - "ask:<text>": asks the host <text> and answers "answer:<the host's answer>";
/// - "host": the identifier of the host that opened the connection;
/// - "fail": fails with code 7 and the message "asked to fail";
/// - "crash": writes through a bad pointer in `crashInExtensionProbe`, for the crash report's
///   backtrace.
struct ExtensionProbe: AppExtension {
    /// A capability of the extension's own (Apple's shape: a type whose id names it).
    struct Probing: AppExtensionPoint.Capability {
        var id: String { "org.plugind.tests.probing" }
    }

    // Apple's 26.2 short form (AppExtension.Bind, AppExtension.Identifier); plugind bind reads it.
    @Bind
    var extensionPoint: AppExtensionPoint {
        Identifier(host: "org.plugind.tests", name: "point")
        Implementing {
            Supports("text/plain")
            Probing()
        }
    }

    var configuration: some AppExtensionConfiguration {
        ConnectionHandler { connection in
            guard !connection.hostIdentifier.hasSuffix(".untrusted") else { return false }
            let served = Atomic<Int>(0)
            connection.requestHandler = { request in
                let count = served.add(1, ordering: .relaxed).newValue
                let text = String(decoding: request, as: UTF8.self)
                switch text {
                case "count": return Array("\(count)".utf8)
                case "host": return Array(connection.hostIdentifier.utf8)
                case "fail": throw PluginError(code: 7, "asked to fail")
                case "crash": crashInExtensionProbe(address: 8 + count % 8)
                default:
                    guard text.hasPrefix("ask:") else { throw PluginError("unknown request '\(text)'") }
                    let answer: String = try await connection.ask(String(text.dropFirst(4)))
                    return Array("answer:\(answer)".utf8)
                }
            }
            return true
        }
    }
}

/// Writes through `address`, which no mapping holds: the worker dies of SIGSEGV in this function.
@inline(never)
func crashInExtensionProbe(address: Int) -> Never {
    UnsafeMutablePointer<Int>(bitPattern: address)!.pointee = 1
    fatalError("the write to 0x\(String(address, radix: 16)) did not fault")
}

@c(plugind_plugin_entry)
public func pluginEntry() -> UnsafeRawPointer { PluginExport.entry(ExtensionProbe.self) }
