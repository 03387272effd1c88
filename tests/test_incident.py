"""An incident told truthfully: the alarms and the report follow the model's recorded state.

Each built-in incident (``cooling-failure``'s CDU pump loss and its thermal trips,
``demand-response``'s power caps, a chiller trip on the ``heatwave`` site) and what-ifs injected
live must raise their alarm within one step of the condition and clear it within one step of its
end — in a replay (the ``alarms`` query on the recording at every step) and in the live console
core (``Console`` over a live session, paused too). The expected steps come from the scenario's
events (their ``at_h`` and ``duration_h``) and from the model's own event log (``thermal_trip``,
``thermal_recover``, ``throttle``), never from the state tables the alarms read.

Waits are on events the code sets (an answer delivered, the writer flushed); their timeouts only
guard against a hang.
"""

from __future__ import annotations

import json
import math
import queue
import re
import threading
import tomllib
from collections.abc import Iterator
from html.parser import HTMLParser
from importlib import resources
from pathlib import Path
from typing import Any

import duckdb
import pytest
from click.testing import CliRunner

from scenarios.runner import Session, run
from scenarios.spec import parse
from storage.queries import panel_sql
from storage.reader import latest_run_id, open_run_file
from tui.cli import main
from tui.console.core import Console

GUARD_S = 120.0  # a hang guard only

HEATWAVE_CHILLER_TRIP = """
[[events]]
at_h = 14
kind = "chiller_trip"
value = 3
duration_h = 3
"""


def builtin_text(name: str) -> str:
    return resources.files("scenarios.builtin").joinpath(f"{name}.toml").read_text(encoding="utf-8")


def _heatwave_text() -> str:
    """The heatwave site with its heat wave from the start, 18 h, and all three chillers tripped
    on its second afternoon for 3 h."""
    text = builtin_text("heatwave")
    text = re.sub(r"(?m)^duration_h = .*$", "duration_h = 18", text)
    text = re.sub(r"(?m)^heatwave_start_h = .*$", "heatwave_start_h = 0", text)
    return text + HEATWAVE_CHILLER_TRIP


CASES: dict[str, tuple[str, float]] = {  # name -> (scenario text, hours recorded)
    "cooling-failure": (builtin_text("cooling-failure"), 11.0),
    "demand-response": (builtin_text("demand-response"), 46.0),
    "heatwave-chiller-trip": (_heatwave_text(), 18.0),
}


def _step_end(at_s: float, dt: int) -> int:
    """The first step at or after ``at_s`` (an event's end takes effect at the step it falls in)."""
    return int(math.ceil(round(at_s, 6) / dt) * dt)


def _expected(name: str, con: duckdb.DuckDBPyConnection) -> list[tuple[str, str, int, int]]:
    """(alarm, target, first step the condition holds, first step it no longer does), from the
    scenario's events and the model's event log."""
    text, hours = CASES[name]
    doc = tomllib.loads(text)  # the scenario file itself, not the model's reading of it
    dt = int(doc["dt_s"])
    out: list[tuple[str, str, int, int]] = []
    for ev in doc.get("events", []):
        start = int(round(ev["at_h"] * 3600))
        if start >= hours * 3600:
            continue
        end = _step_end(start + ev["duration_h"] * 3600, dt)
        if ev["kind"] == "cdu_pump_failure":
            out.append(("CDU pumps lost", f"row:{ev['target']}", start, end))
        elif ev["kind"] == "power_cap":
            out.append(("power cap", "factory", start, end))
        elif ev["kind"] == "chiller_trip":
            out.append(("chiller loss", "plant", start, end))
            if ev["value"] >= 3:  # every chiller of the plant: the economizer alone is short
                out.append(("plant short of capacity", "factory", start, end))
    trips = con.sql(
        "SELECT min(time_s) FILTER (WHERE kind = 'thermal_trip'), max(time_s) FILTER (WHERE kind = 'thermal_recover') "
        "FROM events"
    ).fetchall()[0]
    if trips[0] is not None:
        out.append(("thermal trip", "factory", int(trips[0]), int(trips[1])))
    throttle = con.sql(
        "SELECT time_s, detail FROM events WHERE kind = 'throttle' ORDER BY time_s LIMIT 2"
    ).fetchall()
    if name == "cooling-failure":
        assert throttle[1][1] == "throttling ended"
        out.append(("throttling", "factory", int(throttle[0][0]), int(throttle[1][0])))
    return out


@pytest.fixture(scope="module")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    d = tmp_path_factory.mktemp("incident")
    out: dict[str, Path] = {}
    for name, (text, hours) in CASES.items():
        out[name] = d / f"{name}.duckdb"
        run(parse(text, f"{name}.toml"), text, out[name], duration_s=int(hours * 3600))
    yield out


def _active(con: duckdb.DuckDBPyConnection, run_id: str, t: int) -> set[tuple[str, str]]:
    rows = con.sql(panel_sql("alarms", {"run_id": run_id, "t": t})).fetchall()
    return {(a, tgt) for a, tgt, _, _ in rows}


@pytest.mark.parametrize("name", list(CASES))
def test_replay_alarms_are_raised_and_cleared_within_a_step_of_the_incident(
    name: str, recordings: dict[str, Path]
) -> None:
    con = open_run_file(recordings[name])
    try:
        run_id = latest_run_id(con)
        dt = int(con.sql("SELECT dt_s FROM runs").fetchall()[0][0])
        expected = _expected(name, con)
        assert expected, name
        for alarm, target, on, off in expected:
            times = [on - 2 * dt + i * dt for i in range((off - on) // dt + 5)]
            listed = [t for t in times if (alarm, target) in _active(con, run_id, t)]
            assert listed, (alarm, target)
            raised = listed[0]
            cleared = next(t for t in times if t > raised and t not in listed)
            assert on <= raised <= on + dt, (alarm, target, on, raised)
            if alarm == "plant short of capacity":
                # Short while the economizer alone cannot carry the heat: the chilled water stores
                # what is left and warms until the economizer takes over, on and off before the
                # restore (twin.physics.plant); never after it.
                assert max(listed) < off + dt, (alarm, target, off, max(listed))
                continue
            assert off <= cleared <= off + dt, (alarm, target, off, cleared)
            assert listed == [t for t in times if raised <= t < cleared], (alarm, target)  # no gap
            # "since" is the step it was raised at, all through the episode
            rows = con.sql(panel_sql("alarms", {"run_id": run_id, "t": cleared - dt})).fetchall()
            assert [r[2] for r in rows if (r[0], r[1]) == (alarm, target)] == [raised]
    finally:
        con.close()


# ---------------------------------------------------------------------- live
class LiveConsole:
    """The console core over a live session, stepped by the test: the test thread plays the UI
    (it takes the loader's answers) and the simulation loop (it advances and commits)."""

    def __init__(self, text: str, path: Path, hours: float) -> None:
        self.session = Session(parse(text, "live.toml"), text, path, duration_s=int(hours * 3600))
        self.answers: queue.Queue[tuple[Any, int, dict[str, Any]]] = queue.Queue()
        self.core = Console(
            on_tick=lambda t, steps: None,
            on_panels=lambda who, seq, res: self.answers.put((who, seq, res)),
            session=self.session,
        )
        assert self.core.live is not None
        self.live = self.core.live
        self.thread = threading.Thread(
            target=self.core.panels.run, args=(self.core.new_cursor(),), daemon=True
        )
        self.thread.start()

    def step(self, n: int = 1, commit: bool = True) -> int:
        """Simulate ``n`` steps and show the last; ``commit``: the writer has it in the file."""
        while n > 0:
            self.live.advance(n)
            n -= self.live.last_steps
        if commit:
            self.commit()
        assert self.live.t is not None
        self.core.tick(self.live.t, self.live.steps_done)
        return self.live.t

    def commit(self) -> None:
        self.live.commit()
        self.session.writer.flush()

    def alarms(self) -> set[tuple[str, str]]:
        """The alarms the header counts after the console asked for them (if it did)."""
        self.core.poll_alarms()
        while self.core.panels.pending():
            who, seq, res = self.answers.get(timeout=GUARD_S)
            if self.core.panels.accept(who, seq):
                who.show_panel("alarms", res["alarms"])
        assert not self.core.alarms.error
        return {(a.alarm, a.target) for a in self.core.alarms.active}

    def close(self) -> None:
        self.core.panels.stop()
        assert self.core.panels.done.wait(GUARD_S)
        self.thread.join(GUARD_S)
        self.session.close("stopped")


@pytest.fixture
def no_throttle(monkeypatch: pytest.MonkeyPatch) -> None:
    """The console asks for the alarms whenever it may (its wall-clock pacing is not under test)."""
    import tui.console.core as core

    monkeypatch.setattr(core, "ALARMS_LIVE_S", 0.0)
    monkeypatch.setattr(core, "ALARMS_CATCH_UP_S", 0.0, raising=False)


def test_live_alarms_follow_the_cdu_loss_and_its_thermal_trips(
    tmp_path: Path, recordings: dict[str, Path], no_throttle: None
) -> None:
    con = open_run_file(recordings["cooling-failure"])
    try:
        expected = {(a, tgt): (on, off) for a, tgt, on, off in _expected("cooling-failure", con)}
    finally:
        con.close()
    text, hours = CASES["cooling-failure"]
    lc = LiveConsole(text, tmp_path / "live.duckdb", hours)
    try:
        dt = lc.live.meta.dt_s
        first = min(on for on, _ in expected.values()) - 2 * dt
        last = max(off for _, off in expected.values()) + 2 * dt
        t = lc.step(first // dt + 1)  # steps 0 .. first
        assert t == first
        seen: dict[tuple[str, str], list[int]] = {k: [] for k in expected}
        while t <= last:
            active = lc.alarms()
            assert lc.core.status().alarms == len(lc.core.alarms.active)  # the header's count
            for k in expected:
                if k in active:
                    seen[k].append(t)
            t = lc.step()
        for k, (on, off) in expected.items():
            assert seen[k], k
            raised, last_on = seen[k][0], seen[k][-1]
            assert on <= raised <= on + dt, (k, on, raised)
            assert off <= last_on + dt <= off + dt, (k, off, last_on + dt)  # cleared at last_on + dt
            assert seen[k] == list(range(raised, last_on + dt, dt)), k
    finally:
        lc.close()


def test_live_alarms_of_injected_what_ifs_and_no_lingering_while_paused(
    tmp_path: Path, no_throttle: None
) -> None:
    """A facility power cap and a chiller trip injected live; paused at the step the cap ended,
    before the file has it, the header first shows what the file holds, then — still paused, the
    writer having committed the step — the cap is gone."""
    text = builtin_text("demand-response")
    lc = LiveConsole(text, tmp_path / "live.duckdb", 24.0)
    try:
        dt = lc.live.meta.dt_s
        lc.step(10)
        lc.live.request_inject("power_cap", "facility", 1.6e6, 30 * 60)
        lc.live.request_inject("chiller_trip", "", 2.0, 20 * 60)
        t = lc.step()
        at = lc.live.injected_at[0]
        assert lc.live.injected_at == [at, at]
        windows = {
            ("power cap", "factory"): (at, at + 30 * 60),
            ("chiller loss", "plant"): (at, at + 20 * 60),
        }
        seen: dict[tuple[str, str], list[int]] = {k: [] for k in windows}
        while t < at + 30 * 60 - dt:
            active = lc.alarms()
            for k in windows:
                if k in active:
                    seen[k].append(t)
            t = lc.step()
        for k, (on, off) in windows.items():
            if k == ("power cap", "factory"):
                off = t  # not reached yet: the cap still holds at the last step seen
            assert seen[k] and seen[k][0] == on, (k, seen[k][:1], on)
            assert seen[k] == list(range(on, off, dt)), k
        assert ("power cap", "factory") in lc.alarms()
        # The cap's last step is shown and committed; the next step (cap over) runs but is not in
        # the file yet, and the clock stops there (paused).
        t = lc.step(commit=False)
        assert t == at + 30 * 60
        lc.alarms()  # asked at the time shown; answered at the last step the file has
        lc.commit()  # paused: the writer gets the held step within a second
        assert ("power cap", "factory") not in lc.alarms()
        # It settles: once asked with the step in the file, the console stops asking (paused).
        assert ("power cap", "factory") not in lc.alarms()
        assert lc.core.alarms_at_shown and lc.core.t == t
        lc.core.poll_alarms()
        assert not lc.core.panels.pending()
    finally:
        lc.close()


# ---------------------------------------------------------------------- report, summary, compare
class _Report(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.order: list[str] = []  # h2 titles and figures in page order
        self.figures: list[dict[str, str]] = []
        self.timeline: dict[str, list[list[str]]] = {}
        self.kpis: dict[str, list[str]] = {}
        self.job_tables = 0
        self._table: list[list[str]] | None = None
        self._cell: list[str] | None = None
        self._h2 = False
        self._kpi: str | None = None
        self._kcells: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "h2":
            self._h2 = True
            self.order.append("")
        elif tag == "figure":
            self.figures.append(a)
            self.order.append("figure")
        elif tag == "table" and "data-timeline" in a:
            self._table = self.timeline.setdefault(a["data-file"], [])
        elif tag == "table" and "data-events" in a:
            self.job_tables += 1
        elif tag == "tr" and self._table is not None:
            self._table.append([])
        elif tag == "td" and self._table is not None:
            self._table[-1].append("")
        elif tag == "tr" and a.get("data-kpi"):
            self._kpi, self._kcells = a["data-kpi"], []
        elif tag == "td" and self._kpi:
            self._kcells.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "h2":
            self._h2 = False
        elif tag == "table":
            self._table = None
        elif tag == "tr" and self._kpi:
            self.kpis[self._kpi] = self._kcells[1:]
            self._kpi = None

    def handle_data(self, data: str) -> None:
        if self._h2:
            self.order[-1] += data
        elif self._table is not None and self._table and self._table[-1]:
            self._table[-1][-1] += data
        elif self._kpi and self._kcells:
            self._kcells[-1] += data


def _clock_s(text: str) -> int:
    """'d1 10:20:00 (10.33 h)' -> simulated seconds."""
    m = re.match(r"d(\d+) (\d\d):(\d\d):(\d\d)", text)
    assert m, text
    d, h, mi, sec = map(int, m.groups())
    return (d - 1) * 86400 + h * 3600 + mi * 60 + sec


def _report(files: list[Path], out: Path, *extra: str) -> _Report:
    r = CliRunner().invoke(main, ["report", *map(str, files), "--out", str(out), "--overwrite", *extra])
    assert r.exit_code == 0, r.stderr
    page = _Report()
    page.feed(out.read_text(encoding="utf-8"))
    return page


def test_the_report_leads_with_the_incident_and_marks_it_on_every_plot(
    recordings: dict[str, Path], tmp_path: Path
) -> None:
    path = recordings["cooling-failure"]
    page = _report([path], tmp_path / "r.html")
    # First after the run's heading: the incident timeline, before any plot.
    assert page.order[1] == "Incident timeline" and page.order.index("figure") > 1
    rows = [r for r in page.timeline[str(path)] if r]  # [time, kind, target, detail, source]
    con = duckdb.connect(str(path), read_only=True)
    try:
        events = con.sql(
            "SELECT time_s, kind, target FROM events WHERE kind NOT IN "
            "('job_start', 'job_end', 'job_interrupted', 'job_preempted') ORDER BY time_s"
        ).fetchall()
        expected = _expected("cooling-failure", con)
        n_jobs = con.sql("SELECT count(*) FROM events WHERE kind LIKE 'job%'").fetchall()[0][0]
    finally:
        con.close()
    # Every event but the routine job events, none of those.
    assert [(r[1], r[2]) for r in rows if r[4] != "alarm"] == [(k, tgt) for _, k, tgt in events]
    assert not [r for r in rows if r[1].startswith("job_")] and n_jobs > 100
    kinds = [r[1] for r in rows]
    assert kinds.count("thermal_trip") == 4 and kinds.count("thermal_recover") == 4
    assert "cdu_pump_failure" in kinds and "cooling_restore" in kinds
    # Each alarm raised and cleared at the steps of its condition (within one step).
    dt = 30
    for alarm, target, on, off in expected:
        mine = [r for r in rows if r[4] == "alarm" and r[2] == target and r[3].startswith(alarm)]
        assert [r[1] for r in mine] == ["alarm raised", "alarm cleared"], alarm
        raised, cleared = (_clock_s(r[0]) for r in mine)
        assert on <= raised <= on + dt and off <= cleared <= off + dt, (alarm, raised, cleared)
    # A marker at the CDU pump loss (10:00) on every plot.
    assert page.figures and all(36000 in json.loads(f["data-markers"]) for f in page.figures)
    assert page.job_tables == 0
    # The KPI table: thermal trips and tripped UltraServer-hours, from the UltraServers' own rows.
    con = duckdb.connect(str(path), read_only=True)
    try:
        us_h = con.sql("SELECT sum(tripped::INTEGER) * 30 / 3600 FROM ultraserver_ts").fetchall()[0][0]
    finally:
        con.close()
    assert page.kpis["thermal_trips"] == ["4"]
    assert page.kpis["tripped_ultraserver_h"] == [f"{us_h:,.2f}"]
    # Job events on request.
    with_jobs = _report([path], tmp_path / "j.html", "--job-events")
    assert with_jobs.job_tables == 1


def test_compared_runs_share_each_plots_y_axis(recordings: dict[str, Path], tmp_path: Path) -> None:
    files = [recordings["cooling-failure"], recordings["demand-response"]]
    page = _report(files, tmp_path / "two.html")
    by_plot: dict[str, list[dict[str, str]]] = {}
    for f in page.figures:
        by_plot.setdefault(f["data-plot"], []).append(f)
    assert by_plot
    for key, figs in by_plot.items():
        assert len(figs) == 2 and figs[0]["data-ylim"] == figs[1]["data-ylim"], key
        lo, hi = json.loads(figs[0]["data-ylim"])
        scale = float(figs[0]["data-scale"])
        for f in figs:  # the shared range holds every run's data
            for rng in json.loads(f["data-series"]).values():
                if rng["min"] is not None:
                    assert lo <= rng["min"] * scale and rng["max"] * scale <= hi, key


def test_run_summary_json_and_compare_count_thermal_trips(
    recordings: dict[str, Path], tmp_path: Path
) -> None:
    path = recordings["cooling-failure"]
    con = duckdb.connect(str(path), read_only=True)
    try:
        n_trips = con.sql("SELECT count(*) FROM events WHERE kind = 'thermal_trip'").fetchall()[0][0]
        us_h = con.sql("SELECT sum(tripped::INTEGER) * 30 / 3600 FROM ultraserver_ts").fetchall()[0][0]
    finally:
        con.close()
    assert n_trips == 4
    r = CliRunner().invoke(main, ["compare", str(path), str(recordings["demand-response"]), "--json"])
    assert r.exit_code == 0, r.stderr
    got = list(json.loads(r.stdout).values())  # label -> KPIs, in the order of the files
    assert [g["thermal_trips"] for g in got] == [n_trips, 0]
    assert (
        got[0]["tripped_ultraserver_h"] == pytest.approx(us_h, rel=1e-9)
        and got[1]["tripped_ultraserver_h"] == 0
    )
    r = CliRunner().invoke(main, ["compare", str(path), str(recordings["demand-response"])])
    line = next(x for x in r.stdout.splitlines() if x.startswith("tripped UltraServer-hours"))
    assert line.split()[2] == f"{us_h:,.2f}" and line.split()[3] == "0.00"
    text, _ = CASES["cooling-failure"]
    out = tmp_path / "run.duckdb"
    spec_file = tmp_path / "cf.toml"
    spec_file.write_text(text)
    r = CliRunner().invoke(main, ["run", str(spec_file), "--hours", "11", "--out", str(out), "--json"])
    assert r.exit_code == 0, r.stderr
    summary = json.loads(r.stdout.splitlines()[-1])
    assert summary["thermal_trips"] == n_trips
    assert summary["tripped_ultraserver_h"] == pytest.approx(us_h, rel=1e-9)
    r = CliRunner().invoke(main, ["run", str(spec_file), "--hours", "11", "--out", str(out), "--overwrite"])
    assert r.exit_code == 0, r.stderr
    assert f"thermal trips     {n_trips} UltraServers powered off   {us_h:,.2f} tripped" in r.stdout


# ---------------------------------------------------------------------- the TUI over the recording
async def test_f8_and_the_header_show_the_trips_that_the_floor_shows(recordings: dict[str, Path]) -> None:
    """Replay of the CDU loss: at d1 10:17 (after the last thermal_trip event, before the first
    thermal_recover, the pumps still lost) F8 lists the thermal trip of the four UltraServers and
    row 1's CDU, the header counts them; at d1 10:25 (pumps back, UltraServers back on) none."""
    from tests.test_tui import replay_app, settle, status_text
    from tui.screens.alarms import AlarmsScreen

    con = open_run_file(recordings["cooling-failure"])
    try:
        ((last_trip, first_recover, tripped),) = con.sql(
            "SELECT max(time_s) FILTER (WHERE kind = 'thermal_trip'), min(time_s) FILTER (WHERE kind = "
            "'thermal_recover'), count(DISTINCT target) FILTER (WHERE kind = 'thermal_trip') FROM events"
        ).fetchall()
        t = 10 * 3600 + 17 * 60
        assert last_trip < t < first_recover < 10 * 3600 + 25 * 60 and tripped == 4
        app = replay_app(con)
        async with app.run_test(size=(120, 30)) as pilot:
            await pilot.press("f8")

            async def shown_at(clock: str) -> dict[tuple[str, str], str]:
                await pilot.press("t")
                app.screen.query_one("Input").value = clock
                await pilot.press("enter")
                await settle(pilot, app)
                assert isinstance(app.screen, AlarmsScreen)
                shown = app.screen.query_one("#alarms-table").table.to_pydict()
                return {
                    (a, w): v for a, w, v in zip(shown["alarm"], shown["target"], shown["value"], strict=True)
                }

            # What is active before the incident (failed hardware, a long wait: the state the
            # warm-up reached) stays; the incident's alarms come and go on top of it. The queue
            # alarm names the job waiting longest, which changes as jobs start: compared by kind.
            def kinds(alarms: Any) -> set[tuple[str, str]]:
                return {(a, "job" if a == "queue wait" else w) for a, w in alarms}

            before = kinds(await shown_at("d1 09:59"))
            incident = {
                ("thermal trip", "factory"): "4 UltraServers off",
                ("CDU pumps lost", "row:1"): "flow 0 %",
            }
            assert not before & set(incident)
            for clock, expected in (("d1 10:17", incident), ("d1 10:25", {})):
                got = await shown_at(clock)
                assert kinds(got) == before | set(expected), clock
                assert {k: got[k] for k in expected} == expected, clock
                app.refresh_views()
                assert f"⚠ {len(got)}" in status_text(app), clock
    finally:
        con.close()


@pytest.mark.parametrize("name", list(CASES))
def test_report_queue_alarm_episodes_match_the_console_alarm_at_every_half_hour(
    name: str, recordings: dict[str, Path]
) -> None:
    """The report's queue alarm (``queue_wait_episodes``, intervals from the job events) against
    the console's (``alarms`` at one time, from each job's state then), sampled every 30 min."""
    from storage.alarms import queue_wait_episodes

    con = open_run_file(recordings[name])
    try:
        run_id = latest_run_id(con)
        end = int(con.sql("SELECT sim_time_s FROM runs").fetchall()[0][0])
        episodes = queue_wait_episodes(con, run_id, end)
        for t in range(0, end + 1, 1800):
            inside = any(raised < t and (cleared is None or t < cleared) for raised, cleared, *_ in episodes)
            console = any(a == "queue wait" for a, _ in _active(con, run_id, t))
            assert inside == console, (name, t, episodes)
    finally:
        con.close()
    if name == "cooling-failure":  # a gang of 1,024 chips waits ~18 h on this 2,304-chip hall
        assert episodes and episodes[0][3] >= 1


def test_the_demand_response_cap_binds_on_its_loaded_hall(recordings: dict[str, Path]) -> None:
    """The built-in's first evening peak (41-45 h): the hall is loaded and its 1.6 MW cap (20 %
    below the loaded hall's ~2.0 MW) holds the chips below full clock nearly all of the 4 h."""
    con = duckdb.connect(str(recordings["demand-response"]), read_only=True)
    try:
        bound_h, busy, cap = con.sql(
            "SELECT count(*) FILTER (WHERE throttled_chips > 0) * 60 / 3600.0, "
            "avg(chips_busy::DOUBLE / chips_total), max(facility_cap_w) "
            "FROM factory_ts WHERE time_s >= 41 * 3600 AND time_s < 45 * 3600"
        ).fetchall()[0]
    finally:
        con.close()
    assert cap == 1.6e6
    assert busy > 0.8 and bound_h > 3.5
