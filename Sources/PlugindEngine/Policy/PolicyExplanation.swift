import FoundationEssentials
import Glibc
import PlugindSystem

/// Why a plugin may or may not be used, decided once from its policy decision and quarantine:
/// the code scripts read, the category the counts use, and each sentence that says it — in a
/// listing, in a refused launch, for a running worker ended, in the browser. Before, six places
/// switched over the decision and each said it its own way.
package struct PolicyExplanation: Sendable {
    package enum Category: Sendable, Equatable {
        case available
        /// Disabled by the owner or the administrator, or refused by a rule.
        case disabled
        /// Waiting for the owner's approval, or approved once and changed since.
        case unapproved
        /// Held back after repeated crashes.
        case quarantined
    }

    private enum Reason: Sendable, Equatable {
        case available
        case unapproved
        case disabledByOwner
        case disabledByAdministrator
        case denied(String)
        case approvalOutdated(String)
        case quarantined(since: Date, reason: String)
    }

    private let reason: Reason
    /// The plugin's identifier, which the fixes name.
    let identifier: String
    /// The quarantine, when the plugin has one, whatever the decision: it still ends a running
    /// worker whose approval is outdated (`revocation`).
    private let quarantined: (since: Date, reason: String)?

    /// The decision wins over a quarantine: a plugin that may not be used at all is not usable
    /// whatever its crashes.
    package init(decision: PolicyDecision, quarantine: CrashLog.Quarantine?, identifier: String) {
        self.identifier = identifier
        quarantined = quarantine.map { ($0.since, $0.reason) }
        switch decision {
        case .available:
            reason = quarantine.map { .quarantined(since: $0.since, reason: $0.reason) } ?? .available
        case .unapproved: reason = .unapproved
        case .disabled(let byAdministrator): reason = byAdministrator ? .disabledByAdministrator : .disabledByOwner
        case .denied(let text): reason = .denied(text)
        case .approvalOutdated(let change): reason = .approvalOutdated(change)
        }
    }

    /// The explanation for `entry` under `decision`, reading `crashLog` only where a quarantine
    /// can matter (a launch or a running worker the policy still allows, or whose approval is
    /// only outdated).
    package init(decision: PolicyDecision, entry: CatalogEntry, crashLog: CrashLog) {
        let mayMatter: Bool
        switch decision {
        case .available, .approvalOutdated: mayMatter = true
        case .unapproved, .disabled, .denied: mayMatter = false
        }
        self.init(
            decision: decision, quarantine: mayMatter ? crashLog.quarantine(of: entry.identifier, bundle: entry.bundle) : nil,
            identifier: entry.identifier)
    }

    package var isAvailable: Bool { reason == .available }

    package var category: Category {
        switch reason {
        case .available: .available
        case .disabledByOwner, .disabledByAdministrator, .denied: .disabled
        case .unapproved, .approvalOutdated: .unapproved
        case .quarantined: .quarantined
        }
    }

    /// The code of its diagnostic; nil when the plugin is available.
    package var kind: AppExtensionDiagnostic.Kind? {
        switch reason {
        case .available: nil
        case .unapproved: .unapproved
        case .disabledByOwner, .disabledByAdministrator: .disabled
        case .denied: .denied
        case .approvalOutdated: .approvalOutdated
        case .quarantined: .quarantined
        }
    }

    /// A word for scripts: available, unapproved, disabled, denied, approval-outdated,
    /// quarantined.
    package var stateCode: String { kind?.code ?? "available" }

    private static func date(_ date: Date) -> String { date.formatted(.iso8601) }

    /// What a listing says, with the command that fixes it; nil when the plugin is available.
    package var listing: String? {
        let id = identifier
        switch reason {
        case .available: return nil
        case .unapproved: return "not approved yet; review it with 'plugind info \(id)' and run 'plugind approve \(id)'"
        case .disabledByAdministrator: return "disabled by the administrator"
        case .disabledByOwner: return "disabled by the owner; run 'plugind enable \(id)' to use it again"
        case .denied(let text): return text
        case .approvalOutdated(let change):
            return "the approval no longer matches: \(change); review it and run 'plugind approve \(id)' again"
        case .quarantined(let since, let why):
            return "quarantined since \(Self.date(since)) (\(why)); run 'plugind quarantine clear \(id)' once it is fixed"
        }
    }

    /// What the browser says, naming the key that acts on it where there is one.
    package var browser: String? {
        switch reason {
        case .unapproved: "not approved yet; a shows exactly what approving grants, and approves it"
        case .disabledByOwner: "disabled by the owner; e enables it again"
        case .approvalOutdated(let change): "the approval no longer matches: \(change); a reviews it again"
        case .quarantined: listing.map { $0 + "; Enter shows its crashes" }
        default: listing
        }
    }

    /// The error a launch is refused with; nil when the plugin may be launched.
    /// `administratorDirectory`: where the administrator's policy lives, which a refusal names.
    package func launchRefusal(administratorDirectory: String) -> AppExtensionError? {
        let id = identifier
        let (code, text): (AppExtensionError.Code, String)
        switch reason {
        case .available: return nil
        case .unapproved:
            (code, text) = (
                .notApproved, "is not approved; review it with 'plugind info \(id)' and approve it with 'plugind approve \(id)'"
            )
        case .disabledByAdministrator: (code, text) = (.notApproved, "is disabled by the administrator (\(administratorDirectory))")
        case .disabledByOwner: (code, text) = (.notApproved, "is disabled; enable it with 'plugind enable \(id)'")
        case .denied(let reason): (code, text) = (.notApproved, reason)
        case .approvalOutdated(let change):
            (code, text) = (.notApproved, "is no longer approved: \(change); review it and run 'plugind approve \(id)' again")
        case .quarantined(let since, let why):
            (code, text) = (
                .quarantined, "is quarantined since \(Self.date(since)) (\(why)); clear it with 'plugind quarantine clear \(id)'"
            )
        }
        return AppExtensionError(code, plugin: id, text)
    }

    /// Why a worker that runs it must end, `during` saying when the decision landed ("while it
    /// ran"); nil when it may go on. New bytes (an outdated approval) end nothing: a running
    /// worker keeps what was approved when it started.
    package func revocation(during: String) -> String? {
        switch reason {
        case .available: nil
        case .approvalOutdated: quarantined.map { "was quarantined \(during) (\($0.reason))" }
        case .disabledByAdministrator: "was disabled by the administrator \(during)"
        case .disabledByOwner: "was disabled by its owner \(during)"
        case .denied(let text): "was refused \(during): \(text)"
        case .unapproved: "its approval was revoked \(during)"
        case .quarantined(_, let why): "was quarantined \(during) (\(why))"
        }
    }
}
