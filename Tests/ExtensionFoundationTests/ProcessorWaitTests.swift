import Foundation
import PlugindSystem
import PlugindWire
import TestSupport
import Testing

@testable import ExtensionFoundation
@testable import PlugindEngine

/// Whether a timeout says the machine was busy: a pure function of the worker's threads' waits for
/// a processor, their ages and the machine's load, and the reading of those numbers from `/proc`.
@Suite("A timeout the machine's load explains says so", .tags(.unit))
struct ProcessorWaitTests {
    typealias Thread = ProcessorWait.Thread

    func wait(_ threads: [Thread], pressure: Double? = 87.4, load: Double? = 4.1, processors: Int = 2) -> ProcessorWait {
        ProcessorWait(threads: threads, cpuPressure: pressure, loadAverage: load, processors: processors)
    }

    @Test("a thread younger than the deadline that waited half of it or more: measured, with the machine's load")
    func measured() {
        let busy = wait([Thread(ran: .seconds(6), waited: .milliseconds(21_400), age: .seconds(29))])
        #expect(
            busy.busyMachineSentence(timeout: .seconds(30))
                == "the machine was busy: the worker waited 21.4 s of the 30 s for a processor (CPU pressure 87%, load average 4.10 on 2 processors); a longer timeout may help"
        )
        // Half is enough; just under half is not.
        let half = wait([Thread(ran: .seconds(1), waited: .seconds(15), age: .seconds(30))])
        #expect(half.busyMachineSentence(timeout: .seconds(30)) != nil)
        let under = wait([Thread(ran: .seconds(1), waited: .milliseconds(14_990), age: .seconds(30))])
        #expect(under.busyMachineSentence(timeout: .seconds(30)) == nil)
    }

    @Test("a plugin that sleeps or hangs waits for no processor: no sentence, however busy the machine")
    func quietWorker() {
        let hung = wait(
            [Thread(ran: .milliseconds(3), waited: .milliseconds(40), age: .seconds(2))], pressure: 100, load: 40, processors: 2)
        #expect(hung.busyMachineSentence(timeout: .seconds(2)) == nil)
    }

    @Test("the thread that waited most decides, not the sum of the worker's threads")
    func busiestThread() {
        let threads = [
            Thread(ran: .milliseconds(1), waited: .milliseconds(200), age: .seconds(9)),
            Thread(ran: .seconds(1), waited: .milliseconds(7_500), age: .seconds(9)),
            Thread(ran: .seconds(1), waited: .milliseconds(3_000), age: .seconds(9)),
        ]
        #expect(wait(threads).busyMachineSentence(timeout: .seconds(10))?.contains("waited 7.5 s of the 10 s") == true)
        // Three threads that each waited 40 % add up to more than half, but none waited half.
        let spread = [Thread](repeating: Thread(ran: .seconds(1), waited: .seconds(4), age: .seconds(9)), count: 3)
        #expect(wait(spread).busyMachineSentence(timeout: .seconds(10)) == nil)
    }

    @Test("an old thread's waits count in the window where they must have fallen there, or at the rate it has waited")
    func oldThreads() throws {
        // A long-lived worker that waited 20 s over an hour of mostly quiet life: those waits say
        // nothing about the last 30 s.
        let longLived = wait([Thread(ran: .seconds(60), waited: .seconds(20), age: .seconds(3600))])
        #expect(longLived.busyMachineSentence(timeout: .seconds(30)) == nil)
        #expect(longLived.waited(within: .seconds(30))?.evidence == .atItsRate)
        // Started 35 s ago and waited 32 s: at least 27 s of it in the last 30 s, since a thread
        // waits at most as long as it exists. A first request's thread, started at the launch
        // just before the request, is such a thread.
        let mustHave = wait([Thread(ran: .seconds(1), waited: .seconds(32), age: .seconds(35))])
        let least = try #require(mustHave.waited(within: .seconds(30)))
        #expect(least.waited == .seconds(27) && least.evidence == .atLeast)
        #expect(
            mustHave.busyMachineSentence(timeout: .seconds(30))
                == "the machine was busy: the worker waited at least 27.0 s of the 30 s for a processor (CPU pressure 87%, load average 4.10 on 2 processors); a longer timeout may help"
        )
        // Waiting for 70 % of its ten minutes: about 21 s of the last 30 s at that rate.
        let chronic = wait([Thread(ran: .seconds(100), waited: .seconds(420), age: .seconds(600))], pressure: nil)
        #expect(chronic.waited(within: .seconds(30))?.evidence == .atItsRate)
        #expect(
            chronic.busyMachineSentence(timeout: .seconds(30))
                == "the machine was busy: the worker waited about 21.0 s of the 30 s for a processor, at the rate it has waited since it started 10.0 min ago (load average 4.10 on 2 processors); a longer timeout may help"
        )
    }

    @Test("the machine's context is what the kernel told: pressure, load, both or neither")
    func context() {
        let thread = [Thread(ran: .zero, waited: .milliseconds(400), age: .milliseconds(500))]
        #expect(
            wait(thread, pressure: nil, load: nil).busyMachineSentence(timeout: .milliseconds(500))
                == "the machine was busy: the worker waited 400 ms of the 500 ms for a processor; a longer timeout may help")
        #expect(
            wait(thread, pressure: nil, load: 3, processors: 1).busyMachineSentence(timeout: .milliseconds(500))?
                .contains("(load average 3.00 on 1 processor);") == true)
        #expect(
            wait(thread, pressure: 55.5, load: nil).busyMachineSentence(timeout: .milliseconds(500))?.contains("(CPU pressure 56%);")
                == true)
        // Numbers no kernel writes are left out, never printed or trapped on.
        #expect(
            wait(thread, pressure: .nan, load: -1).busyMachineSentence(timeout: .milliseconds(500))?.contains("(") == false)
    }

    @Test("nothing to judge: an empty window, no threads; a wait longer than the window is the window")
    func edges() {
        let thread = Thread(ran: .zero, waited: .seconds(40), age: .seconds(20))
        #expect(wait([thread]).busyMachineSentence(timeout: .zero) == nil)
        #expect(wait([thread]).busyMachineSentence(timeout: .seconds(-1)) == nil)
        #expect(wait([]).busyMachineSentence(timeout: .seconds(30)) == nil)
        #expect(wait([thread]).busyMachineSentence(timeout: .seconds(30))?.contains("waited 30.0 s of the 30 s") == true)
        let negative = Thread(ran: .seconds(-5), waited: .seconds(-5), age: .seconds(-5))
        #expect(wait([negative]).busyMachineSentence(timeout: .seconds(30)) == nil)
    }

    @Test("durations in the sentence: milliseconds, seconds, minutes, hours")
    func text() {
        #expect(ProcessorWait.text(.milliseconds(420)) == "420 ms")
        #expect(ProcessorWait.text(.milliseconds(21_440)) == "21.4 s")
        #expect(ProcessorWait.text(.seconds(312)) == "5.2 min")
        #expect(ProcessorWait.text(.seconds(11_160)) == "3.1 h")
    }

    @Test("a thread from the kernel's files: a name with spaces and parentheses, and files that are not what they should be")
    func parsing() {
        // pid (comm) state ppid … starttime is the 22nd field: 19 fields after the state.
        let fields = (4...21).map(String.init).joined(separator: " ")
        let stat = "1234 (a) (b c) S \(fields) 50000 23 24"
        let thread = ProcessorWait.thread(schedstat: "3000000000 21400000000 17\n", stat: stat, uptime: 530, ticksPerSecond: 100)
        #expect(thread == Thread(ran: .seconds(3), waited: .milliseconds(21_400), age: .seconds(30)))
        #expect(ProcessorWait.thread(schedstat: "3000 x 1", stat: stat, uptime: 530, ticksPerSecond: 100) == nil)
        #expect(ProcessorWait.thread(schedstat: "3000 -4 1", stat: stat, uptime: 530, ticksPerSecond: 100) == nil)
        #expect(ProcessorWait.thread(schedstat: "3000 4 1", stat: "1234 (a) S 1 2", uptime: 530, ticksPerSecond: 100) == nil)
        #expect(ProcessorWait.thread(schedstat: "", stat: "", uptime: 530, ticksPerSecond: 100) == nil)
        let pressure = "some avg10=87.43 avg60=80.00 avg300=70.00 total=1\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
        #expect(ProcessorWait.someAverage10(pressure) == 87.43)
        #expect(ProcessorWait.someAverage10("full avg10=1.00\n") == nil)
        #expect(ProcessorWait.someAverage10("some avg10=nan\n") == nil)
    }

    @Test("read from this process: its threads, each with what the kernel counted")
    func readsItself() throws {
        let wait = try #require(ProcessorWait.read(processIdentifier: getpid()))
        #expect(!wait.threads.isEmpty)
        #expect(wait.threads.allSatisfy { $0.ran >= .zero && $0.waited >= .zero && $0.age >= .zero })
        #expect(wait.threads.contains { $0.ran > .zero })
        #expect(wait.processors >= 1)
        #expect(ProcessorWait.read(processIdentifier: 0) == nil)
        #expect(ProcessorWait.read(processIdentifier: -1) == nil)
    }

    @Test("a launch that timed out says the machine was busy when the worker's waits explain it, and only then")
    func launchTimeoutReason() {
        func reason(_ wait: ProcessorWait?) -> String {
            var termination = WorkerTermination(
                exit: ProcessExit(reason: .signaled(signal: SignalNumber.kill, coreDumped: false)), fatalReport: nil,
                stopCause: .launchTimedOut(.seconds(10)), loadFailure: nil, output: "", wasInvalidated: false)
            termination.processorWait = wait
            let error = termination.launchError(plugin: "org.example.p", limits: ResourceLimits())
            #expect(error.code == .timedOut)
            return error.reason
        }
        #expect(reason(nil) == "did not finish loading within 10 s; its worker was killed")
        #expect(
            reason(wait([Thread(ran: .seconds(1), waited: .seconds(2), age: .seconds(10))]))
                == "did not finish loading within 10 s; its worker was killed")
        #expect(
            reason(wait([Thread(ran: .seconds(1), waited: .milliseconds(8_200), age: .seconds(10))]))
                == "did not finish loading within 10 s; its worker was killed; the machine was busy: the worker waited 8.2 s of the 10 s for a processor (CPU pressure 87%, load average 4.10 on 2 processors); a longer timeout may help"
        )
    }

    @Test("a request's timeout keeps its code, backtrace and the rest when the sentence is added")
    func addingToReason() {
        var error = AppExtensionError(.timedOut, plugin: "org.example.p", "request did not finish within 2 s", standardErrorTail: "tail")
        error.backtrace = [AppExtensionError.StackFrame(index: 0, address: 0x1234, object: "libp.so", function: "spin")]
        let explained = error.addingToReason("the machine was busy: …")
        #expect(explained.code == .timedOut && explained.pluginIdentifier == "org.example.p")
        #expect(explained.reason == "request did not finish within 2 s; the machine was busy: …")
        #expect(explained.standardErrorTail == "tail" && explained.backtrace == error.backtrace)
    }
}
