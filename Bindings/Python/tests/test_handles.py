"""Handles (opaque pointers of a kind the manifest declares) from Python. HandleHostTests (Swift)
installs and approves the SQLite example and runs this file with:

  PLUGIND_TEST_SQLITE_POINT   the SQLite example (ExamplePlugins/Sqlite, libsqlite3.so.0)

Without it these tests are skipped.
"""

import gc
import os
import sqlite3

import pytest

import plugind

DEADLINE = 20
ROW, DONE = 100, 101

pytestmark = pytest.mark.skipif(
    "PLUGIND_TEST_SQLITE_POINT" not in os.environ, reason="run by HandleHostTests, which installs the bundle"
)

CREATE = "CREATE TABLE t (id INTEGER PRIMARY KEY, n INTEGER NOT NULL, label TEXT)"
INSERT = "INSERT INTO t (n, label) VALUES (?1, 'n=' || ?1)"
SELECT = "SELECT id, n, label FROM t ORDER BY n DESC"
VALUES = [5, -3, 0, 2**40, 17]


def only():
    monitor = plugind.Monitor(os.environ["PLUGIND_TEST_SQLITE_POINT"])
    assert len(monitor.identities) == 1, monitor.identities
    identity = monitor.identities[0]
    monitor.close()
    return identity


def prepare(process, db, sql):
    prepared = process.call_with_outputs("sqlite3_prepare_v2", db, sql, -1, timeout=DEADLINE)
    assert prepared.value == 0, process.call("sqlite3_errmsg", db)
    return prepared.outputs["ppStmt"]


def test_rows_match_pythons_sqlite3():
    with plugind.Process(only()) as process:
        opened = process.call_with_outputs("sqlite3_open", ":memory:", timeout=DEADLINE)
        assert opened.value == 0
        db = opened.outputs["ppDb"]
        assert isinstance(db, plugind.Handle) and db.kind == "sqlite3"
        create = prepare(process, db, CREATE)
        assert process.call("sqlite3_step", create) == DONE
        create.release()
        insert = prepare(process, db, INSERT)
        for value in VALUES:
            assert process.call("sqlite3_bind_int64", insert, 1, value) == 0
            assert process.call("sqlite3_step", insert) == DONE
            assert process.call("sqlite3_reset", insert) == 0
        assert process.call("sqlite3_finalize", insert) == 0
        select = prepare(process, db, SELECT)
        assert process.call("sqlite3_db_handle", select) is db
        rows = []
        while process.call("sqlite3_step", select) == ROW:
            rows.append(
                (
                    process.call("sqlite3_column_int64", select, 0),
                    process.call("sqlite3_column_int64", select, 1),
                    process.call("sqlite3_column_text", select, 2),
                )
            )
        select.release()

        reference = sqlite3.connect(":memory:")
        reference.execute(CREATE)
        for value in VALUES:
            reference.execute(INSERT, (value,))
        assert rows == reference.execute(SELECT).fetchall()
        db.release()


def test_refusals_name_the_function_and_argument():
    with plugind.Process(only()) as process:
        db = process.call_with_outputs("sqlite3_open", ":memory:", timeout=DEADLINE).outputs["ppDb"]
        statement = prepare(process, db, "SELECT 1")
        with pytest.raises(plugind.CallError) as raised:
            process.call("sqlite3_step", db)
        assert "sqlite3_step" in str(raised.value) and "'stmt'" in str(raised.value)
        broken = process.call_with_outputs("sqlite3_prepare_v2", db, "SELEKT", -1, timeout=DEADLINE)
        assert broken.value == 1 and broken.outputs["ppStmt"] is None  # NULL
        assert process.call("sqlite3_finalize", statement) == 0  # consumed
        statement.release()  # nothing left to do
        with pytest.raises(plugind.CallError) as raised:
            process.call("sqlite3_step", statement)
        assert "was released" in str(raised.value)
        db.release()
        with pytest.raises(plugind.CallError) as raised:
            process.call("sqlite3_errmsg", db)
        assert "sqlite3_errmsg" in str(raised.value) and "'db'" in str(raised.value)


def test_dropped_handles_are_released():
    with plugind.Process(only()) as process:
        db = process.call_with_outputs("sqlite3_open", ":memory:", timeout=DEADLINE).outputs["ppDb"]
        number = db.id
        stale = plugind.Handle(process, "sqlite3", number)  # the same number, not held
        del db
        gc.collect()
        # The release runs in the background: the worker refuses the number once it has run.
        for _ in range(2000):
            try:
                process.call("sqlite3_errmsg", stale, timeout=DEADLINE)
            except plugind.CallError as error:
                assert "was released" in str(error)
                break
        else:
            pytest.fail("sqlite3#%d was never released" % number)
        stale._released = True  # made by hand: nothing to release
