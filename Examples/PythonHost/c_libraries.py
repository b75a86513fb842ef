#!/usr/bin/env python3
"""Sandboxing the machine's own C libraries from Python: zlib's deflate stream on a z_stream kept
in a confined worker, libc's qsort with a comparator written in Python, and libm's complex square
root on a struct passed and returned by value. Every result is checked against Python's own zlib,
sorted() and cmath.

    c_libraries.py [--size BYTES] [--count N]
"""

import argparse
import cmath
import os
import random
import struct
import sys
import zlib

import plugind

FUNCTIONS = "org.plugind.examples.functions"
Z_NO_FLUSH, Z_FINISH, Z_STREAM_END = 0, 4, 1


def identity(monitor, bundle):
    for candidate in monitor.identities:
        if candidate.bundle_identifier == bundle:
            return candidate
    raise SystemExit("c_libraries.py: %s is not approved (plugind approve %s)" % (bundle, bundle))


def deflate(process, data):
    """Deflates data through one stream: 64 KiB in and 16 KiB of room out a call."""
    made = process.call_with_outputs("deflateInit_", 6, process.call("zlibVersion"), 112)
    stream, deflated, offset = made.outputs["strm"], b"", 0
    while True:
        chunk = data[offset : offset + 65536]
        flush = Z_FINISH if offset + len(chunk) == len(data) else Z_NO_FLUSH
        step = process.call_with_outputs("deflate", stream, chunk, 16384, flush)
        deflated += step.outputs["strm.next_out"]
        offset += len(chunk) - step.outputs["strm.avail_in"]
        if step.value == Z_STREAM_END:
            break
    process.call("deflateEnd", stream)
    return deflated


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1 << 20, help="bytes through the deflate stream")
    parser.add_argument("--count", type=int, default=2000, help="int64s through qsort")
    arguments = parser.parse_args()
    monitor = plugind.Monitor(FUNCTIONS, scope="none")
    data = os.urandom(arguments.size // 2) + b"plugind sandboxes zlib " * (arguments.size // 46)
    with plugind.Process(identity(monitor, "org.plugind.examples.zlib")) as process:
        deflated = deflate(process, data)
        assert zlib.decompress(deflated) == data, "Python's zlib disagrees"
        print("zlib: %d bytes deflated to %d through a confined stream; Python's zlib inflates them back" % (len(data), len(deflated)))
    values = [random.randint(-(2**63), 2**63 - 1) for _ in range(arguments.count)]
    calls = 0

    def compare(a, b):
        nonlocal calls
        calls += 1
        left, right = struct.unpack("<q", a)[0], struct.unpack("<q", b)[0]
        return (left > right) - (left < right)

    with plugind.Process(identity(monitor, "org.plugind.examples.qsort")) as process:
        packed = struct.pack("<%dq" % len(values), *values)
        result = process.call_with_outputs("qsort", packed, 8, callbacks={"compar": compare})
        ordered = list(struct.unpack("<%dq" % len(values), result.outputs["base"]))
        assert ordered == sorted(values), "sorted() disagrees"
        print("qsort: %d int64s sorted by libc with %d calls of a Python comparator; sorted() agrees" % (len(values), calls))
    with plugind.Process(identity(monitor, "org.plugind.examples.libm")) as process:
        z = complex(-3, 4)
        root = process.call_with_outputs("csqrt", z.real, z.imag)
        answer = complex(root.outputs["return.re"], root.outputs["return.im"])
        assert abs(answer - cmath.sqrt(z)) <= 1e-12 * abs(answer), "cmath disagrees"
        print("libm: csqrt(%s) = %s, a double complex passed and returned by value; cmath agrees" % (z, answer))
    monitor.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
