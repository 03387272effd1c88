"""The writer's backlog is bounded in bytes: a slow store of the parts holds the producer back (back-pressure)
instead of letting memory grow, and everything handed over is committed once the sink catches up.

No test here depends on the machine's speed: the slow sink is a gate the test opens, and the test
waits on the conditions the writer exposes (``Backlog.waiting``), never on a duration.
"""

from __future__ import annotations

import queue
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.batches import Backlog, frames_nbytes
from storage.reader import open_run_file
from storage.writer import TelemetryWriter

WAIT_S = 120.0  # a safety net for a hung test only; every wait below ends on a condition


def _factory_frame(t0: int, rows: int) -> dict[str, dict[str, Any]]:
    """``rows`` steps of factory_ts with every column filled (time_s distinct, so rows count)."""
    from storage.schema import columns

    cols: dict[str, Any] = {}
    for c in columns("factory_ts"):
        if c.name == "run_id" or c.name == "ts":
            continue
        if c.name == "time_s":
            cols[c.name] = np.arange(t0, t0 + rows, dtype=np.int64) * 60
        elif c.dtype == "string":
            cols[c.name] = ["x"] * rows
        elif c.dtype.startswith("int"):
            cols[c.name] = np.ones(rows, dtype=c.dtype)
        else:
            cols[c.name] = np.ones(rows, dtype=np.float64)
    return {"factory_ts": cols}


def test_frames_nbytes_counts_arrays_exactly() -> None:
    a, b = np.zeros(1000), np.zeros(10, dtype=np.int32)
    assert frames_nbytes({"t": {"a": a, "b": b}}) == 8000 + 40
    # Text: at least one pointer and the characters of every value.
    assert frames_nbytes({"t": {"s": ["abc"] * 10}}) >= 10 * (8 + 3)


def test_a_slow_sink_holds_the_producer_back_and_loses_nothing(tmp_path: Path) -> None:
    gate = threading.Event()  # the "disk": every commit's parts wait until the test opens it
    commits: list[int] = []

    frame_rows, n_frames = 500, 40
    one = frames_nbytes(_factory_frame(0, frame_rows))
    bound = 3 * one  # room for three frames
    out = tmp_path / "bp.duckdb"
    w = TelemetryWriter(
        out,
        {"run_id": "bp", "dt_s": 60},
        flush_rows=frame_rows,
        flush_interval_s=0.01,
        max_backlog_bytes=bound,
    )
    assert w.publisher is not None  # a new file stores its time series as parts, commit by commit
    store = w.publisher.store

    def slow_store(tables: dict[str, Any]) -> list[str]:
        if tables:
            commits.append(sum(t.num_rows for t in tables.values()))
            gate.wait(WAIT_S)
        return store(tables)

    w.publisher.store = slow_store  # type: ignore[method-assign]
    handed = []

    def produce() -> None:
        for i in range(n_frames):
            w.write(_factory_frame(i * frame_rows, frame_rows), (i + 1) * frame_rows * 60)
            handed.append(i)

    producer = threading.Thread(target=produce, daemon=True)
    try:
        producer.start()
        # The writer is stuck in its first commit; the producer fills the backlog and must wait.
        assert w.backlog.waiting.wait(WAIT_S), "the producer never waited for room"
        assert producer.is_alive()
        assert len(handed) < n_frames
        assert w.backlog.nbytes <= bound
        # Three frames fit; the writer has taken at most the one in its stuck commit.
        assert 3 <= len(handed) <= 4
        gate.set()
        producer.join(WAIT_S)
        assert not producer.is_alive()
        w.flush()
        assert w.backlog.high_water <= bound
        assert w.backlog.waits >= 1
    finally:
        gate.set()
        w.close()
    con = open_run_file(out)
    try:
        n, distinct = con.sql("SELECT count(*), count(DISTINCT time_s) FROM factory_ts").fetchall()[0]
    finally:
        con.close()
    assert n == distinct == frame_rows * n_frames
    assert sum(commits) == frame_rows * n_frames


def test_a_failed_writer_releases_a_waiting_producer_with_the_error(tmp_path: Path) -> None:
    gate = threading.Event()

    def failing_store(tables: dict[str, Any]) -> list[str]:
        if tables:
            gate.wait(WAIT_S)
            raise OSError("disk gone")
        return []

    one = frames_nbytes(_factory_frame(0, 100))
    w = TelemetryWriter(
        tmp_path / "f.duckdb",
        {"run_id": "f", "dt_s": 60},
        flush_rows=100,
        flush_interval_s=0.01,
        max_backlog_bytes=2 * one,
    )
    assert w.publisher is not None
    w.publisher.store = failing_store  # type: ignore[method-assign]
    errors: list[BaseException] = []

    def produce() -> None:
        try:
            for i in range(50):
                w.write(_factory_frame(i * 100, 100), (i + 1) * 6000)
        except BaseException as e:  # the test inspects it
            errors.append(e)

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    assert w.backlog.waiting.wait(WAIT_S)
    gate.set()
    producer.join(WAIT_S)
    assert not producer.is_alive()
    assert errors and "disk gone" in str(errors[0])
    with pytest.raises(Exception, match="disk gone"):
        w.close()


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=0, max_value=5000), min_size=1, max_size=60),
    bound=st.integers(min_value=1, max_value=12000),
    take_every=st.integers(min_value=1, max_value=5),
)
def test_the_backlog_never_holds_more_than_its_bound(sizes: list[int], bound: int, take_every: int) -> None:
    """Property: whatever the sizes, the bytes queued never exceed the bound (or one item larger
    than the bound, alone), items come out in order, and the count returns to zero."""
    b = Backlog(bound)
    got: list[int] = []
    seen_max = [0]
    done = threading.Event()

    def consume() -> None:
        while not (done.is_set() and len(b) == 0):
            try:
                got.append(b.get(0.01))
            except queue.Empty:
                continue
            seen_max[0] = max(seen_max[0], b.nbytes)

    c = threading.Thread(target=consume, daemon=True)
    c.start()
    for i, n in enumerate(sizes):
        assert b.put(i, n)
        assert b.nbytes <= max(bound, n)
        if i % take_every == 0:
            seen_max[0] = max(seen_max[0], b.nbytes)
    done.set()
    c.join(WAIT_S)
    assert not c.is_alive()
    assert got == list(range(len(sizes)))
    assert b.nbytes == 0
    assert b.high_water <= max([bound, *sizes])
    assert b.high_water <= bound or any(n > bound for n in sizes)


def test_an_abandoned_backlog_releases_its_producer() -> None:
    b = Backlog(10)
    assert b.put("a", 8)
    released: list[bool] = []
    t = threading.Thread(target=lambda: released.append(b.put("b", 8)), daemon=True)
    t.start()
    assert b.waiting.wait(WAIT_S)
    assert b.abandon() == ["a"]
    t.join(WAIT_S)
    assert released == [False] and b.nbytes == 0
