import ExtensionFoundation
import Foundation
import Observation

// The shortest real host: it declares an extension point, watches it with a Monitor, and runs
// every available plugin on its input. Run it with text as arguments (or on stdin); add --watch
// to keep listing the available filters as plugins are installed, approved or disabled.

extension AppExtensionPoint {
    @Definition
    static var textFilters: AppExtensionPoint {
        Name("text-filters")
        Scope(restriction: .none)
    }
}

var host = AppExtensionHost.current
host.identifier = "org.plugind.examples"
AppExtensionHost.current = host

let arguments = Array(CommandLine.arguments.dropFirst())
if arguments.contains("--help") || arguments.contains("-h") {
    print(
        """
        OVERVIEW: Example plugind host: runs every available text filter on its input.

        USAGE: plugind-example-host [<text> ...] [--watch]

        Filters are plugins for the extension point org.plugind.examples.text-filters that the
        owner approved ('plugind approve ID'). Plugins are searched in $PLUGIND_PATH and the
        usual plugind directories.

        OPTIONS:
          --watch                 Keep running and print the available filters on every change.
          -h, --help              Show help information.
        """
    )
    exit(0)
}

let monitor = try await AppExtensionPoint.Monitor(appExtensionPoint: .textFilters)

if arguments.contains("--watch") {
    for await identities in Observations({ monitor.identities }) {
        let names = identities.map(\.localizedName).sorted()
        print("available filters: \(names.isEmpty ? "none" : names.joined(separator: ", "))")
    }
}

let text =
    arguments.isEmpty ? String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self) : arguments.joined(separator: " ")
let state = monitor.state
if state.identities.isEmpty {
    print("No text filters are available (\(state.unapprovedCount) unapproved, \(state.disabledCount) disabled).")
    for diagnostic in monitor.diagnostics {
        print("  \(diagnostic)")
    }
}
var failures = 0
for identity in state.identities.sorted(by: { $0.bundleIdentifier < $1.bundleIdentifier }) {
    let configuration = AppExtensionProcess.Configuration(appExtensionIdentity: identity) {
        print("\(identity.localizedName) stopped unexpectedly")
    }
    do {
        let output = try await AppExtensionProcess.withProcess(configuration: configuration) { process in
            try await process.makeConnection().send(Array(text.utf8))
        }
        print("\(identity.localizedName): \(String(decoding: output, as: UTF8.self))")
    } catch {
        failures += 1
        print("\(identity.localizedName): error: \(error)")
    }
}
exit(failures == 0 ? 0 : 1)
