import ExtensionFoundation
import Foundation
import PlugindEngine
import TestSupport
import Testing

@testable import plugind

/// `plugind logs` from the journal, without one: whose entries it asks journalctl for, and the uid
/// it reads back. Any process can send an entry with plugind's fields; only the uid the journal
/// stamps tells whose it is.
@Suite("plugind logs: the journal match and the uid of an entry", .tags(.unit))
struct LogsJournalMatchTests {
    static func command(_ arguments: [String]) throws -> LogsCommand {
        let description = LogsCommand.description
        return try LogsCommand(
            ArgumentScanner(
                arguments, command: "logs", valueOptions: description.valueOptions, flagOptions: description.flagOptions,
                aliases: description.aliases))
    }

    @Test("an ordinary user asks for the entries stamped with their own uid; root for every user's")
    func match() throws {
        let logs = try Self.command(["org.example.p", "--lines", "5"])
        let user = logs.journalArguments(namespace: "ns", reader: 1000)
        #expect(user.contains("SYSLOG_IDENTIFIER=plugind") && user.contains("PLUGIND_PLUGIN=org.example.p"))
        #expect(user.filter { $0.hasPrefix("_UID=") } == ["_UID=1000"], "\(user)")
        #expect(user.contains("--namespace=ns") && user.contains("--lines=5"))
        // A match, not an option: every argument that is not an option is a FIELD=value match.
        #expect(user.filter { !$0.hasPrefix("--") }.allSatisfy { $0.contains("=") })
        let root = logs.journalArguments(namespace: nil, reader: 0)
        #expect(!root.contains { $0.hasPrefix("_UID") }, "\(root)")
        #expect(root.contains("SYSLOG_IDENTIFIER=plugind"))
    }

    @Test("an entry read back from the journal carries the uid the journal stamped; one written or of the file does not")
    func uid() throws {
        let written = PluginLogEntry(time: 1_000_000, priority: 6, event: .log, message: "hello", plugin: "org.example.p", level: "info")
        #expect(written.uid == nil)
        #expect(!written.journalFields.contains { $0.0.hasPrefix("_") }, "the journal stamps its own fields")
        var object: [String: Any] = Dictionary(uniqueKeysWithValues: written.journalFields.map { ($0.0, $0.1 as Any) })
        #expect(PluginLogEntry(journalObject: object) == written)
        object["_UID"] = "1000"
        object["_PID"] = "4242"
        let stamped = try #require(PluginLogEntry(journalObject: object))
        #expect(stamped.uid == 1000)
        var expected = written
        expected.uid = 1000
        #expect(stamped == expected)
        // In --json the uid is a field of its own.
        let encoded = try #require(try JSONSerialization.jsonObject(with: JSONEncoder().encode(stamped)) as? [String: Any])
        #expect(encoded["uid"] as? Int == 1000)
        object["_UID"] = "not a number"
        #expect(PluginLogEntry(journalObject: object)?.uid == nil)
    }
}
