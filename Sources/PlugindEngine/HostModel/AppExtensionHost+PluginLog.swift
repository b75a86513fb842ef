extension AppExtensionHost {
    /// Where a host records what its plugins do — their log lines, crashes, quarantines, limits
    /// they hit, refusals of the sandbox — for the owner's `plugind logs`. Linux addition (Apple's
    /// extensions log through the unified log on their own).
    public enum PluginLogDestination: String, Sendable, Hashable, CaseIterable {
        /// The system journal when it runs (its socket exists), else the per-user log file.
        case automatic
        /// The system journal only (entries are lost while it does not run).
        case journal
        /// The per-user log files under the state directory (`logs/plugins.log` for plugins'
        /// lines, `logs/events.log` for plugind's events and the owner's decisions, each rotated at
        /// 1 MiB).
        case file
        /// Nothing is recorded; plugin log lines still reach `messages()`.
        case off
    }
}
