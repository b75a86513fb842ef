import ExtensionFoundation
import Foundation
import PlugindEngine
import TestSupport
import Testing

/// LADSPA effects and frei0r filters through libplugind: from C (`plugind_audio_effect_*`,
/// `plugind_video_filter_*`, built with AddressSanitizer so that a bad access to the shared ports
/// or a leak fails) and from Python (`plugind.AudioEffect`, `plugind.VideoFilter`,
/// Bindings/Python/tests/test_media.py), on Debian's unchanged amp.so (ladspa-sdk) and invert0r,
/// addition and tint0r (frei0r-plugins); each output compared with the same arithmetic done by the
/// host.
@Suite("LADSPA effects and frei0r filters from C and Python", .tags(.process), .serialized, .timeLimit(.minutes(10)))
struct MediaHostTests {
    /// The plugins, as manifest-only bundles of `point` in the external root, approved: the
    /// library, and the adapter (buffers: LADSPA's port count, frei0r's inputs and output).
    static func install(point: String, in test: TestHost) throws {
        let plugins: [(identifier: String, library: String, adapter: [String: Any])] = [
            ("ladspa.amp.amp-stereo", "/usr/lib/ladspa/amp.so", ["abi": "ladspa", "plugin": "amp_stereo", "buffers": 5]),
            ("frei0r.invert0r", "/usr/lib/frei0r-1/invert0r.so", ["abi": "frei0r", "buffers": 2]),
            ("frei0r.addition", "/usr/lib/frei0r-1/addition.so", ["abi": "frei0r", "buffers": 3]),
            ("frei0r.tint0r", "/usr/lib/frei0r-1/tint0r.so", ["abi": "frei0r", "buffers": 2]),
        ]
        for plugin in plugins {
            try CallOutputsHostTests.installApproved(
                [
                    "manifestVersion": 1, "identifier": plugin.identifier, "name": plugin.identifier, "version": "1",
                    "library": plugin.library, "adapter": plugin.adapter,
                ], point: point, in: test)
        }
    }

    static let cHost = #"""
        #include <math.h>
        #include <plugind/plugind.h>
        #include <stdio.h>
        #include <stdlib.h>
        #include <string.h>

        enum { frames = 512, width = 64, height = 48 };

        static void fail(const char *what, plugind_error *error) {
            fprintf(stderr, "%s: %s\n", what, error != NULL ? plugind_error_message(error) : "(no error)");
            exit(1);
        }

        /* A deterministic sequence of 32 bits (a linear congruential generator). */
        static uint32_t state = 12345;
        static uint32_t next(void) {
            state = state * 1664525u + 1013904223u;
            return state;
        }

        /* The process of the plugin `identifier` of `point`. */
        static plugind_process *launch(const char *point, const char *identifier) {
            plugind_error *error = NULL;
            plugind_monitor *monitor = plugind_monitor_create(point, PLUGIND_SCOPE_NONE, &error);
            if (monitor == NULL) fail("plugind_monitor_create", error);
            plugind_process *process = NULL;
            for (int64_t index = 0; index < plugind_monitor_count(monitor); index++) {
                plugind_identity *identity = plugind_monitor_identity_at(monitor, index, &error);
                if (identity == NULL) fail("plugind_monitor_identity_at", error);
                if (strcmp(plugind_identity_bundle_identifier(identity), identifier) == 0) {
                    process = plugind_process_create(identity, NULL, NULL, &error);
                    if (process == NULL) fail("plugind_process_create", error);
                }
                plugind_identity_release(identity);
            }
            plugind_monitor_release(monitor);
            if (process == NULL) {
                fprintf(stderr, "%s is not listed\n", identifier);
                exit(1);
            }
            return process;
        }

        static const char *kinds[] = {"audio-input", "audio-output", "control-input", "control-output"};

        static void amp(const char *point) {
            plugind_process *process = launch(point, "ladspa.amp.amp-stereo");
            plugind_error *error = NULL;
            plugind_audio_effect *effect = plugind_audio_effect_create(process, 48000, frames, &error);
            if (effect == NULL) fail("plugind_audio_effect_create", error);
            size_t count = plugind_audio_effect_port_count(effect);
            printf("ports %zu", count);
            for (size_t index = 0; index < count; index++) {
                plugind_audio_port port;
                if (plugind_audio_effect_port(effect, index, &port) != 0) fail("plugind_audio_effect_port", NULL);
                printf(" [%s %s", port.name, kinds[port.kind]);
                if (port.kind == PLUGIND_PORT_CONTROL_INPUT) {
                    printf(" %g..%s default %g", port.has_lower_bound ? port.lower_bound : -INFINITY,
                        port.has_upper_bound ? "bounded" : "", port.default_value);
                }
                printf("]");
            }
            plugind_audio_port beyond;
            printf(" beyond %d\n", plugind_audio_effect_port(effect, count, &beyond));

            /* Control ports and indexes out of range have no samples. */
            printf("samples of control %s, of port %zu %s\n", plugind_audio_effect_samples(effect, 0) == NULL ? "NULL" : "NOT NULL",
                count, plugind_audio_effect_samples(effect, count) == NULL ? "NULL" : "NOT NULL");

            float *inputs[2] = {plugind_audio_effect_samples(effect, 1), plugind_audio_effect_samples(effect, 3)};
            float *outputs[2] = {plugind_audio_effect_samples(effect, 2), plugind_audio_effect_samples(effect, 4)};
            for (int channel = 0; channel < 2; channel++) {
                if (inputs[channel] == NULL || outputs[channel] == NULL) fail("plugind_audio_effect_samples", NULL);
            }
            static float expected[2][frames];
            for (int channel = 0; channel < 2; channel++) {
                for (size_t frame = 0; frame < frames; frame++) {
                    float sample = (float)((int32_t)next()) / 2147483648.0f * (channel == 0 ? 1.0f : 1000.0f);
                    inputs[channel][frame] = sample;
                    expected[channel][frame] = sample * 0.5f;
                }
            }
            if (plugind_audio_effect_set_control(effect, 0, 0.5f, &error) != 0) fail("plugind_audio_effect_set_control", error);
            if (plugind_audio_effect_run(effect, frames, 600000, &error) != 0) fail("plugind_audio_effect_run", error);
            size_t exact = 0;
            for (int channel = 0; channel < 2; channel++) {
                exact += memcmp(outputs[channel], expected[channel], sizeof expected[channel]) == 0;
            }
            printf("amp x0.5 %s\n", exact == 2 ? "exact" : "DIFFERENT");

            /* Refused: below the lower bound, not a number, on an audio port; the control keeps its value. */
            const float refused[] = {-1.0f, NAN};
            for (size_t index = 0; index < 2; index++) {
                if (plugind_audio_effect_set_control(effect, 0, refused[index], &error) == 0) {
                    printf("accepted %g\n", refused[index]);
                    continue;
                }
                printf("refused %d %s\n", plugind_error_code_of(error), plugind_error_message(error));
                plugind_error_free(error);
                error = NULL;
            }
            if (plugind_audio_effect_set_control(effect, 1, 0.5f, &error) == 0) {
                printf("accepted on an audio port\n");
            } else {
                printf("audio port %d %s\n", plugind_error_code_of(error), plugind_error_message(error));
                plugind_error_free(error);
                error = NULL;
            }
            float value = 0, other = 0;
            int read = plugind_audio_effect_control(effect, 0, &value);
            printf("control %d %g, of an audio port %d\n", read, value, plugind_audio_effect_control(effect, 1, &other));
            if (plugind_audio_effect_run(effect, frames + 1, 0, &error) == 0) {
                printf("ran beyond the ports\n");
            } else {
                printf("long run %d\n", plugind_error_code_of(error));
                plugind_error_free(error);
            }
            plugind_audio_effect_release(effect);
            plugind_audio_effect_release(NULL);
            plugind_process_release(process);
        }

        static void invert(const char *point) {
            plugind_process *process = launch(point, "frei0r.invert0r");
            plugind_error *error = NULL;
            plugind_video_filter *filter = plugind_video_filter_create(process, width, height, &error);
            if (filter == NULL) fail("plugind_video_filter_create", error);
            uint8_t *input = plugind_video_filter_input(filter, 0);
            const uint8_t *output = plugind_video_filter_output(filter);
            printf("inputs %zu, parameters %zu, input 1 %s, aligned %s\n", plugind_video_filter_input_count(filter),
                plugind_video_filter_parameter_count(filter), plugind_video_filter_input(filter, 1) == NULL ? "NULL" : "NOT NULL",
                ((uintptr_t)input | (uintptr_t)output) % 16 == 0 ? "yes" : "NO");
            if (input == NULL || output == NULL) fail("plugind_video_filter_input", NULL);
            static uint8_t expected[width * height * 4];
            size_t matching = 0;
            for (int round = 0; round < 2; round++) {
                for (size_t index = 0; index < sizeof expected; index++) {
                    input[index] = (uint8_t)(next() >> 24);
                    expected[index] = index % 4 == 3 ? input[index] : (uint8_t)(255 - input[index]);
                }
                if (plugind_video_filter_update(filter, round * 0.04, 600000, &error) != 0) fail("plugind_video_filter_update", error);
                matching += memcmp(output, expected, sizeof expected) == 0;
            }
            printf("invert0r 255-x %s\n", matching == 2 ? "exact" : "DIFFERENT");
            plugind_video_filter_release(filter);
            plugind_video_filter_release(NULL);

            /* The same process is no LADSPA plugin's. */
            if (plugind_audio_effect_create(process, 48000, frames, &error) != NULL) {
                printf("an effect of a frei0r plugin\n");
            } else {
                printf("not ladspa %d\n", plugind_error_code_of(error));
                plugind_error_free(error);
            }
            plugind_process_release(process);
        }

        static void tint(const char *point) {
            plugind_process *process = launch(point, "frei0r.tint0r");
            plugind_error *error = NULL;
            plugind_video_filter *filter = plugind_video_filter_create(process, 8, 8, &error);
            if (filter == NULL) fail("plugind_video_filter_create", error);
            printf("parameters");
            for (size_t index = 0; index < plugind_video_filter_parameter_count(filter); index++) {
                const char *name = NULL;
                plugind_parameter_type type;
                if (plugind_video_filter_parameter(filter, index, &name, &type) != 0) fail("plugind_video_filter_parameter", NULL);
                printf(" [%s %d]", name, (int)type);
            }
            printf("\n");
            const double color[] = {0.0, 0.5, 1.0};
            if (plugind_video_filter_set_parameter(filter, 0, color, 3, NULL, &error) != 0) fail("set color", error);
            /* Three numbers for a double, one beyond its range, a string for a colour. */
            struct {
                size_t index, count;
                double value;
                const char *text;
            } wrong[] = {{2, 3, 0.5, NULL}, {2, 1, 1.5, NULL}, {0, 0, 0, "red"}};
            for (size_t index = 0; index < 3; index++) {
                double values[3] = {wrong[index].value, wrong[index].value, wrong[index].value};
                if (plugind_video_filter_set_parameter(
                        filter, wrong[index].index, wrong[index].count ? values : NULL, wrong[index].count, wrong[index].text, &error)
                    == 0) {
                    printf("accepted wrong %zu\n", index);
                    continue;
                }
                printf("wrong %d %s\n", plugind_error_code_of(error), plugind_error_message(error));
                plugind_error_free(error);
                error = NULL;
            }
            if (plugind_video_filter_update(filter, 0, 600000, &error) != 0) fail("plugind_video_filter_update", error);
            plugind_video_filter_release(filter);
            plugind_process_release(process);
        }

        int main(int argc, char **argv) {
            if (argc != 2) return 2;
            amp(argv[1]);
            invert(argv[1]);
            tint(argv[1]);
            return 0;
        }
        """#

    @Test("plugind_audio_effect_* and plugind_video_filter_*: amp_stereo x0.5 and invert0r exactly, refusals, no leak")
    func cHost() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let point = "org.plugind.tests.c-media"
        try Self.install(point: point, in: test)
        let host = test.directory.path + "/media_host"
        try await SanitizedCHost.build(Self.cHost, output: host)
        let result = try await SanitizedCHost.run(host, [point], in: test)
        #expect(result.status == 0, "\(result.stderr)")
        let lines = result.stdout.split(separator: "\n").map(String.init)
        let expected: [(prefix: String, contains: String)] = [
            (
                "ports 5 [Gain control-input 0.. default 1] [Input (Left) audio-input] [Output (Left) audio-output] "
                    + "[Input (Right) audio-input] [Output (Right) audio-output] beyond -1", ""
            ),
            ("samples of control NULL, of port 5 NULL", ""),
            ("amp x0.5 exact", ""),
            ("refused 20 ", "control 0 (Gain) takes 0.0 … ∞; -1.0 is outside"),
            ("refused 20 ", "control 0 (Gain)"),
            ("audio port 20 ", "port 1 is not a control input (those are: 0 Gain)"),
            ("control 0 0.5, of an audio port -1", ""),
            ("long run 20", ""),
            ("inputs 1, parameters 0, input 1 NULL, aligned yes", ""),
            ("invert0r 255-x exact", ""),
            ("not ladspa 21", ""),
            ("parameters [Map black to 2] [Map white to 2] [Tint amount 1]", ""),
            ("wrong 20 ", "parameter 2 (Tint amount) of type double takes other values"),
            ("wrong 20 ", "parameter 2 (Tint amount) takes 0…1"),
            ("wrong 20 ", "parameter 0 (Map black to) of type color takes other values"),
        ]
        #expect(lines.count == expected.count, "\(result.stdout)\n\(result.stderr)")
        for (line, expectation) in zip(lines, expected) {
            // (An empty string is contained in none.)
            #expect(line.hasPrefix(expectation.prefix) && (expectation.contains.isEmpty || line.contains(expectation.contains)), "\(line)")
        }
    }

    @Test("plugind.AudioEffect and plugind.VideoFilter from Python: amp_stereo, invert0r, addition against arithmetic; refusals")
    func python() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let point = "org.plugind.tests.python-media"
        try Self.install(point: point, in: test)
        let result = try await PythonPackage.pytest("test_media.py", in: test, variables: ["PLUGIND_TEST_MEDIA_POINT": point])
        #expect(result.status == 0, "pytest:\n\(result.stdout)\n\(result.stderr)")
        #expect(result.stdout.contains("6 passed"), "\(result.stdout)")
    }
}
