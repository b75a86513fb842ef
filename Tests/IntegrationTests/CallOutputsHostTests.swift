import ExtensionFoundation
import Foundation
import PlugindEngine
import PlugindPolicyEditing
import TestSupport
import Testing

/// Typed calls with out values, buffers and errno through libplugind: from C
/// (`plugind_process_call_outputs`, built with AddressSanitizer so that a bad free or a leak of
/// the result fails) and from Python (`Process.call_with_outputs`,
/// Bindings/Python/tests/test_call_outputs.py), against the zlib example and libc by soname.
@Suite("Typed calls with outputs from C and Python", .tags(.process), .serialized, .timeLimit(.minutes(5)))
struct CallOutputsHostTests {
    /// Writes a manifest-only bundle for `point` into the external root and approves it.
    static func installApproved(_ manifest: [String: Any], point: String, in test: TestHost) throws {
        var manifest = manifest
        manifest["extensionPoint"] = point
        let identifier = try #require(manifest["identifier"] as? String)
        let bundle = test.externalRoot + "/\(identifier).appex"
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        try JSONSerialization.data(withJSONObject: manifest).write(to: URL(fileURLWithPath: bundle + "/manifest.json"))
        let item = try #require(Inventory.take(host: test.host, catalog: Catalog()).item(identifier))
        try PolicyEditor(for: test.host, administrator: false).approve(item.entry)
    }

    static func installZlib(point: String, in test: TestHost) throws {
        let path = BuiltProducts.packageRoot + "/ExamplePlugins/Zlib/manifest.json"
        let manifest = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any])
        try installApproved(manifest, point: point, in: test)
    }

    static func installLibc(point: String, in test: TestHost) throws {
        try installApproved(
            [
                "manifestVersion": 1, "identifier": "org.plugind.tests.libc-outputs", "name": "libc", "version": "6",
                "library": "libc.so.6",
                "functions": [
                    ["name": "strtol", "arguments": ["string", "null", "int32"], "returns": "int64", "errno": true],
                    [
                        "name": "rand_r", "returns": "int32",
                        "arguments": [["name": "seed", "type": "pointer", "to": "uint32", "direction": "inout"]],
                    ],
                ],
            ], point: point, in: test)
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

        static void print_result(const plugind_call_result *result) {
            printf("value %lld\n", (long long)result->value.payload.integer);
            for (size_t index = 0; index < result->output_count; index++) {
                const plugind_output *output = &result->outputs[index];
                printf("%s ", output->name);
                if (output->value.type == PLUGIND_TYPE_BYTES) {
                    for (size_t byte = 0; byte < output->value.payload.data.length; byte++) {
                        printf("%02x", output->value.payload.data.bytes[byte]);
                    }
                    printf("\n");
                } else {
                    printf("%llu\n", (unsigned long long)output->value.payload.unsigned_integer);
                }
            }
            printf("has_errno %d\n", result->has_errno);
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

            static const char text[] = "hello";
            plugind_value arguments[2];
            memset(arguments, 0, sizeof arguments);
            arguments[0].type = PLUGIND_TYPE_UINT64;
            arguments[0].payload.unsigned_integer = 64;
            arguments[1].type = PLUGIND_TYPE_BYTES;
            arguments[1].payload.data.bytes = (const uint8_t *)text;
            arguments[1].payload.data.length = strlen(text);
            plugind_call_result result;
            if (plugind_process_call_outputs(process, "compress", arguments, 2, 0, &result, &error) != 0) fail("compress", error);
            print_result(&result);
            plugind_call_result_free(&result);
            if (result.outputs != NULL || result.output_count != 0) return 3;
            plugind_call_result_free(NULL);

            /* The capacity as a string: refused before the worker sees it. */
            arguments[0].type = PLUGIND_TYPE_STRING;
            arguments[0].payload.data.bytes = (const uint8_t *)text;
            arguments[0].payload.data.length = strlen(text);
            if (plugind_process_call_outputs(process, "compress", arguments, 2, 0, &result, &error) == 0) return 4;
            printf("wrong-type %d\n", plugind_error_code_of(error));
            plugind_error_free(error);
            error = NULL;
            if (plugind_process_call_outputs(process, "compress", arguments, 2, 0, NULL, &error) == 0) return 5;
            printf("null-result %d\n", plugind_error_code_of(error));
            plugind_error_free(error);
            plugind_process_release(process);
            return 0;
        }
        """#

    @Test("plugind_process_call_outputs: the value, each output by name, freed without a leak")
    func cHost() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let point = "org.plugind.tests.c-outputs"
        try Self.installZlib(point: point, in: test)
        let host = test.directory.path + "/outputs_host"
        try await SanitizedCHost.build(Self.cHost, output: host)
        let result = try await SanitizedCHost.run(host, [point], in: test)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(
            result.stdout
                == "value 0\ndest 789ccb48cdc9c90700062c0215\ndestLen 13\nhas_errno 0\nwrong-type 20\nnull-result 1\n")
    }

    @Test("Process.call_with_outputs from Python, a deflate stream's struct fields included, checked by Python's own zlib")
    func python() async throws {
        let test = try TestHost()
        defer { test.remove() }
        try Self.installZlib(point: "org.plugind.tests.python-zlib", in: test)
        try Self.installLibc(point: "org.plugind.tests.python-libc", in: test)
        let result = try await PythonPackage.pytest(
            "test_call_outputs.py", in: test,
            variables: [
                "PLUGIND_TEST_ZLIB_POINT": "org.plugind.tests.python-zlib", "PLUGIND_TEST_LIBC_POINT": "org.plugind.tests.python-libc",
            ])
        #expect(result.status == 0, "pytest:\n\(result.stdout)\n\(result.stderr)")
        #expect(result.stdout.contains("3 passed"), "\(result.stdout)")
    }
}
