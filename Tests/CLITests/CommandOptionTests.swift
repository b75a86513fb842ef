import TestSupport
import Testing

@testable import plugind

@Suite("Command options: each declared once, and the usage lines agree with the declarations", .tags(.unit))
struct CommandOptionTests {
    /// The long options a usage line names ("--point", "--json").
    private func optionsNamed(in usage: String) -> Set<String> {
        Set(usage.split(whereSeparator: { " []|.".contains($0) }).filter { $0.hasPrefix("--") }.map { String($0.dropFirst(2)) })
    }

    @Test("every option a usage line names is declared, and every declared option is in the usage line")
    func usageMatchesDeclarations() {
        for entry in Plugind.commands {
            let description = entry.description
            #expect(optionsNamed(in: description.usage) == Set(description.options.map(\.name)), "plugind \(description.name)")
        }
    }

    @Test("names are unique; help rows, parsing sets and short forms come from the declarations")
    func derivedFromDeclarations() throws {
        for entry in Plugind.commands {
            let description = entry.description
            #expect(Set(description.options.map(\.name)).count == description.options.count, "plugind \(description.name)")
            #expect(description.optionRows.count == description.options.count)
            #expect(description.flagOptions.isDisjoint(with: description.valueOptions))
        }
        let approve = try #require(Plugind.command(named: "approve")?.description)
        #expect(approve.aliases == ["-y": "yes"])
        #expect(approve.optionRows.first?.0 == "-y, --yes")
        let scanner = try ArgumentScanner(
            ["org.example.p", "-y"], command: "approve", valueOptions: approve.valueOptions, flagOptions: approve.flagOptions,
            aliases: approve.aliases)
        #expect(scanner.flag(approve.options[0]))
        #expect(!scanner.flag(approve.options[1]))
    }

    @Test("disable, enable and revoke are one command with three names")
    func policyChanges() throws {
        let names = PolicyChangeCommand.Change.allCases.map(\.description.name)
        #expect(names == ["disable", "enable", "revoke"])
        for name in names { #expect(Plugind.command(named: name) != nil) }
    }
}
