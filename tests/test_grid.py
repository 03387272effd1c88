"""The grid's view (twin.compose.grid): a gang's sub-step waveform follows its step model, the sub-step
recording keeps the step model's energy, storage conserves energy with its efficiency, and the
power floor costs what a hand calculation says."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pytest

from scenarios.spec import ScenarioError, build_simulation, parse
from tests.conftest import SMALL_TOML
from twin.compose import grid
from twin.spec.params import GridParams

NO_STALL = GridParams(checkpoint_stall_s=0.0)


@dataclass(frozen=True)
class Step:
    """A gang's step as the waveform reads it from its plan [s]."""

    compute_s: float
    step_s: float


def _gang(sc: Step, chips: float = 144.0, mean: float = 0.85, slope: float = 1000.0) -> grid.Gangs:
    period, phases = grid.iteration_profile(sc)
    return grid.Gangs(
        np.array([chips]),
        np.array([mean]),
        np.array([period]),
        np.array([grid.duty_of(phases)]),
        np.array([0.0]),
        np.array([False]),
        np.array([slope]),
        np.array([7], dtype=np.int64),
    )


def _wave(g: grid.Gangs, steps: int, dt: int = 60, gp: GridParams = NO_STALL) -> np.ndarray:
    return np.concatenate([grid.gang_deviation(g, float(k * dt), dt, 1, gp)[0] for k in range(steps)])


def test_a_gangs_waveform_has_the_period_and_duty_of_its_step_model() -> None:
    # Hand calculation: 9 s of compute, 8 s of communication of which half is hidden:
    # step = 9 + 0.5 x 8 = 13 s, compute 9 / 13 of it.
    sc = Step(compute_s=9.0, step_s=9.0 + 0.5 * (5.0 + 3.0))  # 13 s: half of 8 s exposed
    # One step of 780 s = 60 whole iterations (in a step that is not a whole number of
    # iterations, each step's mean sets the levels of that step).
    w = _wave(_gang(sc), steps=1, dt=780)
    # Period: the strongest line of the spectrum is at 1 / 13 Hz.
    spec = np.abs(np.fft.rfft(w - w.mean()))
    f = np.fft.rfftfreq(len(w), 1.0)
    assert np.isclose(f[spec.argmax()], 1 / 13, rtol=0.02)
    # Duty: the waveform's position between its levels over whole periods (bins straddling an
    # edge average the two levels, so the mean is exact).
    duty = (w.mean() - w.min()) / (w.max() - w.min())
    assert np.isclose(duty, 9 / 13, rtol=1e-9)
    # Levels: communication at COMM_ACTIVITY (0.1) would need compute at (0.85 - 4/13 x 0.1) /
    # (9/13) = 1.18 > 1 to keep the mean activity 0.85, so compute runs at 1 and communication at
    # (0.85 - 9/13) / (4/13) = 0.5125; swing = chips x slope x (1 - 0.5125).
    d = 9 / 13
    assert (0.85 - (1 - d) * grid.COMM_ACTIVITY) / d > 1
    assert np.isclose(w.max() - w.min(), 144 * 1000.0 * (1 - (0.85 - d) / (1 - d)), rtol=1e-9)
    # A gang mostly in compute (duty 0.9): communication at COMM_ACTIVITY, compute at
    # (0.85 - 0.1 COMM_ACTIVITY) / 0.9.
    lo = grid.COMM_ACTIVITY
    w = _wave(_gang(Step(9.0, 10.0)), steps=1, dt=600)
    assert np.isclose(w.max() - w.min(), 144 * 1000.0 * ((0.85 - 0.1 * lo) / 0.9 - lo), rtol=1e-9)


def test_each_step_of_the_waveform_keeps_the_step_models_energy() -> None:
    sc = Step(compute_s=5.3, step_s=5.3 + 0.7 * (2.9 + 1.7))  # 8.52 s: not a divisor of 60
    g = _gang(sc)
    gp = GridParams(checkpoint_stall_s=25.0)
    g = dataclasses.replace(g, ckpt=np.array([True]))
    for k in range(5):
        dev, floor = grid.gang_deviation(g, 60.0 * k, 60, 1, gp)
        assert abs(dev.mean()) < 1e-9 * 144 * 1000 and not floor.any()
    # The stall is a dip at the step's end (synchronised), inside the step's energy.
    dev, _ = grid.gang_deviation(g, 0.0, 60, 1, gp)
    assert dev[-25:].max() < dev[:30].max()


def test_the_recording_leaves_the_step_energy_unchanged() -> None:
    base = SMALL_TOML.replace("duration_h = 6", "duration_h = 3", 1)
    rec = base + "\n[telemetry]\ngrid_interval_s = 5\n"
    _, a = build_simulation(parse(base, "a.toml"))
    _, b = build_simulation(parse(rec, "b.toml"))
    fa, fb = a.advance(180), b.advance(180)
    assert "grid_ts" not in fa
    # Every factory_ts column (energy, cost, CO2, power) to the last bit.
    assert fa["factory_ts"].keys() == fb["factory_ts"].keys()
    for col, v in fa["factory_ts"].items():
        assert np.array_equal(v, fb["factory_ts"][col], equal_nan=True), col
    g = fb["grid_ts"]
    hall = g["p_w"][g["hall_id"] == 0].reshape(180, 12)
    assert np.allclose(hall.mean(axis=1), fb["factory_ts"]["facility_power_w"], rtol=1e-12)
    # No storage: the connection draws what the hall does.
    assert np.allclose(g["p_w"][g["hall_id"] == -1], g["p_w"][g["hall_id"] == 0], rtol=1e-12)


def test_storage_conserves_energy_with_its_round_trip_efficiency() -> None:
    rng = np.random.default_rng(3)
    load = 1e6 + 3e5 * np.sign(np.sin(np.arange(3000) * 2 * np.pi / 11)) + 5e4 * rng.standard_normal(3000)
    eta, e0 = 0.81, 2e6
    r = grid.storage(load, 1.0, 4e6, 2e5, eta, 60.0)
    charge = np.maximum(r.grid_w - load, 0.0)  # drawn into the store [W]
    discharge = np.maximum(load - r.grid_w, 0.0)  # delivered by it
    # Half of the round-trip loss each way: sqrt(0.81) = 0.9.
    gained = (0.9 * charge - discharge / 0.9).sum()
    assert np.isclose(r.soc_j[-1] - e0, gained, rtol=1e-9)
    assert np.isclose(r.grid_w.sum() - load.sum(), r.soc_j[-1] - e0 + r.loss_j, rtol=1e-9)
    assert (r.soc_j >= -1e-6).all() and (r.soc_j <= 4e6 + 1e-6).all()
    assert np.abs(r.grid_w - load).max() <= 2e5 * (1 + 1e-12)
    # It smooths: the swing between intervals falls.
    assert np.abs(np.diff(r.grid_w)).max() < np.abs(np.diff(load)).max()


def test_the_power_floor_costs_the_hand_calculated_energy() -> None:
    sc = Step(compute_s=9.0, step_s=13.0)  # duty 9/13
    g = _gang(sc)
    gp = dataclasses.replace(NO_STALL, power_floor=0.6)
    floors = [grid.gang_deviation(g, 60.0 * k, 60, 1, gp)[1] for k in range(13)]
    e = sum(f.sum() for f in floors)  # J over 780 s
    d = 9 / 13
    lo = (0.85 - d) / (1 - d)  # compute at 1 (test above)
    # Communication (4 s of every 13) raised from lo to 0.6 x 1, on 144 chips at 1000 W per unit.
    assert np.isclose(e, 144 * 1000.0 * (0.6 - lo) * (1 - d) * 780, rtol=1e-9)
    # A floor below the communication phase's activity costs nothing.
    low = dataclasses.replace(NO_STALL, power_floor=0.5)
    assert not grid.gang_deviation(g, 0.0, 60, 1, low)[1].any()


def test_band_energies_sum_to_the_variance_and_find_the_line() -> None:
    t = np.arange(4000.0)
    x = 5.0 + 2.0 * np.sin(2 * np.pi * 0.05 * t)  # a 0.05 Hz line of amplitude 2: variance 2
    b = grid.band_energies(x, 1.0)
    assert np.isclose(b["0_01_0_1hz"], 2.0, rtol=1e-3)
    assert b["gt_1hz"] is None  # above the Nyquist frequency of 1 s samples
    assert np.isclose(sum(v for v in b.values() if v is not None), x.var(), rtol=1e-9)


def test_a_campus_records_each_hall_and_the_connection_after_its_battery() -> None:
    text = 'name = "c"\nseed = 11\ndt_s = 60\nduration_h = 1\nservices = []\n\n'
    for n in (2, 4):
        text += f'[[halls]]\nsystem = "trn3-gen2"\nultraservers = {n}\nultraservers_per_row = 2\n\n'
    text += "[training]\narrivals_per_day = 200\n\n[telemetry]\ngrid_interval_s = 10\n\n"
    battery = "[grid]\nbattery_power_w = 20000.0\nbattery_energy_j = 3.6e6\nbattery_efficiency = 0.81\n"
    _, plain = build_simulation(parse(text, "c.toml"))
    _, stored = build_simulation(parse(text + battery, "b.toml"))
    fp, fs = plain.advance(60), stored.advance(60)
    g = fp["grid_ts"]
    halls = [g["p_w"][g["hall_id"] == k] for k in (0, 1)]
    conn = g["p_w"][g["hall_id"] == -1]
    assert len(conn) == 60 * 6
    assert np.allclose(conn, halls[0] + halls[1], rtol=1e-12)
    # Each step's mean over the halls' rows is the campus's facility power.
    assert np.allclose(conn.reshape(60, 6).mean(axis=1), fp["factory_ts"]["facility_power_w"], rtol=1e-12)
    # The battery: the same load, drawn through storage that ends where its state says.
    gs = fs["grid_ts"]
    assert np.array_equal(gs["p_w"][gs["hall_id"] >= 0], g["p_w"][g["hall_id"] >= 0])
    drawn = gs["p_w"][gs["hall_id"] == -1]
    soc = stored.connection.state["battery"][0]
    gained = (drawn.sum() - conn.sum()) * 10.0 - stored.connection.loss_j
    assert np.isclose(gained, soc - 1.8e6, rtol=1e-9, atol=1e-3)
    assert np.abs(drawn - conn).max() <= 20000.0 * (1 + 1e-12)


def test_an_interval_that_does_not_divide_the_step_is_refused() -> None:
    with pytest.raises(ScenarioError, match=r"telemetry.grid_interval_s: 7 s must divide dt_s = 60 s"):
        parse(SMALL_TOML + "\n[telemetry]\ngrid_interval_s = 7\n", "bad.toml")
