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
    cp, topo = fac.cp, fac.topo
    k = cp.dvfs_exponent
    rows_capped = fac._rows_capped
    capped = math.isfinite(fac.facility_cap_w) or rows_capped
    # Fast exit: even a chip at TDP on the warmest coolant stays below the throttle point.
    cool = float((coolant_us + r_us * fac.acc.tdp_w).max()) <= cp.throttle_temp_c
    if not capped and cool:
        return fac._ones if cp.min_clock <= 1.0 else np.full(topo.chips, cp.min_clock)
    if (
        cool
        and not rows_capped
        and fac._full_clock
        and cp.min_clock <= 1.0
        and (fac.facility_cap_w * it_w / facility_w * fac.cap_it_scale >= it_w)
    ):
        # A facility cap with room to spare (a campus shares its cap among its halls every step).
        # At full clock the scale below is x = (target - (IT - dyn)) / dyn, at least 1 exactly
        # when the IT target is at least the IT power: every clock would come out 1, so the
        # shared all-ones clock is returned without a pass over the chips.
        return fac._ones
    if dyn_full is None:
        dyn_full = (fac.acc.tdp_w - fac.acc.idle_w) * util
    it_target = it_target_w(fac, it_w, facility_w)
    f = cap_clock(fac, dyn_full, it_w, it_target, us_it) if capped else np.ones(topo.chips)
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


def cap_clock(
    fac: Facility, dyn_full: FloatArray, it_w: float, it_target: float, us_it: FloatArray
) -> FloatArray:
    """Clock per chip that brings IT power to ``it_target`` [W] (inf: no facility cap) and each
    row to its cap, from the operating point of the facility's current clocks (``fac.clock``)
    where IT power is ``it_w`` and UltraServer IT ``us_it``. Every busy chip in scope gets the
    same clock: dynamic power scales with f^k, the rest (idle chips, hosts, switches) is fixed."""
    cp, pp, topo = fac.cp, fac.pp, fac.topo
    k = cp.dvfs_exponent
    f = np.ones(topo.chips)
    dyn_it = dyn_full / pp.psu_efficiency  # rack-input watts of dynamic power at f = 1
    cur = dyn_it if fac._full_clock else dyn_it * power.dvfs_power_factor(fac.clock, k)
    if math.isfinite(it_target):
        # Facility power scales ~ with IT power at this operating point.
        dyn_now = float(cur.sum())
        fixed = it_w - dyn_now
        total_dyn = float(dyn_it.sum())
        if total_dyn > 0:
            x = (it_target - fixed) / total_dyn
            f[:] = min(max(x, 0.0), 1.0) ** (1 / k)
    if fac._rows_capped:
        row_dyn_now = np.bincount(fac.chip_row, weights=cur, minlength=topo.rows)
        row_dyn = np.bincount(fac.chip_row, weights=dyn_it, minlength=topo.rows)
        row_it = topo.per_row(us_it)
        row_fixed = row_it - row_dyn_now
        with np.errstate(divide="ignore", invalid="ignore"):
            xr = np.where(row_dyn > 0, (fac.row_cap_w - row_fixed) / row_dyn, 1.0)
        fr = np.clip(xr, 0.0, 1.0) ** (1 / k)
        f = np.minimum(f, fr[fac.chip_row])
    return f


def within_step(
    fac: Facility, util: FloatArray, dyn_full: FloatArray | None, it_w: float, us_it: FloatArray
) -> tuple[FloatArray, FloatArray] | None:
    """(clocks lowered inside the step, ``dyn_full``) when the step's load, at the clocks it
    began with, draws more than a cap allows (IT power ``it_w``, per UltraServer ``us_it``);
    None when every cap holds. A cap set at the end of the last step meets the last step's load: a job starting, a
    service scaling up or a cap arriving would otherwise overshoot for one step. The facility
    cap is converted to IT watts at the last step's ratio of IT to facility power (the plant of
    this step comes after the chips; a run's first step asks the plant and the chain what this
    step's IT power would cost, ``Facility.it_per_facility_w``); no clock is raised here."""
    over = False
    it_target = math.inf
    if math.isfinite(fac.facility_cap_w):
        if fac._last is not None:
            it_target = it_target_w(fac, fac._last[3], fac._last[4])
        elif fac._first is not None:  # a run's first step: at this step's own ratio
            it_target = it_target_w(fac, fac.it_per_facility_w(it_w, *fac._first), 1.0)
        over = it_w > it_target
    if not over and fac._rows_capped:
        over = bool((fac.topo.per_row(us_it) > fac.row_cap_w).any())
    if not over:
        return None
    if dyn_full is None:
        dyn_full = (fac.acc.tdp_w - fac.acc.idle_w) * util
    f = np.maximum(cap_clock(fac, dyn_full, it_w, it_target, us_it), fac.cp.min_clock)
    clock: FloatArray = np.minimum(fac.clock, f)
    return clock, dyn_full


def it_target_w(fac: Facility, it_w: float, facility_w: float) -> float:
    """The facility cap as IT watts at an operating point (IT ``it_w``, facility ``facility_w``;
    facility power scales ~ with IT power there), times the facility's share scale when it
    shares a cap with others (``cap_it_scale``, ``shared_targets``); inf when uncapped."""
    if not math.isfinite(fac.facility_cap_w) or facility_w <= 0:
        return math.inf
    return fac.facility_cap_w * it_w / facility_w * fac.cap_it_scale


def basis(
    fac: Facility, util: FloatArray, clock: FloatArray, full_clock: bool, it_w: float, us_act: FloatArray
) -> tuple[float, float, float]:
    """What a shared cap needs of one facility's step: (IT power, its dynamic part at the
    step's clocks, the dynamic part at full clock) [W at rack input]. ``util`` is the chips'
    utilisation at full clock (0 on unpowered chips), ``us_act`` its sum per UltraServer at the
    step's clocks (at full clock the same sum, so no pass over the chips)."""
    dp = (fac.acc.tdp_w - fac.acc.idle_w) / fac.pp.psu_efficiency
    if full_clock:
        full = dp * float(us_act.sum())
        return it_w, full, full
    full = dp * float(util.sum())
    now = dp * float((util * power.dvfs_power_factor(clock, fac.cp.dvfs_exponent)).sum())
    return it_w, now, full


def shared_targets(bases: list[tuple[float, float, float]], it_target: float) -> list[float]:
    """IT watts for each of several facilities under one cap of ``it_target`` IT watts
    (a floor's systems, a campus's halls): every busy chip under the cap gets the same clock,
    as inside one facility. With x = (target - fixed) / dynamic-at-full-clock over all of them
    (clipped to 0..1), facility k gets fixed_k + x dyn_k; at x = 1 every target is at least its
    IT power (nothing binds). Shares in proportion to IT power instead would push a lightly
    loaded facility (mostly idle power, which no clock sheds) to its lowest clock while a busy
    one kept its speed."""
    fixed = sum(it - now for it, now, _ in bases)
    dyn = sum(full for _, _, full in bases)
    x = min(max((it_target - fixed) / dyn, 0.0), 1.0) if dyn > 0 else 1.0
    return [it - now + x * full for it, now, full in bases]
