import ExtensionFoundation
import PlugindBundle
import PlugindEngine

/// Finds a plugin by identifier for a command, with an error that says where plugind looked and
/// why a plugin by that name is not usable.
enum PluginLookup {
    static func item(_ identifier: String, in inventory: Inventory, host: AppExtensionHost) throws(CommandFailure) -> Inventory.Item {
        if let item = inventory.item(identifier) { return item }
        if let problem = inventory.problems.first(where: { $0.bundleIdentifier == identifier && $0.kind != .shadowed }) {
            throw CommandFailure(
                message: "plugin \(identifier) at \(problem.path) cannot be used: \(problem.message)",
                status: .unavailable
            )
        }
        let roots = SearchRoot.roots(of: host).map(\.path).joined(separator: ", ")
        throw CommandFailure(
            message: "no plugin \(identifier) is installed (searched \(roots)); see 'plugind list --all'",
            status: .unavailable
        )
    }
}
