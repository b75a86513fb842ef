"""plugind.FunctionSession against a decoder that crashes on purpose
(ExamplePlugins/Testing/HostileDecoder). FunctionSessionHostTests (Swift) installs and approves it
and runs this file with:

  PLUGIND_TEST_SESSION_POINT   the hostile decoder's extension point
  PLUGIND_TEST_SESSION_SEED    a file the decoder may read, holding its seed (7)

Without them these tests are skipped. The three tests crash the decoder twice in all: one short of
the default quarantine (3 crashes in 5 minutes), which a third would trigger.
"""

import os

import pytest

import plugind

DEADLINE = 60
SEED = 7

pytestmark = pytest.mark.skipif(
    "PLUGIND_TEST_SESSION_POINT" not in os.environ, reason="run by FunctionSessionHostTests, which installs the bundle"
)


def only():
    monitor = plugind.Monitor(os.environ["PLUGIND_TEST_SESSION_POINT"])
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
