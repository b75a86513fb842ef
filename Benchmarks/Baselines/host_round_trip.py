"""The 64 B round trip from a Python host (the plugind package over libplugind), and an empty
ctypes call into the same library beside it: what the binding itself costs. Prints
"round-trip <µs>" and "ctypes <µs>" lines for plugind-bench (foreign-round-trip)."""

import sys
import time

import plugind
from plugind._native import library

point, iterations = sys.argv[1], int(sys.argv[2])
monitor = plugind.Monitor(point)
with plugind.Process(monitor.identities[0]) as process:
    connection = process.connect()
    payload = b"a" * 64
    for index in range(iterations + iterations // 10):
        start = time.perf_counter_ns()
        connection.send(payload)
        elapsed = (time.perf_counter_ns() - start) / 1000
        if index >= iterations // 10:
            print("round-trip %.3f" % elapsed)
    for index in range(iterations):
        start = time.perf_counter_ns()
        library.plugind_monitor_count(None)
        print("ctypes %.3f" % ((time.perf_counter_ns() - start) / 1000))
monitor.close()
