"""The per-advance record (``twin.compose.record.Recorder``): a step's scalars kept as one tuple and typed
into columns once per advance must give the columns that storing each value in its typed column
would; the hall tier's means are ``ndarray.mean``'s; an advance cut short keeps only the steps
run. And a booked work step (``WorkStep.booked``) is the step with its three batch figures
replaced, every other field kept."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from twin.compose.pool import FACTORY_ORDER, PoolRow
from twin.compose.record import Recorder, named
from twin.spec import telemetry
from twin.spec.topology import build
from twin.work.services import ServiceStep
from twin.work.serving import WorkStep

# Two rows of 3 and 2 UltraServers of 4 chips.
TOPO = build(5, 4, 2, 3)


def _typed(table: str, name: str, values: list[float]) -> np.ndarray:
    """What storing each value in the column's own dtype gives (the independent expectation)."""
    dtype = {c.name: c.dtype for c in telemetry.TABLES[table]}[name]
    out = np.zeros(len(values), dtype=dtype)
    for k, v in enumerate(values):
        out[k] = v
    return out


def _us_cols(rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    n = TOPO.ultraservers
    return (
        rng.uniform(1e3, 2e5, n),  # power
        rng.integers(0, 5, n).astype(np.int64),  # busy
        rng.integers(0, 2, n).astype(np.int64),  # failed
        rng.random(n) < 0.3,  # tripped
        rng.random(n),  # activity
        rng.uniform(40, 95, n),  # hottest junction
        rng.uniform(30, 50, n),  # return
        rng.uniform(0.5, 1.0, n),  # clock
        np.ones(n),  # CDU flow
    )


def test_factory_rows_become_the_columns_a_direct_store_would_give() -> None:
    rng = np.random.default_rng(7)
    steps = 4
    times = np.arange(steps, dtype=np.int64) * 60
    rec = Recorder(steps, TOPO, times=times, order=FACTORY_ORDER)
    dtypes = {c.name: c.dtype for c in telemetry.TABLES["factory_ts"]}
    rows = []
    for i in range(steps):
        # Counts as ints or whole floats (how steps hand them over); fractions with digits past
        # float32's precision; a NaN where a step has no tokens.
        row = tuple(
            (int(rng.integers(0, 10_000)) if k % 2 else float(rng.integers(0, 10_000)))
            if dtypes[name].startswith("int")
            else (float("nan") if name == "energy_per_token_j" and i == 1 else rng.uniform(-1e7, 1e7) + 1 / 3)
            for k, name in enumerate(FACTORY_ORDER)
        )
        rows.append(row)
        rec.factory(i, row)
        rec.ultraserver(i, int(times[i]), *_us_cols(rng))
    assert rec.value(2, "it_power_w") == float(rows[2][FACTORY_ORDER.index("it_power_w")])
    f = rec.frames()["factory_ts"]
    for k, name in enumerate(FACTORY_ORDER):
        want = _typed("factory_ts", name, [r[k] for r in rows])
        assert f[name].dtype == want.dtype, name
        np.testing.assert_array_equal(f[name], want, err_msg=name)
    numeric = [c.name for c in telemetry.TABLES["factory_ts"] if c.dtype != "string"]
    assert list(f) == numeric  # every numeric column, in the table's order


def test_a_column_the_model_did_not_produce_is_an_error_not_a_zero() -> None:
    order = tuple(c for c in FACTORY_ORDER if c not in ("it_power_w", "queue_jobs"))
    rec = Recorder(2, TOPO, times=np.array([0, 60], dtype=np.int64), order=order)
    rng = np.random.default_rng(1)
    for i in range(2):
        rec.factory(i, (1.0,) * len(order))
        rec.ultraserver(i, 60 * i, *_us_cols(rng))
    with pytest.raises(ValueError, match="factory_ts: the model produced no it_power_w, queue_jobs"):
        rec.frames()


def test_a_row_type_names_only_columns_of_its_table() -> None:
    assert named(PoolRow) == PoolRow._fields
    with pytest.raises(ValueError, match=r"PoolRow: .* not columns of hall_ts"):
        named(PoolRow, "hall_ts")


def test_hall_and_row_tiers_reduce_the_ultraservers_of_the_step() -> None:
    rng = np.random.default_rng(3)
    times = np.array([0, 60, 120], dtype=np.int64)
    rec = Recorder(3, TOPO, times=times, order=FACTORY_ORDER)
    cols = [_us_cols(rng) for _ in range(3)]
    for i, c in enumerate(cols):
        rec.factory(i, (0,) * len(FACTORY_ORDER))
        rec.ultraserver(i, int(times[i]), *c)
    fr = rec.frames()
    h, r, u = fr["hall_ts"], fr["row_ts"], fr["ultraserver_ts"]
    power, busy, failed, tripped, act, tmax, ret, clock, _ = (np.stack(x) for x in zip(*cols, strict=True))
    np.testing.assert_array_equal(h["time_s"], times)
    np.testing.assert_array_equal(h["power_w"], power.sum(axis=1))
    np.testing.assert_array_equal(h["chips_busy"], busy.sum(axis=1))
    np.testing.assert_array_equal(h["chips_failed"], failed.sum(axis=1))
    np.testing.assert_array_equal(h["ultraservers_tripped"], tripped.sum(axis=1))
    np.testing.assert_array_equal(h["activity"], np.array([a.mean() for a in act], dtype=np.float32))
    np.testing.assert_array_equal(h["clock"], np.array([c.mean() for c in clock], dtype=np.float32))
    np.testing.assert_array_equal(h["max_chip_temp_c"], tmax.max(axis=1).astype(np.float32))
    np.testing.assert_array_equal(h["ultraservers"], [5, 5, 5])
    # Rows of 3 and 2 UltraServers: their sums and means.
    np.testing.assert_allclose(r["power_w"], np.c_[power[:, :3].sum(1), power[:, 3:].sum(1)].ravel())
    np.testing.assert_allclose(
        r["coolant_return_c"], np.c_[ret[:, :3].mean(1), ret[:, 3:].mean(1)].ravel(), rtol=1e-6
    )
    np.testing.assert_array_equal(r["time_s"], np.repeat(times, 2))
    np.testing.assert_array_equal(u["time_s"], np.repeat(times, 5))
    np.testing.assert_array_equal(u["power_w"], power.ravel())


def test_an_advance_cut_short_keeps_the_steps_run() -> None:
    rng = np.random.default_rng(5)
    times = np.arange(5, dtype=np.int64) * 10
    tiers = {"hall_ts": times % 20 < 10}  # every other step
    rec = Recorder(5, TOPO, ("chat", "code"), tiers=tiers, times=times, order=FACTORY_ORDER)
    svc = ServiceStep(3, 2, 1, 4, 10.0, 20.0, (0.1, 0.2, 0.3), (0.01, 0.02, 0.03), 2.0, 1.5, 0.2, 0.5, 0.4)
    w = WorkStep(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0, 0, (svc, svc), ((1, 0, 1), (2, 1, 3)))
    for i in range(3):
        rec.factory(i, tuple(float(i) for _ in FACTORY_ORDER))
        rec.ultraserver(i, int(times[i]), *_us_cols(rng))
        rec.services(int(times[i]), 10, w, np.array([100.0, 200.0]))
    fr = rec.frames(3)
    assert len(fr["factory_ts"]["time_s"]) == 3
    np.testing.assert_array_equal(fr["factory_ts"]["time_s"], [0, 1, 2])
    np.testing.assert_array_equal(fr["hall_ts"]["time_s"], [0, 20])
    assert len(fr["ultraserver_ts"]["time_s"]) == 3 * TOPO.ultraservers
    s = fr["service_ts"]
    assert s["service"] == ["chat", "code"] * 3
    np.testing.assert_array_equal(s["service_id"], [0, 1] * 3)
    np.testing.assert_array_equal(s["time_s"], np.repeat(times[:3], 2))
    np.testing.assert_array_equal(s["replicas_target"], [1, 3] * 3)
    np.testing.assert_array_equal(s["power_w"], [100.0, 200.0] * 3)
    np.testing.assert_array_equal(s["slo_attainment"], [2.0 / 3] * 6)  # met / (served + dropped)
    np.testing.assert_array_equal(s["request_rate_per_s"], [0.3] * 6)  # 3 arrived over 10 s


def test_a_booked_step_replaces_only_its_batch_figures() -> None:
    svc = ServiceStep(3, 2, 1, 4, 10.0, 20.0, (0.1, 0.2, 0.3), (0.01, 0.02, 0.03), 2.0, 1.5, 0.2, 0.5, 0.4)
    # Every field a distinct value, so a field copied into the wrong place would show.
    w = WorkStep(1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7, 8, (svc,), ((1, 2, 3),), 9.0, 0.25)
    assert len(dataclasses.fields(WorkStep)) == 12  # a new field must be carried by ``booked``
    got = w.booked(11.0, 12.0, 13)
    assert got == dataclasses.replace(w, training_flops=11.0, job_flops=12.0, running_jobs=13)
