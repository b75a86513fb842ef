import ExtensionFoundation
import Foundation
import Observation

// The shortest real host: it declares two extension points, watches them with Monitors, runs
// every available text filter on its input, and lets every available greeter greet it — a
// greeter asks the host whom to greet, and this host answers through its connection's request
// handler. Run it with text as arguments (or on stdin); add --watch to keep listing the
// available filters as plugins are installed, approved or disabled, and --review to let the
// owner approve waiting plugins in the plugin browser first.

extension AppExtensionPoint {
    @Definition
    static var textFilters: AppExtensionPoint {
        Name("text-filters")
        Scope(restriction: .none)
        Description("Filters that transform the text given to the example host")
    }

    @Definition
    static var greeters: AppExtensionPoint {
        Name("greeters")
        Scope(restriction: .none)
        Description("Greeters that ask the example host whom to greet")
    }
}

var host = AppExtensionHost.current
host.identifier = "org.plugind.examples"
AppExtensionHost.current = host
// Declares its points where plugind reads them ('plugind points list', the "declared" line of
// 'plugind info'); rewritten only when they change. A host that cannot write there still runs.
_ = try? host.installExtensionPointDescriptors([.textFilters, .greeters])

let arguments = Array(CommandLine.arguments.dropFirst())
if arguments.contains("--help") || arguments.contains("-h") {
    print(
        """
        OVERVIEW: Example plugind host: runs every available text filter on its input, then lets
        every available greeter greet it.

        USAGE: plugind-example-host [<text> ...] [--name <name>] [--watch] [--review]

        Filters are plugins for the extension point org.plugind.examples.text-filters, greeters
        for org.plugind.examples.greeters, that the owner approved ('plugind approve ID'). A
        greeter asks the host whom to greet; this host answers with --name. Plugins are searched
        in $PLUGIND_PATH and the usual plugind directories.

        OPTIONS:
          --name <name>           Whom the greeters greet (default: world).
          --watch                 Keep running and print the available filters on every change.
          --review                When plugins wait for the owner's approval, open the plugin
                                  browser ('plugind browse') on this terminal first.
          -h, --help              Show help information.
        """
    )
    exit(0)
}

var options = arguments
var name = "world"
if let index = options.firstIndex(of: "--name") {
    guard index + 1 < options.count else {
        FileHandle.standardError.write(Data("plugind-example-host: --name needs a value\n".utf8))
        exit(64)
    }
    name = options[index + 1]
    options.removeSubrange(index...(index + 1))
}
let watching = options.contains("--watch")
let reviewing = options.contains("--review")
options.removeAll { $0 == "--watch" || $0 == "--review" }

// One monitor for both points; each loop below takes the identities of its own point.
let monitor = AppExtensionPoint.Monitor()
try await monitor.addAppExtensionPoint(.textFilters)
try await monitor.addAppExtensionPoint(.greeters)
func identities(of point: AppExtensionPoint) -> [AppExtensionIdentity] {
    monitor.identities.filter { $0.extensionPointIdentifier == point.identifier }.sorted { $0.bundleIdentifier < $1.bundleIdentifier }
}

// As a Mac app presents EXAppExtensionBrowserViewController: the owner decides first.
if reviewing {
    do {
        try await monitor.presentBrowserIfNeeded()
    } catch {
        FileHandle.standardError.write(Data("plugind-example-host: \(error)\n".utf8))
    }
}

if watching {
    for await identities in Observations({
        monitor.identities.filter { $0.extensionPointIdentifier == AppExtensionPoint.textFilters.identifier }
    }) {
        let names = identities.map(\.localizedName).sorted()
        print("available filters: \(names.isEmpty ? "none" : names.joined(separator: ", "))")
    }
}

let text =
    options.isEmpty ? String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self) : options.joined(separator: " ")
let state = monitor.state
let filters = identities(of: .textFilters)
if filters.isEmpty {
    print(
        "No text filters are available (of this host's plugins, \(state.unapprovedCount) wait for approval and \(state.disabledCount) are disabled; --review shows them)."
    )
    for diagnostic in monitor.diagnostics {
        print("  \(diagnostic)")
    }
}
var failures = 0
for identity in filters {
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

// Greeters ask the host whom to greet, on the connection the request came on: the handler given
// to makeConnection answers.
for identity in identities(of: .greeters) {
    let configuration = AppExtensionProcess.Configuration(appExtensionIdentity: identity) {
        print("\(identity.localizedName) stopped unexpectedly")
    }
    let answer = Array(name.utf8)
    do {
        let output = try await AppExtensionProcess.withProcess(configuration: configuration) { process in
            let connection = try await process.makeConnection(requestHandler: { _ in answer })
            defer { connection.close() }
            return try await connection.send(Array(text.utf8))
        }
        print("\(identity.localizedName): \(String(decoding: output, as: UTF8.self))")
    } catch {
        failures += 1
        print("\(identity.localizedName): error: \(error)")
    }
}
exit(failures == 0 ? 0 : 1)
