import ExtensionFoundation
import Foundation
import PlugindEngine
import PlugindFuzzing
import PlugindHostFuzzing
import PlugindSystem
import TestSupport
import Testing

@testable import plugind

/// The statistics-page fuzz target's corpus, replayed through what `plugind top` computes and
/// shows for a page, which a fuzz target cannot link: every page that is read makes a row, sorted
/// by every key, drawn as a table and written as JSON, without trapping, with in flight never
/// above started and the plugin's strings inert.
@Suite("Fuzz corpus replay: plugind top's rows from hostile statistics pages", .tags(.unit))
struct StatisticsPageCorpusTests {
    @Test("every page of the corpus makes a row top can sort, draw and print")
    func corpus() throws {
        let inputs = FuzzReplay.inputs(in: [BuiltProducts.packageRoot + "/Fuzz/Corpus/statistics-page"])
        #expect(inputs.count >= 8)
        var samples: [WorkerTable.Sample] = []
        for (index, (path, bytes)) in inputs.enumerated() {
            guard let statistics = WorkerStatistics(page: Array(bytes.prefix(1024))) else { continue }
            #expect(throws: Never.self, "\(path)") { try StatisticsPageFuzzing.check(statistics) }
            // CPU ticks and resident memory at the bounds too: they come from /proc of whatever pid
            // the page names.
            samples.append(
                WorkerTable.Sample(
                    statistics: statistics, owner: 0, cpuTicks: index % 2 == 0 ? .max : UInt64(index), residentBytes: .max,
                    taken: .now))
        }
        #expect(samples.count >= 5)
        let earlier = samples.map { sample in
            var before = sample
            before.cpuTicks = sample.cpuTicks / 2
            before.taken = sample.taken - .seconds(1)
            return before
        }
        let rows = WorkerTable.rows(samples, since: earlier)
        #expect(rows.count == samples.count)
        for (row, sample) in zip(rows, samples) {
            #expect(row.requestsInFlight <= sample.statistics.requestsStarted, "\(row)")
            #expect(row.requestsInFlight == sample.statistics.requestsInFlight, "\(row)")
            #expect(row.cpuPercent.isFinite && row.uptimeSeconds.isFinite, "\(row)")
        }
        var model = TopModel()
        model.rows = rows
        for key in TopModel.SortKey.allCases {
            model.sort = key
            #expect(model.sortedRows.count == rows.count)
            let lines = model.tableLines(showUser: true)
            #expect(lines.count == rows.count + 1)
            for line in lines {
                #expect(
                    !line.unicodeScalars.contains { $0.value < 0x20 || InertText.needsJSONEscape($0) }, "\(line.debugDescription)")
            }
        }
        let json = try JSONEncoder().encode(model.sortedRows)
        #expect(try JSONSerialization.jsonObject(with: json) is [Any])
    }
}
