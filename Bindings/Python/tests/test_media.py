"""LADSPA effects and frei0r filters from Python (plugind.AudioEffect, plugind.AudioEffectChain,
plugind.VideoFilter): Debian's unchanged libraries in their workers, each output compared with the
same arithmetic done here, a chain's with its effects run one after the other. MediaHostTests
(Swift) installs and approves, under one extension point:

  PLUGIND_TEST_MEDIA_POINT  ladspa.amp.amp-stereo, ladspa.amp.amp-mono and ladspa.filter.lpf
                            (ladspa-sdk), frei0r.invert0r, frei0r.addition and frei0r.tint0r
                            (frei0r-plugins)

Without it these tests are skipped.
"""

import array
import os
import random

import pytest

import plugind

DEADLINE = 300

pytestmark = pytest.mark.skipif(
    "PLUGIND_TEST_MEDIA_POINT" not in os.environ, reason="run by MediaHostTests, which installs the bundles"
)


def identity(identifier):
    monitor = plugind.Monitor(os.environ["PLUGIND_TEST_MEDIA_POINT"])
    found = [item for item in monitor.identities if item.bundle_identifier == identifier]
    monitor.close()
    assert len(found) == 1, monitor.identities
    return found[0]


def float32(values):
    """Python's floats (doubles) rounded to float32, as array("f") stores them."""
    return array.array("f", values)


def frame(width, height, seed):
    generator = random.Random(seed)
    return bytes(generator.randrange(256) for _ in range(width * height * 4))


def test_amp_stereo_at_gain_one_half_halves_each_channel_exactly():
    frames = 1000
    generator = random.Random(1049)
    left = float32([generator.uniform(-1, 1) for _ in range(frames)])
    right = float32([generator.uniform(-4, 4) for _ in range(frames - 1)] + [3.4e38])
    with plugind.Process(identity("ladspa.amp.amp-stereo")) as process:
        with plugind.AudioEffect(process, 48000, maximum_frames=1024) as amp:
            assert [(port.index, port.name, port.kind) for port in amp.ports] == [
                (0, "Gain", "control_input"),
                (1, "Input (Left)", "audio_input"),
                (2, "Output (Left)", "audio_output"),
                (3, "Input (Right)", "audio_input"),
                (4, "Output (Right)", "audio_output"),
            ]
            gain = amp.ports[0]
            assert (gain.lower_bound, gain.upper_bound, gain.default) == (0.0, None, 1.0)
            assert amp.control(0) == 1.0

            amp.set_control(0, 0.5)
            assert amp.control(0) == 0.5
            left_in, right_in = amp.samples(1), amp.samples(3)
            assert (left_in.format, len(left_in), left_in.readonly) == ("f", 1024, False)
            left_in[:frames] = left
            right_in[:frames] = right
            amp.run(frames, timeout=DEADLINE)
            # A product of two float32s is exact in a double: rounding it to float32 once is the
            # float32 product the plugin computes.
            assert amp.samples(2)[:frames].tobytes() == float32([x * 0.5 for x in left]).tobytes()
            assert amp.samples(4)[:frames].tobytes() == float32([x * 0.5 for x in right]).tobytes()

            # The views are the memory the worker reads: a second block, written in place.
            for index in range(frames):
                left_in[index] = -left_in[index]
            amp.run(frames, timeout=DEADLINE)
            assert list(amp.samples(2)[:frames]) == list(float32([-x * 0.5 for x in left]))


def test_a_control_out_of_range_or_on_another_port_raises_naming_the_port():
    with plugind.Process(identity("ladspa.amp.amp-stereo")) as process:
        with plugind.AudioEffect(process, 44100, maximum_frames=64) as amp:
            amp.set_control(0, 0.25)
            with pytest.raises(plugind.CallError) as below:
                amp.set_control(0, -1.0)
            assert below.value.code == "invalidArguments"
            assert below.value.number == 20
            assert "control 0 (Gain)" in str(below.value) and "-1.0 is outside" in str(below.value), str(below.value)
            with pytest.raises(plugind.CallError) as infinite:
                amp.set_control(0, float("inf"))
            assert "Gain" in str(infinite.value)
            assert amp.control(0) == 0.25, "a refused value never reaches the plugin"

            with pytest.raises(plugind.CallError) as audio:
                amp.set_control(1, 0.5)
            assert "port 1 is not a control input (those are: 0 Gain)" in str(audio.value), str(audio.value)
            with pytest.raises(plugind.InvalidArgumentError) as not_audio:
                amp.samples(0)
            assert "port 0 is not an audio port" in str(not_audio.value)
            with pytest.raises(plugind.InvalidArgumentError):
                amp.control(2)
            with pytest.raises(plugind.InvalidArgumentError):
                amp.set_control(0, "loud")
            with pytest.raises(plugind.CallError) as long_run:
                amp.run(65, timeout=DEADLINE)
            assert "run of 65 frames; the ports hold 64" in str(long_run.value), str(long_run.value)
            amp.run(64, timeout=DEADLINE)


def test_invert0r_gives_255_minus_each_colour_byte_and_keeps_alpha():
    width, height = 64, 48
    with plugind.Process(identity("frei0r.invert0r")) as process:
        with plugind.VideoFilter(process, width, height) as invert:
            assert invert.input_count == 1
            assert invert.parameters == []
            output = invert.output()
            assert (len(output), output.readonly) == (width * height * 4, True)
            for seed in (1, 2):
                pixels = frame(width, height, seed)
                invert.input(0)[:] = pixels
                invert.update(seed / 25, timeout=DEADLINE)
                expected = bytes(value if index % 4 == 3 else 255 - value for index, value in enumerate(pixels))
                assert bytes(output) == expected
            with pytest.raises(plugind.InvalidArgumentError):
                invert.input(1)
            with pytest.raises(TypeError):
                output[0] = 1


def test_addition_adds_two_frames_saturating_and_takes_the_lower_alpha():
    width, height = 32, 16
    first, second = frame(width, height, 3), frame(width, height, 4)
    with plugind.Process(identity("frei0r.addition")) as process:
        with plugind.VideoFilter(process, width, height) as addition:
            assert addition.input_count == 2
            addition.input(0)[:] = first
            addition.input(1)[:] = second
            addition.update(0.0, timeout=DEADLINE)
            expected = bytes(
                min(a, b) if index % 4 == 3 else min(a + b, 255) for index, (a, b) in enumerate(zip(first, second))
            )
            assert bytes(addition.output()) == expected


def test_a_parameter_of_the_wrong_type_or_range_raises():
    with plugind.Process(identity("frei0r.tint0r")) as process:
        with plugind.VideoFilter(process, 8, 8) as tint:
            assert [(parameter.index, parameter.name, parameter.type) for parameter in tint.parameters] == [
                (0, "Map black to", "color"),
                (1, "Map white to", "color"),
                (2, "Tint amount", "double"),
            ]
            tint.set_parameter(0, (0.0, 0.2, 1.0))
            tint.set_parameter(2, 0.75)
            tint.set_parameter(2, 1)
            for index, value in [(0, "red"), (0, 0.5), (0, (0.1, 0.2)), (1, (0.1, 0.2, True)), (2, True), (2, (0.5,)), (2, "0.5")]:
                with pytest.raises(plugind.CallError) as wrong:
                    tint.set_parameter(index, value)
                assert wrong.value.code == "invalidArguments"
                assert "parameter %d (%s)" % (index, tint.parameters[index].name) in str(wrong.value), str(wrong.value)
            # In range, checked by plugind before the plugin sees it.
            with pytest.raises(plugind.CallError) as beyond:
                tint.set_parameter(2, 1.5)
            assert beyond.value.code == "invalidArguments"
            with pytest.raises(plugind.CallError):
                tint.set_parameter(1, (0.0, 2.0, 0.0))
            with pytest.raises(plugind.CallError):
                tint.set_parameter(3, 0.5)
            tint.update(0.0, timeout=DEADLINE)


def test_close_releases_the_views_and_the_process_goes_on():
    with plugind.Process(identity("frei0r.invert0r")) as process:
        with pytest.raises(plugind.CallError) as unsupported:
            plugind.AudioEffect(process, 48000)
        assert unsupported.value.code == "unsupported"
        invert = plugind.VideoFilter(process, 8, 8)
        view = invert.input(0)
        assert invert.input(0) is view, "one view per frame, handed out again"
        invert.close()
        invert.close()
        with pytest.raises(ValueError):
            view[0]
        with pytest.raises(plugind.InvalidArgumentError):
            invert.update(0.0)
        assert process.pid > 0
    with pytest.raises(plugind.InvalidArgumentError):
        plugind.VideoFilter(process, 8, 8)


def mono_effects(processes, sample_rate, maximum_frames, controls):
    """An AudioEffect per process, control 0 of each set to the matching value."""
    effects = []
    for process, value in zip(processes, controls):
        effect = plugind.AudioEffect(process, sample_rate, maximum_frames=maximum_frames)
        effect.set_control(0, value)
        effects.append(effect)
    return effects


def test_a_chain_of_amp_mono_and_lpf_equals_the_two_run_one_after_the_other():
    block, blocks = 200, 5
    generator = random.Random(2718)
    signal = float32([generator.uniform(-1, 1) for _ in range(block * blocks)])
    identifiers = ["ladspa.amp.amp-mono", "ladspa.filter.lpf"] * 2
    processes = [plugind.Process(identity(identifier)) for identifier in identifiers]
    try:
        amp, lowpass, other_amp, other_lowpass = mono_effects(processes, 44100, 256, [0.5, 1000.0] * 2)
        with plugind.AudioEffectChain([amp, lowpass]) as chain:
            assert (chain.input_count, chain.output_count, chain.maximum_frames) == (1, 1, 256)
            assert chain.effects == (amp, lowpass)
            source, sink = chain.input(0), chain.output(0)
            assert (source.format, len(source), source.readonly, sink.readonly) == ("f", 256, False, True)
            assert chain.input(0) is source, "one view per channel, handed out again"
            chained, separate = array.array("f"), array.array("f")
            for start in range(0, len(signal), block):
                samples = signal[start:start + block]
                source[:block] = samples
                chain.run(block, timeout=DEADLINE)
                chained.extend(sink[:block])
                other_amp.samples(1)[:block] = samples
                other_amp.run(block, timeout=DEADLINE)
                other_lowpass.samples(1)[:block] = other_amp.samples(2)[:block]
                other_lowpass.run(block, timeout=DEADLINE)
                separate.extend(other_lowpass.samples(2)[:block])
            assert chained.tobytes() == separate.tobytes()
            # The filter did something: not just the amp's exact halves.
            assert sum(a != b * 0.5 for a, b in zip(chained, signal)) > len(signal) // 2

            timing = chain.timing
            assert timing.blocks == blocks and 0 <= timing.missed_blocks <= blocks
            assert timing.longest_run > 0 and timing.longest_run >= amp.timing.longest_run
            assert amp.timing.blocks == lowpass.timing.blocks == other_amp.timing.blocks == blocks

            with pytest.raises(plugind.InvalidArgumentError):
                chain.input(1)
            with pytest.raises(plugind.CallError) as long_run:
                chain.run(257, timeout=DEADLINE)
            assert "run of 257 frames; the ports hold 256" in str(long_run.value), str(long_run.value)
        with pytest.raises(ValueError):
            source[0]
        with pytest.raises(plugind.InvalidArgumentError):
            chain.run(block)
        # The effects are the caller's still, and run on their own.
        amp.run(block, timeout=DEADLINE)
    finally:
        for process in processes:
            process.close()


def test_a_link_that_does_not_fit_one_effect_twice_or_a_closed_effect_is_refused():
    processes = [plugind.Process(identity(identifier)) for identifier in ["ladspa.amp.amp-mono", "ladspa.amp.amp-stereo"]]
    try:
        mono, stereo = (plugind.AudioEffect(process, 48000, maximum_frames=64) for process in processes)
        with pytest.raises(plugind.CallError) as link:
            plugind.AudioEffectChain([mono, stereo])
        assert link.value.code == "invalidArguments"
        assert "takes 2 audio inputs; effect 0 of the chain gives 1" in str(link.value), str(link.value)
        with pytest.raises(plugind.InvalidArgumentError) as twice:
            plugind.AudioEffectChain([mono, mono])
        assert "effect 1 of the chain is effect 0 again" in str(twice.value), str(twice.value)
        with pytest.raises(plugind.InvalidArgumentError) as empty:
            plugind.AudioEffectChain([])
        assert "a chain of no effects" in str(empty.value)
        with pytest.raises(plugind.InvalidArgumentError):
            plugind.AudioEffectChain([mono, "an effect"])

        # Stereo into stereo fits; closing an effect while in the chain makes its run refuse.
        other = plugind.Process(identity("ladspa.amp.amp-stereo"))
        processes.append(other)
        second = plugind.AudioEffect(other, 48000, maximum_frames=64)
        chain = plugind.AudioEffectChain([stereo, second])
        assert (chain.input_count, chain.output_count) == (2, 2)
        chain.run(64, timeout=DEADLINE)
        second.close()
        with pytest.raises(plugind.InvalidArgumentError) as released:
            chain.run(64, timeout=DEADLINE)
        assert "effect 1 of the chain was released" in str(released.value), str(released.value)
        with pytest.raises(plugind.InvalidArgumentError):
            plugind.AudioEffectChain([stereo, second])
        chain.close()
        mono.close()
        stereo.close()
    finally:
        for process in processes:
            process.close()
