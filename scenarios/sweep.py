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

Every point is validated before any run starts. A point's id is a hash of what defines it (base
scenario text, run length, fixed overrides, its parameters), so a sweep re-invoked on the same
directory skips the points and seeds it has finished (``DIR/points/<id>-s<seed>.json``, written
atomically when a point ends) and ``DIR/results.parquet`` is rebuilt from those files.

A task runs one point with one seed through ``scenarios.runner.run`` and returns its row: the
parameters, every KPI of ``twin compare`` (``storage.kpis``), status, error, wall time and run file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import itertools
import json
import math
import os
import shutil
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scenarios import overrides, spec
from scenarios.spec import ScenarioError

MAX_POINTS = 100_000
MAX_SEEDS = 1000
MAX_VALUES = 10_000
BACKENDS = ("local", "ray")
# Columns every row has besides the parameters and the KPIs.
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


def kpi_keys() -> list[str]:
    """The KPIs of a row: those ``twin compare`` shows, in its order."""
    from storage.kpis import COMPARE_ROWS

    return [k for k, _, _ in COMPARE_ROWS]


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
        return None if self.hours is None else int(round(self.hours * 3600))


@dataclass(frozen=True)
class Point:
    index: int
    id: str
    params: dict[str, Any]


@dataclass(frozen=True)
class Task:
    """What a worker needs to run one point with one seed (plain data: it crosses processes)."""

    point: int
    point_id: str
    seed: int | None
    params: tuple[tuple[str, Any], ...]
    overrides: tuple[tuple[str, Any], ...]
    base_text: str
    origin: str
    base_dir: str | None
    duration_s: int | None
    run_file: str | None

    @property
    def key(self) -> str:
        return f"{self.point_id}-s{'default' if self.seed is None else self.seed}"


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
        rp = Path(ref).expanduser()
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


def validate(sw: Sweep, pts: list[Point]) -> None:
    """Check every point as a scenario (and its model parameters) before anything runs; the first
    bad one raises ``ScenarioError`` naming the sweep file, the point and the key."""
    raw = tomllib.loads(sw.base_text)
    base_dir = overrides.base_dir_of(sw.base_origin)
    for pt in pts:
        where = f"{sw.origin}: point {pt.index} {pt.id} ({_describe(pt.params)})"
        check(raw, base_dir, point_overrides(sw, pt), where)


def check(raw: dict[str, Any], base_dir: Path | None, ovs: list[overrides.Override], where: str) -> None:
    """Validate raw scenario data with overrides as a scenario and as model parameters; errors
    start with ``where``."""
    from twin import sim

    try:
        data = overrides.apply(raw, ovs)
    except ScenarioError as e:
        raise ScenarioError(f"{where}: {e}") from None
    scen = overrides.validate_raw(data, where, base_dir)
    try:
        sim.build(scen.to_params())
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


# ---------------------------------------------------------------------- one task
def _one_line(e: BaseException) -> str:
    msg = str(e).strip().splitlines()
    text = f"{type(e).__name__}: {msg[0] if msg else ''}".rstrip(": ")
    return text[:500]


def empty_row(t: Task) -> dict[str, Any]:
    row: dict[str, Any] = {
        "point": t.point,
        "point_id": t.point_id,
        "seed": t.seed,
        "hours": None if t.duration_s is None else t.duration_s / 3600,
        "status": "pending",
        "error": None,
        "wall_s": None,
        "cpu_s": None,
        "run_file": None,
        "run_id": None,
    }
    row.update(dict(t.params))
    row.update({k: None for k in kpi_keys()})
    return row


def run_task(t: Task) -> dict[str, Any]:
    """Run one point with one seed; never raises for the point's own failure (the row says)."""
    from scenarios.runner import run
    from storage.kpis import run_kpis
    from storage.reader import open_run_file

    t0, c0 = time.perf_counter(), time.process_time()
    row = empty_row(t)
    tmp: str | None = None
    try:
        ovs = [overrides.make(k, v) for k, v in t.overrides]
        text = overrides.effective_text(t.base_text, ovs, t.origin)
        scen = spec.parse(text, t.origin, t.base_dir)
        if t.run_file is None:
            tmp = tempfile.mkdtemp(prefix="twin-sweep-")
            out = Path(tmp) / f"{t.key}.duckdb"
        else:
            out = Path(t.run_file)
        # Nobody reads a sweep's run while it runs: no live sidecar next to the file.
        result = run(
            scen, text, out, seed=t.seed, duration_s=t.duration_s, overwrite=True, publish_live=False
        )
        con = open_run_file(out)
        try:
            kpis = run_kpis(con, result.run_id)
            seed = con.sql("SELECT seed FROM runs WHERE run_id = ?", params=[result.run_id]).fetchall()[0][0]
        finally:
            con.close()
        row.update({k: kpis.get(k) for k in kpi_keys()})
        row.update(
            seed=int(seed),
            hours=result.sim_s / 3600,
            status=result.status,
            run_id=result.run_id,
            run_file=None if t.run_file is None else str(out),
        )
    except Exception as e:
        row.update(status="failed", error=_one_line(e))
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    row["wall_s"] = time.perf_counter() - t0
    row["cpu_s"] = time.process_time() - c0  # every thread of the process: model, writer, DuckDB
    return row


def failed_row(t: Task, e: BaseException) -> dict[str, Any]:
    row = empty_row(t)
    row.update(status="failed", error=_one_line(e))
    return row


# ---------------------------------------------------------------------- backends
def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


OnResult = Callable[[Task, dict[str, Any]], None]


def execute(
    todo: list[Task],
    on_result: OnResult,
    backend: str = "local",
    jobs: int | None = None,
    ray_address: str | None = None,
) -> None:
    """Run tasks on a backend, calling ``on_result(task, row)`` in the caller's process as each ends."""
    check_backend(backend, jobs)
    if not todo:
        return
    if backend == "ray":
        _execute_ray(todo, on_result, jobs, ray_address)
    elif (jobs or default_jobs()) == 1 or len(todo) == 1:
        for t in todo:
            on_result(t, run_task(t))
    else:
        _execute_local(todo, on_result, jobs or default_jobs())


def check_backend(backend: str, jobs: int | None) -> None:
    if backend not in BACKENDS:
        raise ScenarioError(f"--backend: unknown backend {backend!r}; known: {', '.join(BACKENDS)}")
    if jobs is not None and not 1 <= jobs <= 4096:
        raise ScenarioError(f"-j: expected a number of parallel runs in 1..4096 (got {jobs})")
    if backend == "ray" and ray_missing():
        raise ScenarioError(f"--backend ray: {ray_missing()}")


def _execute_local(todo: list[Task], on_result: OnResult, jobs: int) -> None:
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait

    # forkserver: workers start from a clean process (no inherited threads or open files).
    ctx = multiprocessing.get_context("forkserver")
    ex = ProcessPoolExecutor(max_workers=min(jobs, len(todo)), mp_context=ctx)
    queue = iter(todo)
    futs: dict[Future[dict[str, Any]], Task] = {}

    def submit(n: int) -> None:
        for t in itertools.islice(queue, n):
            futs[ex.submit(run_task, t)] = t

    try:
        # A bounded window of tasks in flight: memory stays flat however many points there are.
        submit(2 * jobs)
        while futs:
            done, _ = wait(futs, return_when=FIRST_COMPLETED)
            for f in done:
                t = futs.pop(f)
                try:
                    row = f.result()
                except Exception as e:  # the worker process died (e.g. out of memory)
                    row = failed_row(t, e)
                on_result(t, row)
            submit(len(done))
    finally:
        ex.shutdown(wait=True, cancel_futures=True)


def ray_missing() -> str | None:
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        return "the ray backend needs Ray: pip install 'ai-factory-twin[ray]'"
    return None


@contextlib.contextmanager
def backend_session(backend: str, jobs: int | None = None, address: str | None = None) -> Iterator[None]:
    """Keep a backend up across several ``execute`` calls: for Ray, connect to ``address`` or start a
    local Ray with ``jobs`` CPUs (unless Ray is up already), and shut down what was started."""
    check_backend(backend, jobs)
    if backend != "ray":
        yield
        return
    if not address:
        # A Ray started for one sweep serves this machine only: Ray's own switch keeps its
        # processes on the loopback address instead of the machine's network address.
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    import logging

    import ray

    started = False
    if not ray.is_initialized():
        kw: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.ERROR}
        try:
            if address:
                ray.init(address=address, **kw)
            else:
                ray.init(num_cpus=jobs or default_jobs(), include_dashboard=False, **kw)
        except (ConnectionError, RuntimeError, ValueError) as e:
            where = f"--ray-address {address}" if address else "--backend ray"
            raise ScenarioError(f"{where}: cannot start or reach Ray: {_one_line(e)}") from None
        started = True
    try:
        yield
    finally:
        if started:
            ray.shutdown()


def _execute_ray(todo: list[Task], on_result: OnResult, jobs: int | None, address: str | None) -> None:
    with backend_session("ray", jobs, address):
        _run_on_ray(todo, on_result, jobs)


def _run_on_ray(todo: list[Task], on_result: OnResult, jobs: int | None) -> None:
    import ray

    remote = ray.remote(num_cpus=1, max_retries=0)(run_task)
    resources: Any = ray.cluster_resources
    cpus = int(resources().get("CPU", jobs or 1))
    queue = iter(todo)
    refs: dict[Any, Task] = {}

    def submit(n: int) -> None:
        for t in itertools.islice(queue, n):
            refs[remote.remote(t)] = t

    try:
        # A bounded window in flight (twice the cluster's CPUs): flat memory on the driver.
        submit(2 * max(cpus, 1))
        while refs:
            ready, _ = ray.wait(list(refs), num_returns=1)
            for r in ready:
                t = refs.pop(r)
                try:
                    row = ray.get(r)
                except Exception as e:  # the worker died or the task could not run
                    row = failed_row(t, e)
                on_result(t, row)
            submit(len(ready))
    finally:
        for r in refs:
            with contextlib.suppress(Exception):
                ray.cancel(r, force=True)


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


def read_row(out_dir: Path, t: Task) -> dict[str, Any] | None:
    p = point_file(out_dir, t)
    try:
        row: dict[str, Any] = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return None  # unreadable: run the point again
    if row.get("point_id") != t.point_id:
        return None
    return row


def prepare_dir(out_dir: Path, runs_dir: Path | None) -> None:
    if out_dir.exists() and not out_dir.is_dir():
        raise ScenarioError(f"--out {out_dir}: exists and is not a directory")
    (out_dir / "points").mkdir(parents=True, exist_ok=True)
    if runs_dir is not None:
        if runs_dir.exists() and not runs_dir.is_dir():
            raise ScenarioError(f"--runs-dir {runs_dir}: exists and is not a directory")
        runs_dir.mkdir(parents=True, exist_ok=True)


def results_table(sw: Sweep, all_tasks: list[Task], out_dir: Path) -> Any:
    """The results as an Arrow table: one row per point and seed (pending ones too)."""
    import pyarrow as pa

    rows = [read_row(out_dir, t) or empty_row(t) for t in all_tasks]
    cols: dict[str, Any] = {}
    ints = {"point", "seed"}
    floats = {"hours", "wall_s", "cpu_s", *kpi_keys()}
    order = [
        "point",
        "point_id",
        "seed",
        *sw.param_keys,
        *kpi_keys(),
        "hours",
        "status",
        "error",
        "wall_s",
        "cpu_s",
        "run_file",
        "run_id",
    ]
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
) -> Outcome:
    """Validate every point, then run the ones not finished yet; rebuild results.parquet."""
    check_backend(backend, jobs)
    pts = points(sw)
    validate(sw, pts)
    with backend_session(backend, jobs, ray_address):
        runs = (runs_dir or out_dir / "runs") if files else None
        return _run_points(
            sw,
            pts,
            out_dir,
            backend,
            jobs,
            ray_address,
            runs,
            retry_failed,
            on_start,
            on_result,
            rebuild_every_s,
        )


def _run_points(
    sw: Sweep,
    pts: list[Point],
    out_dir: Path,
    backend: str,
    jobs: int | None,
    ray_address: str | None,
    runs_dir: Path | None,
    retry_failed: bool,
    on_start: Callable[[int, int], None] | None,
    on_result: OnResult | None,
    rebuild_every_s: float,
) -> Outcome:
    prepare_dir(out_dir, runs_dir)
    all_tasks = tasks(sw, pts, runs_dir)
    todo = []
    for t in all_tasks:
        row = read_row(out_dir, t)
        if row is None or (retry_failed and row.get("status") != "complete"):
            todo.append(t)
    outcome = Outcome(total=len(all_tasks), skipped=len(all_tasks) - len(todo))
    if on_start:
        on_start(len(todo), outcome.skipped)
    last = time.monotonic()
    every = rebuild_every_s

    def done(t: Task, row: dict[str, Any]) -> None:
        nonlocal last, every
        record(out_dir, t, row)
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
