"""Timed effects as independent intervals.

Every timed event (a power cap, a CDU pump failure, a chiller trip, a cooling-tower loss, an
inference surge) is an interval ``[start_s, end_s)`` that ends itself and nothing else; an
open-ended one (``end_s = -1``) lasts until an event ends it explicitly. The state the model runs
with at a time is a pure function of the intervals active then:

* facility cap = the tightest of the standing cap and every active facility cap [W];
* row cap = the same per row [W];
* CDU flow of a row = the worst (lowest) active flow fraction, 1 when none [-];
* chillers / economizer units up = installed units minus the units every active trip holds down,
  never below zero (each trip takes its own units out) [-];
* surge factor of a service = the largest active factor, 1 when none is active [-].

Nothing is "restored to the value an event replaced": when an interval ends, the state is
re-evaluated from the intervals still active.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from twin.spec.events import Events

FACILITY_CAP, ROW_CAP, CDU, CHILLERS, TOWERS = "facility_cap", "row_cap", "cdu", "chillers", "towers"


@dataclass(frozen=True)
class Effect:
    what: str  # FACILITY_CAP | ROW_CAP | CDU | CHILLERS | TOWERS
    index: int  # row for ROW_CAP / CDU, else 0
    value: float  # cap [W], flow fraction [-] or units held down [-]
    start_s: int
    end_s: int  # -1: until ended by another event

    def active(self, t_s: int) -> bool:
        return self.start_s <= t_s and (self.end_s < 0 or t_s < self.end_s)


@dataclass(frozen=True)
class EffectState:
    facility_cap_w: float  # inf: no cap
    row_cap_w: npt.NDArray[np.float64]  # per row, inf: no cap
    row_flow_fraction: npt.NDArray[np.float64]  # per row, 1 = CDU pumps healthy
    chillers_up: int
    towers_up: int


def resolve(
    effects: Iterable[Effect],
    t_s: int,
    standing_facility_cap_w: float,
    standing_row_cap_w: npt.NDArray[np.float64],
    chiller_units: int,
    tower_units: int,
) -> EffectState:
    """The plant and power state at ``t_s`` from the standing caps and the active intervals."""
    fac = standing_facility_cap_w
    rows = np.array(standing_row_cap_w, dtype=np.float64)
    flow = np.ones(len(rows))
    chillers_down = towers_down = 0
    for e in effects:
        if not e.active(t_s):
            continue
        if e.what == FACILITY_CAP:
            fac = min(fac, e.value)
        elif e.what == ROW_CAP:
            rows[e.index] = min(rows[e.index], e.value)
        elif e.what == CDU:
            flow[e.index] = min(flow[e.index], e.value)
        elif e.what == CHILLERS:
            chillers_down += int(e.value)
        elif e.what == TOWERS:
            towers_down += int(e.value)
    return EffectState(
        facility_cap_w=fac,
        row_cap_w=rows,
        row_flow_fraction=flow,
        chillers_up=max(chiller_units - chillers_down, 0),
        towers_up=max(tower_units - towers_down, 0),
    )


@dataclass
class Timeline:
    """The timed effects of one facility, each an interval of its own."""

    effects: list[Effect] = field(default_factory=list)

    def add(self, e: Effect) -> None:
        self.effects.append(e)

    def end(self, pred: Callable[[Effect], bool]) -> None:
        """The effects ``pred`` selects end now."""
        self.effects = [e for e in self.effects if not pred(e)]

    def end_due(self, t_s: int, ev: Events) -> bool:
        """Intervals that end at or before ``t_s`` end (each only itself), reported in ``ev``;
        True when any did (the state is then to be resolved again from those still active)."""
        if not self.effects or not any(0 <= e.end_s <= t_s for e in self.effects):
            return False
        keep = []
        for e in self.effects:
            if not 0 <= e.end_s <= t_s:
                keep.append(e)
            elif e.what == FACILITY_CAP:
                ev.append(("power_cap", "facility", f"power cap {e.value / 1e6:.3f} MW ended"))
            elif e.what == ROW_CAP:
                ev.append(("power_cap", f"row:{e.index}", f"power cap {e.value / 1e6:.3f} MW ended"))
            elif e.what == CDU:
                ev.append(("cooling_restore", f"row:{e.index}", "CDU pump failure ended"))
            elif e.what == CHILLERS:
                ev.append(("cooling_restore", "plant", f"{int(e.value)} chiller(s) back"))
            else:
                ev.append(("cooling_restore", "plant", f"{int(e.value)} economizer unit(s) back"))
        self.effects = keep
        return True


def row_index(rows: int, target: str) -> int:
    """The row of an event's target (``row:3`` or ``3``), checked against the number of rows."""
    t = target.split(":", 1)[1] if ":" in target else target
    r = int(t)
    if not 0 <= r < rows:
        raise ValueError(f"row {r} out of range 0..{rows - 1}")
    return r


def surge_factor(surges: Iterable[tuple[float, int, int]], t_s: int) -> float:
    """Request-rate multiplier at ``t_s`` from (factor, start_s, end_s) intervals: the largest
    active factor, 1 when none is active."""
    active = [factor for factor, start, end in surges if start <= t_s < end]
    return max(active) if active else 1.0


def no_cap(value_w: float) -> float:
    """A cap value as the model uses it: a value <= 0 means no cap (inf)."""
    return value_w if value_w > 0 else math.inf
