"""What an operator looks for: the Services and Alarms screens, why PUE moved, the plant's units,
event search, and a cancelled query's answer landing on that query — each checked against the
recording (its own SQL or an independent calculation from the telemetry tables)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from scenarios.runner import run
from scenarios.spec import parse
from storage.reader import latest_run_id, open_run_file
from tests.test_tui import TINY, factory_row, replay_app, settle, snap, status_text, wait_for
from tui.console import fmt

HOURS = 30


@pytest.fixture(scope="module")
def op_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("op") / "run.duckdb"
    run(parse(TINY, "tiny.toml"), TINY, out, duration_s=HOURS * 3600)
    return out


@pytest.fixture
def con(op_file: Path) -> Any:
    c = open_run_file(op_file)
    try:
        yield c
    finally:
        c.close()


async def test_services_screen_shows_service_ts_against_the_slo(con: Any) -> None:
    from tui.screens.services import ServicesScreen
    from tui.widgets.arrowtable import ArrowTable
    from tui.widgets.plot import BraillePlot

    t = 10 * 3600
    svc = (
        con.sql(f"SELECT * FROM service_ts WHERE time_s = {t} ORDER BY service_id")
        .to_arrow_table()
        .to_pylist()
    )
    app = replay_app(con)
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.press(*["right"] * 10, "f7")
        await settle(pilot, app)
        assert isinstance(app.screen, ServicesScreen)
        rows = app.screen.query_one("#services", ArrowTable).table.to_pylist()
        assert [r["service"] for r in rows] == [s["service"] for s in svc] == ["chat"]
        r, s = rows[0], svc[0]
        assert r["replicas"] == f"{s['replicas_running']}/{s['replicas_starting']}/{s['replicas_target']}"
        # the scenario's SLO is the default (MLPerf llama2-70b server: TTFT 2 s, TPOT 200 ms at p99)
        assert r["ttft"] == f"{fmt.span_ms(s['ttft_p50_s'])}/{fmt.span_ms(s['ttft_p99_s'])} (2.00 s)" + (
            " !" if s["ttft_p99_s"] > 2.0 else ""
        )
        assert r["tpot"].endswith("(200 ms)" + (" !" if s["tpot_p99_s"] > 0.2 else ""))
        assert r["jpt"] == f"{s['power_w'] / s['tokens_per_s']:.2f}"  # W / (token/s) = J/token
        # prompt and output tokens apart, as recorded (prompts are most of the tokens of the mix)
        tin, tout = s["input_tokens_per_s"], s["tokens_per_s"]
        assert r["tokens"] == f"{fmt.si(tin, '', 3)}/{fmt.si(tout, '', 3)}" and tin > tout > 0
        assert r["kv"] == fmt.pct(s["kv_cache_fraction"], 0)
        plot = app.screen.query_one("#svc-ttft", BraillePlot)
        n = con.sql(
            f"SELECT count(*) FROM service_ts WHERE service_id = 0 AND time_s > {t - 86400} AND time_s <= {t}"
        ).fetchall()[0][0]
        assert len(plot._t) == n and plot._t[-1] == t


async def test_alarms_count_in_the_header_and_acknowledge(con: Any) -> None:
    """UltraServer 1 fails at 14 h for 12 h: a failed-hardware alarm since 14 h, counted in the
    status line until acknowledged, gone once repaired."""
    from tui.screens.alarms import AlarmsScreen

    app = replay_app(con)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press(*["right"] * 16)
        await settle(pilot, app)
        await wait_for(pilot, lambda: app.core.alarms.load_count > 0 and app.core.alarms.active is not None)
        await settle(pilot, app)
        failed = [a for a in app.core.alarms.active if a.alarm == "failed hardware"]
        assert len(failed) == 1
        # since: the first step of the current run of steps with failed chips (from factory_ts)
        since = con.sql(
            "SELECT min(time_s) FROM factory_ts WHERE time_s > (SELECT max(time_s) FROM factory_ts "
            "WHERE time_s <= 16 * 3600 AND chips_failed = 0) AND time_s <= 16 * 3600"
        ).fetchall()[0][0]
        assert failed[0].since_s == since and 14 * 3600 <= since <= 14 * 3600 + 60
        assert failed[0].value == factory_row(con, 16 * 3600)["chips_failed"] >= 144
        n = len(app.core.alarms.active)
        app.refresh_views()
        assert f"⚠ {n}" in status_text(app)
        await pilot.press("f8")
        await settle(pilot, app)
        assert isinstance(app.screen, AlarmsScreen)
        shown = app.screen.query_one("#alarms-table").table.to_pydict()
        assert "failed hardware" in shown["alarm"] and shown["since"][
            shown["alarm"].index("failed hardware")
        ] == fmt.short_clock(since)
        await pilot.press("A")  # acknowledge all
        assert app.core.alarms.unacked == 0
        app.refresh_views()
        assert f"⚠ {n}" in status_text(app)  # still active, shown muted
        await pilot.press("shift+right")  # 40 h > the end of the run (30 h): repaired at 26 h
        await settle(pilot, app)
        await wait_for(pilot, lambda: not app.panels_pending())
        assert not [a for a in app.core.alarms.active if a.alarm == "failed hardware"]


async def test_why_pue_moved_and_plant_units(con: Any) -> None:
    from tui.widgets.info import InfoList

    t = 28 * 3600
    app = replay_app(con)
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.press(*["right"] * 28, "f5")
        await settle(pilot, app)
        why = {
            label.strip(): value.split()
            for label, value, _, _ in app.screen.query_one("#pue-why", InfoList).items
        }
        now, hour, day = factory_row(con, t), factory_row(con, t - 3600), factory_row(con, t - 86400)
        assert why["PUE"] == [f"{r['pue']:.3f}" for r in (now, hour, day)]
        # PUE = 1 + cooling/IT + losses/IT: the shares shown add up to the PUE (energy balance)
        for r in (now, hour, day):
            assert r["pue"] == pytest.approx(
                1 + (r["cooling_power_w"] + r["power_loss_w"]) / r["it_power_w"], rel=1e-6
            )
        assert why["cooling/IT"][0:2] == [
            fmt.pct(now["cooling_power_w"] / now["it_power_w"], 1).split()[0],
            "%",
        ]
        assert why["wet bulb"] == [f"{r['outdoor_wetbulb_c']:.1f}°C" for r in (now, hour, day)]
        assert (
            why["chiller load"][0::2]
            == fmt.power(now["chiller_power_w"] * now["chiller_cop"]).split()[:1]
            + fmt.power(hour["chiller_power_w"] * hour["chiller_cop"]).split()[:1]
            + fmt.power(day["chiller_power_w"] * day["chiller_cop"]).split()[:1]
        )
        units = app.screen.query_one("#units", InfoList).items
        cdus = [u for u in units if u[0].startswith("CDU")]
        rows = con.sql(
            f"SELECT row_id, sum(power_w) AS w FROM ultraserver_ts WHERE time_s = {t} "
            "GROUP BY row_id ORDER BY row_id"
        ).fetchall()
        assert [c[0] for c in cdus] == [f"CDU {r}" for r, _ in rows]
        assert [c[1].split(" · ")[0] for c in cdus] == [fmt.power(w) for _, w in rows]
        # the loads add up to the IT power (every UltraServer hangs off one CDU)
        assert sum(w for _, w in rows) == pytest.approx(now["it_power_w"], rel=1e-9)
        # each chiller and tower: as many running as recorded, at the recorded load; the rest standby
        from twin.spec.params import CoolingParams

        cp = CoolingParams()  # TINY keeps the plant's defaults
        running = 0
        for name, n, key, what in (
            ("chiller", cp.chiller_units, "chiller", "load"),
            ("tower", cp.economizer_units, "economizer", "fans"),
        ):
            mine = [(label, value) for label, value, _, _ in units if label.startswith(name + " ")]
            assert [label for label, _ in mine] == [f"{name} {k + 1}" for k in range(n)]
            on = now[f"{key}s_running"]
            assert 0 <= on <= n  # chillers rest while outside air and the towers carry the heat
            running += on
            load = fmt.pct(now[f"{key}_load_fraction"], 0)
            assert [v for _, v in mine] == [f"running · {what} {load}"] * on + ["standby"] * (n - on)
        assert running > 0  # something rejects the heat


async def test_energy_and_cost_shows_the_run_summary_cost(con: Any) -> None:
    """At the end of the run the cost panel shows the run summary's own figures (storage.kpis,
    the code ``twin run`` prints); its per-day split is the total over the simulated days, and
    "today" is the cost_by_day view's day; $/chip-hour by hand from the chips and hours."""
    from storage.kpis import whole_run
    from tui.screens.energy import usd
    from tui.widgets.info import InfoList

    run_id = latest_run_id(con)
    k = whole_run(con, run_id)
    app = replay_app(con)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("end", "f5")
        await settle(pilot, app)
        t = app.core.t
        from tui.widgets.status import ModeTabs

        assert app.current_mode == "energy" and "Energy & cost" in str(
            app.screen.query_one(ModeTabs).render()
        )
        items = {label: value for label, value, _, _ in app.screen.query_one("#cost", InfoList).items}
    days = HOURS / 24
    assert k["days"] == pytest.approx(days)
    assert items[f"TCO so far ({days:,.1f} d)"] == usd(k["total_cost_usd"])
    chips = con.sql("SELECT any_value(chips_total) FROM factory_ts").fetchall()[0][0]
    assert items["TCO $/chip-hour"] == usd(k["total_cost_usd"] / (chips * HOURS))
    assert items["TCO $/M tokens"] == usd(k["usd_per_mtok_all_in"])
    assert items["elec. $/M tokens"] == usd(k["usd_per_mtok"])
    assert items["TCO $/EFLOP batch"] == usd(k["usd_per_eflop"])
    job = k["usd_per_pretrain_job"]
    assert items["TCO $/pretrain job"] == (usd(job) if job is not None else "none done")
    today = (
        con.sql("SELECT * FROM cost_by_day WHERE run_id = ? AND day = ?", params=[run_id, t // 86400])
        .to_arrow_table()
        .to_pylist()[0]
    )
    for label, key in (
        ("capital", "capex_usd"),
        ("energy", "energy_cost_usd"),
        ("cooling", "cooling_cost_usd"),
        ("other", "other_cost_usd"),
        ("total (TCO)", "total_cost_usd"),
    ):
        assert items[label].split() == [*usd(k[key] / days).split(), *usd(today[key]).split()], label
    # the split adds up to the total (capital + energy + cooling + other)
    parts = ("capex_usd", "energy_cost_usd", "cooling_cost_usd", "other_cost_usd")
    assert sum(k[p] for p in parts) == pytest.approx(k["total_cost_usd"], rel=1e-12)


async def test_event_search(con: Any) -> None:
    from tui.widgets.tables import EventLog

    app = replay_app(con)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("end", "e")  # all events at the end
        await settle(pilot, app)
        await pilot.press("slash")
        app.screen.query_one("Input").value = "ultraserver:1"
        await pilot.press("enter")
        await settle(pilot, app)
        log = app.screen.query_one(EventLog)
        want = con.sql(
            "SELECT count(*) FROM events WHERE target ILIKE '%ultraserver:1%' OR kind ILIKE "
            "'%ultraserver:1%' OR detail ILIKE '%ultraserver:1%' OR source ILIKE '%ultraserver:1%'"
        ).fetchall()[0][0]
        assert log.total == want > 0
        assert all("ultraserver:1" in ln for ln in log.plain_lines() if ln.strip())
        await pilot.press("slash")
        app.screen.query_one("Input").value = ""
        await pilot.press("enter")
        await settle(pilot, app)
        assert log.total == con.sql("SELECT count(*) FROM events").fetchall()[0][0]


async def test_a_cancelled_query_answers_itself_not_the_next(con: Any) -> None:
    """Run a long query, run another before the first is cancelled: the first's "cancelled" is
    dropped (its request id is older); the second can still be cancelled with ctrl+g."""
    from textual.widgets import TextArea

    app = replay_app(con)
    slow = "SELECT count(*) FROM range(100000) a, range(100000) b, range(1000) c"
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("f6")
        scr = app.screen
        ed = scr.query_one("#editor", TextArea)
        ed.text = slow
        await pilot.press("ctrl+r")
        first = scr.request
        await wait_for(pilot, lambda: app.sql_executing == first)
        ed.text = slow + " -- again"
        await pilot.press("ctrl+r")  # cancels the first, starts the second
        second = scr.request
        assert second > first
        await wait_for(pilot, lambda: app.sql_executing == second)
        await pilot.pause()
        assert scr.running  # the first's "cancelled" did not land on the second
        await pilot.press("ctrl+g")
        await wait_for(pilot, lambda: not scr.running)
        assert "cancelled" in str(scr.query_one("#sql-status").render())
        ed.text = "SELECT 42 AS answer"
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: not scr.running)
        assert scr.result is not None and scr.result.to_pylist() == [{"answer": 42}]


# ---------------------------------------------------------------------- snapshots
def _app(op_file: Path) -> Any:
    c = open_run_file(op_file)
    from tui.app import TwinApp

    return TwinApp(replay_con=c, replay_run_id=latest_run_id(c), replay_path="run.duckdb")


@pytest.mark.parametrize("size", [(80, 24), (200, 60)])
@pytest.mark.parametrize("keys", [["f7"], ["f8"], ["f5"]], ids=["services", "alarms", "energy"])
def test_snapshot_operator_screens(
    snap_compare: Any, op_file: Path, size: tuple[int, int], keys: list[str]
) -> None:
    assert snap_compare(_app(op_file), terminal_size=size, run_before=snap([*["right"] * 16, *keys]))


def test_numbers_are_finite_where_shown(con: Any) -> None:
    svc = con.sql("SELECT power_w / nullif(tokens_per_s, 0) AS j FROM service_ts").fetchall()
    assert all(v[0] is None or (math.isfinite(v[0]) and v[0] > 0) for v in svc)
    assert np.isfinite([r[0] for r in con.sql("SELECT pue FROM factory_ts").fetchall()]).all()


def test_one_steps_grouped_targets_show_by_number_whatever_order_they_were_read_in() -> None:
    """Rows of one step have no order of their own (the file may give them in any): a grouped
    event line lists its targets by kind and number, so it reads the same every time."""
    import random

    from tui.widgets.tables import _target_order

    targets = ["job:1037", "job:460", "job:1031", "row:2", "job:9", "facility"]
    want = ["facility", "job:9", "job:460", "job:1031", "job:1037", "row:2"]
    for seed in range(5):
        random.Random(seed).shuffle(targets)
        assert sorted(targets, key=_target_order) == want
