"""What ``bench/bench_scale.py`` measures inside a case's child process: the calibration, the
storage paths on the case's own frames, and the CPU per model phase (``--profile``).

Nothing here imports the twin at module level: the child imports the revision under test first
(``--rev``), and every model attribute is looked up when measured, so a revision that lacks one
is reported, not crashed on.
"""

from __future__ import annotations

import contextlib
import math
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

# ------------------------------------------------------------------------------- calibration
CALIBRATION_PASSES = 20  # np.multiply passes over the chips per step
CALIBRATION_BUDGET_S = 5.0  # longer than this: time a part of the steps and scale linearly
CALIBRATION_SAMPLE_S = 2.0  # CPU-s the part is sized to
CALIBRATION_MIN_S = 1.0  # shorter than this: every step timed several times, the mean taken
CALIBRATION_MAX_REPEATS = 15
CALIBRATION = (
    f"calibration = CPU-s of {CALIBRATION_PASSES} in-place NumPy passes over the case's chips per step, "
    "for the case's steps (float64 a, b of one value per chip, 64-byte aligned; per step "
    f"{CALIBRATION_PASSES} x np.multiply(a, b, out=a)), in the case's own process, timed in slices "
    "between the model's advances so both see the same load"
)


def yardstick_arrays(n: int) -> tuple[np.ndarray, np.ndarray]:
    """The calibration's ``a`` (ones) and ``b`` (a hair above 1) of ``n`` float64, laid out the
    same way in every process: each 64-byte aligned, ``b`` 64 bytes past a 4 KiB boundary from
    ``a`` (a load of ``b[i]`` shares its address bits below 4 KiB with the store to ``a[i + 8]``,
    not yet made, or to ``a[i - 504]``, long done). Where ``malloc`` happened to put them decided
    a small case's yardstick: at 9,216 chips (arrays in the core's caches) one pass took 1.1 us
    with ``a`` 32-byte aligned and up to 3.0 us with it off that and ``b`` a multiple of 4 KiB
    from it (its loads waiting on ``a``'s stores: 4K aliasing). In fresh processes, 20 passes a
    step: 2.4 or 3.2-4.4 ns a chip-step by the layout malloc gave; laid out here, 2.3-2.5 (an
    outlier in four, as any process on these machines). At 144,000 and 1 M chips (memory-bound)
    the layout moves a pass by 5-8 %."""
    nbytes = n * 8
    gap = -(-nbytes // 4096) * 4096 + 64
    raw = np.empty(gap + nbytes + 64, dtype=np.uint8)
    at = -raw.ctypes.data % 64
    a = raw[at : at + nbytes].view(np.float64)
    b = raw[at + gap : at + gap + nbytes].view(np.float64)
    a[:] = 1.0
    b[:] = 1.0 + 2.0**-30
    return a, b


class Calibration:
    """The calibration of a case of ``chips`` chips and ``steps`` steps (``CALIBRATION``).

    ``after(n)`` after each advance of ``n`` model steps times the calibration's ``n`` steps
    there, so the model and its yardstick run under the same load (a shared machine's CPU-s
    move with it). ``b`` holds one constant a hair above 1, so ``a`` stays finite and normal
    over any number of steps. The whole count estimated (a probe of 10 steps) longer than
    ``CALIBRATION_BUDGET_S``: a share of each slice is timed (~``CALIBRATION_SAMPLE_S`` in all)
    and the figure scaled linearly to all ``steps``; shorter than ``CALIBRATION_MIN_S``: each
    slice is timed several times (up to ``CALIBRATION_MAX_REPEATS``) and the mean taken.
    ``clock``: ``time.process_time``, or ``time.thread_time`` where other threads (the writer's)
    run at the same time. ``spent_s``: the CPU the calibration used (to take out of the
    process's figure)."""

    def __init__(self, chips: int, steps: int, clock: Callable[[], float] = time.process_time) -> None:
        self.clock = clock
        c0 = clock()
        self.steps = steps
        self.a, self.b = yardstick_arrays(chips)
        probe = min(steps, 10)
        self.cpu, self.timed = self._run(probe), probe
        full = max(self.cpu / probe, 1e-9) * steps
        if full > CALIBRATION_BUDGET_S:
            self.share = CALIBRATION_SAMPLE_S / full
        elif full < CALIBRATION_MIN_S:
            self.share = min(CALIBRATION_MAX_REPEATS, CALIBRATION_MIN_S / full)
        else:
            self.share = 1.0
        self.owed = 0.0
        self.spent_s = clock() - c0

    def _run(self, n: int) -> float:
        a, b, mul, clock = self.a, self.b, np.multiply, self.clock
        c0 = clock()
        for _ in range(n):
            for _ in range(CALIBRATION_PASSES):
                mul(a, b, out=a)
        return clock() - c0

    def after(self, n: int) -> None:
        """The calibration's slice for ``n`` model steps just run."""
        self.owed += n * self.share
        k = int(self.owed)
        if k:
            c = self._run(k)
            self.cpu, self.timed, self.owed, self.spent_s = (
                self.cpu + c,
                self.timed + k,
                self.owed - k,
                self.spent_s + c,
            )

    def result(self) -> dict[str, Any]:
        if not np.isfinite(self.a).all():  # the constant keeps it finite for any realistic count
            raise RuntimeError("calibration array overflowed")
        return {
            "cpu_s": self.cpu * self.steps / self.timed,
            "timed_steps": self.timed,
            "steps": self.steps,
            "spent_s": self.spent_s,
        }


def calibration_note(c: dict[str, Any]) -> str:
    t, n = c["timed_steps"], c["steps"]
    if t < n:
        return f"{t} of {n} steps timed, scaled linearly"
    if t >= 2 * n:
        return f"every step timed {t / n:.1f} times, the mean taken"
    return "all steps timed"


# ------------------------------------------------------------------------------- storage
STORAGE_NOTE = (
    "recorded value = one cell of the model's columns (rows x columns, without run_id and ts); "
    "product = TelemetryWriter + LivePublisher as a run wires them (frames in, to_arrow included); "
    "raw = the same Arrow batches written one DuckDB insert per batch, as Parquet parts "
    "(snappy, zstd) or as Arrow IPC; each path's fewest CPU-s of the repeats"
)


def _writepath(root: str) -> Any:
    """``bench/bench_writepath.py`` (this checkout's), without letting it put this checkout's code
    ahead of ``root``'s on ``sys.path`` (it inserts its own root when imported)."""
    here = str(Path(__file__).resolve().parent)
    if here not in sys.path:
        sys.path.insert(1, here)
    import bench_writepath

    own = str(Path(bench_writepath.__file__).resolve().parent.parent)
    if own != str(Path(root).resolve()):
        while own in sys.path:
            sys.path.remove(own)
    if sys.path[0] != root:
        sys.path.insert(0, root)
    return bench_writepath


def storage(
    frames_list: list[dict[str, dict[str, Any]]], d: Path, root: str, reps: int = 2
) -> dict[str, Any]:
    """CPU and bytes of the product's write path and of each raw path on the same batches.

    Returns ``values`` (recorded values), ``rows`` and per path ``cpu_s``, ``bytes`` (the file
    or folder once closed), ``live`` (the product's live parts before close) or ``error`` (a
    path this revision cannot take, e.g. a writer API that differs). The paths alternate
    ``reps`` times in this process and each keeps its fewest CPU-s."""
    import shutil

    wp = _writepath(root)
    ts = set(wp.TS_TABLES)
    frames_list = [{t: c for t, c in fr.items() if t in ts and c} for fr in frames_list]
    out: dict[str, Any] = {"paths": {}}
    try:
        batches = wp.to_batches(frames_list)
    except Exception as e:
        out["error"] = f"to_arrow failed on this revision: {type(e).__name__}: {e}"
        return out
    values = rows = 0
    for tabs in batches:
        for tb in tabs.values():
            rows += tb.num_rows
            values += tb.num_rows * (tb.num_columns - 2)  # without run_id and ts
    out["values"], out["rows"] = values, rows
    paths: dict[str, Callable[..., dict[str, int]]] = {
        "product": wp.path_writer(True),
        # The product recording one row of each table: its fixed cost per file (creating the file,
        # its schema and views, the run row, the first commit, closing), which a recording pays
        # once however many values it holds.
        "product/empty": lambda b, f, d: wp.path_writer(True)([], [_first_rows(f[0])], d),
        "duckdb/batch": wp.path_duckdb_batch,
        "parquet/snappy": wp.path_parquet("snappy"),
        "parquet/zstd": wp.path_parquet("zstd"),
        "ipc": wp.path_ipc,
    }
    res: dict[str, dict[str, Any]] = {name: {"cpu_s": math.inf} for name in paths}
    for rep in range(reps):
        for name, go in paths.items():
            r = res[name]
            if "error" in r:
                continue
            p = d / f"{rep}-{name.replace('/', '-')}"
            p.mkdir()
            c0 = time.process_time()
            try:
                sizes = go(batches, frames_list, p)
            except Exception as e:
                r["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
                continue
            finally:
                cpu = time.process_time() - c0
                shutil.rmtree(p, ignore_errors=True)
            r["cpu_s"] = min(r["cpu_s"], cpu)
            r["bytes"], r["live"] = sizes["file"], sizes.get("live", 0)
    for r in res.values():
        if "error" in r:
            r.pop("cpu_s", None)
    out["paths"] = res
    return out


def _first_rows(frames: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The first row of each table of one advance's frames."""
    return {t: {k: v[:1] for k, v in cols.items()} for t, cols in frames.items()}


OPENABLE = ("duckdb/batch", "parquet/snappy", "parquet/zstd")


def storage_summary(s: dict[str, Any]) -> dict[str, Any]:
    """The product against the cheapest raw path: ``x_cpu`` (CPU/value), ``x_bytes``
    (bytes/value) and which raw path each is measured against."""
    paths, out = s.get("paths", {}), dict[str, Any]()
    raw = {n: r for n, r in paths.items() if not n.startswith("product") and "error" not in r}
    prod = paths.get("product", {})
    # The target's yardstick: the cheapest raw write a recording could be (one file or folder that
    # DuckDB 1.x and 2.x, polars and pandas all open). Arrow IPC files are not: DuckDB reads them
    # only through its community ``arrow`` extension, which cannot be installed at run time.
    openable = {n: r for n, r in raw.items() if n in OPENABLE}
    if openable and prod and "error" not in prod:
        cheap = min(openable, key=lambda n: openable[n]["cpu_s"])
        small = min(raw, key=lambda n: raw[n]["bytes"])
        out.update(
            x_cpu=prod["cpu_s"] / raw[cheap]["cpu_s"],
            cheapest=cheap,
            x_bytes=prod["bytes"] / raw[small]["bytes"],
            smallest=small,
        )
        empty = paths.get("product/empty", {})
        if "cpu_s" in empty and s.get("values"):
            # Per recorded value at the margin: the fixed cost per file taken out (the sample holds
            # a few million values; a whole run, many more). ``fixed_cpu_s`` is printed beside it.
            out.update(
                fixed_cpu_s=empty["cpu_s"],
                x_cpu_net=(prod["cpu_s"] - empty["cpu_s"]) / raw[cheap]["cpu_s"],
            )
    return out


def storage_over_run(s: dict[str, Any], st: dict[str, Any], run_values: int) -> float | None:
    """The product's CPU per value over the case's whole run (its fixed cost per file spread over
    all the run's recorded values, its cost at the margin for each) against the cheapest raw
    write's per value: what recording the run costs per value, as the target asks."""
    if "x_cpu_net" not in s or not run_values or not st.get("values"):
        return None
    cheap = st["paths"][s["cheapest"]]["cpu_s"] / st["values"]
    net = (st["paths"]["product"]["cpu_s"] - s["fixed_cpu_s"]) / st["values"]
    return float((net + s["fixed_cpu_s"] / run_values) / cheap)


# ------------------------------------------------------------------------------- model phases
# (label, where, attribute): ``where`` names the object the hall steps it through (a module of
# twin, the hall, a pool, its facility, cluster, racks or trips). The nested ones (label
# starting with spaces) run inside the phase above them. Older revisions: what they have.
PHASES: tuple[tuple[str, str, str], ...] = (
    ("1 events", "hall", "_apply"),
    ("2 work (Pool.work)", "pool", "work"),
    ("    Cluster.prepare", "cluster", "prepare"),
    ("    Cluster.step (older revisions)", "cluster", "step"),
    ("      failures (outages.random_failures)", "twin.work.outages", "random_failures"),
    ("      arrivals (arrivals.arrivals)", "twin.work.arrivals", "arrivals"),
    ("      requests (serving.autoscale)", "twin.work.serving", "autoscale"),
    ("      services (serving.serve)", "twin.work.serving", "serve"),
    ("3 site (SiteModel.step)", "site", "step"),
    ("4 work rates (Pool.utilisation)", "pool", "utilisation"),
    ("4 chips, loops (Facility.step_it)", "facility", "step_it"),
    ("    chip/IT power (_it_power)", "facility", "_it_power"),
    ("    cap in step (capping.within_step)", "twin.physics.capping", "within_step"),
    ("    rack loops (Racks.step)", "racks", "step"),
    ("    loop trips (Trips.loop_trips)", "trips", "loop_trips"),
    ("4b work booked (Pool.book)", "pool", "book"),
    ("4c plant (plant.run)", "twin.physics.plant", "run"),
    ("4d power chain (power.chain_losses)", "twin.physics.power", "chain_losses"),
    ("4e next clocks (Facility.finish_step)", "facility", "finish_step"),
    ("    capping.next_clock", "twin.physics.capping", "next_clock"),
    ("    step record (steps.record)", "twin.physics.steps", "record"),
    ("4f grid waveform (GridRecorder.step)", "grid", "step"),
    ("5 trips to work (Pool.after_physics)", "pool", "after_physics"),
    ("6 record (Pool.record)", "pool", "record"),
    ("    site, cost rows (_record_site)", "pool", "_record_site"),
    ("    workload, service rows (_record_work)", "pool", "_record_work"),
    ("    chip samples (_record_chips)", "pool", "_record_chips"),
    ("7 buffers (Hall.begin)", "hall", "begin"),
    ("7 frames (Hall.end)", "hall", "end"),
    ("7 campus frames (Campus._merge)", "campus", "_merge"),
)
# The phases that carry state from one step to the next through a non-linear or integer update
# (weather anomalies, request queues and the autoscaler's estimate, rack-loop and plant
# temperatures, the clocks a step hands the next): a pass over several steps that gives the same
# results as stepping one by one still runs these once a step, in order.
RECURRENCES: tuple[str, ...] = (
    "3 site (SiteModel.step)",
    "      requests (serving.autoscale)",
    "      services (serving.serve)",
    "    rack loops (Racks.step)",
    "4c plant (plant.run)",
    "    capping.next_clock",
)
# Phases a model may well not have (no grid recording, a single hall, an older or newer revision).
OPTIONAL = frozenset({("grid", "step"), ("cluster", "step"), ("campus", "_merge"), ("pool", "_record_site")})


def _objects(sim: Any, where: str) -> list[Any]:
    """Every object of kind ``where`` in the simulation (a campus: every hall's)."""
    import importlib

    if where.startswith("twin."):
        try:
            return [importlib.import_module(where)]
        except ImportError:
            return []
    if where == "campus":
        return [sim] if getattr(sim, "halls", None) else []
    halls = list(getattr(sim, "halls", None) or [sim])
    if where == "hall":
        return halls
    if where == "site":
        return [h.site for h in halls if hasattr(h, "site")]
    if where == "grid":
        return [h.grid for h in halls if getattr(h, "grid", None) is not None]
    pools = [pl for h in halls for pl in (getattr(h, "pools", None) or [])]
    if where == "pool":
        return pools
    if where in ("cluster", "facility"):
        return [getattr(pl, where) for pl in pools if hasattr(pl, where)]
    facs = [pl.facility for pl in pools if hasattr(pl, "facility")]
    return [getattr(f, where) for f in facs if hasattr(f, where)]


@dataclass
class Timers:
    """CPU-s per phase label; ``outer``: CPU-s inside any timed phase not itself inside another
    (the rest of a step is the total less this); ``notes``: phases this revision lacks."""

    cpu: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    outer: float = 0.0
    notes: list[str] = field(default_factory=list)


@contextlib.contextmanager
def phase_timers(sim: Any) -> Iterator[Timers]:
    """Timers around the model's phase functions (``PHASES``) for the duration of the block.
    Restores every function afterwards."""
    tm = Timers()
    cpu = tm.cpu
    depth = [0]
    undo: list[Callable[[], None]] = []

    def wrap(obj: Any, name: str, label: str) -> None:
        f = getattr(obj, name)
        clock = time.process_time

        def w(*a: Any, **k: Any) -> Any:
            c = clock()
            depth[0] += 1
            try:
                return f(*a, **k)
            finally:
                depth[0] -= 1
                dt = clock() - c
                cpu[label] += dt
                if depth[0] == 0:
                    tm.outer += dt

        own = name in getattr(obj, "__dict__", {})  # a module's function, or an instance's own
        setattr(obj, name, w)

        def restore() -> None:
            if own:
                setattr(obj, name, f)
            else:  # the class's method shows through again
                delattr(obj, name)

        undo.append(restore)

    for label, where, name in PHASES:
        objs = [o for o in _objects(sim, where) if callable(getattr(o, name, None))]
        if not objs:
            if (where, name) not in OPTIONAL:
                tm.notes.append(f"{label.strip()}: not in this revision ({where}.{name}), not timed")
            continue
        for o in objs:
            wrap(o, name, label)
    try:
        yield tm
    finally:
        for u in reversed(undo):
            u()
