"""The console's headless core (``tui.console``): the SQL runner, the panel loader and the simulation
loop, driven through their callbacks in plain threads, without Textual.

Waits are on events the code sets (an answer delivered, a loop ended); their timeouts only guard
against a hang and are never an expectation.
"""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest

from scenarios.runner import Session, run
from scenarios.spec import parse
from storage.errors import QueryError
from storage.queries import run_sql
from storage.reader import latest_run_id, open_run_file
from storage.sandbox import Limits, UserResult, UserSql
from tests.test_tui import TINY
from tui.console.core import Console
from tui.console.feed import LiveFeed, PanelReq
from tui.console.pacing import MAX, PAUSE, Pacer, SpeedControl
from tui.console.panels import PanelLoader
from tui.console.simloop import SimLoop
from tui.console.sqlrunner import SqlAnswer, SqlRunner

GUARD_S = 120.0  # a hang guard only


def test_the_console_core_does_not_import_textual() -> None:
    code = (
        "import sys, tui.console.core, tui.console.simloop, tui.console.panels, tui.console.sqlrunner; "
        "assert 'textual' not in sys.modules, sorted(m for m in sys.modules if m.startswith('textual'))"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# ---------------------------------------------------------------------- SQL runner
class HeldSandbox:
    """Stands in for the sandbox: the query ``hold`` runs until it is interrupted (then ends as the
    sandbox does, with ``QueryError('cancelled')``); any other query answers a one-row table."""

    limits = Limits()
    strict = False

    def __init__(self) -> None:
        self.holding = threading.Event()  # ``hold`` is running
        self.interrupted = threading.Event()
        self.ran: list[str] = []

    def run(self, sql: str, max_rows: int | None = None, cancelled: Any = None) -> UserResult:
        self.ran.append(sql)
        if sql == "hold":
            self.holding.set()
            assert self.interrupted.wait(GUARD_S), "never interrupted"
            raise QueryError("cancelled")
        return UserResult(pa.table({"sql": [sql]}), statements=1, truncated=False, wall_s=0.0)

    def interrupt(self) -> None:
        if self.holding.is_set():
            self.interrupted.set()

    def make_room(self) -> None:
        pass

    def close(self) -> None:
        pass


def test_a_new_query_cancels_the_running_one_and_only_the_newest_has_rows() -> None:
    sandbox = HeldSandbox()
    runner = SqlRunner(sandbox)
    answers: queue.Queue[SqlAnswer] = queue.Queue()
    first = runner.run("hold", answers.put)
    assert sandbox.holding.wait(GUARD_S)
    assert runner.executing == first
    second = runner.run("SELECT 2", answers.put)
    assert second == first + 1 == runner.latest
    got = {a.request: a for a in (answers.get(timeout=GUARD_S), answers.get(timeout=GUARD_S))}
    assert got[first].table is None and got[first].error == "cancelled"
    newest = got[second]
    assert newest.error == "" and newest.table is not None
    assert newest.table.column("sql").to_pylist() == ["SELECT 2"]
    assert newest.info.startswith("1 rows in ")
    assert sandbox.ran == ["hold", "SELECT 2"]
    assert runner.executing is None and not runner.running()


def test_cancel_ends_the_running_query_with_cancelled() -> None:
    sandbox = HeldSandbox()
    runner = SqlRunner(sandbox)
    answers: queue.Queue[SqlAnswer] = queue.Queue()
    rid = runner.run("hold", answers.put)
    assert sandbox.holding.wait(GUARD_S)
    runner.cancel()
    answer = answers.get(timeout=GUARD_S)
    assert (answer.request, answer.table, answer.error) == (rid, None, "cancelled")
    runner.cancel()  # nothing running: no effect
    assert answers.empty()


def test_the_runner_answers_through_the_real_sandbox() -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT range AS i FROM range(5)")
    runner = SqlRunner(UserSql(con.cursor(), Limits(), strict=False), max_rows=3)
    answers: queue.Queue[SqlAnswer] = queue.Queue()
    runner.run("SELECT i * 10 AS x FROM t ORDER BY i", answers.put)
    ok = answers.get(timeout=GUARD_S)
    assert ok.table is not None and ok.table.column("x").to_pylist() == [0, 10, 20]
    assert ok.info.startswith("first 3 rows kept")
    runner.run("DELETE FROM t", answers.put)  # only reading statements
    refused = answers.get(timeout=GUARD_S)
    assert refused.table is None and refused.error
    assert con.execute("SELECT count(*) FROM t").fetchone() == (5,)
    con.close()


# ---------------------------------------------------------------------- panel loader
@dataclass(frozen=True)
class Req:
    """A panel request as the loader sees it (its panel, SQL and parameters)."""

    panel: str
    sql: str
    params: dict[str, Any] = field(default_factory=dict)


class Cursor:
    def __init__(self) -> None:
        self.closed = False
        self.interrupts = 0

    def interrupt(self) -> None:
        self.interrupts += 1

    def close(self) -> None:
        self.closed = True


def test_the_loader_keeps_only_the_newest_request_per_screen() -> None:
    release, running = threading.Event(), threading.Event()
    ran: list[str] = []

    def run(cur: Any, sql: str) -> Any:
        ran.append(sql)
        if sql == "a1":  # the first query holds the loader while the screens ask again
            running.set()
            assert release.wait(GUARD_S)
        if sql == "bad":
            raise ValueError("no such column")
        return {"sql": sql}

    answers: queue.Queue[tuple[Any, int, dict[str, Any]]] = queue.Queue()
    loader = PanelLoader(lambda who, seq, res: answers.put((who, seq, res)), run=run)
    cur = Cursor()
    thread = threading.Thread(target=loader.run, args=(cur,), daemon=True)
    thread.start()
    a, b = object(), object()
    s1 = loader.request(a, [Req("p", "a1")])  # type: ignore[list-item]
    assert running.wait(GUARD_S)
    loader.request(a, [Req("p", "a2")])  # type: ignore[list-item]
    s3 = loader.request(a, [Req("p", "a3"), Req("q", "bad")])  # type: ignore[list-item]
    s4 = loader.request(b, [Req("p", "b1")])  # type: ignore[list-item]
    assert loader.pending()
    release.set()
    got = [answers.get(timeout=GUARD_S) for _ in range(3)]
    assert [(who, seq) for who, seq, _ in got] == [(a, s1), (a, s3), (b, s4)]
    assert ran == ["a1", "a3", "bad", "b1"]  # a2 was replaced before it started
    assert got[1][2]["p"] == {"sql": "a3"} and isinstance(got[1][2]["q"], ValueError)
    # The UI takes an answer only when it is newer than the one the screen shows.
    assert loader.accept(a, s3) and not loader.accept(a, s1)
    assert loader.pending()  # b's answer not taken yet
    assert loader.accept(b, s4) and not loader.pending()
    loader.stop()
    assert loader.done.wait(GUARD_S)
    thread.join(GUARD_S)
    assert cur.closed and cur.interrupts == 1
    assert answers.empty()


def test_live_requests_run_at_the_last_committed_step() -> None:
    loader = PanelLoader(lambda *_: None, live_run=("run-1", 60))
    r = Req("p", "x", {"t": 600})
    assert loader.file_req(r) is r  # nothing known about the file yet
    loader.t_file = 540
    assert loader.file_req(r).params == {"t": 540}  # type: ignore[arg-type]
    assert loader.file_req(Req("p", "x", {"t": 480})).params == {"t": 480}  # type: ignore[arg-type]
    replay = PanelLoader(lambda *_: None)
    replay.t_file = 0
    assert replay.file_req(r) is r  # type: ignore[arg-type]


# ---------------------------------------------------------------------- simulation loop
@pytest.fixture
def live(tmp_path: Path) -> Any:
    session = Session(parse(TINY, "test"), TINY, tmp_path / "live.duckdb", duration_s=30 * 86400)
    try:
        yield LiveFeed(session)
    finally:
        session.close("stopped")


def test_the_sim_loop_stops_when_asked(live: LiveFeed) -> None:
    speed = SpeedControl(MAX)
    ticks: list[tuple[int, int]] = []

    def on_tick(t: int, steps: int) -> None:
        ticks.append((t, steps))
        if len(ticks) == 3:
            loop.stop()

    loop = SimLoop(live, Pacer(speed, live.meta.dt_s, live.session.chunk_steps), speed, on_tick)
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    assert loop.done.wait(GUARD_S)
    thread.join(GUARD_S)
    assert len(ticks) == 3  # nothing ran after the stop
    times = [t for t, _ in ticks]
    steps = [n for _, n in ticks]
    assert times == sorted(set(times)) and steps == sorted(set(steps))
    assert live.steps_done == steps[-1] and live.t == times[-1]
    assert times[-1] - times[0] == (steps[-1] - steps[0]) * live.meta.dt_s  # one dt per step
    assert live.remaining > 0 and loop.idle.is_set() and loop.thread_id is not None


def test_a_paused_sim_loop_idles_and_stops(live: LiveFeed) -> None:
    speed = SpeedControl(PAUSE)
    ticks: list[int] = []
    loop = SimLoop(
        live, Pacer(speed, live.meta.dt_s, live.session.chunk_steps), speed, lambda t, _: ticks.append(t)
    )
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    assert loop.idle.wait(GUARD_S)
    loop.stop()
    assert loop.done.wait(GUARD_S)
    thread.join(GUARD_S)
    assert ticks == [] and live.steps_done == 0


# ---------------------------------------------------------------------- the console over a recording
@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    out = tmp_path_factory.mktemp("console") / "run.duckdb"
    run(parse(TINY, "tiny.toml"), TINY, out, duration_s=6 * 3600)
    con = open_run_file(out)
    try:
        yield con
    finally:
        con.close()


def replay_console(con: Any, on_panels: Any = None) -> Console:
    return Console(
        on_tick=lambda t, steps: None,
        on_panels=on_panels or (lambda *_: None),
        replay_con=con,
        replay_run_id=latest_run_id(con),
        replay_path="run.duckdb",
    )


def test_the_replay_clock_moves_over_the_recorded_steps(recording: Any) -> None:
    first, last, n = recording.execute("SELECT min(time_s), max(time_s), count(*) FROM factory_ts").fetchone()
    times = [t for (t,) in recording.execute("SELECT time_s FROM factory_ts ORDER BY time_s").fetchall()]
    core = replay_console(recording)
    assert (core.t, core.speed.paused, core.status().mode) == (first, True, "REPLAY")
    assert core.play() == (False, False)  # paused: the clock holds
    seq = core.seq
    assert core.show_time(times[3] + 1) and core.t == times[3] and core.seq == seq + 1  # the step shown then
    assert core.step_time(1) == times[4] and core.step_time(-10) == times[0]
    assert core.show_time(-3600) and core.t == first
    assert core.show_time(last + 86400) and core.t == last
    assert core.status().position == "100 %" and core.params()["t"] == last
    core.speed.set(1)  # play at the end: again from the start
    assert core.speed_changed() and core.t == first
    assert n == len(times) > 10


def test_the_loader_answers_a_screen_with_the_panel_sql_on_the_file(recording: Any) -> None:
    answers: queue.Queue[tuple[Any, int, dict[str, Any]]] = queue.Queue()
    core = replay_console(recording, lambda who, seq, res: answers.put((who, seq, res)))
    core.show_time(core.step_time(5))
    req = PanelReq("kpis", "kpis", core.params())
    thread = threading.Thread(target=core.panels.run, args=(core.new_cursor(),), daemon=True)
    thread.start()
    screen = object()
    core.request_panels(screen, [req])
    who, seq, results = answers.get(timeout=GUARD_S)
    assert who is screen and core.panels.accept(screen, seq) and not core.panels.pending()
    expected = run_sql(recording.cursor(), req.sql)
    assert results["kpis"].keys() == expected.keys()
    for k, v in expected.items():
        assert list(results["kpis"][k]) == list(v), k
    core.panels.stop()
    assert core.panels.done.wait(GUARD_S)
    thread.join(GUARD_S)


class _FakeLive:
    """A simulation whose steps each take ``cost_s`` on a fake clock (no real time passes)."""

    def __init__(self, clock: list[float], dt_s: int, cost_s: float) -> None:
        self.clock, self.dt_s, self.cost_s = clock, dt_s, cost_s
        self.t = self.steps_done = self.last_steps = 0
        self.remaining = 10**9
        self.session = type("S", (), {"held_steps": 0})()

    def advance(self, k: int, stop: Any) -> int:
        self.last_steps = 0
        for _ in range(k):
            self.clock[0] += self.cost_s
            self.t += self.dt_s
            self.steps_done += 1
            self.last_steps += 1
            if stop():
                break
        return self.t

    def commit(self) -> None:
        pass

    def inject_pending(self) -> bool:
        return False


@pytest.mark.parametrize(
    ("level", "cost_s", "label"),
    [
        (MAX, 0.024, "max ≈ {}"),
        (MAX, 0.0001, "max ≈ {}"),
        (3, 0.024, "3600× (behind: {})"),
        (3, 0.006, "3600×"),
    ],
)
def test_the_speed_label_is_the_rate_the_loop_achieved(level: int, cost_s: float, label: str) -> None:
    """Steps of 60 s costing 24 ms of wall time each: the loop advances 2,500 sim-s per wall second,
    and the label says so (measured on the loop's clock as it advances, not when the UI hears)."""
    from tui.console.pacing import live_speed_text, rate_text

    clock = [1000.0]

    def sleep(s: float) -> None:
        clock[0] += max(s, 1e-3)  # a real sleep takes a little time however short the wait asked

    speed = SpeedControl(level)
    live = _FakeLive(clock, 60, cost_s)
    ticks: list[int] = []
    loop = SimLoop(
        live,  # type: ignore[arg-type]
        Pacer(speed, 60, 10_000),
        speed,
        lambda t, _: ticks.append(t),
        clock=lambda: clock[0],
        sleep=sleep,
    )
    loop.run(cancelled=lambda: clock[0] > 1030.0)  # 30 s on the fake clock
    assert len(ticks) > 20
    achieved = live.t / (clock[0] - 1000.0)  # what the loop advanced per second of its clock
    measured = loop.rate.rate()
    assert measured is not None and abs(measured / achieved - 1) < 0.05
    assert live_speed_text(speed, measured, loop.pacer.wait_s()) == label.format(rate_text(measured))
    if level == MAX:
        assert rate_text(achieved) == rate_text(measured)
