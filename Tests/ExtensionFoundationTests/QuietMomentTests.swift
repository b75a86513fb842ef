import TestSupport
import Testing

@testable import ExtensionFoundation
@testable import PlugindEngine

@Suite("When a worker is primed after a launch", .tags(.unit))
struct QuietMomentTests {
    let start = ContinuousClock.now
    let quiet = Duration.microseconds(200)
    let atMost = Duration.milliseconds(5)

    func at(_ microseconds: Int) -> ContinuousClock.Instant { start.advanced(by: .microseconds(microseconds)) }

    @Test("nothing sent or answered since the last check and nothing awaited: prime")
    func quietHost() {
        var moment = QuietMoment(traffic: 7, now: start, quiet: quiet, atMost: atMost)
        #expect(moment.firstCheck == at(200))
        #expect(moment.check(traffic: 7, awaitedAnswers: 0, now: at(200)) == .start)
    }

    @Test("a request sent since the last check, or an answer awaited, puts it off by the quiet time")
    func busyHost() {
        var moment = QuietMoment(traffic: 7, now: start, quiet: quiet, atMost: atMost)
        // The first request to the new worker went out: not yet.
        #expect(moment.check(traffic: 8, awaitedAnswers: 1, now: at(200)) == .checkAgain(at: at(400)))
        // Still awaited, though nothing new moved.
        #expect(moment.check(traffic: 8, awaitedAnswers: 1, now: at(400)) == .checkAgain(at: at(600)))
        // Answered (the count moved): quiet only from now on.
        #expect(moment.check(traffic: 9, awaitedAnswers: 0, now: at(600)) == .checkAgain(at: at(800)))
        #expect(moment.check(traffic: 9, awaitedAnswers: 0, now: at(800)) == .start)
    }

    @Test("a host that never goes quiet gets its worker primed at the deadline")
    func deadline() {
        var moment = QuietMoment(traffic: 0, now: start, quiet: quiet, atMost: atMost)
        var traffic: UInt64 = 0
        var now = moment.firstCheck
        var checks = 0
        while case .checkAgain(let next) = moment.check(traffic: traffic, awaitedAnswers: 3, now: now) {
            #expect(next > now && next <= at(5000))
            traffic += 1
            now = next
            checks += 1
        }
        #expect(now == at(5000))
        #expect(checks == 24)
    }

    @Test("launches back to back prime at once; a launch after a pause waits for quiet")
    func backToBack() {
        let soon = QuietMoment.afterLaunch(
            now: at(3000), previousLaunch: at(0), traffic: 0, quiet: quiet, atMost: atMost, backToBack: .milliseconds(5))
        #expect(soon.firstCheck == at(3000))
        var copy = soon
        #expect(copy.check(traffic: 5, awaitedAnswers: 2, now: at(3000)) == .start)
        let later = QuietMoment.afterLaunch(
            now: at(9000), previousLaunch: at(0), traffic: 0, quiet: quiet, atMost: atMost, backToBack: .milliseconds(5))
        #expect(later.firstCheck == at(9200))
        let first = QuietMoment.afterLaunch(
            now: at(0), previousLaunch: nil, traffic: 0, quiet: quiet, atMost: atMost, backToBack: .milliseconds(5))
        #expect(first.firstCheck == at(200))
    }
}
