"""Random failures: when, where, why, for how long and how far they reach.

Failures arrive as a Poisson process with a per-chip hazard over the chips in service (default
2.0e-5 /h from the Llama 3 405B interruption statistics, facts §9.4). Each failure has a cause
drawn from the cause mix; the cause sets its blast radius (the chip, its whole server, or only the
job on it, for software faults) and a log-normal repair time with the cause's mean. The blast
radius continues to every job with a chip in it (``twin.work.cluster``). Pure functions; no state.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from twin.spec.params import FAILURE_CAUSES, FailureParams

BLASTS = ("chip", "server", "job")


@dataclass(frozen=True)
class CauseTable:
    names: tuple[str, ...]
    cum_weight: npt.NDArray[np.float64]  # cumulative probabilities
    repair_s: npt.NDArray[np.float64]  # mean repair time per cause
    blast: tuple[str, ...]


def cause_table(p: FailureParams) -> CauseTable:
    causes = [p.cause(n) for n in FAILURE_CAUSES]
    w = np.array([c.weight for c in causes], dtype=float)
    if w.sum() <= 0:
        w = np.ones_like(w)
    return CauseTable(
        FAILURE_CAUSES,
        np.cumsum(w / w.sum()),
        np.array([c.repair_h * 3600.0 for c in causes]),
        tuple(c.blast for c in causes),
    )


@dataclass(frozen=True)
class FailureDraw:
    chips: npt.NDArray[np.int64]  # the chip where each failure strikes
    cause: npt.NDArray[np.int64]  # index into CauseTable.names
    repair_s: npt.NDArray[np.int64]  # time to repair


def expected_failures(chips_in_service: float, hazard_per_h: float, dt_s: float) -> float:
    """Poisson mean of failures in a step."""
    return chips_in_service * hazard_per_h * dt_s / 3600.0


def draw(
    out: npt.NDArray[np.int64],
    n: int,
    k: int,
    table: CauseTable,
    repair_sigma: float,
    rng: np.random.Generator,
) -> FailureDraw:
    """Where ``k`` failures strike among the chips in service (of chips 0..``n - 1``, all but
    those ``out`` of service, ascending), their causes and repair times."""
    k = min(k, n - len(out))
    # The i-th chip in service (as a choice among their list would pick, the same draws): i plus
    # the chips out of service before it (a list of every chip in service cost 8 MB a draw).
    rank = rng.choice(n - len(out), size=k, replace=False).astype(np.int64)
    chips = rank + np.searchsorted(out - np.arange(len(out)), rank, side="right")
    cause = np.minimum(np.searchsorted(table.cum_weight, rng.random(k), side="right"), len(table.names) - 1)
    # Log-normal with the cause's mean: exp(sigma z - sigma^2 / 2) has mean 1.
    spread = np.exp(repair_sigma * rng.standard_normal(k) - 0.5 * repair_sigma**2)
    repair = np.round(table.repair_s[cause] * spread).astype(np.int64)
    return FailureDraw(chips, cause.astype(np.int64), repair)
