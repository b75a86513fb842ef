"""Typed calls with callbacks, from Python: libc's qsort in the worker with a Python comparator
(ExamplePlugins/Qsort). CallbackHostTests (Swift) installs and approves the example and runs this
file with:

  PLUGIND_TEST_QSORT_POINT   the qsort example (qsort with its comparator "compar", and llabs)

Without it these tests are skipped.
"""

import os
import random
import struct
import threading

import pytest

import plugind

DEADLINE = 300

pytestmark = pytest.mark.skipif(
    "PLUGIND_TEST_QSORT_POINT" not in os.environ, reason="run by CallbackHostTests, which installs the bundle"
)


def only():
    monitor = plugind.Monitor(os.environ["PLUGIND_TEST_QSORT_POINT"])
    assert len(monitor.identities) == 1, monitor.identities
    identity = monitor.identities[0]
    monitor.close()
    return identity


def packed(values):
    return struct.pack("<%dq" % len(values), *values)


def unpacked(data):
    return list(struct.unpack("<%dq" % (len(data) // 8), data))


def element(data: bytes) -> int:
    return struct.unpack("<q", data)[0]


def test_sorting_2000_int64s_with_a_python_comparator_gives_pythons_order():
    values = [random.randint(-(2**63), 2**63 - 1) for _ in range(2000)]
    calls = []
    threads = set()

    def ascending(a, b):
        calls.append(1)
        threads.add(threading.get_ident())
        left, right = element(a), element(b)
        return -1 if left < right else 1 if left > right else 0

    with plugind.Process(only()) as process:
        result = process.call_with_outputs(
            "qsort", packed(values), 8, timeout=DEADLINE, callbacks={"compar": ascending}
        )
        assert result.value is None
        assert unpacked(result.outputs["base"]) == sorted(values)
        # Any comparison sort of 2,000 distinct values needs about log2(2000!) > 19,000 of them.
        assert len(calls) > 15_000
        assert threads == {threading.get_ident()}, "the comparator runs on the calling thread"
        # call() with callbacks returns the function's value: void.
        assert process.call("qsort", packed([3, 1, 2]), 8, timeout=DEADLINE, callbacks={"compar": ascending}) is None


def test_a_comparator_that_raises_fails_the_call_with_its_message():
    def refusing(a, b):
        raise ValueError("the comparator refuses %d" % element(a))

    with plugind.Process(only()) as process:
        with pytest.raises(plugind.CallbackError) as raised:
            process.call_with_outputs("qsort", packed([3, 1, 2]), 8, timeout=DEADLINE, callbacks={"compar": refusing})
        assert raised.value.code == "callbackFailed"
        assert raised.value.number == 29
        assert "callback 'compar' of qsort failed in the host's handler: ValueError: the comparator refuses" in str(
            raised.value
        ), str(raised.value)
        assert isinstance(raised.value.__cause__, ValueError)
        assert isinstance(raised.value, plugind.CallError)

        # A value the callback cannot return: refused by Python (a str) or by plugind (int32's range).
        with pytest.raises(plugind.CallbackError) as text:
            process.call("qsort", packed([3, 1, 2]), 8, timeout=DEADLINE, callbacks={"compar": lambda a, b: "less"})
        assert "TypeError: the handler returned 'less'" in str(text.value), str(text.value)
        with pytest.raises(plugind.CallbackError) as wide:
            process.call("qsort", packed([3, 1, 2]), 8, timeout=DEADLINE, callbacks={"compar": lambda a, b: 2**40})
        assert "not a value of the declared int32" in str(wide.value), str(wide.value)

        # Checked before anything is sent: a callback without a handler, and a name the function lacks.
        with pytest.raises(plugind.CallError) as missing:
            process.call("qsort", packed([3, 1, 2]), 8, timeout=DEADLINE, callbacks={})
        assert missing.value.code == "invalidArguments"
        assert "qsort needs a handler for its callback 'compar'" in str(missing.value), str(missing.value)
        with pytest.raises(plugind.CallError) as unknown:
            process.call("llabs", -4, timeout=DEADLINE, callbacks={"compar": lambda a, b: 0})
        assert unknown.value.code == "invalidArguments"
        assert "llabs has no callback 'compar' to handle" in str(unknown.value), str(unknown.value)
        with pytest.raises(plugind.InvalidArgumentError):
            process.call("qsort", packed([3, 1, 2]), 8, callbacks={"compar": 3})

        # The process goes on.
        assert process.call("llabs", -42, timeout=DEADLINE) == 42


def test_a_comparator_may_call_the_same_process():
    values = [-9, 4, -1, 7, 0, -3, 12, -12, 5]
    nested = []

    def by_magnitude(a, b):
        left = process.call("llabs", element(a), timeout=DEADLINE)
        right = process.call("llabs", element(b), timeout=DEADLINE)
        nested.append(2)
        return -1 if left < right else 1 if left > right else 0

    with plugind.Process(only()) as process:
        result = process.call_with_outputs(
            "qsort", packed(values), 8, timeout=DEADLINE, callbacks={"compar": by_magnitude}
        )
        # glibc's merge sort is stable: equal magnitudes keep their order.
        assert unpacked(result.outputs["base"]) == [0, -1, -3, 4, 5, 7, -9, 12, -12]
        assert nested

        # A nested call with callbacks of its own: their handler runs on this thread too.
        inner = []

        def sorting_inside(a, b):
            def compare(x, y):
                inner.append(1)
                return (element(x) > element(y)) - (element(x) < element(y))

            pair = process.call_with_outputs(
                "qsort", packed([element(b), element(a)]), 8, timeout=DEADLINE, callbacks={"compar": compare}
            )
            low, _ = unpacked(pair.outputs["base"])
            return 0 if element(a) == element(b) else -1 if low == element(a) else 1

        result = process.call_with_outputs(
            "qsort", packed(values), 8, timeout=DEADLINE, callbacks={"compar": sorting_inside}
        )
        assert unpacked(result.outputs["base"]) == sorted(values)
        assert inner

        # A nested call that fails fails the comparator, which fails the outer call.
        def failing(a, b):
            return process.call("llabs", "not a number", timeout=DEADLINE)

        with pytest.raises(plugind.CallbackError) as raised:
            process.call("qsort", packed([3, 1, 2]), 8, timeout=DEADLINE, callbacks={"compar": failing})
        assert isinstance(raised.value.__cause__, plugind.CallError)
        assert process.call("llabs", -7, timeout=DEADLINE) == 7


def test_two_threads_sort_at_once_each_with_its_own_comparator():
    outcomes = {}

    def sort(label, reverse):
        values = [random.randint(-1000, 1000) for _ in range(300)]
        seen = set()

        def compare(a, b):
            seen.add(threading.get_ident())
            left, right = element(a), element(b)
            order = -1 if left < right else 1 if left > right else 0
            return -order if reverse else order

        result = process.call_with_outputs("qsort", packed(values), 8, timeout=DEADLINE, callbacks={"compar": compare})
        in_order = unpacked(result.outputs["base"]) == sorted(values, reverse=reverse)
        outcomes[label] = (in_order, seen == {threading.get_ident()})

    with plugind.Process(only()) as process:
        threads = [threading.Thread(target=sort, args=(label, label == "down")) for label in ("up", "down")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert outcomes == {"up": (True, True), "down": (True, True)}
