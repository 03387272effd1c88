"""Clocks for the next step: power caps (facility and rows) and thermal equilibrium.

Functions of explicit arguments: the chips and their layout (``Chips``, fixed for a run), the caps
in force (``PowerCap``), the clocks the chips run at, and the operating point a step measured
(``OperatingPoint``). Caps are met by scaling the clock of every busy chip in scope; dynamic power
follows f^k (ASM k = dvfs_exponent), performance follows f.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import numpy.typing as npt

from twin.physics import cooling, effects, power
from twin.physics.load import Load
from twin.spec.catalog import Accelerator
from twin.spec.params import CoolingParams, PowerChainParams
from twin.spec.topology import Topology

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

# Chip-to-chip spread, fixed per chip for a run (``Chips.of``, ``spread``): factors ~ N(1, sigma)
# clipped to +-3 sigma; 0 makes every chip the nominal one.
# Power at a given load (manufacturing / leakage). 3P/DER: same-SKU GPUs differ by 8 % (max 22 %)
# on average in performance under power management, attributed to manufacturing variability
# (Sinha et al., "Not All GPUs Are Created Equal", SC22, arXiv 2208.11035); read here as a spread
# of power at equal work of ~8 % across the p5-p95 range, sigma = 8 % / 3.3 = 2.5 % (DER; the
# reading of performance spread as power spread is ASM).
CHIP_POWER_SPREAD = 0.025
# Junction-to-coolant resistance (cold-plate mounting, thermal-interface bond line). ASM: no
# published figure found; the interface is roughly a third to a half of the package's resistance
# and its bond line varies by +-10-20 % between assemblies, so ~5 % of the total.
COLD_PLATE_R_SPREAD = 0.05


@dataclass(frozen=True)
class Chips:
    """What the clocks are solved over, fixed for a run: the accelerator, the cooling and power
    parameters, the layout, the shared all-ones clock (read-only) and each chip's fixed spread:
    its power at a given load, g P(u, f) (``p_scale`` = g), and its junction-to-coolant
    resistance, h R (``r_scale`` = h; ``spread``)."""

    acc: Accelerator
    cp: CoolingParams
    pp: PowerChainParams
    topo: Topology
    chip_row: npt.NDArray[np.int32]  # row of each chip
    ones: FloatArray  # the clock while nothing is capped or hot (shared, read-only)
    p_scale: FloatArray  # g: power factor of each chip [-]
    r_scale: FloatArray  # h: resistance factor of each chip [-]
    idle_chip: FloatArray  # g P_idle [W]
    hg: FloatArray  # h g: a chip's junction rise over the nominal chip's at the same load [-]
    us_hg_max: FloatArray  # largest h g of each UltraServer [-]
    us_p_scale: FloatArray  # sum of g over each UltraServer's chips [-]

    @classmethod
    def of(
        cls,
        acc: Accelerator,
        cp: CoolingParams,
        pp: PowerChainParams,
        topo: Topology,
        chip_row: npt.NDArray[np.int32],
        ones: FloatArray,
        rng: np.random.Generator,
    ) -> Chips:
        """The chips with their spread drawn once from ``rng`` (``twin.spec.rng.chip_spread``)."""
        g, h = spread(rng, topo.chips, CHIP_POWER_SPREAD, COLD_PLATE_R_SPREAD)
        hg = h * g
        for a in (g, h, hg):
            a.setflags(write=False)
        return cls(
            acc,
            cp,
            pp,
            topo,
            chip_row,
            ones,
            g,
            h,
            acc.idle_w * g,
            hg,
            topo.max_per_us(hg),
            topo.per_us(g),
        )

    def dynamic_w(self, util: FloatArray) -> FloatArray:
        """Dynamic chip power at full clock g (P_tdp - P_idle) u [W] (``power.dynamic_w`` with
        each chip's power factor)."""
        out: FloatArray = power.dynamic_w(self.acc.tdp_w, self.acc.idle_w, util) * self.p_scale
        return out


def spread(rng: np.random.Generator, n: int, sigma_p: float, sigma_r: float) -> tuple[FloatArray, FloatArray]:
    """(power factor g, resistance factor h) of ``n`` chips: each ~ N(1, sigma) clipped to
    +-3 sigma (``CHIP_POWER_SPREAD``, ``COLD_PLATE_R_SPREAD``); both drawn every time (sigma 0:
    ones) so that one spread does not move the other's draws."""
    z = np.clip(rng.standard_normal((2, n)), -3.0, 3.0)
    return 1.0 + sigma_p * z[0], 1.0 + sigma_r * z[1]


@dataclass(slots=True)
class OperatingPoint:
    """A step as the next clocks are solved from it."""

    load: Load  # the chips' utilisation at full clock, 0 on unpowered chips (per chip when asked)
    dyn_full: FloatArray | None  # (P_tdp - P_idle) u [W], or None: derived when needed
    it_w: float  # IT power [W]
    facility_w: float  # the facility power a facility cap is measured against [W]
    us_it: FloatArray  # IT power per UltraServer [W]
    speed: FloatArray  # rack loop pump speed per UltraServer [-]

    @property
    def util(self) -> FloatArray:
        """Utilisation of every chip at full clock [-]."""
        return self.load.util

    @property
    def alive(self) -> BoolArray:
        """Powered chips."""
        return self.load.alive


@dataclass(frozen=True, slots=True)
class CapShare:
    """A pool's part of a cap its hall shares among its pools (``twin.compose.hall``), handed to
    its step as values: the hall's cap in force (None: the pool's own, which the first pool's
    is) and the pool's IT target over its proportional share (``shared_targets``)."""

    facility_w: float | None
    it_scale: float


@dataclass
class PowerCap:
    """The power caps of one facility: standing caps ([power] or an open-ended power_cap event),
    the timed ones resolved on top of them (``twin.physics.effects``), a campus's share of its cap for
    this hall, and, when the facility shares a cap with others (``shared_targets``), its IT
    target over the proportional one and its last step's basis for it. The ratings of an
    oversubscribed IT feed and row feeds (``power.tier_rating_w``) hold under every cap: no
    power_cap event lifts them."""

    standing_facility_w: float
    standing_row_w: FloatArray
    own_w: float  # the hall's own facility cap (standing or timed) [W]; inf: none
    row_w: FloatArray  # row caps in force [W]; inf: none
    facility_w: float  # the facility cap in force: the lower of ``own_w`` and ``site_w`` [W]
    rows_capped: bool  # any row cap finite
    site_w: float = math.inf  # a campus's share of its cap (``twin.compose.campus``; inf: none)
    it_scale: float = 1.0  # IT target over the proportional share (1: alone under its cap)
    basis: tuple[float, float, float] = field(default=(0.0, 0.0, 0.0))
    it_rating_w: float = math.inf  # the IT feed's rating [W]; inf: rated at nameplate
    row_rating_w: FloatArray | None = None  # each row feed's rating [W]; None: at nameplate

    @classmethod
    def standing(
        cls,
        pp: PowerChainParams,
        rows: int,
        us_nameplate_w: float = 0.0,
        us_per_row: npt.ArrayLike | None = None,
    ) -> PowerCap:
        """The standing caps of [power], with the ratings of the oversubscribed tiers from the
        nameplate IT power of one UltraServer ``us_nameplate_w`` (rack input, full load and
        clock) and the UltraServers in each row ``us_per_row``."""
        fac = effects.no_cap(pp.facility_cap_w)
        row = np.full(rows, effects.no_cap(pp.row_cap_w))
        it_rating, row_rating = math.inf, None
        if us_per_row is not None:
            row_nameplate = us_nameplate_w * np.asarray(us_per_row, dtype=np.float64)
            it_rating = power.tier_rating_w(float(row_nameplate.sum()), pp.oversubscription)
            if pp.row_oversubscription > 0:
                row_rating = row_nameplate * power.tier_rating_w(1.0, pp.row_oversubscription)
        cap = cls(fac, row, fac, row.copy(), fac, False, it_rating_w=it_rating, row_rating_w=row_rating)
        cap.resolved(fac, row.copy())
        return cap

    @property
    def capped(self) -> bool:
        """A facility, IT feed or row cap is in force."""
        return math.isfinite(self.facility_w) or self.rows_capped or math.isfinite(self.it_rating_w)

    def set_standing(self, what: str, r: int, cap: float) -> None:
        if what == effects.FACILITY_CAP:
            self.standing_facility_w = cap
        else:
            self.standing_row_w[r] = cap

    def event(
        self, timeline: effects.Timeline, what: str, r: int, cap_w: float, t_s: int, end_s: int
    ) -> None:
        """A power_cap event on ``what`` (``effects.FACILITY_CAP`` or ``effects.ROW_CAP``, row
        ``r``): an open-ended cap replaces the standing cap of its target, a cleared one (inf)
        ends every cap there, a timed one is an interval of its own (resolve after)."""
        if math.isinf(cap_w):
            timeline.end(lambda e: e.what == what and e.index == r)
            self.set_standing(what, r, math.inf)
        elif end_s < 0:
            self.set_standing(what, r, cap_w)
        else:
            timeline.add(effects.Effect(what, r, cap_w, t_s, end_s))

    def resolved(self, facility_w: float, row_w: FloatArray) -> None:
        """The caps resolved from the standing ones and the active intervals."""
        self.own_w = facility_w
        self.facility_w = min(facility_w, self.site_w)
        self.row_w = row_w if self.row_rating_w is None else np.minimum(row_w, self.row_rating_w)
        self.rows_capped = bool(np.isfinite(self.row_w).any())

    def take(self, share: CapShare) -> None:
        """The hall's cap and this pool's scale under it (``CapShare``), for the step that takes them."""
        if share.facility_w is not None:
            self.facility_w = share.facility_w
        self.it_scale = share.it_scale

    def set_site(self, cap_w: float) -> None:
        """A campus's share of its cap for this hall (inf: none)."""
        self.site_w = cap_w
        self.facility_w = min(self.own_w, cap_w)

    def in_step_it_target_w(
        self, last: OperatingPoint | None, first_ratio: Callable[[], float] | None
    ) -> float:
        """The facility cap as IT watts inside a step: at the last step's ratio of IT to
        facility power (the plant of a step comes after its chips); without a last step at
        ``first_ratio()`` (a run's first step: the plant's and the chain's answer to its own
        IT power); the IT feed's rating when lower; inf without either."""
        if not math.isfinite(self.facility_w):
            return self.it_rating_w
        if last is not None:
            return self.it_target_w(last.it_w, last.facility_w)
        if first_ratio is not None:
            return self.it_target_w(first_ratio(), 1.0)
        return self.it_rating_w

    def it_target_w(self, it_w: float, facility_w: float) -> float:
        """The facility cap as IT watts at an operating point (IT ``it_w``, facility
        ``facility_w``; facility power scales ~ with IT power there), times the share scale when
        the facility shares a cap with others; the IT feed's rating when lower; inf when
        uncapped."""
        if not math.isfinite(self.facility_w) or facility_w <= 0:
            return self.it_rating_w
        return min(self.facility_w * it_w / facility_w * self.it_scale, self.it_rating_w)


def next_clock(
    ch: Chips,
    cap: PowerCap,
    clock: FloatArray,
    full_clock: bool,
    op: OperatingPoint,
    coolant_us: FloatArray,
    r_us: FloatArray,
) -> FloatArray:
    """Clock per chip for the next step from the operating point ``op`` run at ``clock``
    (``full_clock``: all ones): the lowest of the facility cap, the row cap and the thermal
    limit. Returns the shared all-ones clock when nothing is capped and no chip can be hot (the
    common step)."""
    cp, topo = ch.cp, ch.topo
    k = cp.dvfs_exponent
    # Fast exit: even the hottest-running chip (largest h g) at TDP on the warmest coolant stays
    # below the throttle point.
    cool = (
        float(cooling.junction_c(coolant_us, r_us * ch.us_hg_max, ch.acc.tdp_w).max()) <= cp.throttle_temp_c
    )
    if not cap.capped and cool:
        return ch.ones if cp.min_clock <= 1.0 else np.full(topo.chips, cp.min_clock)
    if (
        cool
        and not cap.rows_capped
        and full_clock
        and cp.min_clock <= 1.0
        and cap.it_target_w(op.it_w, op.facility_w) >= op.it_w
    ):
        # A facility cap with room to spare (a campus shares its cap among its halls every step).
        # At full clock the scale below is x = (target - (IT - dyn)) / dyn, at least 1 exactly
        # when the IT target is at least the IT power: every clock would come out 1, so the
        # shared all-ones clock is returned without a pass over the chips.
        return ch.ones
    dyn_full = op.dyn_full
    if dyn_full is None:
        dyn_full = ch.dynamic_w(op.util)
    it_target = cap.it_target_w(op.it_w, op.facility_w)
    f = (
        cap_clock(ch, cap, clock, full_clock, dyn_full, op.it_w, it_target, op.us_it)
        if cap.capped
        else np.ones(topo.chips)
    )
    f = np.maximum(f, cp.min_clock)
    # Thermal: the largest clock whose junction temperature stays on the throttle curve
    # (quasi-steady junction: the package settles in seconds, well inside a step).
    if cool:
        return f
    r = r_us[topo.chip_us] * ch.r_scale
    base = cooling.junction_c(coolant_us[topo.chip_us], r, ch.idle_chip)
    tj_at = cooling.junction_dyn_c(base, r * dyn_full, power.dvfs_power_factor(f, k))
    hot = (tj_at > cp.throttle_temp_c) & op.alive
    if hot.any():
        f[hot] = cooling.thermal_clock(base[hot], r[hot] * dyn_full[hot], f[hot], k, cp)
    return f


def cap_clock(
    ch: Chips,
    cap: PowerCap,
    clock: FloatArray,
    full_clock: bool,
    dyn_full: FloatArray,
    it_w: float,
    it_target: float,
    us_it: FloatArray,
) -> FloatArray:
    """Clock per chip that brings IT power to ``it_target`` [W] (inf: no facility cap) and each
    row to its cap, from the operating point at ``clock`` where IT power is ``it_w`` and
    UltraServer IT ``us_it``. Every busy chip in scope gets the same clock: dynamic power scales
    with f^k, the rest (idle chips, hosts, switches) is fixed."""
    pp, topo = ch.pp, ch.topo
    k = ch.cp.dvfs_exponent
    f = np.ones(topo.chips)
    dyn_it = power.rack_dynamic_w(dyn_full, pp)
    cur = dyn_it if full_clock else dyn_it * power.dvfs_power_factor(clock, k)
    if math.isfinite(it_target):
        # Facility power scales ~ with IT power at this operating point.
        dyn_now = float(cur.sum())
        fixed = it_w - dyn_now
        total_dyn = float(dyn_it.sum())
        if total_dyn > 0:
            f[:] = power.dvfs_clock((it_target - fixed) / total_dyn, k)
    if cap.rows_capped:
        row_dyn_now = np.bincount(ch.chip_row, weights=cur, minlength=topo.rows)
        row_dyn = np.bincount(ch.chip_row, weights=dyn_it, minlength=topo.rows)
        row_it = topo.per_row(us_it)
        row_fixed = row_it - row_dyn_now
        with np.errstate(divide="ignore", invalid="ignore"):
            xr = np.where(row_dyn > 0, (cap.row_w - row_fixed) / row_dyn, 1.0)
        f = np.minimum(f, power.dvfs_clocks(xr, k)[ch.chip_row])
    return f


def within_step(
    ch: Chips,
    cap: PowerCap,
    clock: FloatArray,
    full_clock: bool,
    load: Load,
    dyn_full: FloatArray | None,
    it_w: float,
    us_it: FloatArray,
    it_target: float,
) -> tuple[FloatArray, FloatArray] | None:
    """(clocks lowered inside the step, ``dyn_full``) when the step's load, at the clocks it
    began with (``clock``), draws more than a cap allows (IT power ``it_w``, per UltraServer
    ``us_it``; the facility cap as the IT target ``it_target``, inf: none); None when every cap
    holds. A cap set at the end of the last step meets the last step's load: a job starting, a
    service scaling up or a cap arriving would otherwise overshoot for one step. No clock is
    raised here."""
    over = it_w > it_target
    if not over and cap.rows_capped:
        over = bool((ch.topo.per_row(us_it) > cap.row_w).any())
    if not over:
        return None
    if dyn_full is None:
        dyn_full = ch.dynamic_w(load.util)
    f = np.maximum(cap_clock(ch, cap, clock, full_clock, dyn_full, it_w, it_target, us_it), ch.cp.min_clock)
    lowered: FloatArray = np.minimum(clock, f)
    return lowered, dyn_full


class HasChips(Protocol):
    """A facility as ``basis`` reads it."""

    @property
    def acc(self) -> Accelerator: ...
    @property
    def pp(self) -> PowerChainParams: ...
    @property
    def cp(self) -> CoolingParams: ...


def basis(
    fac: HasChips,
    load: Load,
    clock: FloatArray,
    full_clock: bool,
    it_w: float,
    us_act: FloatArray,
    p_scale: FloatArray | None = None,
) -> tuple[float, float, float]:
    """What a shared cap needs of one facility's step: (IT power, its dynamic part at the
    step's clocks, the dynamic part at full clock) [W at rack input]. ``load`` holds the chips'
    utilisation at full clock (0 on unpowered chips; read per chip below full clock only),
    ``p_scale`` their power factors g (None:
    1), ``us_act`` the sum of g u f per UltraServer at the step's clocks (at full clock the same
    sum, so no pass over the chips)."""
    dp = power.rack_dynamic_w(power.dynamic_w(fac.acc.tdp_w, fac.acc.idle_w, 1.0), fac.pp)
    if full_clock:
        full = dp * float(us_act.sum())
        return it_w, full, full
    util = load.util
    gu = util if p_scale is None else util * p_scale
    full = dp * float(gu.sum())
    now = dp * float((gu * power.dvfs_power_factor(clock, fac.cp.dvfs_exponent)).sum())
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
