"""Capacity planning: the smallest integer value of a key (e.g. ``hall.ultraservers``) at which a
scenario's KPIs meet every constraint (``slo_attainment >= 0.99``, ``peak_facility_mw <= 30``), or
(``maximize``) the largest: the deployable capacity of a fixed feed, e.g. the most UltraServers a
substation rating (``power.facility_cap_w``) hosts at ``cap_hit_share <= 0.01`` (3P: planners
size AI campuses by deployable capacity, not installed megawatts; Wilkins et al., "Designing
Datacenter Power Delivery Hierarchies for the AI Era", arXiv 2026). Maximizing runs the same search
over the range mirrored (``Planner._at``).

Each KPI is assumed monotone in the key. The range's ends tell each constraint's direction: one that
fails at the low end and holds at the high end needs a value large enough ("lower-bound"
constraints); one that holds low and fails high caps the value. Bisection (k-ary with k parallel
runs on the backend) finds the smallest value at which every lower-bound constraint holds; the
answer is feasible if the capping constraints still hold there. The value below the answer is always
run, so the constraint that binds is observed, not inferred. ``method="sweep"`` runs every value
of the range instead (no monotonicity assumed; a non-monotone outcome is reported).

A case is one combination of ``--over`` values (e.g. each climate); each case gets its own answer.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from scenarios import execution, overrides, sweep
from scenarios.spec import Scenario, ScenarioError, duration_arg

OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": lambda a, b: a >= b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    "<": lambda a, b: a < b,
}
_CONSTRAINT = re.compile(
    r"^\s*([a-z][a-z0-9_]{0,63})\s*(>=|<=|>|<)\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d{1,3})?)\s*$"
)
MAX_RANGE = 100_000
MAX_CASES = 1000


class RunFailed(Exception):
    """A run the search needed failed (not bad input: the message names the run and its error)."""


@dataclass(frozen=True)
class Constraint:
    kpi: str
    op: str
    bound: float
    text: str

    def holds(self, row: dict[str, Any]) -> bool:
        v = row.get(self.kpi)
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return False
        return OPS[self.op](float(v), self.bound)

    def shown(self, row: dict[str, Any]) -> str:
        v = row.get(self.kpi)
        val = "undefined" if v is None else f"{v:.6g}"
        return f"{self.kpi} = {val}, needs {self.op} {self.bound:g}"

    def __str__(self) -> str:
        return f"{self.kpi} {self.op} {self.bound:g}"


def parse_constraint(text: str) -> Constraint:
    """``KPI OP NUMBER`` with a KPI of ``twin compare`` and OP one of >= <= > <."""
    shown = text if len(text) <= 80 else text[:77] + "..."
    m = _CONSTRAINT.match(text) if len(text) <= 200 else None
    if m is None:
        raise ScenarioError(
            f'--subject-to {shown!r}: expected KPI OP NUMBER, e.g. "slo_attainment >= 0.99" (OP: >=, <=, >, <)'
        )
    kpi, op, num = m.groups()
    if kpi not in execution.kpi_keys():
        raise ScenarioError(
            f"--subject-to {shown!r}: unknown KPI {kpi!r}; known: {', '.join(execution.kpi_keys())}"
        )
    bound = float(num)
    if not math.isfinite(bound):
        raise ScenarioError(f"--subject-to {shown!r}: the bound must be a finite number")
    return Constraint(kpi, op, bound, text.strip())


def parse_range(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"\s*(\d{1,9})\s*:\s*(\d{1,9})\s*", text)
    if m is None:
        raise ScenarioError(f"--range {text!r}: expected LOW:HIGH, two whole numbers (e.g. 1:64)")
    lo, hi = int(m.group(1)), int(m.group(2))
    if not 0 <= lo < hi or hi - lo > MAX_RANGE:
        raise ScenarioError(f"--range {text!r}: need 0 <= LOW < HIGH and at most {MAX_RANGE:,} values")
    return lo, hi


def parse_over(text: str) -> tuple[str, list[Any]]:
    """``KEY=V1,V2,...`` (each value a TOML value or a bare word)."""
    if "=" not in text:
        raise ScenarioError(f"--over {text!r}: expected KEY=V1,V2 (e.g. site.climate=temperate,hot)")
    key, vals = text.split("=", 1)
    try:
        overrides.parse_path(key.strip())
        values = [overrides.parse_value(v) for v in vals.split(",")]
    except ValueError as e:
        raise ScenarioError(f"--over {text!r}: {e}") from None
    if not vals.strip() or any(v == "" for v in values):
        raise ScenarioError(f"--over {text!r}: a value is empty")
    return key.strip(), values


@dataclass
class CaseResult:
    case: dict[str, Any]
    answer: int | None = None
    rows: dict[int, dict[str, Any]] = field(default_factory=dict)
    why: str = ""
    binding: list[Constraint] = field(default_factory=list)
    warning: str = ""
    idle: str = ""  # the answer's hall is mostly idle (``sweep.idle_note``)

    @property
    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.case.items()) or "(scenario as given)"


@dataclass
class PlanResult:
    key: str
    constraints: list[Constraint]
    cases: list[CaseResult]
    runs: int = 0
    maximize: bool = False

    @property
    def answer(self) -> int | None:
        """The smallest value (maximizing: the largest) meeting the constraints in every case
        (None if any case has none)."""
        vals = [v for v in (c.answer for c in self.cases) if v is not None]
        if not vals or len(vals) < len(self.cases):
            return None
        return min(vals) if self.maximize else max(vals)


class Planner:
    def __init__(
        self,
        scenario: Scenario,
        text: str,
        origin: str,
        key: str,
        constraints: list[Constraint],
        over: Sequence[tuple[str, list[Any]]] = (),
        lo: int = 1,
        hi: int = 64,
        hours: float | None = None,
        seed: int | None = None,
        backend: str = "local",
        jobs: int | None = None,
        ray_address: str | None = None,
        on_run: Callable[[int], None] | None = None,
        maximize: bool = False,
    ) -> None:
        if scenario.variants:
            raise ScenarioError(
                f"{origin}: a comparison scenario ([[variants]]) cannot be planned; use one variant"
            )
        if not constraints:
            raise ScenarioError("give at least one --subject-to constraint")
        execution.check_backend(backend, jobs)
        try:
            overrides.parse_path(key)
        except ValueError as e:
            raise ScenarioError(f"--{'maximize' if maximize else 'minimize'} {key!r}: {e}") from None
        if any(k == key for k, _ in over):
            raise ScenarioError(f"--over {key}: is the key being searched")
        n_cases = math.prod(len(v) for _, v in over)
        if n_cases > MAX_CASES:
            raise ScenarioError(f"--over: {n_cases:,} cases; at most {MAX_CASES:,}")
        self.text, self.origin, self.key = text, origin, key
        self.maximize = maximize
        self.constraints = constraints
        self.lo, self.hi = lo, hi
        self.duration_s = duration_arg(hours, None)  # as twin run reads --hours
        self.seed, self.backend, self.jobs, self.address = seed, backend, jobs, ray_address
        self.on_run = on_run
        self.raw = tomllib.loads(text)
        self.base_dir = overrides.base_dir_of(origin)
        keys = [k for k, _ in over]
        self.cases = [
            dict(zip(keys, combo, strict=True)) for combo in itertools.product(*(v for _, v in over))
        ]
        self.runs = 0
        # Both ends of the range must be valid scenarios in every case before anything runs.
        for case in self.cases:
            for v in (lo, hi):
                self._check(case, v)

    def _ovs(self, case: dict[str, Any], value: int) -> list[overrides.Override]:
        return [overrides.make(k, v) for k, v in [*case.items(), (self.key, value)]]

    def _check(self, case: dict[str, Any], value: int) -> None:
        desc = ", ".join(f"{k}={v!r}" for k, v in [*case.items(), (self.key, value)])
        sweep.check(
            self.raw, self.base_dir, self._ovs(case, value), f"{self.origin} ({desc})", self.duration_s
        )

    def _task(self, case: dict[str, Any], value: int) -> execution.Task:
        params = {**case, self.key: value}
        pid = "p" + hashlib.sha256(json.dumps(params, sort_keys=True, default=str).encode()).hexdigest()[:10]
        return execution.Task(
            value,
            pid,
            self.seed,
            tuple(params.items()),
            tuple((o.key, o.value) for o in self._ovs(case, value)),
            self.text,
            self.origin,
            None if self.base_dir is None else str(self.base_dir.resolve()),
            self.duration_s,
            None,
        )

    def evaluate(self, wanted: list[tuple[CaseResult, int]]) -> None:
        """Run the (case, value) pairs not run yet, in parallel on the backend."""
        todo: dict[str, tuple[CaseResult, int]] = {}
        tasks = []
        for cr, v in wanted:
            if v in cr.rows:
                continue
            self._check(cr.case, v)
            t = self._task(cr.case, v)
            if t.key + str(id(cr)) in todo:
                continue
            todo[t.key + str(id(cr))] = (cr, v)
            tasks.append((t, cr))
        by_task = {id(t): cr for t, cr in tasks}

        def done(t: execution.Task, row: dict[str, Any]) -> None:
            self.runs += 1
            if self.on_run:
                self.on_run(self.runs)
            if row["status"] != "complete":
                raise RunFailed(
                    f"{self.origin}: the run at {self.key}={t.point} "
                    f"({by_task[id(t)].label}) failed: {row['error']}"
                )
            by_task[id(t)].rows[t.point] = row

        execution.execute([t for t, _ in tasks], done, self.backend, self.jobs, self.address)

    def failing(self, cr: CaseResult, v: int) -> list[Constraint]:
        return [c for c in self.constraints if not c.holds(cr.rows[v])]

    def _at(self, x: int) -> int:
        """The key's value at position ``x`` of the search: the value itself when minimizing,
        mirrored in the range when maximizing (the largest value meeting the constraints is the
        smallest position), so one search serves both."""
        return self.lo + self.hi - x if self.maximize else x

    def bisect(self) -> PlanResult:
        at = self._at
        crs = [CaseResult(case) for case in self.cases]
        self.evaluate([(cr, v) for cr in crs for v in (self.lo, self.hi)])
        state: dict[int, tuple[int, int, list[Constraint]]] = {}
        for i, cr in enumerate(crs):
            lo_row, hi_row = cr.rows[at(self.lo)], cr.rows[at(self.hi)]
            up = [c for c in self.constraints if not c.holds(lo_row) and c.holds(hi_row)]
            never = [c for c in self.constraints if not c.holds(lo_row) and not c.holds(hi_row)]
            if never:
                cr.why = (
                    f"no value in {self.lo}..{self.hi}: {never[0]} fails at both ends "
                    f"({never[0].shown(hi_row)} at {at(self.hi)})"
                )
                continue
            if not up:
                cr.answer = at(self.lo)
                cr.why = f"every constraint holds at the {self._end} end of the range ({at(self.lo)})"
                continue
            state[i] = (self.lo, self.hi, up)
        while any(hi - lo > 1 for lo, hi, _ in state.values()):
            open_ = {i: s for i, s in state.items() if s[1] - s[0] > 1}
            k = max(1, (self.jobs or execution.default_jobs()) // len(open_))
            wanted = []
            for i, (lo, hi, _) in open_.items():
                probes = sorted({lo + (hi - lo) * j // (k + 1) for j in range(1, k + 1)} - {lo, hi})
                wanted += [(crs[i], at(x)) for x in probes or [(lo + hi) // 2]]
            self.evaluate(wanted)
            for i, (lo, hi, up) in open_.items():
                cr = crs[i]
                inside = sorted(x for x in map(at, cr.rows) if lo < x < hi)
                ok = [x for x in inside if all(c.holds(cr.rows[at(x)]) for c in up)]
                new_hi = min(ok, default=hi)
                new_lo = max([x for x in inside if x < new_hi], default=lo)
                if any(x > new_hi and not all(c.holds(cr.rows[at(x)]) for c in up) for x in inside):
                    side = "below" if self.maximize else "above"
                    cr.warning = f"not monotone: a constraint that binds fails {side} {at(new_hi)}"
                state[i] = (new_lo, new_hi, up)
        for i, (_lo, hi, up) in state.items():
            self._conclude(crs[i], hi, up)
        return self._result(crs)

    def _result(self, crs: list[CaseResult]) -> PlanResult:
        """The plan's result, each answer checked for a mostly idle hall."""
        for cr in crs:
            if cr.answer is not None:
                cr.idle = sweep.idle_note(cr.rows[cr.answer].get("busy_fraction"))
        return PlanResult(self.key, self.constraints, crs, self.runs, self.maximize)

    @property
    def _end(self) -> str:
        """The end of the range the search starts from."""
        return "high" if self.maximize else "low"

    def _conclude(self, cr: CaseResult, x: int, up: list[Constraint]) -> None:
        at = self._at
        a = at(x)
        capped = self.failing(cr, a)
        below = cr.rows[at(x - 1)]
        cr.binding = [c for c in up if not c.holds(below)]
        if capped:
            need = "at most" if self.maximize else "at least"
            cr.why = (
                f"no value in {self.lo}..{self.hi}: {', '.join(map(str, cr.binding))} needs {need} {a}, "
                f"where {capped[0].shown(cr.rows[a])}"
            )
            return
        cr.answer = a
        cr.why = "binding at {}: {}".format(at(x - 1), "; ".join(c.shown(below) for c in cr.binding))

    def sweep_range(self) -> PlanResult:
        at = self._at
        crs = [CaseResult(case) for case in self.cases]
        self.evaluate([(cr, v) for cr in crs for v in range(self.lo, self.hi + 1)])
        for cr in crs:
            ok = [x for x in range(self.lo, self.hi + 1) if not self.failing(cr, at(x))]
            if not ok:
                worst = self.failing(cr, at(self.hi))
                cr.why = (
                    f"no value in {self.lo}..{self.hi} meets every constraint "
                    f"(at {at(self.hi)}: {worst[0].shown(cr.rows[at(self.hi)])})"
                )
                continue
            a = ok[0]
            if ok != list(range(a, ok[-1] + 1)):
                cr.warning = (
                    f"not monotone: the constraints hold at {at(a)} but not at every value up to {at(ok[-1])}"
                )
            cr.answer = at(a)
            if a == self.lo:
                cr.why = f"every constraint holds at the {self._end} end of the range ({at(self.lo)})"
            else:
                cr.binding = self.failing(cr, at(a - 1))
                cr.why = "binding at {}: {}".format(
                    at(a - 1), "; ".join(c.shown(cr.rows[at(a - 1)]) for c in cr.binding)
                )
        return self._result(crs)
