"""The twin speaks the floor's telemetry both ways: emit -> a real server -> ingest gives back the
recorded values within each format's precision (storage.interop; docs/interop.md)."""

from __future__ import annotations

import copy
import math
import time
from importlib.resources import files
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from scenarios.spec import parse
from storage.interop import mapping, sources
from storage.interop.normalise import normalise
from storage.interop.sinks import Emitters
from storage.interop.sinks import parse as parse_sinks
from storage.reader import open_run_file
from tests.conftest import SMALL_TOML
from tests.servers import http_json, mosquitto, prometheus, sampled_after, wait_for

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures" / "interop"


def cooling_failure_text() -> str:
    """``cooling-failure`` made small: 4 UltraServers in 2 rows, no warm-up, row 1's CDU pumps
    stopping at 0.9 h for 20 minutes (across the chip sample at 1 h)."""
    text = (files("scenarios.builtin") / "cooling-failure.toml").read_text()
    for a, b in (
        ("warmup_h = 24", "warmup_h = 0"),
        ("at_h = 10\n", "at_h = 0.9\n"),
        ("ultraservers = 16", "ultraservers = 4"),
        ("ultraservers_per_row = 4", "ultraservers_per_row = 2"),
    ):
        assert a in text
        text = text.replace(a, b)
    return text


SCENARIOS = {"small": (SMALL_TOML, 3 * 3600), "cooling-failure": (cooling_failure_text(), 2 * 3600)}


# ---------------------------------------------------------------------- the recorded truth
def recorded(path: Path) -> dict[str, dict[tuple[str, int], float]]:
    """Every mapped quantity as the recording holds it: quantity -> {(entity, time in us): value},
    read with SQL from the file (independently of the emitters' code)."""
    con = open_run_file(path)
    try:
        start = "(SELECT epoch_us(start) FROM runs LIMIT 1)"
        t = "epoch_us(ts)"
        sql = {
            "chip": f"SELECT 'us' || ultraserver_id || '/chip' || (row_number() OVER (PARTITION BY time_s, "
            f"ultraserver_id ORDER BY chip_id) - 1), {t}, CAST({{c}} AS DOUBLE) FROM chip_ts",
            "us": f"SELECT 'us' || ultraserver_id, {t}, CAST({{c}} AS DOUBLE) FROM ultraserver_ts",
            "cdu": f"SELECT 'cdu' || ultraserver_id, {t}, CAST({{c}} AS DOUBLE) FROM ultraserver_ts",
            "cdu_factory": "SELECT 'cdu' || u.ultraserver_id, epoch_us(f.ts), f.{c} FROM factory_ts f "
            "JOIN ultraserver_ts u USING (time_s)",
            "row": f"SELECT 'row' || row_id, {t}, {{c}} FROM row_ts",
            "site": f"SELECT 'site', {t}, {{c}} FROM factory_ts",
        }
        out: dict[str, dict[tuple[str, int], float]] = {}
        for q in mapping.QUANTITIES:
            if q.entity == "job":
                continue
            kind = "cdu_factory" if q.entity == "cdu" and q.table == "factory_ts" else q.entity
            rows = con.sql(sql[kind].format(c=q.column)).fetchall()
            out[q.name] = {(e, int(tu)): float("nan") if v is None else float(v) for e, tu, v in rows}
        rows = con.sql(
            f"SELECT 'job' || job_id, {start} // 1000000, submit_time_s, start_time_s, end_time_s, chips, state FROM jobs"
        ).fetchall()
        code = {k: float(mapping.JOB_STATES.index(v)) for k, v in mapping.TWIN_JOB_STATES.items()}
        for name in ("job.submit_time", "job.start_time", "job.end_time", "job.chips", "job.state"):
            out[name] = {}
        for e, s0, sub, st, end, chips, state in rows:
            out["job.submit_time"][(e, 0)] = s0 + sub
            if st >= 0:
                out["job.start_time"][(e, 0)] = s0 + st
                out["job.chips"][(e, 0)] = chips
            if end >= 0:
                out["job.end_time"][(e, 0)] = s0 + end
            out["job.state"][(e, 0)] = code[state]
        return out
    finally:
        con.close()


def observed(tab: pa.Table) -> dict[str, dict[tuple[str, int], tuple[float | None, str]]]:
    out: dict[str, dict[tuple[str, int], tuple[float | None, str]]] = {}
    t = tab.column("time").cast(pa.int64()).to_pylist()
    for e, m, ti, v, q in zip(
        tab.column("entity").to_pylist(),
        tab.column("metric").to_pylist(),
        t,
        tab.column("value").to_pylist(),
        tab.column("quality").to_pylist(),
        strict=True,
    ):
        key = (e, 0 if m.startswith("job.") else ti)
        assert key not in out.setdefault(m, {}), f"two samples of {m} at {key}"
        out[m][key] = (v, q)
    return out


def assert_within(fmt: str, rec: dict[str, dict[tuple[str, int], float]], obs: Any, keys: Any = None) -> int:
    """Every observed sample of ``fmt``'s quantities equals the recorded value within the field's
    precision, and every recorded one was observed (``keys``: limit to these (entity, time))."""
    n = 0
    for f in mapping.fields(fmt):
        if f.codec == "counter":
            continue
        want = rec[f.quantity]
        got = obs.get(f.quantity, {})
        if keys is not None:
            want = {k: v for k, v in want.items() if k in keys}
            got = {k: v for k, v in got.items() if k in keys}
        assert set(got) == set(want), (fmt, f.quantity, sorted(set(want) ^ set(got))[:5])
        for k, (v, q) in got.items():
            r = want[k]
            if math.isnan(r):
                assert v is None and q == "invalid", (fmt, f.quantity, k, v, q)
                continue
            assert v is not None, (fmt, f.quantity, k, q)
            if f.codec == "flag":
                assert v == (1.0 if r > 0 else 0.0), (fmt, f.quantity, k)
            else:
                assert abs(v - r) <= f.precision * (1 + 1e-9) + 1e-9 * abs(r), (fmt, f.quantity, k, v, r)
            n += 1
    return n


def run_with(text: str, dur: int, out: Path, sinks: list[str]) -> tuple[Emitters, list[Any]]:
    from scenarios.runner import run

    spec = parse(text, "t.toml")
    em = Emitters(parse_sinks(sinks), start=spec.start, system=str(spec.hall.system))
    chunks: list[Any] = []

    def hook(frames: Any) -> None:
        chunks.append(copy.deepcopy(frames))
        em.update(frames)

    run(spec, text, out, duration_s=dur, on_chunk=hook)
    return em, chunks


# ---------------------------------------------------------------------- the table itself
def test_the_mapping_names_recorded_columns_and_the_docs_show_it() -> None:
    from twin.spec.telemetry import column

    for q in mapping.QUANTITIES:
        c = column(q.table, q.column)  # KeyError if the table has no such column
        if q.unit in ("W", "°C") or (q.unit == "1" and c.unit not in ("", "-")):
            assert c.unit == q.unit, (q.name, c.unit)
    assert {f.quantity for f in mapping.FIELDS} <= set(mapping.BY_NAME)
    assert {f.fmt for f in mapping.FIELDS} == set(mapping.FORMATS)
    for f in mapping.FIELDS:
        if f.codec == "linear" and f.decimals is not None:
            # The precision covers the emitter's rounding: half the last digit, in the twin's unit.
            assert f.precision >= 0.5 * 10.0**-f.decimals / f.scale * (1 - 1e-9), f
    assert mapping.markdown_table() in (ROOT / "docs" / "interop.md").read_text()


# ---------------------------------------------------------------------- round trips
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_files_and_the_broker_give_back_the_recording(name: str, tmp_path: Path) -> None:
    """neuron-monitor lines, the BMS CSV, Slurm's JSON and the BMS points through a real mosquitto
    broker, ingested back: every recorded sample of every mapped quantity, within precision."""
    text, dur = SCENARIOS[name]
    with mosquitto(tmp_path) as port:
        sub = sources.Mqtt(f"mqtt://127.0.0.1:{port}", 600.0, 10**9, 30.0)
        try:
            em, _ = run_with(
                text,
                dur,
                tmp_path / "run.duckdb",
                [
                    f"neuron:{tmp_path / 'n.jsonl'},bms-csv:{tmp_path / 'bms.csv'}",
                    f"slurm:{tmp_path / 's'}",
                    f"mqtt://127.0.0.1:{port}",
                ],
            )
            em.close()
            assert em.errors == 0 and em.published > 0
            sub.max_messages = em.published
            msgs = list(sub.batches())
        finally:
            sub.close()
    rec = recorded(tmp_path / "run.duckdb")
    now = sources.now_us()
    counts = {}
    for fmt, parsed in (
        ("neuron-monitor", [sources.read_file(str(tmp_path / "n.jsonl"))]),
        ("bms", [sources.read_file(str(tmp_path / "bms.csv"))]),
        ("bms", msgs),
        ("slurm", [sources.read_file(str(tmp_path / "s" / "sacct.json"))]),
    ):
        tab = pa.concat_tables([normalise(p.table, now).table for p in parsed])
        counts[fmt] = assert_within(fmt, rec, observed(tab))
    assert all(counts.values()), counts
    if name == "cooling-failure":  # the incident is in what came back: row 1's CDUs lost their flow
        obs = observed(normalise(msgs[0].table, now).table)
        assert min(v for (e, _), (v, _) in obs["cdu.flow"].items() if e in ("cdu2", "cdu3")) == 0.0


def test_redfish_and_prometheus_give_back_the_recording_during_the_incident(tmp_path: Path) -> None:
    """The twin's Redfish service and its DCGM exporter scraped by a real Prometheus server, read
    back through the HTTP APIs at each chip sample of ``cooling-failure`` (one while row 1's CDU
    pumps are stopped): chassis, PDU and CDU readings and every chip's power, temperature, clock,
    utilisation and fault within precision; a Grafana-style PromQL query agrees with the file."""
    text, dur = SCENARIOS["cooling-failure"]
    _, chunks = run_with(text, dur, tmp_path / "run.duckdb", [])
    rec = recorded(tmp_path / "run.duckdb")
    spec = parse(text, "t.toml")
    em = Emitters(parse_sinks(["prometheus:0,redfish:0"]), start=spec.start, system=str(spec.hall.system))
    prom_port, rf_port = em.ports
    checked = {"redfish": 0, "dcgm": 0}
    incident_seen = False
    try:
        with prometheus(tmp_path, [prom_port]) as prom:
            for frames in chunks:
                for st in em.state.steps(frames):
                    if st.chips_t != st.time_s:
                        continue
                    t_us = int(st.unix(st.time_s) * 1e6)
                    (p,) = sources.read_http(f"http://127.0.0.1:{rf_port}/redfish/v1", 60, 1)
                    obs = observed(normalise(p.table, sources.now_us()).table)
                    now_keys = {k for q in rec.values() for k in q if k[1] == t_us}
                    checked["redfish"] += assert_within("redfish", rec, obs, now_keys)
                    # Prometheus: once it has scraped this state, its query API gives it back.
                    fed = time.time()
                    wait_for(
                        lambda fed=fed: sampled_after(prom, "DCGM_FI_DEV_POWER_USAGE", fed),
                        "a scrape after the update",
                    )
                    (p,) = sources.read_http(f"http://127.0.0.1:{prom}", 5.0, 0.25)
                    tab = normalise(p.table, sources.now_us()).table
                    latest = _latest(tab)
                    obs2: dict[str, dict[tuple[str, int], tuple[float | None, str]]] = {}
                    for (e, m), (v, q) in latest.items():
                        obs2.setdefault(m, {})[(e, t_us)] = (v, q)
                    checked["dcgm"] += assert_within("dcgm", rec, obs2, now_keys)
                    mean = http_json(
                        f"http://127.0.0.1:{prom}/api/v1/query?query=avg(DCGM_FI_DEV_POWER_USAGE)"
                    )["data"]["result"][0]["value"][1]
                    want = np.mean([v for (e, tu), v in rec["chip.power"].items() if tu == t_us])
                    assert abs(float(mean) - want) <= 1e-3
                    flow = [v for (e, tu), v in rec["cdu.flow"].items() if tu == t_us]
                    incident_seen |= min(flow) == 0.0
    finally:
        em.close()
    assert checked["redfish"] and checked["dcgm"] and incident_seen, checked


def _latest(tab: pa.Table) -> dict[tuple[str, str], tuple[float | None, str]]:
    """The latest sample of each (entity, metric) of a range query (rates left out)."""
    out: dict[tuple[str, str], tuple[int, float | None, str]] = {}
    for e, m, t, v, q in zip(
        tab.column("entity").to_pylist(),
        tab.column("metric").to_pylist(),
        tab.column("time").cast(pa.int64()).to_pylist(),
        tab.column("value").to_pylist(),
        tab.column("quality").to_pylist(),
        strict=True,
    ):
        if q in ("rate", "reset"):
            continue
        if (e, m) not in out or t > out[(e, m)][0]:
            out[(e, m)] = (t, v, q)
    return {k: (v, "good" if q == "gap" else q) for k, (t, v, q) in out.items()}


def test_the_dcgm_energy_counter_adds_power_times_time() -> None:
    """The counter of each chip grows by its power x the time since its previous sample (mJ), so
    the rate Prometheus or the ingest takes of it is the power of the later sample."""
    from storage.interop.emit import FloorState

    def chips(t: int, power: list[float]) -> dict[str, dict[str, Any]]:
        n = len(power)
        return {
            "chip_ts": {
                "time_s": np.full(n, t),
                "chip_id": np.arange(n) + 2,
                "ultraserver_id": np.array([0, 0, 1][:n]),
                "neuroncore_utilization": np.zeros(n),
                "chip_power_w": np.array(power),
                "t_junction_c": np.zeros(n),
                "clock": np.ones(n),
                "failed": np.zeros(n, bool),
            }
        }

    st = FloorState()
    st.update(chips(0, [100.0, 200.0, 300.0]))
    assert st.chips["energy_mj"].tolist() == [0.0, 0.0, 0.0]
    assert st.chips["local"].tolist() == [0, 1, 0]
    st.update(chips(60, [110.0, float("nan"), 330.0]))
    assert st.chips["energy_mj"].tolist() == [110 * 60e3, 0.0, 330 * 60e3]
