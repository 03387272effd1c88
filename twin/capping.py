"""Clocks for the next step: power caps (facility and rows) and thermal equilibrium.

A function of the facility state (``twin.facility.Facility``: its caps, clocks and topology).
Caps are met by scaling the clock of every busy chip in scope; dynamic power follows f^k
(ASM k = dvfs_exponent), performance follows f.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from twin import cooling, power

if TYPE_CHECKING:
    from twin.facility import Facility

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


def next_clock(
    fac: Facility,
    util: FloatArray,
    alive: BoolArray,
    dyn_full: FloatArray | None,
    it_w: float,
    facility_w: float,
    us_it: FloatArray,
    coolant_us: FloatArray,
    r_us: FloatArray,
) -> FloatArray:
    """Clock per chip for the next step: the lowest of the facility cap, the row cap and the
    thermal limit. Caps are met by scaling the clock of every busy chip in scope; dynamic power
    follows f^k (ASM k = dvfs_exponent), performance follows f. ``dyn_full`` is
    (P_tdp - P_idle) u, derived from ``util`` when not given. Returns the facility's shared
    all-ones clock when nothing is capped and no chip can be hot (the common step)."""
    cp, pp, topo = fac.cp, fac.pp, fac.topo
    k = cp.dvfs_exponent
    rows_capped = bool(np.isfinite(fac.row_cap_w).any())
    capped = math.isfinite(fac.facility_cap_w) or rows_capped
    # Fast exit: even a chip at TDP on the warmest coolant stays below the throttle point.
    cool = float((coolant_us + r_us * fac.acc.tdp_w).max()) <= cp.throttle_temp_c
    if not capped and cool:
        return fac._ones if cp.min_clock <= 1.0 else np.full(topo.chips, cp.min_clock)
    if cool and not rows_capped and fac._full_clock and cp.min_clock <= 1.0 and (
        fac.facility_cap_w * it_w / facility_w >= it_w
    ):
        # A facility cap with room to spare (a campus shares its cap among its halls every step).
        # At full clock the scale below is x = (target - (IT - dyn)) / dyn, at least 1 exactly
        # when the IT target is at least the IT power: every clock would come out 1, so the
        # shared all-ones clock is returned without a pass over the chips.
        return fac._ones
    if dyn_full is None:
        dyn_full = (fac.acc.tdp_w - fac.acc.idle_w) * util
    f = np.ones(topo.chips)
    dyn_it = dyn_full / pp.psu_efficiency  # rack-input watts of dynamic power at f = 1
    if capped:
        cur = dyn_it if fac._full_clock else dyn_it * power.dvfs_power_factor(fac.clock, k)
    if math.isfinite(fac.facility_cap_w):
        # Facility power scales ~ with IT power at this operating point.
        it_target = fac.facility_cap_w * it_w / facility_w
        dyn_now = float(cur.sum())
        fixed = it_w - dyn_now
        total_dyn = float(dyn_it.sum())
        if total_dyn > 0:
            x = (it_target - fixed) / total_dyn
            f[:] = min(max(x, 0.0), 1.0) ** (1 / k)
    if rows_capped:
        row_dyn_now = np.bincount(fac.chip_row, weights=cur, minlength=topo.rows)
        row_dyn = np.bincount(fac.chip_row, weights=dyn_it, minlength=topo.rows)
        row_it = topo.per_row(us_it)
        row_fixed = row_it - row_dyn_now
        with np.errstate(divide="ignore", invalid="ignore"):
            xr = np.where(row_dyn > 0, (fac.row_cap_w - row_fixed) / row_dyn, 1.0)
        fr = np.clip(xr, 0.0, 1.0) ** (1 / k)
        f = np.minimum(f, fr[fac.chip_row])
    f = np.maximum(f, cp.min_clock)
    # Thermal: the largest clock whose junction temperature stays on the throttle curve
    # (quasi-steady junction: the package settles in seconds, well inside a step).
    if cool:
        return f
    r = r_us[topo.chip_us]
    base = coolant_us[topo.chip_us] + r * fac.acc.idle_w
    tj_at = base + r * dyn_full * power.dvfs_power_factor(f, k)
    hot = (tj_at > cp.throttle_temp_c) & alive
    if hot.any():
        f[hot] = cooling.thermal_clock(base[hot], r[hot] * dyn_full[hot], f[hot], k, cp)
    return f
