import Foundation
import PlugindSystem
import PlugindWire
import TestSupport
import Testing

@testable import ExtensionFoundation
@testable import PlugindEngine

@Suite("One explanation per policy decision", .tags(.unit))
struct PolicyExplanationTests {
    private let quarantine = CrashLog.Quarantine(
        since: Date(timeIntervalSince1970: 0), reason: "3 crashes in 5 min", librarySHA256: "",
        libraryFile: FileIdentity(device: 0, inode: 0, size: 0, modificationNanoseconds: 0, changeNanoseconds: 0))

    private func explain(_ decision: PolicyDecision, quarantined: Bool = false) -> PolicyExplanation {
        PolicyExplanation(decision: decision, quarantine: quarantined ? quarantine : nil, identifier: "org.example.p")
    }

    @Test("each decision has one category, code and refusal; every sentence names the same fix")
    func consistent() throws {
        let cases: [(PolicyDecision, Bool, PolicyExplanation.Category, String, AppExtensionError.Code?)] = [
            (.available(bundledWithHost: false), false, .available, "available", nil),
            (.unapproved, false, .unapproved, "unapproved", .notApproved),
            (.disabled(byAdministrator: false), false, .disabled, "disabled", .notApproved),
            (.disabled(byAdministrator: true), false, .disabled, "disabled", .notApproved),
            (.denied("rule 'x' refuses it"), false, .disabled, "denied", .notApproved),
            (.approvalOutdated("the library changed"), false, .unapproved, "approval-outdated", .notApproved),
            (.available(bundledWithHost: false), true, .quarantined, "quarantined", .quarantined),
        ]
        for (decision, quarantined, category, code, refusal) in cases {
            let explanation = explain(decision, quarantined: quarantined)
            #expect(explanation.category == category, "\(decision)")
            #expect(explanation.stateCode == code, "\(decision)")
            #expect(explanation.launchRefusal(administratorDirectory: "/etc/plugind")?.code == refusal, "\(decision)")
            #expect((explanation.listing == nil) == (category == .available), "\(decision)")
            #expect((explanation.browser == nil) == (category == .available), "\(decision)")
        }
        #expect(explain(.unapproved).listing?.contains("plugind approve org.example.p") == true)
        #expect(
            explain(.disabled(byAdministrator: false)).launchRefusal(administratorDirectory: "/a")?.reason.contains("plugind enable")
                == true)
        #expect(explain(.available(bundledWithHost: false), quarantined: true).listing?.contains("plugind quarantine clear") == true)
    }

    @Test("the decision wins over a quarantine; a running worker is ended for a disable, a revoke or a quarantine, not for new bytes")
    func precedenceAndRevocation() {
        #expect(explain(.disabled(byAdministrator: false), quarantined: true).category == .disabled)
        #expect(explain(.approvalOutdated("x")).revocation(during: "while it ran") == nil)
        // New bytes end nothing, but a quarantine still does.
        #expect(explain(.approvalOutdated("x"), quarantined: true).revocation(during: "while it ran")?.hasPrefix("was quarantined") == true)
        #expect(explain(.available(bundledWithHost: false)).revocation(during: "while it ran") == nil)
        #expect(explain(.disabled(byAdministrator: false)).revocation(during: "while it ran") == "was disabled by its owner while it ran")
        #expect(explain(.unapproved).revocation(during: "while it launched") == "its approval was revoked while it launched")
        #expect(
            explain(.available(bundledWithHost: false), quarantined: true).revocation(during: "while it ran")?.hasPrefix("was quarantined")
                == true)
    }
}
