import ExtensionFoundation
import PlugindEngine
import TextTransformHostKit

// A host as Apple's documentation shapes one: the point is declared with a definition, the
// monitor lists what may run, and each identity runs in a process of its own.
extension AppExtensionPoint {
    @Definition
    static var textTransforms: AppExtensionPoint {
        Name("text-transforms")
        Scope(restriction: .none)
    }
}

var host = AppExtensionHost.current
host.identifier = "com.example.transformer"
AppExtensionHost.current = host

let input = CommandLine.arguments.dropFirst().joined(separator: " ")
let monitor = try await AppExtensionPoint.Monitor(appExtensionPoint: .textTransforms)
for identity in monitor.identities.sorted(by: { $0.bundleIdentifier < $1.bundleIdentifier }) {
    let configuration = AppExtensionProcess.Configuration(appExtensionIdentity: identity) {
        print("\(identity.localizedName) stopped unexpectedly")
    }
    let output = try await AppExtensionProcess.withProcess(configuration: configuration) { process in
        try await TextTransformer(process: process).transform(input)
    }
    print("\(identity.localizedName): \(output ?? "(nothing)")")
}
print("unapproved: \(monitor.state.unapprovedCount)")
