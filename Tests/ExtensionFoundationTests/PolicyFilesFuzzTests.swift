import ExtensionFoundation
import Foundation
import PlugindEngine
import PlugindFuzzing
import PlugindHostFuzzing
import TestSupport
import Testing

@Suite("Policy-files fuzz corpus replay", .tags(.unit))
struct PolicyFilesFuzzTests {
    @Test("every policy-files input is read or refused naming the file; what is read is written back unchanged")
    func replay() throws {
        let inputs = FuzzReplay.inputs(in: [BuiltProducts.packageRoot + "/Fuzz/Corpus/policy-files"])
        #expect(inputs.count >= 4)
        for (path, bytes) in inputs {
            #expect(throws: Never.self, "\(path)") { try PolicyFilesFuzzing.run(bytes) }
        }
        // The seeds reach both sides: a policy and rules that are read, and files that are refused.
        let policies = inputs.filter { $0.bytes.first.map { $0 % 2 == 0 } ?? false }
        #expect(policies.contains { (try? PolicyDocument.decode(Array($0.bytes.dropFirst()), path: "p").get()) != nil })
        #expect(policies.contains { (try? PolicyDocument.decode(Array($0.bytes.dropFirst()), path: "p").get()) == nil })
        let rules = inputs.filter { $0.bytes.first.map { $0 % 2 == 1 } ?? false }
        #expect(rules.contains { (try? AdministratorRules.decode(Array($0.bytes.dropFirst()), path: "r").get()) != nil })
    }
}
