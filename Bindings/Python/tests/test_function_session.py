"""plugind.FunctionSession against a decoder that crashes on purpose
(ExamplePlugins/Testing/HostileDecoder), and its calls with callbacks against libc's qsort
(ExamplePlugins/Qsort). FunctionSessionHostTests (Swift) installs and approves both and runs this
file with:

  PLUGIND_TEST_SESSION_POINT   the hostile decoder's extension point
  PLUGIND_TEST_SESSION_SEED    a file the decoder may read, holding its seed (7)
  PLUGIND_TEST_QSORT_POINT     the qsort example's (qsort with its comparator "compar", and llabs)

Without them these tests are skipped. The three decoder tests crash it twice in all: one short of
the default quarantine (3 crashes in 5 minutes), which a third would trigger.
"""

import os
import random
import struct
import threading

import pytest

import plugind

DEADLINE = 60
SORT_DEADLINE = 300
SEED = 7

pytestmark = pytest.mark.skipif(
    "PLUGIND_TEST_SESSION_POINT" not in os.environ, reason="run by FunctionSessionHostTests, which installs the bundle"
)

needs_qsort = pytest.mark.skipif(
    "PLUGIND_TEST_QSORT_POINT" not in os.environ, reason="run by FunctionSessionHostTests, which installs the bundle"
)


def only(variable: str = "PLUGIND_TEST_SESSION_POINT"):
    monitor = plugind.Monitor(os.environ[variable])
    assert len(monitor.identities) == 1, monitor.identities
    identity = monitor.identities[0]
    monitor.close()
    return identity


def checksum(data: bytes, seed: int = 0) -> int:
    """The decoder's checksum: FNV-1a from the seeded basis, its top bit cleared."""
    value = 2166136261 ^ seed
    for byte in data:
        value = ((value ^ byte) * 16777619) & 0xFFFFFFFF
    return value & 0x7FFFFFFF


def test_a_crash_fails_only_its_call():
    with plugind.FunctionSession(only()) as session:
        assert session.pid is None
        outcomes = []
        for index in range(10):
            data = b"CRASH" if index == 6 else b"input %d" % index
            try:
                outcomes.append(session.call("decode", data, timeout=DEADLINE) == checksum(data))
            except plugind.CrashedError as error:
                assert error.code == "workerCrashed"
                assert "decode ended its worker: crashed with SIGSEGV" in str(error), str(error)
                assert session.pid is None
                outcomes.append("crashed")
        assert outcomes == [True] * 6 + ["crashed"] + [True] * 3
        assert session.workers_started == 2


def test_set_up_replay_and_stale_handles():
    seed = os.environ["PLUGIND_TEST_SESSION_SEED"]
    with plugind.FunctionSession(only(), fresh_worker_every=2, set_up=[("open_decoder", seed)]) as session:
        first = session.set_up_results[0].value
        assert isinstance(first, plugind.Handle) and first.kind == "decoder"
        pid = session.pid
        assert session.call("decode_with", first, b"hello", timeout=DEADLINE) == checksum(b"hello", SEED)
        assert session.call("decode", b"x", timeout=DEADLINE) == checksum(b"x")
        # Two calls: the next one gets a new worker, where the first handle names nothing.
        with pytest.raises(plugind.CallError) as refused:
            session.call("decode_with", first, b"hello", timeout=DEADLINE)
        assert refused.value.code == "invalidArguments"
        assert "argument 1 of decode_with" in str(refused.value) and "earlier worker" in str(refused.value)
        assert session.pid not in (None, pid)
        second = session.set_up_results[0].value
        assert second != first
        assert session.call("decode_with", second, b"hello", timeout=DEADLINE) == checksum(b"hello", SEED)
        second.release()
        with pytest.raises(plugind.CallError):
            session.call("decode_with", second, b"hello", timeout=DEADLINE)


def test_abort_then_recycling():
    with plugind.FunctionSession(only(), fresh_worker_every=3) as session:
        pids = []
        for index in range(6):
            assert session.call("decode", b"%d" % index, timeout=DEADLINE) == checksum(b"%d" % index)
            pids.append(session.pid)
        assert pids[0] == pids[2] != pids[3] == pids[5], pids
        with pytest.raises(plugind.CrashedError) as crashed:
            session.call("decode", b"ABORT", timeout=DEADLINE)
        assert "decode ended its worker: crashed with SIGABRT" in str(crashed.value), str(crashed.value)
        assert session.call("decode", b"after", timeout=DEADLINE) == checksum(b"after")
        assert session.workers_started == 4


def packed(values):
    return struct.pack("<%dq" % len(values), *values)


def unpacked(data):
    return list(struct.unpack("<%dq" % (len(data) // 8), data))


def element(data: bytes) -> int:
    return struct.unpack("<q", data)[0]


@needs_qsort
def test_a_session_sorts_2000_int64s_with_a_python_comparator():
    values = [random.randint(-(2**63), 2**63 - 1) for _ in range(2000)]
    calls = []
    threads = set()

    def ascending(a, b):
        calls.append(1)
        threads.add(threading.get_ident())
        left, right = element(a), element(b)
        return -1 if left < right else 1 if left > right else 0

    with plugind.FunctionSession(only("PLUGIND_TEST_QSORT_POINT")) as session:
        result = session.call_with_outputs(
            "qsort", packed(values), 8, timeout=SORT_DEADLINE, callbacks={"compar": ascending}
        )
        assert result.value is None
        assert unpacked(result.outputs["base"]) == sorted(values)
        # Any comparison sort of 2,000 distinct values needs about log2(2000!) > 19,000 of them.
        assert len(calls) > 15_000
        assert threads == {threading.get_ident()}, "the comparator runs on the calling thread"
        # call() with callbacks returns the function's value: void.
        assert session.call("qsort", packed([3, 1, 2]), 8, timeout=DEADLINE, callbacks={"compar": ascending}) is None

        # A comparator may call another session while the library waits.
        with plugind.FunctionSession(only("PLUGIND_TEST_QSORT_POINT")) as helper:

            def by_magnitude(a, b):
                left = helper.call("llabs", element(a), timeout=DEADLINE)
                right = helper.call("llabs", element(b), timeout=DEADLINE)
                return -1 if left < right else 1 if left > right else 0

            magnitudes = session.call_with_outputs(
                "qsort", packed([-9, 4, -1, 7, 0, -3, 12, -12, 5]), 8, timeout=DEADLINE,
                callbacks={"compar": by_magnitude},
            )
            # glibc's merge sort is stable: equal magnitudes keep their order.
            assert unpacked(magnitudes.outputs["base"]) == [0, -1, -3, 4, 5, 7, -9, 12, -12]
        assert session.workers_started == 1


@needs_qsort
def test_a_raising_comparator_fails_its_call_only():
    def refusing(a, b):
        raise ValueError("the comparator refuses %d" % element(a))

    with plugind.FunctionSession(only("PLUGIND_TEST_QSORT_POINT")) as session:
        assert session.call("llabs", -1, timeout=DEADLINE) == 1
        pid = session.pid
        with pytest.raises(plugind.CallbackError) as raised:
            session.call_with_outputs("qsort", packed([3, 1, 2]), 8, timeout=DEADLINE, callbacks={"compar": refusing})
        assert raised.value.code == "callbackFailed"
        assert "callback 'compar' of qsort failed in the host's handler: ValueError: the comparator refuses" in str(
            raised.value
        ), str(raised.value)
        assert isinstance(raised.value.__cause__, ValueError)

        # The session goes on, with the same worker.
        assert session.call("llabs", -42, timeout=DEADLINE) == 42
        assert session.pid == pid

        # Its own session, from a comparator: refused there (it would wait for itself), and the
        # refusal fails the sort.
        def own(a, b):
            return session.call("llabs", element(a), timeout=DEADLINE)

        with pytest.raises(plugind.CallbackError) as nested:
            session.call("qsort", packed([3, 1, 2]), 8, timeout=DEADLINE, callbacks={"compar": own})
        assert isinstance(nested.value.__cause__, plugind.CallError)
        assert nested.value.__cause__.code == "invalidArguments"
        assert "would wait for itself" in str(nested.value.__cause__), str(nested.value.__cause__)

        # Checked before anything is sent.
        with pytest.raises(plugind.CallError) as missing:
            session.call("qsort", packed([3, 1, 2]), 8, timeout=DEADLINE, callbacks={})
        assert "qsort needs a handler for its callback 'compar'" in str(missing.value), str(missing.value)
        with pytest.raises(plugind.InvalidArgumentError):
            session.call("qsort", packed([3, 1, 2]), 8, callbacks={"compar": 3})

        assert session.call("llabs", -7, timeout=DEADLINE) == 7
        assert session.pid == pid and session.workers_started == 1
