import ExtensionFoundation
import Foundation
import PlugindEngine
import TestSupport
import Testing

/// Typed calls with callbacks through libplugind: from C (`plugind_process_call_callbacks`, built
/// with AddressSanitizer so that a bad free or a leak of the handlers' messages or the result
/// fails) and from Python (`Process.call_with_outputs(..., callbacks=)`,
/// Bindings/Python/tests/test_callbacks.py), against libc's qsort (ExamplePlugins/Qsort).
@Suite("Typed calls with callbacks from C and Python", .tags(.process), .serialized, .timeLimit(.minutes(10)))
struct CallbackHostTests {
    static func installQsort(point: String, in test: TestHost) throws {
        let path = BuiltProducts.packageRoot + "/ExamplePlugins/Qsort/manifest.json"
        let manifest = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any])
        try CallOutputsHostTests.installApproved(manifest, point: point, in: test)
    }

    static let cHost = #"""
        #include <plugind/plugind.h>
        #include <pthread.h>
        #include <stdio.h>
        #include <stdlib.h>
        #include <string.h>
        #include <time.h>
        #include <unistd.h>

        static plugind_process *process;

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
            if (count != 2 || arguments[0].type != PLUGIND_TYPE_BYTES || arguments[0].payload.data.length != 8
                || arguments[1].type != PLUGIND_TYPE_BYTES || arguments[1].payload.data.length != 8) {
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

        static int silent(void *context, const plugind_value *arguments, size_t count, plugind_value *result, char **message) {
            (void)context, (void)arguments, (void)count, (void)result, (void)message;
            return 7;
        }

        static int real(void *context, const plugind_value *arguments, size_t count, plugind_value *result, char **message) {
            (void)context, (void)arguments, (void)count;
            /* A message with a success is freed too. */
            *message = strdup("ignored");
            result->type = PLUGIND_TYPE_DOUBLE;
            result->payload.real = -1.5;
            return 0;
        }

        static int wide(void *context, const plugind_value *arguments, size_t count, plugind_value *result, char **message) {
            (void)context, (void)arguments, (void)count, (void)message;
            result->type = PLUGIND_TYPE_INT64;
            result->payload.integer = INT64_C(1) << 40;
            return 0;
        }

        /* By absolute value, through the worker's llabs: calls of the same process from inside the
           handler, nested in the callback while qsort waits for the answer. */
        static int by_magnitude(void *context, const plugind_value *arguments, size_t count, plugind_value *result, char **message) {
            (void)count;
            int64_t magnitude[2];
            for (int side = 0; side < 2; side++) {
                plugind_value argument;
                memset(&argument, 0, sizeof argument);
                argument.type = PLUGIND_TYPE_INT64;
                argument.payload.integer = element(&arguments[side]);
                plugind_value value;
                plugind_error *error = NULL;
                if (plugind_process_call(context, "llabs", &argument, 1, 0, &value, &error) != 0) {
                    *message = strdup(plugind_error_message(error));
                    plugind_error_free(error);
                    return 1;
                }
                magnitude[side] = value.payload.integer;
            }
            result->type = PLUGIND_TYPE_INT32;
            result->payload.integer = magnitude[0] < magnitude[1] ? -1 : magnitude[0] > magnitude[1];
            return 0;
        }

        static int own_order(const void *a, const void *b) {
            int64_t left = *(const int64_t *)a, right = *(const int64_t *)b;
            return left < right ? -1 : left > right;
        }

        /* Sorts `values` in place through the worker's qsort: 0, or -1 with the error printed as
           "<label> <code> <message>". */
        static int sort(int64_t *values, size_t count, const plugind_callback *callbacks, size_t callback_count, const char *label) {
            plugind_value arguments[2];
            memset(arguments, 0, sizeof arguments);
            arguments[0].type = PLUGIND_TYPE_BYTES;
            arguments[0].payload.data.bytes = (const uint8_t *)values;
            arguments[0].payload.data.length = count * sizeof *values;
            arguments[1].type = PLUGIND_TYPE_UINT64;
            arguments[1].payload.unsigned_integer = sizeof *values;
            plugind_call_result result;
            plugind_error *error = NULL;
            if (plugind_process_call_callbacks(process, "qsort", arguments, 2, callbacks, callback_count, 600000, &result, &error) != 0) {
                printf("%s %d %s\n", label, plugind_error_code_of(error), plugind_error_message(error));
                plugind_error_free(error);
                return -1;
            }
            if (result.value.type != PLUGIND_TYPE_VOID || result.output_count != 1 || strcmp(result.outputs[0].name, "base") != 0
                || result.outputs[0].value.type != PLUGIND_TYPE_BYTES
                || result.outputs[0].value.payload.data.length != count * sizeof *values) {
                fprintf(stderr, "%s: not the declared outputs\n", label);
                exit(3);
            }
            memcpy(values, result.outputs[0].value.payload.data.bytes, count * sizeof *values);
            plugind_call_result_free(&result);
            return 0;
        }

        /* A thread of its own sorting 300 values, for the threads check. */
        static void *sort_on_thread(void *context) {
            int *ok = context;
            int64_t values[300], expected[300];
            for (size_t index = 0; index < 300; index++) values[index] = expected[index] = (int64_t)(mrand48() % 1000);
            tally seen = {0, 0, pthread_self()};
            plugind_callback callback = {"compar", ascending, &seen};
            qsort(expected, 300, sizeof *expected, own_order);
            *ok = sort(values, 300, &callback, 1, "thread") == 0 && memcmp(values, expected, sizeof values) == 0 && seen.calls > 0
                && seen.elsewhere == 0;
            return NULL;
        }

        int main(int argc, char **argv) {
            if (argc != 2) return 2;
            plugind_error *error = NULL;
            plugind_monitor *monitor = plugind_monitor_create(argv[1], PLUGIND_SCOPE_NONE, &error);
            if (monitor == NULL) fail("plugind_monitor_create", error);
            plugind_identity *identity = plugind_monitor_identity_at(monitor, 0, &error);
            if (identity == NULL) fail("plugind_monitor_identity_at", error);
            plugind_monitor_release(monitor);
            process = plugind_process_create(identity, NULL, NULL, &error);
            if (process == NULL) fail("plugind_process_create", error);
            plugind_identity_release(identity);

            long seed = (long)time(NULL) ^ (long)getpid();
            fprintf(stderr, "seed %ld\n", seed);
            srand48(seed);
            enum { count = 2000 };
            static int64_t values[count], expected[count];
            for (size_t index = 0; index < count; index++) {
                values[index] = expected[index] = (int64_t)(((uint64_t)(uint32_t)mrand48() << 32) | (uint32_t)mrand48());
            }
            tally seen = {0, 0, pthread_self()};
            plugind_callback callback = {"compar", ascending, &seen};
            if (sort(values, count, &callback, 1, "sort") != 0) return 4;
            qsort(expected, count, sizeof *expected, own_order);
            printf("sorted %d %s\n", count, memcmp(values, expected, sizeof values) == 0 ? "in order" : "OUT OF ORDER");
            /* Any comparison sort of 2,000 distinct values needs about log2(2000!) > 19,000 of them. */
            printf("comparisons %s, on the calling thread %s\n", seen.calls > 15000 ? "all the host's" : "too few",
                seen.elsewhere == 0 ? "only" : "NOT ONLY");
            fprintf(stderr, "comparisons %zu\n", seen.calls);

            int64_t signed_values[] = {-9, 4, -1, 7, 0, -3, 12, -12, 5};
            plugind_callback magnitude = {"compar", by_magnitude, process};
            if (sort(signed_values, 9, &magnitude, 1, "nested") != 0) return 5;
            printf("nested");
            for (size_t index = 0; index < 9; index++) printf(" %lld", (long long)signed_values[index]);
            printf("\n");

            int64_t small[] = {3, 1, 2};
            plugind_callback refusal = {"compar", refusing, NULL};
            if (sort(small, 3, &refusal, 1, "refused") == 0) return 6;
            plugind_callback quiet = {"compar", silent, NULL};
            if (sort(small, 3, &quiet, 1, "silent") == 0) return 7;
            plugind_callback double_result = {"compar", real, NULL};
            if (sort(small, 3, &double_result, 1, "double") == 0) return 8;
            plugind_callback wide_result = {"compar", wide, NULL};
            if (sort(small, 3, &wide_result, 1, "wide") == 0) return 9;
            if (sort(small, 3, NULL, 0, "missing") == 0) return 10;
            plugind_callback misnamed = {"cmp", ascending, &seen};
            if (sort(small, 3, &misnamed, 1, "unknown") == 0) return 11;
            plugind_callback unnamed = {NULL, ascending, &seen};
            if (sort(small, 3, &unnamed, 1, "null-name") == 0) return 12;
            plugind_callback unhandled = {"compar", NULL, NULL};
            if (sort(small, 3, &unhandled, 1, "null-handler") == 0) return 13;
            if (sort(small, 3, NULL, 1, "null-callbacks") == 0) return 14;
            plugind_callback twice[] = {{"compar", ascending, &seen}, {"compar", ascending, &seen}};
            if (sort(small, 3, twice, 2, "twice") == 0) return 15;

            /* Two threads at once, each with its own comparator, each run on its own thread. */
            pthread_t threads[2];
            int ok[2] = {0, 0};
            for (int index = 0; index < 2; index++) pthread_create(&threads[index], NULL, sort_on_thread, &ok[index]);
            for (int index = 0; index < 2; index++) pthread_join(threads[index], NULL);
            printf("threads %s\n", ok[0] && ok[1] ? "ok" : "FAILED");

            /* The process goes on. */
            plugind_value argument;
            memset(&argument, 0, sizeof argument);
            argument.type = PLUGIND_TYPE_INT64;
            argument.payload.integer = -42;
            plugind_value value;
            if (plugind_process_call(process, "llabs", &argument, 1, 0, &value, &error) != 0) fail("llabs", error);
            printf("after %lld\n", (long long)value.payload.integer);
            plugind_process_release(process);
            return 0;
        }
        """#

    @Test("plugind_process_call_callbacks: 2,000 int64s sorted by a C comparator, failing handlers, nested calls, no leak")
    func cHost() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let point = "org.plugind.tests.c-callbacks"
        try Self.installQsort(point: point, in: test)
        let host = test.directory.path + "/callbacks_host"
        try await SanitizedCHost.build(Self.cHost, output: host)
        let result = try await SanitizedCHost.run(host, [point], in: test)
        #expect(result.status == 0, "\(result.stderr)")
        let lines = result.stdout.split(separator: "\n").map(String.init)
        let failed = "callback 'compar' of qsort failed in the host's handler: "
        let expected: [(prefix: String, contains: String)] = [
            ("sorted 2000 in order", ""),
            ("comparisons all the host's, on the calling thread only", ""),
            ("nested 0 -1 -3 4 5 7 -9 12 -12", ""),
            ("refused 29 ", failed + "the comparator refuses"),
            ("silent 29 ", failed + "the handler returned 7"),
            ("double 29 ", "the handler of callback 'compar' of qsort returned the real -1.5, not a value of the declared int32"),
            ("wide 29 ", "returned the integer 1099511627776, not a value of the declared int32"),
            ("missing 20 ", "qsort needs a handler for its callback 'compar'"),
            ("unknown 20 ", "qsort has no callback 'cmp' to handle"),
            ("null-name 1 ", "callback 0: the name is NULL or not UTF-8"),
            ("null-handler 1 ", "callback 0 ('compar'): the handler is NULL"),
            ("null-callbacks 1 ", "callbacks is NULL with a count of 1"),
            ("twice 1 ", "callback 1: 'compar' is given twice"),
            ("threads ok", ""),
            ("after 42", ""),
        ]
        #expect(lines.count == expected.count, "\(result.stdout)\n\(result.stderr)")
        for (line, expectation) in zip(lines, expected) {
            // (An empty string is contained in none.)
            #expect(line.hasPrefix(expectation.prefix) && (expectation.contains.isEmpty || line.contains(expectation.contains)), "\(line)")
        }
    }

    @Test("Process.call_with_outputs(callbacks=) from Python: 2,000 int64s by a Python comparator, raising, nested calls")
    func python() async throws {
        let test = try TestHost()
        defer { test.remove() }
        try Self.installQsort(point: "org.plugind.tests.python-qsort", in: test)
        let result = try await PythonPackage.pytest(
            "test_callbacks.py", in: test, variables: ["PLUGIND_TEST_QSORT_POINT": "org.plugind.tests.python-qsort"])
        #expect(result.status == 0, "pytest:\n\(result.stdout)\n\(result.stderr)")
        #expect(result.stdout.contains("4 passed"), "\(result.stdout)")
    }
}
