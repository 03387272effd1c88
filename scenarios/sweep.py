"""Sweeps: one scenario run at many points of a parameter space, on a process pool or on Ray.

A sweep file names a base scenario, the run length, replica seeds and the parameters::

    [sweep]
    scenario = "default"              # built-in name, or a path relative to the sweep file
    hours = 24                        # default: the scenario's duration_h
    seeds = [1, 2, 3]                 # replicas of every point (default: the scenario's seed)
    [sweep.set]                       # fixed overrides applied to every point
    dt_s = 60
    [sweep.grid]                      # full factorial
    "hall.ultraservers" = [8, 16, 32]
    "site.climate" = ["temperate", "hot"]
    [sweep.random]                    # Latin hypercube sample of n points (crossed with the grid)
    n = 20
    seed = 0
    "training.arrivals_per_day" = { min = 1000, max = 8000 }   # floats (ints if both bounds are)
    "scheduler.policy" = { choices = ["fifo", "backfill"] }

Every point is validated before any run starts (``validate``: each point's keys, values and run;
the model itself built once for each value a key takes). A point's id is a hash of what defines it (base
scenario text, run length, fixed overrides, its parameters), so a sweep re-invoked on the same
directory skips the points and seeds it has finished (``DIR/points/<id>-s<seed>.json``, written
atomically when a point ends) and ``DIR/results.parquet`` is rebuilt from those files.

A task runs one point with one seed through ``scenarios.runner.run`` and returns its row: the
parameters, every KPI of ``twin compare`` (``storage.kpis``), status, error, wall time and run file.

A sweep has at most ``MAX_POINTS`` (100,000) runs (points x seeds). Its directory is its own:
``DIR/sweep.json`` marks a folder a sweep made (a folder holding anything else is refused unless
``overwrite``; ``/``, a system folder or the home folder never), and ``DIR/sweep.lock`` (locked with
``flock`` for the sweep's life, as ``storage.runlock`` locks a run's file; the kernel drops it
however the sweep ends) refuses a second sweep into the same folder while one runs.

The local backend runs each task in a worker process the sweep started and owns: a worker dies
with the sweep (on Linux the kernel sends it SIGTERM when the sweep's process dies, however it
died) and stays in the sweep's process group. On SIGINT or SIGTERM a sweep hands out no more
work and stops the runs in flight (on either backend): each closes its run file with status
``stopped`` (readable, marked) and its point is recorded ``stopped``; what finished is kept, and
a stopped point runs again when the sweep is resumed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import itertools
import json
import math
import os
import stat
import time
import tomllib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scenarios import overrides, spec
from scenarios.execution import (
    OnResult,
    Task,
    _one_line,
    backend_session,
    check_backend,
    check_ray_address,
    empty_row,
    execute,
    kpi_keys,
)
from scenarios.spec import ScenarioError

MAX_POINTS = 100_000  # runs (points x seeds) per sweep: documented in the module and in --help
MAX_SEEDS = 1000
MAX_VALUES = 10_000
# Columns every row has besides the parameters and the KPIs (the first three, the point's identity,
# lead a row; the parameters and KPIs follow them).
BASE_COLUMNS = (
    "point",
    "point_id",
    "seed",
    "hours",
    "status",
    "error",
    "wall_s",
    "cpu_s",
    "run_file",
    "run_id",
)
# KPIs where a larger value is better (the Pareto front's default direction); all others: smaller.
LARGER_IS_BETTER = {
    "slo_attainment",
    "goodput",
    "tokens",
    "training_eflop",
    "jobs_done",
    "busy_fraction",
    "chips",
    "days",
}
_SWEEP_KEYS = {"scenario", "hours", "seeds", "set", "grid", "random"}


# A hall whose chips were busy less than this share of the run is mostly idle: a plan or sweep that
# sized it answered the range it was given, not the work (the work did not grow with the hall).
IDLE_BUSY = 0.5
SCALE_HINT = (
    "the work does not grow with the hall: state it per chip or as a share of the hall "
    "(--set training.arrivals_per_day= --set training.offered_load=0.9, or training.arrivals_per_chip_day)"
)


def idle_note(busy: float | None) -> str:
    """'' or a note that a run's hall was mostly idle (busy chips below ``IDLE_BUSY``)."""
    if busy is None or busy >= IDLE_BUSY:
        return ""
    return f"the hall is mostly idle (busy chips {busy:.0%}): {SCALE_HINT}"


# ---------------------------------------------------------------------- the sweep file
@dataclass(frozen=True)
class Dimension:
    """A random dimension: a number range (ints when both bounds are ints) or choices."""

    key: str
    low: float | int | None = None
    high: float | int | None = None
    choices: tuple[Any, ...] = ()

    def value(self, u: float) -> Any:
        """The value at quantile u in [0, 1)."""
        if self.choices:
            return self.choices[min(int(u * len(self.choices)), len(self.choices) - 1)]
        assert self.low is not None and self.high is not None
        if isinstance(self.low, int) and isinstance(self.high, int):
            return min(self.low + int(u * (self.high - self.low + 1)), self.high)
        return float(self.low + u * (self.high - self.low))


@dataclass
class Sweep:
    origin: str
    scenario_ref: str
    base: spec.Scenario
    base_text: str
    base_origin: str
    hours: float | None
    seeds: list[int | None]
    fixed: list[tuple[str, Any]] = field(default_factory=list)
    grid: list[tuple[str, list[Any]]] = field(default_factory=list)
    random: list[Dimension] = field(default_factory=list)
    n: int = 0
    sample_seed: int = 0

    @property
    def param_keys(self) -> list[str]:
        return [k for k, _ in self.grid] + [d.key for d in self.random]

    @property
    def duration_s(self) -> int | None:
        return (
            None if self.hours is None else spec.duration_arg(self.hours, None)
        )  # as twin run reads --hours


@dataclass(frozen=True)
class Point:
    index: int
    id: str
    params: dict[str, Any]


def _flatten(table: dict[str, Any], prefix: str, leaf: Callable[[Any], bool]) -> Iterable[tuple[str, Any]]:
    """Dotted keys of a (possibly nested) TOML table: "hall.ultraservers" or [sweep.grid.hall]."""
    for k, v in table.items():
        key = f"{prefix}.{k}" if prefix else k
        if isinstance(v, dict) and not leaf(v):
            yield from _flatten(v, key, leaf)
        else:
            yield key, v


def _number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _dimension(where: str, key: str, v: Any) -> Dimension:
    if isinstance(v, list):
        v = {"choices": v}
    if not isinstance(v, dict):
        raise ScenarioError(f"{where}: expected {{ min = .., max = .. }} or {{ choices = [..] }}")
    extra = sorted(set(v) - {"min", "max", "choices"})
    if extra:
        raise ScenarioError(f"{where}.{extra[0]}: unknown key (use min and max, or choices)")
    if "choices" in v:
        if set(v) != {"choices"}:
            raise ScenarioError(f"{where}: give choices or min and max, not both")
        c = v["choices"]
        if not isinstance(c, list) or not c or len(c) > MAX_VALUES:
            raise ScenarioError(f"{where}.choices: expected a non-empty list (at most {MAX_VALUES:,} values)")
        return Dimension(key, choices=tuple(c))
    lo: Any = v.get("min")
    hi: Any = v.get("max")
    if not (_number(lo) and _number(hi)):
        raise ScenarioError(f"{where}: min and max must both be finite numbers (got {lo!r}, {hi!r})")
    if lo > hi:
        raise ScenarioError(f"{where}: min {lo!r} is above max {hi!r}")
    return Dimension(key, lo, hi)


def _is_dimension(d: dict[str, Any]) -> bool:
    return bool(set(d) & {"min", "max", "choices"})


def load_sweep(path: str | Path) -> Sweep:
    """Read and check a sweep file (not its points: see ``points`` and ``validate``)."""
    p = Path(path)
    if not p.exists():
        raise ScenarioError(f"{p}: no such sweep file")
    if p.is_dir():
        raise ScenarioError(f"{p}: is a directory, not a sweep file")
    try:
        if p.stat().st_size > 1_000_000:
            raise ScenarioError(f"{p}: larger than 1 MB; not a sweep file")
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise ScenarioError(f"{p}: cannot read: {e}") from None
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(f"{p}: invalid TOML: {e}") from None
    return parse_sweep(data, str(p), p.parent)


def _sweep_table(data: dict[str, Any], origin: str) -> dict[str, Any]:
    """The [sweep] table of a sweep file, with no unknown keys around or in it."""
    extra = sorted(set(data) - {"sweep"})
    if extra:
        raise ScenarioError(f"{origin}: {extra[0]}: unknown key (a sweep file has one [sweep] table)")
    s = data.get("sweep")
    if not isinstance(s, dict):
        raise ScenarioError(f"{origin}: sweep: required table [sweep] is missing")
    extra = sorted(set(s) - _SWEEP_KEYS)
    if extra:
        raise ScenarioError(
            f"{origin}: sweep.{extra[0]}: unknown key (known: {', '.join(sorted(_SWEEP_KEYS))})"
        )
    return s


def _load_base(s: dict[str, Any], origin: str, base_dir: Path) -> tuple[spec.Scenario, str, str]:
    """sweep.scenario loaded (a path relative to the sweep file's directory): scenario, text, origin."""
    ref = s.get("scenario", "default")
    if not isinstance(ref, str) or not ref:
        raise ScenarioError(f"{origin}: sweep.scenario: expected a built-in name or a scenario file path")
    if ref.endswith(".toml") or "/" in ref:
        try:
            rp = spec.user_path(ref)
        except ValueError as e:
            raise ScenarioError(f"{origin}: sweep.scenario: {e}") from None
        ref = str(rp if rp.is_absolute() else base_dir / rp)
    try:
        base, text, base_origin = spec.load(ref)
    except ScenarioError as e:
        raise ScenarioError(f"{origin}: sweep.scenario: {e}") from None
    if base.variants:
        raise ScenarioError(
            f"{origin}: sweep.scenario: {base_origin} is a comparison scenario ([[variants]]); "
            "sweep a scenario without variants and put the variants' keys in [sweep.grid]"
        )
    return base, text, base_origin


def _parse_hours(s: dict[str, Any], origin: str) -> float | None:
    """sweep.hours: None (the scenario's duration_h) or a positive number of hours."""
    hours = s.get("hours")
    if hours is not None and (not _number(hours) or hours <= 0 or hours > 24 * 366 * 10):
        raise ScenarioError(f"{origin}: sweep.hours: expected a positive number of hours (got {hours!r})")
    if hours is not None:  # the run length twin run accepts (at least one step: ``spec.prepare``)
        spec.check_duration(spec.duration_arg(hours, None), f"{origin}: sweep.hours = {hours!r}")
    return hours


def _parse_seeds(s: dict[str, Any], origin: str, base: spec.Scenario) -> list[int | None]:
    """sweep.seeds: distinct non-negative integers (default: the scenario's own seed)."""
    seeds_raw = s.get("seeds")
    if seeds_raw is None:
        return [base.seed]  # the scenario's own
    if (
        not isinstance(seeds_raw, list)
        or not seeds_raw
        or len(seeds_raw) > MAX_SEEDS
        or not all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < 2**63 for x in seeds_raw)
    ):
        raise ScenarioError(
            f"{origin}: sweep.seeds: expected a non-empty list of at most {MAX_SEEDS} non-negative integers"
        )
    if len(set(seeds_raw)) != len(seeds_raw):
        raise ScenarioError(f"{origin}: sweep.seeds: a seed is listed twice")
    return list(seeds_raw)


def _parse_set_and_grid(sw: Sweep, s: dict[str, Any], origin: str) -> None:
    """sweep.set into sw.fixed, sweep.grid into sw.grid (each key a non-empty list of values)."""
    fixed = s.get("set", {})
    if not isinstance(fixed, dict):
        raise ScenarioError(f"{origin}: sweep.set: expected a table of KEY = VALUE")
    sw.fixed = list(_flatten(fixed, "", lambda d: False))
    grid = s.get("grid", {})
    if not isinstance(grid, dict):
        raise ScenarioError(f"{origin}: sweep.grid: expected a table of KEY = [values]")
    for key, vals in _flatten(grid, "", lambda d: False):
        if not isinstance(vals, list) or not vals or len(vals) > MAX_VALUES:
            raise ScenarioError(
                f"{origin}: sweep.grid.{key}: expected a non-empty list of values (at most {MAX_VALUES:,})"
            )
        sw.grid.append((key, vals))


def _parse_random(sw: Sweep, rnd: Any, origin: str) -> None:
    """sweep.random into sw.n, sw.sample_seed and sw.random (at least one dimension)."""
    if not isinstance(rnd, dict):
        raise ScenarioError(f"{origin}: sweep.random: expected a table with n and the parameters")
    n = rnd.get("n")
    if not isinstance(n, int) or isinstance(n, bool) or not 0 < n <= MAX_POINTS:
        raise ScenarioError(f"{origin}: sweep.random.n: expected a number of points in 1..{MAX_POINTS:,}")
    seed = rnd.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ScenarioError(f"{origin}: sweep.random.seed: expected a non-negative integer")
    sw.n, sw.sample_seed = n, seed
    body = {k: v for k, v in rnd.items() if k not in ("n", "seed")}
    for key, v in _flatten(body, "", _is_dimension):
        sw.random.append(_dimension(f"{origin}: sweep.random.{key}", key, v))
    if not sw.random:
        raise ScenarioError(f"{origin}: sweep.random: no parameters to sample")


def _check_keys(sw: Sweep, origin: str) -> None:
    """Every set, grid and random key once, not seed or name, not a result column, a valid path."""
    keys = [k for k, _ in sw.fixed] + sw.param_keys
    seen: set[str] = set()
    for k in keys:
        if k in seen:
            raise ScenarioError(f"{origin}: {k}: set twice (in sweep.set, sweep.grid or sweep.random)")
        seen.add(k)
        if k in ("seed", "name"):
            raise ScenarioError(f"{origin}: {k}: cannot be swept (use sweep.seeds for replicas)")
        if k in BASE_COLUMNS or k in kpi_keys():
            raise ScenarioError(f"{origin}: {k}: clashes with a result column of that name")
        try:
            overrides.parse_path(k)
        except ValueError as e:
            raise ScenarioError(f"{origin}: {k}: {e}") from None


def parse_sweep(data: dict[str, Any], origin: str, base_dir: Path) -> Sweep:
    """A sweep file's parsed TOML checked into a Sweep (its points are not built here)."""
    s = _sweep_table(data, origin)
    base, text, base_origin = _load_base(s, origin, base_dir)
    hours = _parse_hours(s, origin)
    seeds = _parse_seeds(s, origin, base)
    sw = Sweep(origin, s.get("scenario", "default"), base, text, base_origin, hours, seeds)
    _parse_set_and_grid(sw, s, origin)
    rnd = s.get("random")
    if rnd is not None:
        _parse_random(sw, rnd, origin)
    _check_keys(sw, origin)
    total = math.prod(len(v) for _, v in sw.grid) * max(sw.n, 1) * len(sw.seeds)
    if total > MAX_POINTS:
        raise ScenarioError(f"{origin}: {total:,} runs (points x seeds); at most {MAX_POINTS:,} per sweep")
    return sw


# ---------------------------------------------------------------------- points
def latin_hypercube(dims: list[Dimension], n: int, seed: int) -> list[dict[str, Any]]:
    """n samples: each dimension's range cut into n equal strata, one sample in each, the strata
    paired at random across dimensions (McKay, Beckman & Conover 1979)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    cols = []
    for _ in dims:
        u = (rng.permutation(n) + rng.random(n)) / n
        cols.append(u)
    return [{d.key: d.value(float(cols[j][i])) for j, d in enumerate(dims)} for i in range(n)]


def points(sw: Sweep) -> list[Point]:
    """The sweep's points in order: the grid (last key fastest) crossed with the random sample."""
    grid = [
        dict(zip([k for k, _ in sw.grid], combo, strict=True))
        for combo in itertools.product(*(v for _, v in sw.grid))
    ]
    sample = latin_hypercube(sw.random, sw.n, sw.sample_seed) if sw.random else [{}]
    out = []
    ident = {
        "scenario": hashlib.sha256(sw.base_text.encode()).hexdigest(),
        "hours": sw.hours,
        "set": sw.fixed,
    }
    for i, (g, r) in enumerate(itertools.product(grid, sample)):
        params = {**g, **r}
        h = hashlib.sha256(json.dumps({**ident, "params": params}, sort_keys=True, default=str).encode())
        out.append(Point(i + 1, "p" + h.hexdigest()[:10], params))
    return out


def _describe(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in params.items())


def point_overrides(sw: Sweep, pt: Point) -> list[overrides.Override]:
    return [overrides.make(k, v) for k, v in [*sw.fixed, *pt.params.items()]]


Progress = Callable[[int, int], None]


def validate(sw: Sweep, pts: list[Point], progress: Progress | None = None) -> None:
    """Check every point before anything runs; the first bad one raises ``ScenarioError`` naming
    the sweep file, the point and the key. ``progress(done, total)`` is called as it goes.

    Each point gets every check of ``twin validate`` short of building the model: its keys, types
    and bounds, the scenario's cross-key checks and ``spec.prepare`` at the sweep's run length
    (hall size x steps, replicas, event targets). Building the model (its own checks, e.g. a
    model's weights that do not fit in HBM) costs several times as much, so it is done for the base
    scenario with the fixed overrides and once for each value a key takes alone (each grid value
    and choice, both ends of a number range); a combination of values that only the model refuses
    fails when its run starts (the row says why) and the sweep goes on."""
    raw = tomllib.loads(sw.base_text)
    base_dir = overrides.base_dir_of(sw.base_origin)
    singles: dict[str, tuple[str, Any, str]] = {}  # each value a key takes alone, and where
    for k, vals in sw.grid:
        for v in vals:
            singles.setdefault(json.dumps([k, v], default=str), (k, v, "a value in sweep.grid"))
    for d in sw.random:
        for v in d.choices or (d.low, d.high):
            what = "a choice in sweep.random" if d.choices else "an end of its range in sweep.random"
            singles.setdefault(json.dumps([d.key, v], default=str), (d.key, v, what))
    total = len(pts) + 1 + len(singles)
    step = max(1, total // 200)
    done = 0

    def tick() -> None:
        nonlocal done
        done += 1
        if progress and (done % step == 0 or done == total):
            progress(done, total)

    for pt in pts:
        where = f"{sw.origin}: point {pt.index} {pt.id} ({_describe(pt.params)})"
        check(raw, base_dir, point_overrides(sw, pt), where, sw.duration_s, build=False)
        tick()
    fixed = [overrides.make(k, v) for k, v in sw.fixed]
    check(raw, base_dir, fixed, f"{sw.origin}: the base scenario with sweep.set", sw.duration_s)
    tick()
    for k, v, what in singles.values():
        check(
            raw, base_dir, [*fixed, overrides.make(k, v)], f"{sw.origin}: {k}={v!r} ({what})", sw.duration_s
        )
        tick()


def check(
    raw: dict[str, Any],
    base_dir: Path | None,
    ovs: list[overrides.Override],
    where: str,
    duration_s: int | None = None,
    build: bool = True,
) -> None:
    """Validate raw scenario data with overrides as a scenario, its run (``spec.prepare`` at
    ``duration_s``) and, with ``build``, as model parameters; errors start with ``where``."""
    from twin.compose import sim

    try:
        data = overrides.apply(raw, ovs)
    except ScenarioError as e:
        raise ScenarioError(f"{where}: {e}") from None
    scen = overrides.validate_raw(data, where, base_dir)
    try:  # its errors start with ``where`` (the origin)
        p = spec.prepare(scen, None, duration_s)
    except ScenarioError as e:  # here the run's length is the sweep's key, not a flag
        raise ScenarioError(str(e).replace("(--hours/--days)", "(sweep.hours)")) from None
    if build:
        try:
            sim.build(p)
        except ValueError as e:
            raise ScenarioError(f"{where}: {e}") from None


def tasks(sw: Sweep, pts: list[Point], runs_dir: Path | None) -> list[Task]:
    """One task per point and seed; run files go to ``runs_dir`` (None: not kept)."""
    base_dir = overrides.base_dir_of(sw.base_origin)
    out = []
    for pt in pts:
        ovs = tuple((o.key, o.value) for o in point_overrides(sw, pt))
        for seed in sw.seeds:
            t = Task(
                pt.index,
                pt.id,
                seed,
                tuple(pt.params.items()),
                ovs,
                sw.base_text,
                sw.base_origin,
                None if base_dir is None else str(base_dir.resolve()),
                sw.duration_s,
                None,
            )
            if runs_dir is not None:
                t = dataclasses.replace(t, run_file=str((runs_dir / f"{t.key}.duckdb").resolve()))
            out.append(t)
    return out


# ---------------------------------------------------------------------- a sweep directory
def point_file(out_dir: Path, t: Task) -> Path:
    return out_dir / "points" / f"{t.key}.json"


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def record(out_dir: Path, t: Task, row: dict[str, Any]) -> None:
    """Keep a finished point's row (atomically: a killed sweep leaves whole files or none)."""
    _write_atomic(point_file(out_dir, t), json.dumps(row, default=str).encode())


RECORDED = ("complete", "failed", "stopped")  # the statuses a point file holds


def check_row(row: Any, t: Task) -> str | None:
    """What is wrong with a point file's content for task ``t`` (None: a row this sweep wrote)."""
    if not isinstance(row, dict):
        return f"expected a JSON object, got {type(row).__name__}"
    missing = [k for k in (*BASE_COLUMNS, *kpi_keys()) if k not in row]
    if missing:
        return f"{missing[0]}: missing"
    want = {"point": t.point, "point_id": t.point_id, **dict(t.params)}
    if t.seed is not None:
        want["seed"] = t.seed
    for k, v in want.items():
        if k not in row:
            return f"{k}: missing"
        if row[k] != v or type(row[k]) is not type(v):
            return f"{k}: {row[k]!r} is not this point's {v!r}"
    if row["status"] not in RECORDED:
        return f"status: {row['status']!r} is not one of {', '.join(RECORDED)}"
    if not (row["seed"] is None or (type(row["seed"]) is int and row["seed"] >= 0)):
        return f"seed: expected a non-negative integer, got {row['seed']!r}"
    for k in ("hours", "wall_s", "cpu_s", *kpi_keys()):
        v = row[k]
        if v is not None and (isinstance(v, bool) or not isinstance(v, int | float)):
            return f"{k}: expected a number or null, got {v!r}"
    for k in ("error", "run_file", "run_id"):
        if row[k] is not None and not isinstance(row[k], str):
            return f"{k}: expected a string or null, got {row[k]!r}"
    if row["status"] == "complete" and not isinstance(row["run_id"], str):
        return "run_id: a complete run has one"
    return None


POINT_FILE_MAX_BYTES = 1 << 20  # a point's row is a few kB


def load_row(out_dir: Path, t: Task) -> tuple[dict[str, Any] | None, str | None]:
    """A point's recorded row, or None and what is wrong with its file (None: no file yet)."""
    p = point_file(out_dir, t)
    try:
        st = os.lstat(p)
        if not stat.S_ISREG(st.st_mode):  # a pipe would block the read, a link lead elsewhere
            return None, f"{p}: not a regular file"
        if st.st_size > POINT_FILE_MAX_BYTES:
            return None, f"{p}: {st.st_size:,} bytes, more than a point's row ({POINT_FILE_MAX_BYTES:,})"
        row = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None, None
    except (OSError, ValueError, RecursionError) as e:  # RecursionError: JSON nested too deep
        return None, f"{p}: unreadable ({_one_line(e)})"
    problem = check_row(row, t)
    if problem:
        return None, f"{p}: {problem}"
    return row, None


def read_row(out_dir: Path, t: Task) -> dict[str, Any] | None:
    """A point's recorded row; None if there is none or its file is not one this sweep wrote."""
    return load_row(out_dir, t)[0]


# -- the folder: only a sweep's, one sweep at a time
MARKER = "sweep.json"  # written into the folder a sweep makes: it is a sweep folder
LOCK = "sweep"  # storage.runlock's lock on DIR/sweep.lock
# Folders never written into, even with overwrite; and trees never written anywhere into.
_SYSTEM = ("/", "/tmp", "/var", "/var/tmp", "/home", "/opt", "/srv", "/mnt", "/media", "/root", "/run")
_SYSTEM_TREES = (
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/proc",
    "/sbin",
    "/sys",
    "/usr",
)


def system_folder(path: Path) -> bool:
    """``/``, a system folder (``/tmp`` itself, ``/usr/...``) or the user's home folder itself."""
    try:
        p = path.expanduser().resolve()
    except RuntimeError:  # ~user of no user: a folder of that literal name, as a shell leaves it
        p = path.resolve()
    if str(p) in _SYSTEM or p == Path.home().resolve():
        return True
    return any(p == Path(t) or Path(t) in p.parents for t in _SYSTEM_TREES)


def is_sweep_folder(out_dir: Path) -> bool:
    try:
        data = json.loads((out_dir / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get("kind") == "twin-sweep"


def check_out_dir(out_dir: Path, overwrite: bool = False, runs_dir: Path | None = None) -> None:
    """``StorageError`` unless the sweep may write into ``out_dir``: a new or empty folder, or one
    a sweep made (``DIR/sweep.json``); with ``overwrite``, any other folder too. Never ``/``, a
    system folder or the home folder. Nothing is written here."""
    from storage.errors import StorageError

    for opt, d in (("--out", out_dir), ("--runs-dir", runs_dir)):
        if d is None:
            continue
        if system_folder(d):
            raise StorageError(
                f"{opt} {d}: a system folder (or /, or your home folder); choose a folder of its own"
            )
        if d.exists() and not d.is_dir():
            raise StorageError(f"{opt} {d}: exists and is not a directory")
    if not out_dir.is_dir():
        return
    _probe_lock(out_dir)
    if overwrite or is_sweep_folder(out_dir):
        return
    try:
        entries = sorted(e.name for e in out_dir.iterdir() if e.name != f"{LOCK}.lock")
    except OSError as e:
        raise StorageError(f"--out {out_dir}: cannot read the folder: {e.strerror or e}") from None
    if entries:
        raise StorageError(
            f"--out {out_dir}: not a sweep folder (no {MARKER}) and not empty (holds {entries[0]!r}"
            f"{f' and {len(entries) - 1} more' if len(entries) > 1 else ''}); choose another folder, "
            "or pass --overwrite to write the sweep into it (its results.parquet is replaced)"
        )


def _locked(out_dir: Path, holder: str) -> Exception:
    from storage.errors import StorageError

    return StorageError(
        f"--out {out_dir}: another sweep (process {holder}) is running into this folder; "
        "wait for it to end or choose another --out"
    )


def _probe_lock(out_dir: Path) -> None:
    """Refuse at once a folder another sweep holds (the sweep takes the lock itself later)."""
    from storage.errors import StorageError
    from storage.runlock import LockedError, RunLock

    try:
        RunLock(out_dir / LOCK).release()
    except LockedError as e:
        raise _locked(out_dir, str(e)) from None
    except OSError as e:
        raise StorageError(f"--out {out_dir}: cannot write here: {e.strerror or e}") from None


@contextlib.contextmanager
def sweep_folder(
    out_dir: Path, runs_dir: Path | None, origin: str, overwrite: bool = False
) -> Iterator[None]:
    """The sweep folder made (with its marker), checked and locked for the block: a second sweep
    into it is refused (``StorageError`` naming the process that holds it)."""
    from storage.errors import StorageError
    from storage.runlock import LockedError, RunLock

    check_out_dir(out_dir, overwrite, runs_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise StorageError(f"--out {out_dir}: cannot create the folder: {e.strerror or e}") from None
    try:
        lock = RunLock(out_dir / LOCK)
    except LockedError as e:
        raise _locked(out_dir, str(e)) from None
    except OSError as e:
        raise StorageError(f"--out {out_dir}: cannot lock the folder: {e.strerror or e}") from None
    try:
        if not is_sweep_folder(out_dir):
            marker = {
                "kind": "twin-sweep",
                "sweep": origin,
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            }
            _write_atomic(out_dir / MARKER, json.dumps(marker).encode())
        for opt, d in (("--out", out_dir / "points"), ("--runs-dir", runs_dir)):
            if d is not None:
                try:
                    d.mkdir(parents=True, exist_ok=True)
                except OSError as e:
                    raise StorageError(f"{opt} {d}: cannot create the folder: {e.strerror or e}") from None
        yield
    finally:
        lock.release()


def results_table(sw: Sweep, all_tasks: list[Task], out_dir: Path) -> Any:
    """The results as an Arrow table: one row per point and seed (pending ones too)."""
    import pyarrow as pa

    rows = [read_row(out_dir, t) or empty_row(t) for t in all_tasks]
    cols: dict[str, Any] = {}
    ints = {"point", "seed"}
    floats = {"hours", "wall_s", "cpu_s", *kpi_keys()}
    # The point's identity, its parameters and KPIs, then the rest of the base columns.
    order = [*BASE_COLUMNS[:3], *sw.param_keys, *kpi_keys(), *BASE_COLUMNS[3:]]
    for name in order:
        vals = [r.get(name) for r in rows]
        if name in ints:
            cols[name] = pa.array(vals, pa.int64())
        elif name in floats:
            cols[name] = pa.array([None if v is None else float(v) for v in vals], pa.float64())
        elif name in sw.param_keys:
            try:
                cols[name] = pa.array(vals)
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
                cols[name] = pa.array(
                    [None if v is None else json.dumps(v) if not isinstance(v, str) else v for v in vals],
                    pa.string(),
                )
        else:
            cols[name] = pa.array([None if v is None else str(v) for v in vals], pa.string())
    return pa.table(cols)


def write_results(sw: Sweep, all_tasks: list[Task], out_dir: Path) -> Path:
    import pyarrow.parquet as pq

    table = results_table(sw, all_tasks, out_dir)
    path = out_dir / "results.parquet"
    tmp = out_dir / f".results.parquet.{os.getpid()}.tmp"
    pq.write_table(table, tmp)
    os.replace(tmp, path)
    return path


@dataclass
class Outcome:
    total: int
    skipped: int
    ran: int = 0
    failed: int = 0
    stopped: int = 0
    results: Path | None = None


def run_sweep(
    sw: Sweep,
    out_dir: Path,
    backend: str = "local",
    jobs: int | None = None,
    ray_address: str | None = None,
    files: bool = True,
    runs_dir: Path | None = None,
    retry_failed: bool = False,
    on_start: Callable[[int, int], None] | None = None,
    on_result: OnResult | None = None,
    rebuild_every_s: float = 30.0,
    overwrite: bool = False,
    on_validate: Progress | None = None,
    on_warning: Callable[[str], None] | None = None,
) -> Outcome:
    """Validate every point, then run the ones not finished yet; rebuild results.parquet.

    The folder is checked first (``check_out_dir``), made and locked only once every point is
    valid. A point file that is not one this sweep wrote (unreadable, or keys or values that do
    not fit its point) is reported through ``on_warning`` and its point runs again. On SIGINT or
    SIGTERM the runs in flight are stopped and recorded, results.parquet is rebuilt, and
    ``KeyboardInterrupt`` (SIGTERM: ``scenarios.runner.Terminated``) is raised."""
    check_backend(backend, jobs)
    if backend == "ray" and ray_address:
        check_ray_address(ray_address)  # before anything is written
    runs = (runs_dir or out_dir / "runs") if files else None
    check_out_dir(out_dir, overwrite, runs_dir)
    pts = points(sw)
    validate(sw, pts, on_validate)
    all_tasks = tasks(sw, pts, runs)
    # The backend first (a Ray that cannot be reached leaves no folder behind), then the folder.
    with backend_session(backend, jobs, ray_address), sweep_folder(out_dir, runs, sw.origin, overwrite):
        return _run_points(
            sw,
            all_tasks,
            out_dir,
            backend,
            jobs,
            ray_address,
            retry_failed,
            on_start,
            on_result,
            rebuild_every_s,
            on_warning,
        )


def _run_points(
    sw: Sweep,
    all_tasks: list[Task],
    out_dir: Path,
    backend: str,
    jobs: int | None,
    ray_address: str | None,
    retry_failed: bool,
    on_start: Callable[[int, int], None] | None,
    on_result: OnResult | None,
    rebuild_every_s: float,
    on_warning: Callable[[str], None] | None,
) -> Outcome:
    todo = []
    for t in all_tasks:
        row, problem = load_row(out_dir, t)
        if problem and on_warning:
            on_warning(f"{problem}; the point runs again")
        if row is None or row["status"] == "stopped" or (retry_failed and row["status"] != "complete"):
            todo.append(t)
    outcome = Outcome(total=len(all_tasks), skipped=len(all_tasks) - len(todo))
    if on_start:
        on_start(len(todo), outcome.skipped)
    last = time.monotonic()
    every = rebuild_every_s

    def done(t: Task, row: dict[str, Any]) -> None:
        nonlocal last, every
        record(out_dir, t, row)
        if row["status"] == "stopped":
            outcome.stopped += 1
        else:
            outcome.ran += 1
            outcome.failed += row["status"] != "complete"
        if on_result:
            on_result(t, row)
        if time.monotonic() - last > every:
            t0 = time.monotonic()
            write_results(sw, all_tasks, out_dir)
            # Rebuilding reads every point's file: keep it a small share of the time.
            every = max(rebuild_every_s, 20 * (time.monotonic() - t0))
            last = time.monotonic()

    try:
        execute(todo, done, backend, jobs, ray_address)
    finally:
        outcome.results = write_results(sw, all_tasks, out_dir)
    return outcome


# ---------------------------------------------------------------------- report
def parse_objective(text: str, option: str) -> tuple[str, str]:
    """``KPI`` or ``KPI:min`` / ``KPI:max`` → (kpi, direction)."""
    name, _, d = text.strip().partition(":")
    name = name.strip()
    if name not in kpi_keys():
        raise ScenarioError(f"{option} {text!r}: unknown KPI {name!r}; known: {', '.join(kpi_keys())}")
    d = d.strip() or ("max" if name in LARGER_IS_BETTER else "min")
    if d not in ("min", "max"):
        raise ScenarioError(f"{option} {text!r}: direction must be min or max (got {d!r})")
    return name, d


def by_point(rows: list[dict[str, Any]], param_keys: list[str]) -> list[dict[str, Any]]:
    """Complete rows averaged over seeds, one per point (with the number of seeds)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        if r.get("status") == "complete":
            groups.setdefault(r["point_id"], []).append(r)
    out = []
    for pid, rs in groups.items():
        agg: dict[str, Any] = {"point": rs[0]["point"], "point_id": pid, "seeds": len(rs)}
        agg.update({k: rs[0].get(k) for k in param_keys})
        for k in kpi_keys():
            vals = [
                r[k]
                for r in rs
                if r.get(k) is not None and not (isinstance(r[k], float) and math.isnan(r[k]))
            ]
            agg[k] = sum(vals) / len(vals) if vals else None
        out.append(agg)
    return out


def pareto_front(rows: list[dict[str, Any]], a: tuple[str, str], b: tuple[str, str]) -> list[dict[str, Any]]:
    """Rows not dominated on the two objectives (each min or max), sorted by the first."""
    sign = {"min": 1.0, "max": -1.0}
    cand = [r for r in rows if r.get(a[0]) is not None and r.get(b[0]) is not None]
    cand.sort(key=lambda r: (sign[a[1]] * r[a[0]], sign[b[1]] * r[b[0]]))
    front: list[dict[str, Any]] = []
    best = math.inf
    for r in cand:
        y = sign[b[1]] * r[b[0]]
        if y < best:
            front.append(r)
            best = y
    return front


def read_results(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """Rows of a results.parquet and its parameter columns."""
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (OSError, ValueError) as e:
        raise ScenarioError(f"{path}: not a sweep results file ({_one_line(e)})") from None
    names = table.column_names
    missing = [c for c in ("point", "point_id", "status") if c not in names]
    if missing:
        raise ScenarioError(f"{path}: not a sweep results file (no {missing[0]} column)")
    fixed = set(BASE_COLUMNS) | set(kpi_keys())
    return table.to_pylist(), [c for c in names if c not in fixed]
