"""Scale: the aggregate telemetry tiers (row_ts, hall_ts, ultraserver_ts at an interval) and the
per-UltraServer physics that replaces per-chip passes."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from scenarios.spec import ScenarioError, parse
from tests.conftest import SMALL_TOML, small_params
from twin.compose.hall import Hall
from twin.spec.params import FailureParams, ScheduledEvent


def _concat(chunks: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    return {k: np.concatenate([np.asarray(c[k]) for c in chunks]) for k in chunks[0]}


def _run(sim: Hall, steps: int, chunk: int) -> dict[str, dict[str, np.ndarray]]:
    frames: dict[str, list[dict[str, Any]]] = {}
    done = 0
    while done < steps:
        n = min(chunk, steps - done)
        for t, cols in sim.advance(n).items():
            frames.setdefault(t, []).append(cols)
        done += n
    return {t: _concat(c) for t, c in frames.items() if t.endswith("_ts")}


def _hall(**changes: object) -> Hall:
    # Five UltraServers two to a row: rows of 2, 2 and 1 (a partial last row).
    return Hall(small_params(ultraservers=5, **changes))


@pytest.mark.parametrize("chunk", [120, 7])
def test_tier_row_counts_follow_their_intervals(chunk: int) -> None:
    # dt 60 s for 120 steps = 7,200 s. A tier every I >= dt seconds records once per multiple of
    # I in [0, 7200): 7200/300 = 24, 7200/90 = 80 (the steps at t % 90 < 60); I <= dt is every
    # step; 0 is never.
    sim = _hall(ultraserver_interval_s=300, row_interval_s=90, hall_interval_s=0)
    f = _run(sim, 120, chunk)
    assert len(f["ultraserver_ts"]["time_s"]) == 24 * 5
    assert len(f["row_ts"]["time_s"]) == 80 * 3
    assert len(f["hall_ts"]["time_s"]) == 0
    assert sorted(set(f["ultraserver_ts"]["time_s"].tolist())) == list(range(0, 7200, 300))
    # Each multiple of 90 s is recorded at the first step at or after it.
    expect = sorted({-(-m // 60) * 60 for m in range(0, 7200, 90)})
    assert sorted(set(f["row_ts"]["time_s"].tolist())) == expect
    every = _run(_hall(ultraserver_interval_s=1, row_interval_s=60, hall_interval_s=45), 120, chunk)
    assert len(every["ultraserver_ts"]["time_s"]) == 120 * 5
    assert len(every["row_ts"]["time_s"]) == 120 * 3
    assert len(every["hall_ts"]["time_s"]) == 120
    assert len(every["factory_ts"]["time_s"]) == 120


def test_tiers_do_not_depend_on_how_the_run_is_chunked() -> None:
    kw = dict(ultraserver_interval_s=600, row_interval_s=120, hall_interval_s=60)
    a, b = _run(_hall(**kw), 150, 150), _run(_hall(**kw), 150, 11)
    for table in ("ultraserver_ts", "row_ts", "hall_ts", "factory_ts"):
        for col, v in a[table].items():
            np.testing.assert_array_equal(v, b[table][col], err_msg=f"{table}.{col}")


def test_row_and_hall_tiers_conserve_the_ultraserver_sums() -> None:
    # A busy hall with failures and a thermal fault, so counts, trips and clocks are not trivial.
    events = (ScheduledEvent(time_s=1800, kind="cdu_pump_failure", target="1", value=0.0, duration_s=1800),)
    sim = _hall(failures=FailureParams(chip_hazard_per_h=2e-3), events=events)
    f = _run(sim, 180, 40)
    u, r, h, fac = f["ultraserver_ts"], f["row_ts"], f["hall_ts"], f["factory_ts"]
    row_of = {0: [0, 1], 1: [2, 3], 2: [4]}
    assert r["ultraservers"].tolist()[:3] == [2, 2, 1]
    assert u["chips_failed"].sum() > 0  # failures did happen
    for t in np.unique(u["time_s"]):
        us = u["time_s"] == t
        rows = r["time_s"] == t
        for row, members in row_of.items():
            m = us & np.isin(u["ultraserver_id"], members)
            rr = rows & (r["row_id"] == row)
            assert r["chips_busy"][rr].item() == u["chips_busy"][m].sum()
            assert r["chips_failed"][rr].item() == u["chips_failed"][m].sum()
            assert r["ultraservers_tripped"][rr].item() == u["tripped"][m].sum()
            assert r["power_w"][rr].item() == pytest.approx(u["power_w"][m].sum(), rel=1e-12)
            assert r["max_chip_temp_c"][rr].item() == pytest.approx(u["max_chip_temp_c"][m].max(), rel=1e-6)
            assert r["activity"][rr].item() == pytest.approx(u["activity"][m].mean(), rel=1e-6, abs=1e-7)
        hh = h["time_s"] == t
        assert h["power_w"][hh].item() == pytest.approx(r["power_w"][rows].sum(), rel=1e-12)
        assert h["chips_busy"][hh].item() == r["chips_busy"][rows].sum()
        assert h["chips_failed"][hh].item() == r["chips_failed"][rows].sum()
        # The hall is the factory: the same IT power, busy and failed chips as factory_ts.
        ff = fac["time_s"] == t
        assert h["power_w"][hh].item() == pytest.approx(fac["it_power_w"][ff].item(), rel=1e-12)
        assert h["chips_busy"][hh].item() == fac["chips_busy"][ff].item()
        assert h["chips_failed"][hh].item() == fac["chips_failed"][ff].item()


def test_ultraserver_sums_and_maxima_equal_the_per_chip_values() -> None:
    # The physics derives UltraServer chip power, activity and hottest junction from the chips'
    # utilisation; check them against the per-chip arrays, with unpowered chips present.
    events = (ScheduledEvent(time_s=0, kind="fail_server", target="3", value=0.0, duration_s=0),)
    sim = _hall(events=events)
    for _ in range(3):
        sim.advance(20)
        ph = sim.pool._ph
        assert ph is not None
        c = sim.topo.chips_per_us
        chip_p = ph.chip_p.reshape(-1, c)
        np.testing.assert_allclose(ph.us_chip_w, chip_p.sum(axis=1), rtol=1e-12)
        np.testing.assert_allclose(ph.us_act, ph.act_chip.reshape(-1, c).sum(axis=1), rtol=1e-12, atol=1e-12)
        # T_j = coolant + h R P, h each chip's resistance factor (its fixed spread).
        r = ph.us_r_k_per_w[sim.topo.chip_us] * sim.pool.facility.chips.r_scale
        tj = ph.us_coolant_c[sim.topo.chip_us] + r * ph.chip_p
        np.testing.assert_array_equal(sim.chip_tj, tj)
        np.testing.assert_allclose(ph.us_tj_max, tj.reshape(-1, c).max(axis=1), rtol=1e-12)
        assert (ph.chip_p[sim.pool.chip_failed] == 0).all()  # a failed chip draws nothing
    assert sim.pool.chip_failed.sum() > 0


def test_tier_interval_keys_are_checked() -> None:
    ok = parse(SMALL_TOML + "\n[telemetry]\nultraserver_interval_s = 900\nrow_interval_s = 0\n", "s.toml")
    p = ok.to_params()
    assert (p.ultraserver_interval_s, p.row_interval_s, p.hall_interval_s) == (900, 0, 1)
    with pytest.raises(ScenarioError, match=r"s\.toml: telemetry\.row_interval_s"):
        parse(SMALL_TOML + "\n[telemetry]\nrow_interval_s = -5\n", "s.toml")
    with pytest.raises(ScenarioError, match=r"telemetry\.hall_interval_s"):
        parse(SMALL_TOML + "\n[telemetry]\nhall_interval_s = 1e9\n", "s.toml")


def test_a_file_of_the_first_schema_gains_the_tier_tables(tmp_path: Any) -> None:
    import duckdb

    from storage.database import init_schema
    from storage.schema import migrations

    con = duckdb.connect(str(tmp_path / "old.duckdb"))
    for s in migrations()[0]:
        con.execute(s)
    con.execute("INSERT INTO twin_meta VALUES ('schema_version', '1')")
    assert not con.sql("SELECT * FROM duckdb_tables() WHERE table_name = 'row_ts'").fetchall()
    init_schema(con)
    names = {r[0] for r in con.sql("SELECT table_name FROM duckdb_tables()").fetchall()}
    assert {"row_ts", "hall_ts", "ultraserver_ts"} <= names
    con.close()


def test_params_default_records_every_tier_every_step() -> None:
    p = small_params()
    assert (p.ultraserver_interval_s, p.row_interval_s, p.hall_interval_s) == (1, 1, 1)
    q = dataclasses.replace(p, dt_s=15)
    f = _run(Hall(q), 8, 8)
    assert len(f["ultraserver_ts"]["time_s"]) == 8 * 2


@pytest.mark.parametrize(
    ("ultraservers", "chips_per_us", "dt", "us_iv", "chip_iv", "rows"),
    [
        (6944, 144, 60, 1, 3600, 400_000),  # a million chips, hourly samples
        (6944, 144, 60, 1, 60, 400_000),  # a million chips sampled every step
        (64, 144, 60, 1, 3600, 400_000),  # the reference factory
        (64, 144, 1, 1, 3600, 400_000),  # dt 1 s
        (1000, 144, 15, 300, 900, 50_000),  # UltraServer rows every 20th step
        (5, 144, 60, 1, 0, 100),  # no chip samples
    ],
)
def test_a_runs_chunk_holds_about_its_rows_and_at_most_one_large_chip_sample(
    monkeypatch: pytest.MonkeyPatch,
    ultraservers: int,
    chips_per_us: int,
    dt: int,
    us_iv: int,
    chip_iv: int,
    rows: int,
) -> None:
    # The rows a chunk of n steps holds: n x the UltraServer rows a step records, plus the chip
    # samples due in it (a sample every chip_iv / dt steps: at most ceil(n dt / chip_iv) of them),
    # each all the hall's chips. A chunk may exceed the row budget by one sample, never by more.
    from types import SimpleNamespace

    import scenarios.runner as runner

    monkeypatch.setattr(runner, "_ROWS_PER_CHUNK", rows)
    chips = ultraservers * chips_per_us
    session = SimpleNamespace(
        params=SimpleNamespace(dt_s=dt, ultraserver_interval_s=us_iv, chip_sample_interval_s=chip_iv),
        sim=SimpleNamespace(topo=SimpleNamespace(ultraservers=ultraservers, chips=chips)),
    )
    n = runner.Session.chunk_steps.fget(session)  # type: ignore[attr-defined]

    def held(k: int) -> float:
        us_rows = k * ultraservers * min(1.0, dt / us_iv)
        samples = -(-k * dt // chip_iv) if chip_iv else 0
        return us_rows + samples * chips

    assert 1 <= n <= 1440
    assert held(n) <= rows + (chips if chip_iv else 0)
    if n < 1440:  # the largest such chunk: one step more breaks the bound (or adds a sample)
        assert held(n + 1) > rows or (chip_iv and -(-(n + 1) * dt // chip_iv) > 1)
