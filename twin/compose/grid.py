"""The grid's view of the site: sub-step power of every training gang, superposed to the halls
and the grid connection, its metrics (peak, ramps, spectrum) and mitigations as what-ifs.

A synchronous training gang's chips move together, so the waveform is computed per gang, not
per chip. Each iteration of a gang is a compute phase and an exposed-communication phase, from
the same step model that sets its MFU (``iteration_profile``, the one place that reads
``twin.work.fabric``): period = step time, duty cycle = compute time / step time. A gang's
step-model activity is itself duty x compute activity + (1 - duty) x ``COMM_ACTIVITY`` (set when
it starts, ``twin.work.queueing.training_activity``), so the two phases sit at those physical levels
and their time-weighted mean is the step's activity (``phase_activities``); the sub-step waveform
only redistributes the step's energy: each
gang's deviation from its step mean is zero-mean over the step (bins averaged exactly, the
iteration clipped by the step's ends), and the hall's waveform is its recorded facility power
plus the summed deviations through the power chain's marginal factor (the plant held at the
step's value). Energy at the grid connection is therefore the step model's to floating point,
with or without the sub-step recording.

What-ifs (``GridParams``): a software power floor (chips kept busy during communication: their
low phases raised to a fraction of the compute activity, which costs energy), checkpoint stalls
synchronised at the step's end or staggered through it, and energy storage at the connection
(rack power-shelf storage, a site battery: ``storage``). Pure functions except ``GridRecorder``,
the hall's small state for the recording.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from twin.physics import power
from twin.spec.params import COMM_ACTIVITY, KIND_NAMES, GridParams
from twin.work import fabric, serving, workload
from twin.work.jobs import INFERENCE

FloatArray = npt.NDArray[np.float64]

# Energy storage of a rack's power shelves per accelerator. OFF-2: NVIDIA, "How New GB300 NVL72
# Features Provide Steady Power for AI" (developer blog, 2025): the power supplies store energy
# to smooth the load and cut peak grid demand by up to 30 %; the per-GPU figure (65 J) is ASM
# read from that description, not a datasheet value.
RACK_STORAGE_J_PER_CHIP = 65.0
# Frequency bands a utility reads a load's oscillation in [Hz]: < 0.01 Hz (minutes and longer:
# ramping, automatic generation control), 0.01-0.1 Hz (governor and turbine response), 0.1-1 Hz
# (inter-area electromechanical modes, 0.1-0.7 Hz: Kundur, "Power System Stability and Control",
# 1994, ch. 12; transmission-line critical frequencies < 1 Hz), > 1 Hz (closely coupled sources
# 1-2.5 Hz, turbine-generator shaft torsional modes 7-100+ Hz). 3P: Choukse et al. 2025 (arXiv
# 2508.14318): production training swings concentrate at 0.2-3 Hz; utilities' critical range
# e.g. 0.1-20 Hz. A band above the sampling's Nyquist frequency (1 s samples: 0.5 Hz) is not seen.
BANDS_HZ: tuple[tuple[float, float], ...] = ((0.0, 0.01), (0.01, 0.1), (0.1, 1.0), (1.0, math.inf))
BAND_NAMES = ("lt_0_01hz", "0_01_0_1hz", "0_1_1hz", "gt_1hz")


# ---------------------------------------------------------------------- one gang's iteration
class StepParts(Protocol):
    """What the waveform needs of a gang's step: its busy compute and its whole length [s]
    (``twin.work.fabric.Plan``)."""

    @property
    def compute_s(self) -> float: ...

    @property
    def step_s(self) -> float: ...


def iteration_profile(sc: StepParts) -> tuple[float, tuple[tuple[float, str], ...]]:
    """One iteration of a gang from its parallelism plan: (period_s, ((duration_s, activity),
    ...)), activity "compute" or "comm". The plan's busy compute (overlapped communication
    hides under it), then the rest of the step: exposed tensor-, pipeline- and data-parallel
    communication and the pipeline bubble, where the chips wait. This is the one adapter from the
    step model to the waveform."""
    exposed = max(0.0, sc.step_s - sc.compute_s)
    return sc.step_s, ((sc.compute_s, "compute"), (exposed, "comm"))


def duty_of(phases: tuple[tuple[float, str], ...]) -> float:
    """Share of an iteration in compute [-]."""
    total = sum(d for d, _ in phases)
    return sum(d for d, a in phases if a == "compute") / total if total > 0 else 1.0


def phase_activities(
    mean: FloatArray, duty: FloatArray, compute: float | None = None
) -> tuple[FloatArray, FloatArray]:
    """(compute, communication) activity of gangs whose step-model activity is ``mean`` and
    whose iteration is ``duty`` compute. A gang whose mean is duty x ``compute`` + (1 - duty) x
    ``COMM_ACTIVITY`` (a training gang from its plan, ``compute`` = the training compute
    activity) gets those two levels exactly. Otherwise (another mean, or no ``compute`` given):
    communication at ``COMM_ACTIVITY`` (at most the mean) and compute at what keeps the
    time-weighted mean; where that would exceed 1, compute at 1 and communication at what keeps
    the mean."""
    d = np.clip(duty, 1e-9, 1.0)
    lo = np.minimum(mean, COMM_ACTIVITY)
    hi = (mean - (1.0 - d) * lo) / d
    over = hi > 1.0
    hi = np.where(over, 1.0, hi)
    lo = np.where(over, (mean - d) / np.maximum(1.0 - d, 1e-12), lo)
    if compute is not None:
        rule = np.abs(d * compute + (1.0 - d) * COMM_ACTIVITY - mean) <= 1e-9
        hi = np.where(rule, compute, hi)
        lo = np.where(rule, COMM_ACTIVITY, lo)
    return hi, lo


def compute_fraction(
    t0: float, tau: float, n: int, period: FloatArray, duty: FloatArray, phase: FloatArray
) -> FloatArray:
    """Share of each of ``n`` bins of width ``tau`` from ``t0`` that each gang spends in its
    compute phase (gangs x bins): the integral of the square wave (compute first in each
    iteration, iterations starting at ``phase`` + k ``period``) over each bin, exactly."""
    edges = t0 + tau * np.arange(n + 1, dtype=np.float64)
    T = period[:, None]
    x = edges[None, :] - phase[:, None]
    k = np.floor(x / T)
    on = k * duty[:, None] * T + np.minimum(x - k * T, duty[:, None] * T)
    out: FloatArray = np.diff(on, axis=1) / tau
    return out


@dataclass(frozen=True)
class Gangs:
    """The training gangs of a pool in one step (arrays over gangs)."""

    chips: FloatArray  # chips of each gang
    mean: FloatArray  # step-model activity [-]
    period: FloatArray  # iteration period [s]
    duty: FloatArray  # compute share of an iteration [-]
    phase: FloatArray  # start of an iteration [s]
    ckpt: npt.NDArray[np.bool_]  # checkpoints in this step
    slope_w: FloatArray  # rack-input IT power per chip per unit of activity [W]
    key: npt.NDArray[np.int64]  # job id (stagger offsets)
    compute: float | None = None  # chip activity of busy compute (training.compute_activity) [-]


def gang_deviation(g: Gangs, t0: float, dt: int, tau: int, gp: GridParams) -> tuple[FloatArray, FloatArray]:
    """(deviation, floor) per bin of the step [W rack-input IT]: the gangs' summed zero-mean
    deviation from their step-model power, and the power floor's extra power (0 without one)."""
    n = dt // tau
    if len(g.chips) == 0:
        z = np.zeros(n)
        return z, z.copy()
    c = compute_fraction(t0, tau, n, g.period, g.duty, g.phase)
    stall = gp.checkpoint_stall_s
    if stall > 0 and g.ckpt.any():
        s = min(float(stall), float(dt))
        if gp.checkpoint_stagger:  # each gang's stall at its own place in the step
            start = (g.key * 0.6180339887498949 % 1.0) * (dt - s)
        else:  # every gang's stall at the step's end, when its checkpoint is booked
            start = np.full(len(g.key), dt - s, dtype=np.float64)
        edges = tau * np.arange(n + 1, dtype=np.float64)
        lo_e = np.clip(edges[None, :-1], start[:, None], (start + s)[:, None])
        hi_e = np.clip(edges[None, 1:], start[:, None], (start + s)[:, None])
        frac = (hi_e - lo_e) / tau
        c = c * (1.0 - np.where(g.ckpt[:, None], frac, 0.0))
    hi, lo = phase_activities(g.mean, g.duty, g.compute)
    act = lo[:, None] + (hi - lo)[:, None] * c
    w = (g.chips * g.slope_w)[:, None]
    dev = (act - act.mean(axis=1, keepdims=True)) * w
    floor = np.zeros(n)
    if gp.power_floor > 0:
        raised = np.maximum(lo, gp.power_floor * hi)
        floor = ((raised - lo)[:, None] * (1.0 - c) * w).sum(axis=0)
    return dev.sum(axis=0), floor


# ---------------------------------------------------------------------- a pool's gangs
def activity_slope_w(pool: Any, clock: FloatArray) -> FloatArray:
    """Rack-input IT power per chip per unit of activity at each chip's ``clock`` [W]: the
    chip's dynamic range at that clock (``twin.physics.power``) and its host's share, through the rack
    rectifier (nominal chip: power factor 1)."""
    acc, sysm, pp = pool.acc, pool.sys, pool.p.power
    chip = (acc.tdp_w - acc.idle_w) * power.dvfs_power_factor(clock, pool.p.cooling.dvfs_exponent)
    host = sysm.host_w_per_server * sysm.servers * (1.0 - sysm.host_idle_fraction) / sysm.chips
    out: FloatArray = (np.asarray(chip, dtype=np.float64) + host) / pp.psu_efficiency
    return out


def pool_gangs(pool: Any, t: int, dt: int, clock: FloatArray, cache: dict[str, Any]) -> Gangs:
    """The batch gangs running on ``pool`` in the step [t, t + dt) after its work was booked;
    a gang restarting has no iterations (steady at its restart activity). ``cache``: each job
    slot's (id, start, period, duty), kept from step to step (a profile is computed once per
    placement)."""
    w = pool.cluster
    a = w.jobs.a
    run = w.running.array(w.jobs)
    if len(run):
        run = run[(a["kind"][run] != INFERENCE) & (a["activity"][run] > 0) & (a["restart_until"][run] <= t)]
    n = len(run)
    size = len(a["id"])
    if cache.get("size", 0) < size:  # the job table grew: grow the cache with it
        old = cache.get("size", 0)
        for k, fill in (("id", -1), ("start", -1), ("period", 1.0), ("duty", 1.0)):
            arr = np.full(size, fill, dtype=np.int64 if k in ("id", "start") else np.float64)
            if old:
                arr[:old] = cache[k]
            cache[k] = arr
        cache["size"] = size
    ids = a["id"][run].astype(np.int64)
    stale = run[(cache["id"][run] != ids) | (cache["start"][run] != a["start"][run])]
    for j in stale.tolist():
        cache["period"][j], cache["duty"][j] = _profile(w, j)
        cache["id"][j], cache["start"][j] = a["id"][j], a["start"][j]
    period, duty = cache["period"][run], cache["duty"][run]
    # The gang's clock: its slowest chip's (as its progress).
    gclock = serving.job_clock(w.pool, run, clock) if n and clock.min() < 1.0 else np.ones(n)
    return Gangs(
        a["chips"][run].astype(np.float64),
        a["activity"][run].astype(np.float64),
        period,
        duty,
        (ids * 0.7548776662466927 % 1.0) * period,
        a["ckpt_time"][run] == t + dt,
        activity_slope_w(pool, gclock),
        ids,
        w.p.training.compute_activity,
    )


def _profile(w: Any, j: int) -> tuple[float, float]:
    """(period_s, duty) of job ``j`` from its step model; (1, 1) (no iterations to see) for a
    model without an architecture or a single chip."""
    a, jobs = w.jobs.a, w.jobs
    model = w.models.get(jobs.names[j])
    chips = int(a["chips"][j])
    if model is None or chips <= 1 or a["mfu_base"][j] <= 0:
        return 1.0, 1.0
    sc = fabric.plan(
        model,
        workload.FLOP_PER_PARAM_TOKEN[KIND_NAMES[int(a["kind"][j])]],
        chips,
        max(1, int(a["spanned"][j])),
        w.acc.peak(jobs.precision[j]),
        float(a["mfu_base"][j]),
        w.p.hall.system,
        w.p.training,
    )
    period, phases = iteration_profile(sc)
    return (period, duty_of(phases)) if period > 0 else (1.0, 1.0)


def marginal_factor(it_w: float, cooling_w: float, ups_rating_w: float, pp: Any) -> float:
    """Facility watts per rack-input IT watt at the step's point (the chain's losses linearised,
    the plant held) [-]."""
    d = max(1.0, 1e-6 * it_w)
    lo = power.chain_losses(it_w, cooling_w, ups_rating_w, pp).total_w
    hi = power.chain_losses(it_w + d, cooling_w, ups_rating_w, pp).total_w
    return 1.0 + (hi - lo) / d


@dataclass
class GridRecorder:
    """A hall's sub-step recording: per step, its facility power in bins of ``tau`` seconds."""

    tau: int
    gp: GridParams
    caches: dict[int, dict[str, Any]] = field(default_factory=dict)  # per pool (``pool_gangs``)
    rows: list[FloatArray] = field(default_factory=list)
    floor_j: float = 0.0  # the power floor's energy so far [J]

    def step(
        self, pools: list[Any], clocks: list[FloatArray], t: int, dt: int, facility_w: float, factor: float
    ) -> None:
        n = dt // self.tau
        dev, floor = np.zeros(n), np.zeros(n)
        for k, (pl, clock) in enumerate(zip(pools, clocks, strict=True)):
            g = pool_gangs(pl, t, dt, clock, self.caches.setdefault(k, {}))
            d, f = gang_deviation(g, float(t), dt, self.tau, self.gp)
            dev += d
            floor += f
        wave = facility_w + factor * (dev - dev.mean() + floor)
        self.floor_j += float(factor * floor.sum()) * self.tau
        self.rows.append(wave)

    def take(self, t0: int, ran: int) -> dict[str, Any]:
        """The bins of the ``ran`` steps recorded since ``t0`` (and forget them)."""
        rows, self.rows = self.rows[:ran], []
        p = np.concatenate(rows) if rows else np.zeros(0)
        return {"time_s": t0 + self.tau * np.arange(len(p), dtype=np.int64), "p_w": p}


# ---------------------------------------------------------------------- storage
@dataclass(frozen=True)
class Stored:
    grid_w: FloatArray  # power drawn from the grid [W]
    soc_j: FloatArray  # stored energy after each interval [J]
    loss_j: float  # conversion losses [J]
    avg_w: float  # the moving average at the end (to carry on)


def storage(
    load_w: FloatArray,
    tau: float,
    energy_j: float,
    power_w: float,
    efficiency: float,
    window_s: float,
    soc0_j: float | None = None,
    avg0_w: float | None = None,
) -> Stored:
    """Energy storage at the connection smoothing ``load_w`` (one value per ``tau`` seconds)
    toward its moving average over ``window_s`` (exponential), within its power and energy
    ratings, steering back to half full (``soc0_j``, ``avg0_w``: where an earlier call ended;
    None: half full, the first load). Round-trip ``efficiency`` is split evenly between charging
    and discharging: grid energy = load energy + losses + stored energy gained."""
    n = len(load_w)
    grid = np.array(load_w, dtype=np.float64)
    s = energy_j / 2 if soc0_j is None else soc0_j
    soc = np.full(n, s)
    avg = float(load_w[0]) if avg0_w is None and n else (avg0_w or 0.0)
    if energy_j <= 0 or power_w <= 0 or n == 0:
        return Stored(grid, soc, 0.0, avg)
    e = math.sqrt(efficiency)
    alpha = min(1.0, tau / max(window_s, tau))
    half, steer = energy_j / 2, max(window_s, tau)
    loss = 0.0
    for k in range(n):
        p = float(load_w[k])
        avg += alpha * (p - avg)
        want = p - avg + (s - half) / steer  # > 0: discharge
        if want > 0:
            d = min(want, power_w, s * e / tau)
            s -= d / e * tau
            loss += d * (1 / e - 1) * tau
            grid[k] = p - d
        else:
            c = min(-want, power_w, (energy_j - s) / (e * tau))
            s += c * e * tau
            loss += c * (1 - e) * tau
            grid[k] = p + c
        soc[k] = s
    return Stored(grid, soc, loss, avg)


@dataclass
class Connection:
    """The grid connection's storage (rack power shelves summed over ``chips``, a site battery:
    ``GridParams``) with its state carried from one advance to the next."""

    gp: GridParams
    chips: int
    tau: int
    state: dict[str, tuple[float, float]] = field(default_factory=dict)
    loss_j: float = 0.0

    def stores(self) -> list[tuple[str, float, float, float, float]]:
        gp, out = self.gp, []
        if gp.rack_storage_j_per_chip > 0:
            e = gp.rack_storage_j_per_chip * self.chips
            out.append(("rack", e, math.inf, gp.rack_storage_efficiency, gp.rack_storage_window_s))
        if gp.battery_energy_j > 0 and gp.battery_power_w > 0:
            out.append(
                (
                    "battery",
                    gp.battery_energy_j,
                    gp.battery_power_w,
                    gp.battery_efficiency,
                    gp.battery_window_s,
                )
            )
        return out

    def apply(self, load_w: FloatArray) -> FloatArray:
        """The power drawn from the grid for ``load_w``."""
        out = np.asarray(load_w, dtype=np.float64)
        if len(out) == 0:
            return out
        for name, e, pw, eff, win in self.stores():
            soc0, avg0 = self.state.get(name, (None, None))
            r = storage(out, self.tau, e, pw, eff, win, soc0, avg0)
            self.state[name] = (float(r.soc_j[-1]), r.avg_w)
            self.loss_j += r.loss_j
            out = r.grid_w
        return out


def connection_rows(halls: list[dict[str, Any]], conn: Connection) -> dict[str, Any]:
    """``grid_ts`` of an advance: each hall's rows (``halls``: their ``GridRecorder.take``, the
    same times) and the connection's (hall_id -1): the halls' sum after the connection's storage."""
    times = halls[0]["time_s"]
    load = np.sum([h["p_w"] for h in halls], axis=0) if halls else np.zeros(0)
    grid = conn.apply(load)
    n = len(times)
    return {
        "time_s": np.concatenate([times] * (len(halls) + 1)),
        "hall_id": np.repeat(np.array([*range(len(halls)), -1], dtype=np.int32), n),
        "p_w": np.concatenate([*(h["p_w"] for h in halls), grid]),
    }


# ---------------------------------------------------------------------- metrics
def spectrum(p_w: FloatArray, tau: float) -> tuple[FloatArray, FloatArray]:
    """(frequency [Hz], variance at it [W^2]) of a power series sampled every ``tau`` seconds:
    the one-sided periodogram of the mean-removed series, which sums to its variance (Parseval)."""
    x = np.asarray(p_w, dtype=np.float64)
    n = len(x)
    spec: FloatArray = np.abs(np.fft.rfft(x - x.mean())) ** 2 / (n * n)
    spec[1:] *= 2.0
    if n % 2 == 0:
        spec[-1] /= 2.0
    f: FloatArray = np.fft.rfftfreq(n, tau).astype(np.float64)
    return f, spec


def band_energies(p_w: FloatArray, tau: float) -> dict[str, float | None]:
    """Variance of the power in each of ``BANDS_HZ`` [W^2] (``spectrum``; the bands sum to the
    variance). A band above the Nyquist frequency 1 / (2 tau) is not observable: None."""
    out: dict[str, float | None] = {}
    if len(p_w) < 2:
        return {k: None for k in BAND_NAMES}
    f, spec = spectrum(p_w, tau)
    nyq = 0.5 / tau
    for name, (lo, hi) in zip(BAND_NAMES, BANDS_HZ, strict=True):
        if lo >= nyq:
            out[name] = None
            continue
        m = (f >= lo) & (f < hi) & (f > 0)
        out[name] = float(spec[m].sum())
    return out


def metrics(p_w: FloatArray, tau: float) -> dict[str, float | None]:
    """Peak, mean, peak-to-average, the largest ramp (between intervals [W/s]; over a minute
    [W/min]: the largest change of the one-minute means) and the band variances of a power
    series sampled every ``tau`` seconds."""
    x = np.asarray(p_w, dtype=np.float64)
    if len(x) == 0:
        return {}
    mean = float(x.mean())
    ramp_s = float(np.abs(np.diff(x)).max()) / tau if len(x) > 1 else 0.0
    per_min = max(1, int(round(60.0 / tau)))
    m = len(x) // per_min
    mins = x[: m * per_min].reshape(m, per_min).mean(axis=1) if m else x[:0]
    ramp_min = float(np.abs(np.diff(mins)).max()) if m > 1 else 0.0
    if tau > 60.0:  # samples longer than a minute: their largest change per minute
        ramp_min = ramp_s * 60.0
    out: dict[str, float | None] = {
        "peak_w": float(x.max()),
        "mean_w": mean,
        "peak_to_average": float(x.max()) / mean if mean > 0 else None,
        "swing_w": float(x.max() - x.min()),
        "ramp_w_per_s": ramp_s,
        "ramp_w_per_min": ramp_min,
    }
    for k, v in band_energies(x, tau).items():
        out["band_" + k + "_w2"] = v
    return out


__all__ = [
    "BANDS_HZ",
    "BAND_NAMES",
    "COMM_ACTIVITY",
    "RACK_STORAGE_J_PER_CHIP",
    "Connection",
    "Gangs",
    "GridRecorder",
    "Stored",
    "band_energies",
    "compute_fraction",
    "connection_rows",
    "gang_deviation",
    "iteration_profile",
    "marginal_factor",
    "metrics",
    "phase_activities",
    "spectrum",
    "storage",
]
