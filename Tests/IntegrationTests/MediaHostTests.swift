import ExtensionFoundation
import Foundation
import PlugindEngine
import TestSupport
import Testing

/// LADSPA effects and frei0r filters through libplugind: from C (`plugind_audio_effect_*`,
/// `plugind_audio_chain_*`, `plugind_video_filter_*`, built with AddressSanitizer so that a bad
/// access to the shared ports or a leak fails) and from Python (`plugind.AudioEffect`,
/// `plugind.media.AudioEffectChain`, `plugind.VideoFilter`, Bindings/Python/tests/test_media.py),
/// on Debian's unchanged amp.so and filter.so (ladspa-sdk) and invert0r, addition and tint0r
/// (frei0r-plugins); each output compared with the same arithmetic done by the host, a chain's
/// with its effects run one after the other and with the suite's in-process LADSPA host.
@Suite("LADSPA effects and frei0r filters from C and Python", .tags(.process), .serialized, .timeLimit(.minutes(10)))
struct MediaHostTests {
    /// The plugins, as manifest-only bundles of `point` in the external root, approved: the
    /// library, and the adapter (buffers: LADSPA's port count, frei0r's inputs and output).
    static func install(point: String, in test: TestHost) throws {
        let plugins: [(identifier: String, library: String, adapter: [String: Any])] = [
            ("ladspa.amp.amp-stereo", "/usr/lib/ladspa/amp.so", ["abi": "ladspa", "plugin": "amp_stereo", "buffers": 5]),
            ("ladspa.amp.amp-mono", "/usr/lib/ladspa/amp.so", ["abi": "ladspa", "plugin": "amp_mono", "buffers": 3]),
            ("ladspa.filter.lpf", "/usr/lib/ladspa/filter.so", ["abi": "ladspa", "plugin": "lpf", "buffers": 3]),
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

        static void report(const char *what, plugind_error *error) {
            printf("%s %d %s\n", what, plugind_error_code_of(error), plugind_error_message(error));
            plugind_error_free(error);
        }

        /* amp_mono at 0.5 then lpf at 1000 Hz: as a chain, and as two other effects run one after the
         * other by this host; the chain's input and output go to DIRECTORY/chain-input.f32 and
         * DIRECTORY/chain-output.f32 for the suite's in-process reference host. */
        static void chain(const char *point, const char *directory) {
            enum { blocks = 4, block = 256 };
            const char *identifiers[4] = {"ladspa.amp.amp-mono", "ladspa.filter.lpf", "ladspa.amp.amp-mono", "ladspa.filter.lpf"};
            plugind_process *processes[5];
            plugind_audio_effect *effects[5];
            plugind_error *error = NULL;
            for (int index = 0; index < 4; index++) {
                processes[index] = launch(point, identifiers[index]);
                effects[index] = plugind_audio_effect_create(processes[index], 48000, block, &error);
                if (effects[index] == NULL) fail("plugind_audio_effect_create", error);
                if (plugind_audio_effect_set_control(effects[index], 0, index % 2 == 0 ? 0.5f : 1000.0f, &error) != 0) {
                    fail("plugind_audio_effect_set_control", error);
                }
            }
            plugind_audio_chain *chain = plugind_audio_chain_create(effects, 2, &error);
            if (chain == NULL) fail("plugind_audio_chain_create", error);
            float *input = plugind_audio_chain_input(chain, 0);
            const float *output = plugind_audio_chain_output(chain, 0);
            printf("chain inputs %zu outputs %zu, input 1 %s, output 1 %s, input is amp's %s, output is lpf's %s\n",
                plugind_audio_chain_input_count(chain), plugind_audio_chain_output_count(chain),
                plugind_audio_chain_input(chain, 1) == NULL ? "NULL" : "NOT NULL",
                plugind_audio_chain_output(chain, 1) == NULL ? "NULL" : "NOT NULL",
                input == plugind_audio_effect_samples(effects[0], 1) ? "yes" : "NO",
                output == plugind_audio_effect_samples(effects[1], 2) ? "yes" : "NO");
            if (input == NULL || output == NULL) fail("plugind_audio_chain_input", NULL);
            float *amp_input = plugind_audio_effect_samples(effects[2], 1), *amp_output = plugind_audio_effect_samples(effects[2], 2);
            float *lpf_input = plugind_audio_effect_samples(effects[3], 1), *lpf_output = plugind_audio_effect_samples(effects[3], 2);
            static float signal[blocks * block], chained[blocks * block], separate[blocks * block];
            for (int index = 0; index < blocks; index++) {
                float *samples = signal + index * block;
                for (size_t frame = 0; frame < block; frame++) samples[frame] = (float)((int32_t)next()) / 2147483648.0f;
                memcpy(input, samples, sizeof(float) * block);
                if (plugind_audio_chain_run(chain, block, 600000, &error) != 0) fail("plugind_audio_chain_run", error);
                memcpy(chained + index * block, output, sizeof(float) * block);
                memcpy(amp_input, samples, sizeof(float) * block);
                if (plugind_audio_effect_run(effects[2], block, 600000, &error) != 0) fail("plugind_audio_effect_run", error);
                memcpy(lpf_input, amp_output, sizeof(float) * block);
                if (plugind_audio_effect_run(effects[3], block, 600000, &error) != 0) fail("plugind_audio_effect_run", error);
                memcpy(separate + index * block, lpf_output, sizeof(float) * block);
            }
            size_t changed = 0;
            for (size_t frame = 0; frame < blocks * block; frame++) changed += chained[frame] != signal[frame] * 0.5f;
            printf("chain = amp then lpf %s, filtered %s\n", memcmp(chained, separate, sizeof chained) == 0 ? "exact" : "DIFFERENT",
                changed > blocks * block / 2 ? "yes" : "NO");
            char path[4096];
            const float *files[2] = {signal, chained};
            const char *names[2] = {"chain-input.f32", "chain-output.f32"};
            for (int index = 0; index < 2; index++) {
                snprintf(path, sizeof path, "%s/%s", directory, names[index]);
                FILE *file = fopen(path, "wb");
                if (file == NULL || fwrite(files[index], sizeof signal, 1, file) != 1 || fclose(file) != 0) fail(path, NULL);
            }

            plugind_audio_timing timing, first, beyond = {0, 0, 0};
            if (plugind_audio_chain_timing(chain, &timing) != 0 || plugind_audio_effect_timing(effects[0], &first) != 0) {
                fail("plugind_audio_chain_timing", NULL);
            }
            printf("timing chain %llu effect %llu, missed within %s, longest %s, invalid %d %d\n", (unsigned long long)timing.blocks,
                (unsigned long long)first.blocks, timing.missed_blocks <= timing.blocks ? "yes" : "NO",
                timing.longest_run_ns > 0 && timing.longest_run_ns >= first.longest_run_ns ? "yes" : "NO",
                plugind_audio_chain_timing(NULL, &beyond), plugind_audio_effect_timing(effects[0], NULL));

            /* Refused: no effects, one effect twice, a link of 1 output to 2 inputs. */
            if (plugind_audio_chain_create(effects, 0, &error) != NULL) fail("a chain of no effects", NULL);
            report("empty", error);
            plugind_audio_effect *twice[2] = {effects[2], effects[2]};
            if (plugind_audio_chain_create(twice, 2, &error) != NULL) fail("a chain of one effect twice", NULL);
            report("twice", error);
            processes[4] = launch(point, "ladspa.amp.amp-stereo");
            effects[4] = plugind_audio_effect_create(processes[4], 48000, block, &error);
            if (effects[4] == NULL) fail("plugind_audio_effect_create", error);
            plugind_audio_effect *wide[2] = {effects[2], effects[4]};
            if (plugind_audio_chain_create(wide, 2, &error) != NULL) fail("a chain of mono into stereo", NULL);
            report("link", error);

            /* An effect released while in the chain: the chain's run says so, its ports stay readable. */
            plugind_audio_effect_release(effects[1]);
            if (plugind_audio_chain_run(chain, block, 600000, &error) == 0) fail("ran a chain of a released effect", NULL);
            report("released", error);
            if (plugind_audio_chain_create(effects, 2, &error) != NULL) fail("a chain of a released effect", NULL);
            report("create released", error);
            printf("output still %s\n", memcmp(output, chained + (blocks - 1) * block, sizeof(float) * block) == 0 ? "readable" : "DIFFERENT");
            plugind_audio_chain_release(chain);
            plugind_audio_chain_release(chain);
            plugind_audio_chain_release(NULL);
            if (plugind_audio_chain_run(chain, block, 0, &error) == 0) fail("ran a released chain", NULL);
            report("released chain", error);
            for (int index = 0; index < 5; index++) {
                if (index != 1) plugind_audio_effect_release(effects[index]);
                plugind_process_release(processes[index]);
            }
        }

        int main(int argc, char **argv) {
            if (argc != 3) return 2;
            amp(argv[1]);
            invert(argv[1]);
            tint(argv[1]);
            chain(argv[1], argv[2]);
            return 0;
        }
        """#

    @Test(
        "plugind_audio_effect_*, plugind_audio_chain_* and plugind_video_filter_*: amp_stereo x0.5, amp_mono then lpf and invert0r exactly, refusals, no leak"
    )
    func cHost() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let point = "org.plugind.tests.c-media"
        try Self.install(point: point, in: test)
        let host = test.directory.path + "/media_host"
        try await SanitizedCHost.build(Self.cHost, output: host)
        let result = try await SanitizedCHost.run(host, [point, test.directory.path], in: test)
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
            ("chain inputs 1 outputs 1, input 1 NULL, output 1 NULL, input is amp's yes, output is lpf's yes", ""),
            ("chain = amp then lpf exact, filtered yes", ""),
            ("timing chain 4 effect 4, missed within yes, longest yes, invalid -1 -1", ""),
            ("empty 1 ", "a chain of no effects"),
            ("twice 1 ", "effect 1 of the chain is effect 0 again"),
            ("link 20 ", "takes 2 audio inputs; effect 0 of the chain gives 1"),
            ("released 1 ", "effect 1 of the chain was released"),
            ("create released 1 ", "effect 1 of the chain is not a plugind audio effect"),
            ("output still readable", ""),
            ("released chain 1 ", "not a plugind audio chain"),
        ]
        #expect(lines.count == expected.count, "\(result.stdout)\n\(result.stderr)")
        for (line, expectation) in zip(lines, expected) {
            // (An empty string is contained in none.)
            #expect(line.hasPrefix(expectation.prefix) && (expectation.contains.isEmpty || line.contains(expectation.contains)), "\(line)")
        }

        // The chain's output is amp_mono then lpf as the suite's in-process LADSPA host runs them,
        // block by block with the same controls: byte for byte.
        let reference = try await ForeignPluginTests.reference("ladspa_reference", in: test.directory.path)
        let directory = test.directory.path
        for (library, label, control, input, output) in [
            ("amp.so", "amp_mono", "0=0.5", "chain-input.f32", "amplified.f32"),
            ("filter.so", "lpf", "0=1000", "amplified.f32", "filtered.f32"),
        ] {
            let ran = try await ForeignPluginTests.run(
                reference,
                ["/usr/lib/ladspa/" + library, label, "48000", "256", "1024", directory + "/" + input, directory + "/" + output, control])
            #expect(ran.status == 0, "ladspa_reference \(label): \(ran.stderr)")
        }
        let chained = try Data(contentsOf: URL(fileURLWithPath: directory + "/chain-output.f32"))
        let inProcess = try Data(contentsOf: URL(fileURLWithPath: directory + "/filtered.f32"))
        #expect(chained.count == 4096 && chained == inProcess, "the chain differs from the in-process amp_mono then lpf")
    }

    @Test(
        "plugind.AudioEffect, AudioEffectChain and plugind.VideoFilter from Python: amp_stereo, amp_mono then lpf, invert0r, addition; refusals"
    )
    func python() async throws {
        let test = try TestHost()
        defer { test.remove() }
        let point = "org.plugind.tests.python-media"
        try Self.install(point: point, in: test)
        let result = try await PythonPackage.pytest("test_media.py", in: test, variables: ["PLUGIND_TEST_MEDIA_POINT": point])
        #expect(result.status == 0, "pytest:\n\(result.stdout)\n\(result.stderr)")
        #expect(result.stdout.contains("8 passed"), "\(result.stdout)")
    }
}
