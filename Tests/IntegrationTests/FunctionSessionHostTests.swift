import ExtensionFoundation
import Foundation
import PlugindEngine
import PlugindPolicyEditing
import TestSupport
import Testing

/// Function sessions through libplugind: `plugind_function_session_*` from C (built with
/// AddressSanitizer, so that a leak or a bad free of a result fails) and `plugind.FunctionSession`
/// from Python (Bindings/Python/tests/test_function_session.py), against the hostile decoder.
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

    @Test("plugind.FunctionSession from Python: the same guarantees")
    func python() async throws {
        var test = try TestHost()
        defer { test.remove() }
        let seeds = try TemporaryDirectory()
        defer { seeds.remove() }
        let seedFile = try seeds.publicFile("seed", contents: "7\n")
        let point = "org.plugind.tests.python-function-session"
        try Self.install(point: point, readable: seeds.path, in: &test)
        let result = try await PythonPackage.pytest(
            "test_function_session.py", in: test,
            variables: ["PLUGIND_TEST_SESSION_POINT": point, "PLUGIND_TEST_SESSION_SEED": seedFile])
        #expect(result.status == 0, "pytest:\n\(result.stdout)\n\(result.stderr)")
        #expect(result.stdout.contains("3 passed"), "\(result.stdout)")
    }
}
