import ExtensionFoundation
import Foundation
import PlugindEngine
import PlugindPolicyEditing
import TestSupport
import Testing

/// Function sessions through libplugind: `plugind_function_session_*` from C (built with
/// AddressSanitizer, so that a leak or a bad free of a result fails) and `plugind.FunctionSession`
/// from Python (Bindings/Python/tests/test_function_session.py), against the hostile decoder, and
/// their calls with callbacks against libc's qsort (ExamplePlugins/Qsort).
@Suite("Function sessions from C and Python", .tags(.process), .serialized, .timeLimit(.minutes(5)))
struct FunctionSessionHostTests {
    /// Installs the hostile decoder, approved, for `point`, allowed to read `readable`; a
    /// quarantine the tests' crashes never reach.
    static func install(point: String, readable: String, in test: inout TestHost) throws {
        var extra = FunctionSessionTests.manifest
        extra["permissions"] = ["read": [readable]]
        let fixture = PluginFixture(library: "HostileDecoder", extensionPoint: point, extra: extra)
        try test.install(fixture, bundled: false)
        let item = try #require(Inventory.take(host: test.host).item(fixture.identifier))
        try PolicyEditor(for: test.host, administrator: false).approve(item.entry)
    }

    static let cHost = #"""
        #include <plugind/plugind.h>
        #include <stdio.h>
        #include <stdlib.h>
        #include <string.h>

        static void fail(const char *what, plugind_error *error) {
            fprintf(stderr, "%s: %s\n", what, error != NULL ? plugind_error_message(error) : "(no error)");
            exit(1);
        }

        static plugind_value bytes(const char *string) {
            plugind_value value;
            memset(&value, 0, sizeof value);
            value.type = PLUGIND_TYPE_BYTES;
            value.payload.data.bytes = (const uint8_t *)string;
            value.payload.data.length = strlen(string);
            return value;
        }

        static plugind_value text(const char *string) {
            plugind_value value = bytes(string);
            value.type = PLUGIND_TYPE_STRING;
            return value;
        }

        /* The decoder's checksum: FNV-1a from the seeded basis, its top bit cleared. */
        static int64_t checksum(const char *input, uint32_t seed) {
            uint32_t hash = 2166136261u ^ seed;
            for (const char *byte = input; *byte != 0; byte++) {
                hash ^= (uint8_t)*byte;
                hash *= 16777619u;
            }
            return (int64_t)(hash & 0x7fffffffu);
        }

        /* The error code of a call, 0 when it returned `expected`; -1 for another value; -2 when
         * the message does not name `name` and `cause`. */
        static int outcome(plugind_function_session *session, const char *name, plugind_value *arguments, size_t count,
                           int64_t expected, const char *cause) {
            plugind_error *error = NULL;
            plugind_value result;
            if (plugind_function_session_call(session, name, arguments, count, 0, &result, &error) == 0)
                return result.payload.integer == expected ? 0 : -1;
            int code = plugind_error_code_of(error);
            const char *message = plugind_error_message(error);
            if (strstr(message, name) == NULL || strstr(message, cause) == NULL) {
                fprintf(stderr, "%s\n", message);
                code = -2;
            }
            plugind_error_free(error);
            return code;
        }

        static plugind_value set_up_handle(plugind_function_session *session) {
            plugind_error *error = NULL;
            plugind_call_result result;
            if (plugind_function_session_set_up_result(session, 0, &result, &error) != 0) fail("set_up_result", error);
            plugind_value handle = result.value;
            if (handle.type != PLUGIND_TYPE_HANDLE || handle.payload.handle.id == 0) fail("not a handle", NULL);
            printf("set-up %s#%llu\n", handle.payload.handle.kind, (unsigned long long)handle.payload.handle.id);
            plugind_call_result_free(&result);
            return handle;
        }

        int main(int argc, char **argv) {
            if (argc != 3) return 2;
            plugind_error *error = NULL;
            plugind_monitor *monitor = plugind_monitor_create(argv[1], PLUGIND_SCOPE_NONE, &error);
            if (monitor == NULL) fail("plugind_monitor_create", error);
            plugind_identity *identity = plugind_monitor_identity_at(monitor, 0, &error);
            if (identity == NULL) fail("plugind_monitor_identity_at", error);
            plugind_monitor_release(monitor);

            plugind_function_session *session = plugind_function_session_create(identity, 0, &error);
            if (session == NULL) fail("plugind_function_session_create", error);
            printf("pid before the first call %d\n", plugind_function_session_pid(session));
            plugind_value arguments[2] = {text(argv[2])};
            if (plugind_function_session_add_set_up(session, "open_decoder", arguments, 1, &error) != 0) fail("add_set_up", error);
            printf("set-up calls %zu\n", plugind_function_session_set_up_count(session));

            plugind_value first = set_up_handle(session);
            arguments[0] = first;
            arguments[1] = bytes("hello");
            printf("decode_with %d\n", outcome(session, "decode_with", arguments, 2, checksum("hello", 7), ""));

            /* 20 calls, every 10th crashing: two crashes, one short of the default quarantine. */
            int answers = 0, crashes = 0, others = 0;
            for (int index = 0; index < 20; index++) {
                char input[32];
                snprintf(input, sizeof input, index % 10 == 9 ? "CRASH %d" : "input %d", index);
                arguments[0] = bytes(input);
                int code = outcome(session, "decode", arguments, 1, checksum(input, 0), "SIGSEGV");
                if (code == 0 && index % 10 != 9) answers++;
                else if (code == PLUGIND_ERROR_WORKER_CRASHED && index % 10 == 9) crashes++;
                else others++;
            }
            printf("answers %d crashes %d others %d\n", answers, crashes, others);
            printf("pid after a crash %d\n", plugind_function_session_pid(session));

            /* The handle of the first worker is refused, naming the function and the argument. */
            arguments[0] = first;
            arguments[1] = bytes("hello");
            printf("stale %d\n", outcome(session, "decode_with", arguments, 2, 0, "argument 1"));
            plugind_value second = set_up_handle(session);
            arguments[0] = second;
            printf("fresh %d\n", outcome(session, "decode_with", arguments, 2, checksum("hello", 7), ""));
            printf("release %d\n", plugind_function_session_handle_release(session, &second, &error));
            printf("after release %d\n", outcome(session, "decode_with", arguments, 2, 0, "argument 1"));
            printf("workers %lld\n", (long long)plugind_function_session_workers_started(session));
            plugind_function_session_release(session);

            /* A fresh worker every 3 calls. */
            session = plugind_function_session_create(identity, 3, &error);
            if (session == NULL) fail("plugind_function_session_create", error);
            int32_t pids[9];
            for (int index = 0; index < 9; index++) {
                arguments[0] = bytes("again");
                if (outcome(session, "decode", arguments, 1, checksum("again", 0), "") != 0) fail("decode", NULL);
                pids[index] = plugind_function_session_pid(session);
            }
            int changes = 0;
            for (int index = 1; index < 9; index++) changes += pids[index] != pids[index - 1];
            printf("pid changes %d, same within 3: %d\n", changes,
                   pids[0] == pids[2] && pids[3] == pids[5] && pids[6] == pids[8] && pids[0] > 0);
            printf("workers %lld\n", (long long)plugind_function_session_workers_started(session));
            plugind_function_session_release(session);
            plugind_identity_release(identity);
            return 0;
        }
        """#

    @Test("plugind_function_session_*: crashes fail only their call, set-up replayed, stale handles refused, recycling, without a leak")
    func cHost() async throws {
        var test = try TestHost()
        defer { test.remove() }
        let seeds = try TemporaryDirectory()
        defer { seeds.remove() }
        let seedFile = try seeds.publicFile("seed", contents: "7\n")
        let point = "org.plugind.tests.c-function-session"
        try Self.install(point: point, readable: seeds.path, in: &test)
        let host = test.directory.path + "/session_host"
        try await SanitizedCHost.build(Self.cHost, output: host)
        let result = try await SanitizedCHost.run(host, [point, seedFile], in: test)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(
            result.stdout == """
                pid before the first call -1
                set-up calls 1
                set-up decoder#1
                decode_with 0
                answers 18 crashes 2 others 0
                pid after a crash -1
                stale 20
                set-up decoder#2
                fresh 0
                release 0
                after release 20
                workers 3
                pid changes 2, same within 3: 1
                workers 3

                """)
    }

    /// qsort through a session with C comparators (ExamplePlugins/Qsort): the values to sort are
    /// read from argv[2], one a line, and printed sorted.
    static let cCallbacksHost = #"""
        #include <plugind/plugind.h>
        #include <pthread.h>
        #include <stdio.h>
        #include <stdlib.h>
        #include <string.h>

        static void fail(const char *what, plugind_error *error) {
            fprintf(stderr, "%s: %s\n", what, error != NULL ? plugind_error_message(error) : "(no error)");
            exit(1);
        }

        static int64_t element(const plugind_value *value) {
            int64_t number;
            memcpy(&number, value->payload.data.bytes, sizeof number);
            return number;
        }

        /* What a comparator's context counts: its calls, and those on another thread than the caller's. */
        typedef struct {
            size_t calls;
            size_t elsewhere;
            pthread_t caller;
        } tally;

        static int ascending(void *context, const plugind_value *arguments, size_t count, plugind_value *result, char **message) {
            tally *seen = context;
            if (count != 2 || arguments[0].payload.data.length != 8 || arguments[1].payload.data.length != 8) {
                *message = strdup("not two int64s");
                return 1;
            }
            seen->calls++;
            if (!pthread_equal(seen->caller, pthread_self())) seen->elsewhere++;
            int64_t a = element(&arguments[0]), b = element(&arguments[1]);
            result->type = PLUGIND_TYPE_INT32;
            result->payload.integer = a < b ? -1 : a > b;
            return 0;
        }

        static int refusing(void *context, const plugind_value *arguments, size_t count, plugind_value *result, char **message) {
            (void)context, (void)arguments, (void)count, (void)result;
            *message = strdup("the comparator refuses");
            return 1;
        }

        /* llabs of `number` through `session`: 0, or the error's code with its message in *message. */
        static int magnitude_of(plugind_function_session *session, int64_t number, int64_t *magnitude, char **message) {
            plugind_value argument;
            memset(&argument, 0, sizeof argument);
            argument.type = PLUGIND_TYPE_INT64;
            argument.payload.integer = number;
            plugind_value value;
            plugind_error *error = NULL;
            if (plugind_function_session_call(session, "llabs", &argument, 1, 0, &value, &error) != 0) {
                int code = plugind_error_code_of(error);
                *message = strdup(plugind_error_message(error));
                plugind_error_free(error);
                return code;
            }
            *magnitude = value.payload.integer;
            return 0;
        }

        /* By absolute value, through the worker's llabs in the session of `context`. */
        typedef struct {
            plugind_function_session *session;
            int last_code;
        } through;

        static int by_magnitude(void *context, const plugind_value *arguments, size_t count, plugind_value *result, char **message) {
            (void)count;
            through *via = context;
            int64_t magnitude[2];
            for (int side = 0; side < 2; side++) {
                via->last_code = magnitude_of(via->session, element(&arguments[side]), &magnitude[side], message);
                if (via->last_code != 0) return 1;
            }
            result->type = PLUGIND_TYPE_INT32;
            result->payload.integer = magnitude[0] < magnitude[1] ? -1 : magnitude[0] > magnitude[1];
            return 0;
        }

        /* Sorts `values` in place through the session's qsort: 0, or -1 with the error printed as
           "<label> <code> <message>". */
        static int sort(plugind_function_session *session, int64_t *values, size_t count, const plugind_callback *callbacks,
                        size_t callback_count, const char *label) {
            plugind_value arguments[2];
            memset(arguments, 0, sizeof arguments);
            arguments[0].type = PLUGIND_TYPE_BYTES;
            arguments[0].payload.data.bytes = (const uint8_t *)values;
            arguments[0].payload.data.length = count * sizeof *values;
            arguments[1].type = PLUGIND_TYPE_UINT64;
            arguments[1].payload.unsigned_integer = sizeof *values;
            plugind_call_result result;
            plugind_error *error = NULL;
            if (plugind_function_session_call_callbacks(session, "qsort", arguments, 2, callbacks, callback_count, 600000, &result,
                                                        &error) != 0) {
                printf("%s %d %s\n", label, plugind_error_code_of(error), plugind_error_message(error));
                plugind_error_free(error);
                return -1;
            }
            if (result.value.type != PLUGIND_TYPE_VOID || result.output_count != 1 || strcmp(result.outputs[0].name, "base") != 0
                || result.outputs[0].value.payload.data.length != count * sizeof *values) {
                fprintf(stderr, "%s: not the declared outputs\n", label);
                exit(3);
            }
            memcpy(values, result.outputs[0].value.payload.data.bytes, count * sizeof *values);
            plugind_call_result_free(&result);
            return 0;
        }

        int main(int argc, char **argv) {
            if (argc != 3) return 2;
            plugind_error *error = NULL;
            plugind_monitor *monitor = plugind_monitor_create(argv[1], PLUGIND_SCOPE_NONE, &error);
            if (monitor == NULL) fail("plugind_monitor_create", error);
            plugind_identity *identity = plugind_monitor_identity_at(monitor, 0, &error);
            if (identity == NULL) fail("plugind_monitor_identity_at", error);
            plugind_monitor_release(monitor);
            plugind_function_session *session = plugind_function_session_create(identity, 0, &error);
            if (session == NULL) fail("plugind_function_session_create", error);
            plugind_function_session *helper = plugind_function_session_create(identity, 0, &error);
            if (helper == NULL) fail("plugind_function_session_create", error);
            plugind_identity_release(identity);

            FILE *input = fopen(argv[2], "r");
            if (input == NULL) return 2;
            size_t count = 0, capacity = 16;
            int64_t *values = malloc(capacity * sizeof *values);
            long long number;
            while (fscanf(input, "%lld", &number) == 1) {
                if (count == capacity) values = realloc(values, (capacity *= 2) * sizeof *values);
                values[count++] = number;
            }
            fclose(input);

            tally seen = {0, 0, pthread_self()};
            plugind_callback callback = {"compar", ascending, &seen};
            if (sort(session, values, count, &callback, 1, "sort") != 0) return 4;
            printf("sorted");
            for (size_t index = 0; index < count; index++) printf(" %lld", (long long)values[index]);
            printf("\n");
            /* Any comparison sort of 2,000 distinct values needs about log2(2000!) > 19,000 of them. */
            printf("comparisons %s, on the calling thread %s\n", seen.calls > 15000 ? "all the host's" : "too few",
                   seen.elsewhere == 0 ? "only" : "NOT ONLY");
            int32_t pid = plugind_function_session_pid(session);

            int64_t small[] = {3, 1, 2};
            plugind_callback refusal = {"compar", refusing, NULL};
            if (sort(session, small, 3, &refusal, 1, "refused") == 0) return 5;

            /* The session goes on, with the same worker. */
            int64_t magnitude = 0;
            char *message = NULL;
            if (magnitude_of(session, -42, &magnitude, &message) != 0) fail(message, NULL);
            printf("after %lld, same worker %d\n", (long long)magnitude, plugind_function_session_pid(session) == pid);

            /* A comparator that calls another session: nested while qsort waits. */
            int64_t signed_values[] = {-9, 4, -1, 7, 0, -3, 12, -12, 5};
            through via_helper = {helper, 0};
            plugind_callback other = {"compar", by_magnitude, &via_helper};
            if (sort(session, signed_values, 9, &other, 1, "other") != 0) return 6;
            printf("other session");
            for (size_t index = 0; index < 9; index++) printf(" %lld", (long long)signed_values[index]);
            printf("\n");

            /* One that calls its own session: refused in the handler, whose failure fails the sort. */
            through via_own = {session, 0};
            plugind_callback own = {"compar", by_magnitude, &via_own};
            if (sort(session, small, 3, &own, 1, "own") == 0) return 7;
            printf("own session's call %d\n", via_own.last_code);

            if (sort(session, small, 3, NULL, 0, "missing") == 0) return 8;
            if (sort(session, small, 3, NULL, 1, "null-callbacks") == 0) return 9;
            plugind_callback misnamed = {"cmp", ascending, &seen};
            if (sort(session, small, 3, &misnamed, 1, "unknown") == 0) return 10;

            magnitude = 0;
            if (magnitude_of(session, -7, &magnitude, &message) != 0) fail(message, NULL);
            printf("last %lld, workers %lld\n", (long long)magnitude, (long long)plugind_function_session_workers_started(session));
            free(values);
            plugind_function_session_release(helper);
            plugind_function_session_release(session);
            return 0;
        }
        """#

    @Test("plugind_function_session_call_callbacks: 2,000 int64s sorted by a C comparator, failing handlers, nested calls, no leak")
    func cHostCallbacks() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let point = "org.plugind.tests.c-session-callbacks"
        try CallbackHostTests.installQsort(point: point, in: test)
        let values = (0..<2000).map { _ in Int64.random(in: .min ... .max) }
        let input = test.directory.path + "/values"
        try values.map(String.init).joined(separator: "\n").write(toFile: input, atomically: true, encoding: .utf8)
        let host = test.directory.path + "/session_callbacks_host"
        try await SanitizedCHost.build(Self.cCallbacksHost, output: host)
        let result = try await SanitizedCHost.run(host, [point, input], in: test)
        #expect(result.status == 0, "\(result.stderr)")
        let lines = result.stdout.split(separator: "\n").map(String.init)
        let sorted = "sorted " + values.sorted().map(String.init).joined(separator: " ")
        #expect(lines.first == sorted, "values: \(values)")
        let failed = "callback 'compar' of qsort failed in the host's handler: "
        let expected: [(prefix: String, contains: String)] = [
            ("comparisons all the host's, on the calling thread only", ""),
            ("refused 29 ", failed + "the comparator refuses"),
            ("after 42, same worker 1", ""),
            ("other session 0 -1 -3 4 5 7 -9 12 -12", ""),
            ("own 29 ", failed + "llabs was called from a callback handler of the same function session"),
            ("own session's call 20", ""),
            ("missing 20 ", "qsort needs a handler for its callback 'compar'"),
            ("null-callbacks 1 ", "callbacks is NULL with a count of 1"),
            ("unknown 20 ", "qsort has no callback 'cmp' to handle"),
            ("last 7, workers 1", ""),
        ]
        let rest = Array(lines.dropFirst())
        #expect(rest.count == expected.count, "\(result.stdout)\n\(result.stderr)")
        for (line, expectation) in zip(rest, expected) {
            // (An empty string is contained in none.)
            #expect(line.hasPrefix(expectation.prefix) && (expectation.contains.isEmpty || line.contains(expectation.contains)), "\(line)")
        }
    }

    @Test("plugind.FunctionSession from Python: the same guarantees")
    func python() async throws {
        var test = try TestHost()
        defer { test.remove() }
        let seeds = try TemporaryDirectory()
        defer { seeds.remove() }
        let seedFile = try seeds.publicFile("seed", contents: "7\n")
        let point = "org.plugind.tests.python-function-session"
        try Self.install(point: point, readable: seeds.path, in: &test)
        let qsortPoint = "org.plugind.tests.python-session-qsort"
        try CallbackHostTests.installQsort(point: qsortPoint, in: test)
        let result = try await PythonPackage.pytest(
            "test_function_session.py", in: test,
            variables: [
                "PLUGIND_TEST_SESSION_POINT": point, "PLUGIND_TEST_SESSION_SEED": seedFile, "PLUGIND_TEST_QSORT_POINT": qsortPoint,
            ])
        #expect(result.status == 0, "pytest:\n\(result.stdout)\n\(result.stderr)")
        #expect(result.stdout.contains("5 passed"), "\(result.stdout)")
    }
}
