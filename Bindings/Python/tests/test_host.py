"""The Python host API against real workers. HostLibraryTests (Swift) installs and approves the
plugins and runs this suite with their extension points in the environment:

  PLUGIND_TEST_ECHO_POINT       an approved Echo, and one Echo waiting for approval
  PLUGIND_TEST_ECHO_BUNDLE      the approved Echo's bundle (moved aside and back by the updates test)
  PLUGIND_TEST_ASIDE            where it goes meanwhile
  PLUGIND_TEST_GREETER_POINT    the greeter, which asks its host whom to greet
  PLUGIND_TEST_FUNCTIONS_POINT  the function library (typed calls)
  PLUGIND_TEST_CRASH_POINT      a plugin that crashes on every request
  PLUGIND_TEST_CHANGED_POINT    an approved plugin whose manifest the test changes (approval outdated)
  PLUGIND_TEST_CHANGED_MANIFEST that manifest
  PLUGIND_TEST_HANG_POINT       a plugin that never answers
  PLUGIND_TEST_HOG_POINT        a plugin that eats memory, under a 128 MiB limit
  PLUGIND_TEST_QUARANTINE_POINT a plugin that crashes, to be quarantined
  PLUGIND_TEST_LAUNCH_POINT     a library without the plugin entry point

Every wait has a deadline.
"""

import asyncio
import os
import select
import threading
import time

import pytest

import plugind

DEADLINE = 20


def point(name):
    return os.environ["PLUGIND_TEST_%s_POINT" % name]


def only(name):
    monitor = plugind.Monitor(point(name))
    assert len(monitor.identities) == 1, monitor.identities
    return monitor.identities[0]


def test_discovery_lists_the_approved_plugin_and_counts_the_waiting_one():
    monitor = plugind.Monitor(point("ECHO"))
    assert [identity.bundle_identifier for identity in monitor.identities] == ["org.plugind.tests.echo"]
    assert monitor.identities[0].extension_point == point("ECHO")
    assert monitor.identities[0].capabilities == ("text/plain",)
    assert monitor.unapproved_count == 1
    assert monitor.disabled_count == 0
    monitor.close()


def test_updates_follow_a_bundle_moved_out_and_back():
    async def follow():
        monitor = plugind.Monitor(point("ECHO"))
        counts = []
        async for identities in monitor.updates():
            counts.append(len(identities))
            if len(counts) == 1:
                os.rename(os.environ["PLUGIND_TEST_ECHO_BUNDLE"], os.environ["PLUGIND_TEST_ASIDE"])
            elif len(counts) == 2:
                os.rename(os.environ["PLUGIND_TEST_ASIDE"], os.environ["PLUGIND_TEST_ECHO_BUNDLE"])
            else:
                break
        monitor.close()
        return counts

    assert asyncio.run(asyncio.wait_for(follow(), DEADLINE)) == [1, 0, 1]


def test_send_and_send_async():
    with plugind.Process(only("ECHO")) as process:
        assert process.pid > 0
        with process.connect() as connection:
            assert connection.send(b"hello") == b"hello"
            assert connection.send(b"") == b""
            assert asyncio.run(asyncio.wait_for(connection.send_async(b"later"), DEADLINE)) == b"later"
        with pytest.raises(plugind.InvalidArgumentError):
            connection.send(b"closed")


def test_an_ask_answered_later_from_another_thread():
    questions = []

    def ask(question):
        questions.append(question.data)
        threading.Thread(target=question.respond, args=(b"Ada",)).start()
        return None

    with plugind.Process(only("GREETER")) as process:
        reply = process.connect(ask=ask).send(b"good morning", timeout=DEADLINE)
    assert questions == [b"name?"]
    assert reply == b"Hello, Ada: good morning"


def test_an_ask_handler_that_raises_fails_the_ask_not_the_host():
    def ask(question):
        raise ValueError("nobody is here")

    with plugind.Process(only("GREETER")) as process:
        with pytest.raises(plugind.PluginError) as raised:
            process.connect(ask=ask).send(b"good morning", timeout=DEADLINE)
    assert "nobody is here" in raised.value.message
    assert raised.value.code == "pluginError"


def test_typed_calls_convert_to_the_declared_types():
    with plugind.Process(only("FUNCTIONS")) as process:
        assert process.call("add_int64", 40, 2) == 42
        assert process.call("reverse_string", "plugind") == "dnigulp"
        assert process.call("identity_uint16", 7) == 7
        assert process.call("identity_bool", True) is True
        assert process.call("hypotenuse", 3.0, 4.0) == 5.0
        assert process.call("bytes_length", b"\x00\x01\x02") == 3
        assert process.call("count_call") is None
        with pytest.raises(plugind.CallError) as raised:
            process.call("identity_int8", 300)
        assert raised.value.code == "invalidArguments"
        with pytest.raises(plugind.CallError) as raised:
            process.call("no_such_function")
        assert raised.value.code == "unknownFunction"


def test_a_crash_mid_request_raises_and_interrupts():
    interrupted = threading.Event()
    with plugind.Process(only("CRASH"), on_interruption=interrupted.set) as process:
        with pytest.raises(plugind.CrashedError) as raised:
            process.connect().send(b"boom", timeout=DEADLINE)
        assert raised.value.code == "workerCrashed"
        assert "SIGSEGV" in raised.value.message
        # The crashed thread's frames, through plugind_error_frame: the plugin's function first.
        assert raised.value.backtrace[0].startswith("#0 dereference_null_for_request+0x"), raised.value.backtrace
        assert any(" handle+0x" in frame for frame in raised.value.backtrace[1:3]), raised.value.backtrace
        assert interrupted.wait(DEADLINE)


def test_a_plugin_changed_since_its_approval_is_not_approved():
    identity = only("CHANGED")
    with open(os.environ["PLUGIND_TEST_CHANGED_MANIFEST"], "a") as manifest:
        manifest.write("\n")
    with pytest.raises(plugind.NotApprovedError) as raised:
        plugind.Process(identity)
    assert raised.value.code == "notApproved"
    assert identity.bundle_identifier in raised.value.message


def test_misuse_raises_invalid_argument():
    with pytest.raises(plugind.InvalidArgumentError):
        plugind.Monitor(point("ECHO"), scope="everywhere")
    monitor = plugind.Monitor(point("ECHO"))
    monitor.close()
    with pytest.raises(plugind.InvalidArgumentError):
        monitor.update()
    with pytest.raises(plugind.Error) as raised:
        plugind.Monitor("not a reverse-DNS name")
    assert "not a reverse-DNS name" in raised.value.message


def test_the_documentation_reads_well():
    assert "confined worker process" in plugind.__doc__
    for name in ["Monitor", "Process", "Connection", "Ask", "Error", "CrashedError"]:
        assert getattr(plugind, name).__doc__


def test_a_hang_times_out_and_a_closed_connection_fails_what_waits():
    with plugind.Process(only("HANG")) as process:
        connection = process.connect()
        with pytest.raises(plugind.TimedOutError) as raised:
            connection.send(b"wait", timeout=0.3)
        assert raised.value.code == "timedOut"

    async def close_while_waiting():
        with plugind.Process(only("HANG")) as process:
            connection = process.connect()
            pending = asyncio.ensure_future(connection.send_async(b"wait"))
            await asyncio.sleep(0)  # the send is on its way before the close
            connection.close()
            return await asyncio.wait_for(pending, DEADLINE)

    with pytest.raises(plugind.ConnectionClosedError) as raised:
        asyncio.run(close_while_waiting())
    assert raised.value.code in ("connectionClosed", "invalidated")


def test_a_memory_limit_raises_limit_exceeded():
    with plugind.Process(only("HOG")) as process:
        with pytest.raises(plugind.LimitExceededError) as raised:
            process.connect().send(b"eat", timeout=DEADLINE)
    assert "memory limit" in raised.value.message


def test_repeated_crashes_quarantine_the_plugin():
    identity = only("QUARANTINE")
    for _ in range(3):
        with plugind.Process(identity) as process:
            with pytest.raises(plugind.CrashedError):
                process.connect().send(b"boom", timeout=DEADLINE)
    # The crash log is written in the background: the monitor's list says when it landed.
    monitor = plugind.Monitor(point("QUARANTINE"))
    give_up = time.monotonic() + DEADLINE
    while monitor.identities:
        assert time.monotonic() < give_up, "the quarantine never showed in the monitor"
        select.select([monitor], [], [], 1)
        monitor.update()
    assert monitor.unapproved_count + monitor.disabled_count == 0
    with pytest.raises(plugind.NotApprovedError) as raised:
        plugind.Process(identity)
    assert raised.value.code == "quarantined"
    assert "plugind quarantine clear" in raised.value.message


def test_a_missing_worker_raises_not_found():
    import subprocess
    import sys

    environment = dict(os.environ, PLUGIND_WORKER="/nonexistent/plugind-worker")
    script = (
        "import plugind\n"
        "monitor = plugind.Monitor(%r)\n"
        "try:\n"
        "    plugind.Process(monitor.identities[0])\n"
        "except plugind.NotFoundError as error:\n"
        "    print(error.code)\n" % point("ECHO")
    )
    result = subprocess.run([sys.executable, "-c", script], env=environment, capture_output=True, text=True, timeout=DEADLINE)
    assert result.stdout.strip() == "workerNotFound", result.stderr


def test_a_library_without_the_entry_point_raises_launch_error():
    with pytest.raises(plugind.LaunchError) as raised:
        plugind.Process(only("LAUNCH"))
    assert raised.value.code == "symbolMissing"
    assert "plugind_plugin_entry" in raised.value.message
