"""Checkpointing of a training gang: how long one checkpoint write pauses it and how often it
writes one (Young/Daly for the gang's mean time between failures). Pure functions of their
arguments (no state, no I/O).
"""

from __future__ import annotations

import math

from twin.spec.params import TrainingParams


def young_daly_interval_s(write_s: float, mtbf_s: float) -> float:
    """Checkpoint interval that minimises lost work plus checkpoint time: sqrt(2 C M) (Young
    1974; Daly 2006 first order), for a write time C and a gang mean time between failures M."""
    if write_s <= 0 or not math.isfinite(mtbf_s):
        return math.inf
    return math.sqrt(2.0 * write_s * mtbf_s)


def checkpoint_write_s(params: float, chips: int, cp: TrainingParams) -> float:
    """Time a gang pauses to write one checkpoint [s]: ``checkpoint_bytes_per_param`` x N over
    ``checkpoint_chip_bw_bytes_s`` per chip, at most ``checkpoint_storage_bw_bytes_s`` in all."""
    bw = min(max(chips, 1) * cp.checkpoint_chip_bw_bytes_s, cp.checkpoint_storage_bw_bytes_s)
    return params * cp.checkpoint_bytes_per_param / bw if bw > 0 else 0.0


def checkpoint_interval_s(write_s: float, chips: int, chip_hazard_per_h: float, cp: TrainingParams) -> int:
    """A gang's checkpoint interval [s]: Young/Daly for its mean time between failures
    M = 1 / (chips x per-chip hazard), within [``checkpoint_min_interval_s``,
    ``checkpoint_max_interval_s``]."""
    rate = max(chips, 1) * chip_hazard_per_h / 3600.0
    tau = young_daly_interval_s(write_s, 1.0 / rate if rate > 0 else math.inf)
    return int(round(min(max(tau, cp.checkpoint_min_interval_s), cp.checkpoint_max_interval_s)))
