import Foundation
import PlugindEngine

/// The body of the policy-files fuzz target, shared with the test that replays its corpus: the
/// owner's and the administrator's `policy.json` (approvals, pins, grants, limits, trusted
/// publishers) and the administrator's `rules.json`, as plugind reads them. The first byte picks
/// the file, the rest is its contents. Any input must be read or refused with a
/// `PolicyFileError` naming the file and why; a policy that is read must come back unchanged
/// when plugind writes it and reads it again (what the owner sees decided is what is kept); rules
/// that are read must each name what they select.
package enum PolicyFilesFuzzing {
    package struct InvariantViolation: Error, CustomStringConvertible {
        package var description: String
    }

    static let policyPath = "fuzz/policy.json"
    static let rulesPath = "fuzz/rules.json"

    package static func run(_ input: [UInt8]) throws {
        guard let kind = input.first else { return }
        let contents = Array(input.dropFirst())
        if kind % 2 == 0 {
            try checkPolicy(contents)
        } else {
            try checkRules(contents)
        }
    }

    private static func checkPolicy(_ contents: [UInt8]) throws {
        switch PolicyDocument.decode(contents, path: policyPath) {
        case .failure(let error):
            try expectExplained(error, path: policyPath)
        case .success(let document):
            let written = try document.encoded()
            guard case .success(let reread) = PolicyDocument.decode(Array(written), path: policyPath), reread == document else {
                throw InvariantViolation(
                    description:
                        "the policy read back is not the one written: \(document) became \(String(decoding: written, as: UTF8.self))")
            }
        }
    }

    private static func checkRules(_ contents: [UInt8]) throws {
        switch AdministratorRules.decode(contents, path: rulesPath) {
        case .failure(let error):
            try expectExplained(error, path: rulesPath)
        case .success(let rules):
            if let rule = rules.rules.first(where: { $0.identifier == nil && $0.extensionPoint == nil && $0.publisher == nil }) {
                throw InvariantViolation(description: "accepted rule '\(rule.name)', which selects nothing")
            }
            let written = try JSONEncoder().encode(rules)
            guard case .success(let reread) = AdministratorRules.decode(Array(written), path: rulesPath), reread == rules else {
                throw InvariantViolation(description: "rules read back are not the ones written: \(rules)")
            }
        }
    }

    private static func expectExplained(_ error: PolicyFileError, path: String) throws {
        guard error.path == path, !error.reason.isEmpty else {
            throw InvariantViolation(description: "a refusal that does not name the file and why: \(error)")
        }
    }
}
