import ExtensionFoundation
import Foundation
import PlugindEngine
import TestSupport
import Testing

/// Handles through libplugind: from C (`PLUGIND_TYPE_HANDLE`, `plugind_handle_release`, built
/// with AddressSanitizer so that a leak or a bad free of a result fails) and from Python
/// (`plugind.Handle`, Bindings/Python/tests/test_handles.py), against the SQLite example.
@Suite("Handles from C and Python", .tags(.process), .serialized, .timeLimit(.minutes(5)))
struct HandleHostTests {
    static func installSqlite(point: String, in test: TestHost) throws {
        let path = BuiltProducts.packageRoot + "/ExamplePlugins/Sqlite/manifest.json"
        let manifest = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any])
        try CallOutputsHostTests.installApproved(manifest, point: point, in: test)
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

        static plugind_value text(const char *string) {
            plugind_value value;
            memset(&value, 0, sizeof value);
            value.type = PLUGIND_TYPE_STRING;
            value.payload.data.bytes = (const uint8_t *)string;
            value.payload.data.length = strlen(string);
            return value;
        }

        static plugind_value integer(int64_t number) {
            plugind_value value;
            memset(&value, 0, sizeof value);
            value.type = PLUGIND_TYPE_INT64;
            value.payload.integer = number;
            return value;
        }

        /* Calls `name` and returns its one output, a handle; the result is freed. */
        static plugind_value out_handle(plugind_process *process, const char *name, plugind_value *arguments, size_t count) {
            plugind_error *error = NULL;
            plugind_call_result result;
            if (plugind_process_call_outputs(process, name, arguments, count, 0, &result, &error) != 0) fail(name, error);
            if (result.value.payload.integer != 0 || result.output_count != 1) fail(name, NULL);
            plugind_value handle = result.outputs[0].value;
            if (handle.type != PLUGIND_TYPE_HANDLE) fail("not a handle", NULL);
            printf("%s %s %s#%llu\n", name, result.outputs[0].name, handle.payload.handle.kind,
                   (unsigned long long)handle.payload.handle.id);
            plugind_call_result_free(&result);
            return handle;
        }

        static int64_t call(plugind_process *process, const char *name, plugind_value *arguments, size_t count) {
            plugind_error *error = NULL;
            plugind_value result;
            if (plugind_process_call(process, name, arguments, count, 0, &result, &error) != 0) fail(name, error);
            return result.payload.integer;
        }

        /* The error code of a call that must fail. */
        static int refused(plugind_process *process, const char *name, plugind_value *arguments, size_t count) {
            plugind_error *error = NULL;
            plugind_value result;
            if (plugind_process_call(process, name, arguments, count, 0, &result, &error) == 0) return -1;
            int code = plugind_error_code_of(error);
            if (strstr(plugind_error_message(error), name) == NULL) code = -2;
            plugind_error_free(error);
            return code;
        }

        int main(int argc, char **argv) {
            if (argc != 2) return 2;
            plugind_error *error = NULL;
            plugind_monitor *monitor = plugind_monitor_create(argv[1], PLUGIND_SCOPE_NONE, &error);
            if (monitor == NULL) fail("plugind_monitor_create", error);
            plugind_identity *identity = plugind_monitor_identity_at(monitor, 0, &error);
            if (identity == NULL) fail("plugind_monitor_identity_at", error);
            plugind_monitor_release(monitor);
            plugind_process *process = plugind_process_create(identity, NULL, NULL, &error);
            if (process == NULL) fail("plugind_process_create", error);
            plugind_identity_release(identity);

            plugind_value arguments[3] = {text(":memory:")};
            plugind_value db = out_handle(process, "sqlite3_open", arguments, 1);
            arguments[0] = db;
            arguments[0].payload.handle.kind = NULL; /* the declared kind */
            arguments[1] = text("SELECT 6 * 7");
            arguments[2] = integer(-1);
            plugind_value statement = out_handle(process, "sqlite3_prepare_v2", arguments, 3);
            arguments[0] = statement;
            printf("step %lld\n", (long long)call(process, "sqlite3_step", arguments, 1));
            arguments[1] = integer(0);
            printf("column %lld\n", (long long)call(process, "sqlite3_column_int64", arguments, 2));
            plugind_value owner;
            if (plugind_process_call(process, "sqlite3_db_handle", arguments, 1, 0, &owner, &error) != 0) fail("db_handle", error);
            printf("same database %d\n", owner.type == PLUGIND_TYPE_HANDLE && owner.payload.handle.id == db.payload.handle.id);

            /* Released by calling its release function: plugind_handle_release has nothing left to do. */
            printf("finalize %lld\n", (long long)call(process, "sqlite3_finalize", arguments, 1));
            printf("release after finalize %d\n", plugind_handle_release(process, &statement, &error));
            printf("step after finalize %d\n", refused(process, "sqlite3_step", arguments, 1));

            /* A number the worker never gave out, and one of the other kind. */
            arguments[0] = db;
            arguments[0].payload.handle.id = 1000;
            printf("forged %d\n", refused(process, "sqlite3_errmsg", arguments, 1));
            arguments[0] = statement;
            arguments[0].payload.handle.kind = "sqlite3";
            printf("wrong kind %d\n", refused(process, "sqlite3_errmsg", arguments, 1));

            printf("release %d\n", plugind_handle_release(process, &db, &error));
            arguments[0] = db;
            printf("errmsg after release %d\n", refused(process, "sqlite3_errmsg", arguments, 1));
            if (plugind_handle_release(process, &db, &error) == 0) return 3;
            printf("release again %d\n", plugind_error_code_of(error));
            plugind_error_free(error);
            error = NULL;

            /* Dropped: released in the background; the process's release waits for nothing. */
            arguments[0] = text(":memory:");
            plugind_value dropped = out_handle(process, "sqlite3_open", arguments, 1);
            plugind_handle_drop(process, &dropped);
            arguments[0] = text(":memory:");
            out_handle(process, "sqlite3_open", arguments, 1); /* held until the process goes */
            plugind_process_release(process);
            return 0;
        }
        """#

    @Test("PLUGIND_TYPE_HANDLE in and out, plugind_handle_release and plugind_handle_drop, without a leak")
    func cHost() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let point = "org.plugind.tests.c-handles"
        try Self.installSqlite(point: point, in: test)
        let host = test.directory.path + "/handles_host"
        try await SanitizedCHost.build(Self.cHost, output: host)
        let result = try await SanitizedCHost.run(host, [point], in: test)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(
            result.stdout == """
                sqlite3_open ppDb sqlite3#1
                sqlite3_prepare_v2 ppStmt sqlite3_stmt#2
                step 100
                column 42
                same database 1
                finalize 0
                release after finalize 0
                step after finalize 20
                forged 20
                wrong kind 20
                release 0
                errmsg after release 20
                release again 1
                sqlite3_open ppDb sqlite3#3
                sqlite3_open ppDb sqlite3#4

                """)
    }

    @Test("plugind.Handle from Python: rows checked by Python's sqlite3, release, refusals, release on garbage collection")
    func python() async throws {
        let test = try TestHost()
        defer { test.remove() }
        try Self.installSqlite(point: "org.plugind.tests.python-sqlite", in: test)
        let result = try await PythonPackage.pytest(
            "test_handles.py", in: test, variables: ["PLUGIND_TEST_SQLITE_POINT": "org.plugind.tests.python-sqlite"])
        #expect(result.status == 0, "pytest:\n\(result.stdout)\n\(result.stderr)")
        #expect(result.stdout.contains("3 passed"), "\(result.stdout)")
    }
}
