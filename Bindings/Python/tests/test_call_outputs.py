"""Typed calls with out values, buffers and errno, from Python. CallOutputsHostTests (Swift)
installs and approves the zlib example and a libc bundle and runs this file with:

  PLUGIND_TEST_ZLIB_POINT   the zlib example (compress, uncompress, compressBound, the
                            deflate stream on a z_stream kept in the worker)
  PLUGIND_TEST_LIBC_POINT   libc.so.6: strtol with NULL and errno, rand_r with an inout seed

Without them (the suite of the other plugins) these tests are skipped.
"""

import os
import zlib

import pytest

import plugind

DEADLINE = 20

pytestmark = pytest.mark.skipif(
    "PLUGIND_TEST_ZLIB_POINT" not in os.environ, reason="run by CallOutputsHostTests, which installs the bundles"
)


def only(name):
    monitor = plugind.Monitor(os.environ["PLUGIND_TEST_%s_POINT" % name])
    assert len(monitor.identities) == 1, monitor.identities
    identity = monitor.identities[0]
    monitor.close()
    return identity


def test_zlib_round_trip_checked_by_pythons_zlib():
    data = os.urandom(200_000) + b"plugind " * 10_000
    with plugind.Process(only("ZLIB")) as process:
        bound = process.call("compressBound", len(data), timeout=DEADLINE)
        compressed = process.call_with_outputs("compress", bound, data, timeout=DEADLINE)
        assert compressed.value == 0
        assert compressed.errno is None
        assert list(compressed.outputs) == ["dest", "destLen"]
        assert compressed.outputs["destLen"] == len(compressed.outputs["dest"]) <= bound
        assert zlib.decompress(compressed.outputs["dest"]) == data
        restored = process.call_with_outputs("uncompress", len(data), zlib.compress(data, 1), timeout=DEADLINE)
        assert restored.value == 0
        assert restored.outputs == {"dest": data, "destLen": len(data)}
        small = process.call_with_outputs("compress", 4, data, timeout=DEADLINE)
        assert small.value == -5  # Z_BUF_ERROR: zlib's answer, not an exception
        assert small.outputs["destLen"] <= 4


def test_a_deflate_stream_on_a_struct_handle_checked_by_pythons_zlib():
    data = os.urandom(150_000) + b"plugind " * 20_000
    with plugind.Process(only("ZLIB")) as process:
        version = process.call("zlibVersion", timeout=DEADLINE)
        made = process.call_with_outputs("deflateInit_", 6, version, 112, timeout=DEADLINE)
        assert made.value == 0
        stream = made.outputs["strm"]
        deflated = b""
        offset = 0
        while True:
            chunk = data[offset : offset + 65536]
            finish = offset + len(chunk) == len(data)
            # The struct's fields travel with the call: next_in (avail_in from its length),
            # room for next_out (avail_out); what the library left comes back by field.
            step = process.call_with_outputs("deflate", stream, chunk, 16384, 4 if finish else 0, timeout=DEADLINE)
            assert step.value in (0, 1, -5), step.outputs["strm.msg"]
            assert len(step.outputs["strm.next_out"]) == 16384 - step.outputs["strm.avail_out"]
            deflated += step.outputs["strm.next_out"]
            offset += len(chunk) - step.outputs["strm.avail_in"]
            if step.value == 1:  # Z_STREAM_END
                break
        assert step.outputs["strm.total_in"] == len(data)
        assert process.call("deflateEnd", stream, timeout=DEADLINE) == 0
        assert zlib.decompress(deflated) == data


def test_null_errno_and_an_inout_seed():
    with plugind.Process(only("LIBC")) as process:
        overflow = process.call_with_outputs("strtol", "99999999999999999999", 10, timeout=DEADLINE)
        assert overflow.value == 2**63 - 1
        assert overflow.errno == 34  # ERANGE
        assert process.call_with_outputs("strtol", "-12", 10, timeout=DEADLINE).errno == 0
        seeded = process.call_with_outputs("rand_r", 2026, timeout=DEADLINE)
        assert seeded.outputs["seed"] != 2026
        with pytest.raises(plugind.CallError) as raised:
            process.call_with_outputs("strtol", "1", timeout=DEADLINE)
        assert raised.value.code == "invalidArguments"
