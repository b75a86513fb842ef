import ExtensionFoundation
import Foundation
import PlugindEngine
import TextTransformHostKit

// A host written from Apple's ExtensionFoundation documentation, as a port from macOS would
// read: the macOS 13 discovery calls (`matching`, `availabilityUpdates`), the 26 definitions and
// Monitor, a configuration without a closure, both initializers, and a catch of
// `AppExtensionPoint.Error`. Only the connection differs: Apple's makeXPCConnection() is
// makeConnection() here, which the SDK's `TextTransformer` wraps as a sample's XPC protocol would.
// The host's identifier comes from the environment (PLUGIND_HOST_IDENTIFIER), as Apple's comes
// from the app's bundle.

extension AppExtensionPoint {
    @Definition
    static var textTransforms: AppExtensionPoint {
        Name("text-transforms")
        Scope(restriction: .none)
    }
}

// macOS 13: the identities of a point, as an async sequence of arrays.
let identifier = AppExtensionPoint.textTransforms.identifier
for await matched in try AppExtensionIdentity.matching(appExtensionPointIDs: identifier) {
    print("matching: \(matched.map(\.localizedName).sorted().joined(separator: ", "))")
    break
}

for await availability in AppExtensionIdentity.availabilityUpdates {
    print("availability: \(availability.enabledCount) of \(availability.totalCount) enabled, \(availability.unapprovedCount) unapproved")
    break
}

// A point no extension could declare is refused with Apple's error.
do {
    _ = try AppExtensionPoint(identifier: "not a point")
    print("an invalid point was accepted")
} catch AppExtensionPoint.Error.invalidAppExtensionPoint {
    print("invalid point refused")
}

// macOS 26: the Monitor.
let monitor = try await AppExtensionPoint.Monitor(appExtensionPoint: .textTransforms)
let identities = monitor.identities.sorted { $0.bundleIdentifier < $1.bundleIdentifier }
guard let identity = identities.first else {
    print("no extensions (\(monitor.state.unapprovedCount) wait for approval)")
    exit(1)
}

// A configuration without an interruption handler, and the asynchronous initializer.
let configuration = AppExtensionProcess.Configuration(appExtensionIdentity: identity)
let process = try await AppExtensionProcess(configuration: configuration)
print("async: \(try await TextTransformer(process: process).transform("apple") ?? "(nothing)")")
process.invalidate()

// The synchronous initializer, from a thread of the host's own (as an AppKit host calls it from
// the main thread outside any task).
let synchronous = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<AppExtensionProcess, any Error>) in
    Thread {
        continuation.resume(with: Result { try AppExtensionProcess(configuration: configuration) })
    }.start()
}
print("sync: \(try await TextTransformer(process: synchronous).transform("docs") ?? "(nothing)")")
synchronous.invalidate()
