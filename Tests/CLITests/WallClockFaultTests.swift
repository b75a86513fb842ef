import Foundation
import TestSupport
import Testing

/// A host whose wall clock moves while a request waits (an administrator setting the date, NTP
/// stepping it, a suspended laptop): a request's deadline is kept on the monotonic clock, so it
/// neither fires early when the wall clock leaps forward nor never when it runs backwards.
@Suite("A moved wall clock", .tags(.process), .timeLimit(.minutes(5)))
struct WallClockFaultTests {
    /// Interposed (LD_PRELOAD) in the host only: from its first reading on, the wall clock runs
    /// WALL_CLOCK_RATE times as fast as real time (1000: an hour passes in 3.6 s; -1: it runs
    /// backwards). The monotonic clock is left alone.
    static let shim = #"""
        #define _GNU_SOURCE
        #include <dlfcn.h>
        #include <stdlib.h>
        #include <sys/time.h>
        #include <time.h>

        typedef int (*clock_gettime_function)(clockid_t, struct timespec *);
        static clock_gettime_function real_clock_gettime;
        static double rate;
        static long long start_nanoseconds = -1;

        static long long nanoseconds(struct timespec value) { return value.tv_sec * 1000000000LL + value.tv_nsec; }

        int clock_gettime(clockid_t clock, struct timespec *value) {
            if (__atomic_load_n(&real_clock_gettime, __ATOMIC_ACQUIRE) == NULL) {
                const char *given = getenv("WALL_CLOCK_RATE");
                rate = given != NULL ? atof(given) : 1;
                __atomic_store_n(&real_clock_gettime, (clock_gettime_function)dlsym(RTLD_NEXT, "clock_gettime"), __ATOMIC_RELEASE);
            }
            int result = real_clock_gettime(clock, value);
            if (result != 0 || (clock != CLOCK_REALTIME && clock != CLOCK_REALTIME_COARSE)) return result;
            struct timespec now;
            real_clock_gettime(CLOCK_MONOTONIC, &now);
            long long expected = -1;
            __atomic_compare_exchange_n(&start_nanoseconds, &expected, nanoseconds(now), 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
            long long elapsed = nanoseconds(now) - __atomic_load_n(&start_nanoseconds, __ATOMIC_ACQUIRE);
            long long moved = nanoseconds(*value) + (long long)((rate - 1) * (double)elapsed);
            value->tv_sec = moved / 1000000000LL;
            value->tv_nsec = moved % 1000000000LL;
            return 0;
        }

        int gettimeofday(struct timeval *restrict value, void *restrict zone) {
            (void)zone;
            struct timespec now;
            clock_gettime(CLOCK_REALTIME, &now);
            value->tv_sec = now.tv_sec;
            value->tv_usec = now.tv_nsec / 1000;
            return 0;
        }

        time_t time(time_t *value) {
            struct timespec now;
            clock_gettime(CLOCK_REALTIME, &now);
            if (value != NULL) *value = now.tv_sec;
            return now.tv_sec;
        }
        """#

    @Test(
        "a request's deadline with the wall clock running 1000 times fast, or backwards: timedOut after its own second, neither early nor never",
        arguments: ["1000", "-1"])
    func deadlineHolds(rate: String) async throws {
        let test = try TestHost()
        defer { test.remove() }
        let library = test.directory.path + "/wall-clock-shim.so"
        try await CCompiler.sharedLibrary(Self.shim, output: library, flags: ["-ldl"])
        // The shim moves the wall clock as it says (checked in a process of its own): the wall
        // clock's advance over the monotonic clock's, across some work, is the rate.
        let check = try await CommandRunner.run(
            "/usr/bin/python3",
            [
                "-c",
                "import time; wall, steady = time.time(), time.monotonic(); sum(range(3000000)); "
                    + "print((time.time() - wall) / (time.monotonic() - steady))",
            ],
            environment: ["LD_PRELOAD": library, "WALL_CLOCK_RATE": rate, "PATH": "/usr/bin:/bin"])
        let measured = try #require(Double(check.stdout.trimmingCharacters(in: .whitespacesAndNewlines)), "\(check.stderr)")
        #expect(rate == "1000" ? measured > 100 : measured < 0, "the wall clock ran \(measured) times as fast as real time")

        let hang = PluginFixture(library: "FaultyHang")
        try await installApproved(hang, in: test)
        let clock = ContinuousClock()
        let started = clock.now
        let result = try await plugind(
            "run", hang.identifier, "x", "--timeout", "1", in: test, environment: ["LD_PRELOAD": library, "WALL_CLOCK_RATE": rate])
        let waited = clock.now - started
        #expect(result.status != 0)
        #expect(result.stderr.contains("request did not finish within 1 s"), "\(result.stderr)")
        // A deadline on the wall clock would have fired after a millisecond at 1000 times, and
        // never running backwards (the suite's time limit would end the test).
        #expect(waited >= .milliseconds(950), "the deadline fired after \(waited)")
    }
}
