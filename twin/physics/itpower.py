"""IT power of a step: chips, hosts and switches at the chips' clocks, rectifier losses included.

``it_power`` is a function of the chips (``twin.physics.capping.Chips``), the system's host and switch
figures, the UltraServers powered off, and the step's load (``twin.physics.load.Load``: utilisation per
segment, the chips of one job on one UltraServer, and per chip when asked) and clocks; the
relations are ``twin.physics.power``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import numpy as np
import numpy.typing as npt

from twin.physics import power
from twin.physics.capping import Chips
from twin.physics.load import Load
from twin.spec.catalog import System

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(slots=True)
class ItPower:
    """IT power of a step. Per-chip power is needed only by chip samples, junction protection,
    the live view and the services' share: at full clock it is derived from the load when
    first asked (``chip_p``, ``chip_p_at``), not computed every step."""

    load: Load  # the step's utilisation (per segment; per chip when asked)
    full_p: FloatArray | None  # per chip [W], or None: g (P_idle + (P_tdp - P_idle) u) on demand
    act: FloatArray | None  # work rate per chip = utilisation x clock, or None: the utilisation
    us_it: FloatArray  # per UltraServer at rack input [W]
    it_w: float
    psu_loss_w: float
    us_chip_w: FloatArray  # chip power per UltraServer [W]
    # Largest h P of each UltraServer's chips (h: the chip's resistance factor): its hottest
    # junction is coolant + R h P (``Chips``) [W].
    us_chip_max_w: FloatArray
    us_act: FloatArray  # summed work rate of each UltraServer's chips [-]
    us_gact: FloatArray  # summed g x work rate (g: the chips' power factors) [-]
    idle_w: float = 0.0
    dyn_w: float = 0.0  # P_tdp - P_idle
    p_scale: FloatArray | None = None  # g of every chip (None: 1)
    us_off: BoolArray | None = None  # UltraServers powered off (None: none)

    @property
    def by_segment(self) -> bool:
        """The UltraServer figures came from the load's segments (full clock)."""
        return self.act is None and self.load.seg is not None

    @property
    def act_chip(self) -> FloatArray:
        """Work rate per chip = utilisation x clock [-] (at full clock the utilisation)."""
        return self.load.util if self.act is None else self.act

    @property
    def chip_p(self) -> FloatArray:
        """Power of every chip [W] (``power.chip_power_w``; 0 on unpowered chips)."""
        if self.full_p is None:
            # Full clock: the work rate is the utilisation.
            load = self.load
            p = power.chip_power_full_w(self.idle_w, self.dyn_w, load.util, self.p_scale)
            p[load.dead] = 0.0
            if self.us_off is not None:
                p.reshape(len(self.us_off), -1)[self.us_off] = 0.0
            self.full_p = p
        return self.full_p

    def chip_p_at(
        self,
        chips: npt.NDArray[np.int64],
        g: FloatArray | None = None,
        owner: npt.NDArray[np.int32] | None = None,
        failed: BoolArray | None = None,
        replicas: bool = False,
    ) -> FloatArray:
        """Power of ``chips`` [W], without the whole per-chip array where it is not built yet
        (``chips`` held by jobs: powered, so never among the unpowered). ``g``: their power
        factors (``p_scale[chips]``), ``owner``, ``failed``: their owners and out-of-service
        flags now, where the caller keeps them; ``replicas``: ``chips`` are every replica's
        (``Load.util_at``)."""
        if self.full_p is not None:
            out: FloatArray = self.full_p[chips]
            return out
        if g is None and self.p_scale is not None:
            g = self.p_scale[chips]
        return power.chip_power_full_w(
            self.idle_w, self.dyn_w, self.load.util_at(chips, owner, failed, replicas), g
        )


def _segment_sums(ch: Chips, load: Load) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """At full clock, from the load's segments (``twin.physics.load.Segments``: chips of one job on one
    UltraServer share their utilisation u): each UltraServer's summed utilisation, summed g u,
    chip power from the sums of g and g u over its powered chips
    (``power.us_chip_power_full_w``), and its hottest junction's h P, the largest over its
    segments of their largest h g times their P (``power.hottest_chip_power_full_w``: h g P is
    monotone in h g, so this is the largest over the chips, to the bit)."""
    seg, act = load.seg, load.seg_act
    assert seg is not None and act is not None
    acc, nus = ch.acc, ch.topo.ultraservers
    dp = acc.tdp_w - acc.idle_w
    us_act = _sum_per_us(seg.us, act * seg.n, nus)
    us_gact = _sum_per_us(seg.us, act * seg.g, nus)
    powered = _sum_per_us(seg.us, seg.g, nus)
    us_chip_p = power.us_chip_power_full_w(powered, acc.idle_w, dp, us_gact)
    us_chip_max = np.zeros(nus)  # an UltraServer without a powered chip: 0
    np.maximum.at(us_chip_max, seg.us, power.hottest_chip_power_full_w(seg.hg, acc.idle_w, dp, act, _NONE))
    return us_act, us_gact, us_chip_p, us_chip_max


_NONE = np.zeros(0, dtype=np.intp)


def _sum_per_us(us: npt.NDArray[np.int64], values: FloatArray, nus: int) -> FloatArray:
    """Sum of per-segment ``values`` over each UltraServer (in segment order)."""
    return np.bincount(us, weights=values, minlength=nus).astype(np.float64, copy=False)


def _full_clock_sums(ch: Chips, util: FloatArray, dead: npt.NDArray[np.intp]) -> tuple[FloatArray, ...]:
    """``_segment_sums`` of a load given chip by chip (``util`` 0 on the unpowered ``dead``):
    the sums of g and g u over each UltraServer's powered chips and its hottest junction's h P
    from one pass over the chips."""
    topo, acc = ch.topo, ch.acc
    nus, c = topo.ultraservers, topo.chips_per_us
    dp = acc.tdp_w - acc.idle_w
    us_act = topo.per_us(util)
    us_gact = topo.per_us(util * ch.p_scale)
    powered = ch.us_p_scale
    if len(dead):
        us_dead = topo.chip_us[dead]
        powered = powered - np.bincount(us_dead, weights=ch.p_scale[dead], minlength=nus)
        # An UltraServer with no powered chip sums to exactly 0 (not the subtraction's rounding).
        powered = np.where(np.bincount(us_dead, minlength=nus) < c, powered, 0.0)
    us_chip_p = power.us_chip_power_full_w(powered, acc.idle_w, dp, us_gact)
    us_chip_max = topo.max_per_us(power.hottest_chip_power_full_w(ch.hg, acc.idle_w, dp, util, dead))
    return us_act, us_gact, us_chip_p, us_chip_max


def _full_clock_us(
    ch: Chips, load: Load, us_tripped: BoolArray, tripped: bool
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """At full clock: the UltraServer sums (activity, weighted activity, chip power, hottest
    chip's power) from the load's segments or chip by chip; a tripped UltraServer's power is 0."""
    if load.seg is not None:
        us_act, us_gact, us_chip_p, us_chip_max = _segment_sums(ch, load)
    else:
        us_act, us_gact, us_chip_p, us_chip_max = _full_clock_sums(ch, load.util, load.dead)
    if tripped:
        us_chip_p = np.where(us_tripped, 0.0, us_chip_p)
        us_chip_max = np.where(us_tripped, 0.0, us_chip_max)
    return us_act, us_gact, us_chip_p, us_chip_max


def _clocked_chips(
    ch: Chips,
    load: Load,
    dyn_full: FloatArray | None,
    clock: FloatArray,
    us_tripped: BoolArray,
    tripped: bool,
) -> tuple[FloatArray, FloatArray, tuple[FloatArray, FloatArray, FloatArray, FloatArray]]:
    """Below full clock: every chip's activity and power at ``clock`` (0 on a tripped
    UltraServer), and the UltraServer sums as ``_full_clock_us`` gives them."""
    topo = ch.topo
    util = load.util
    act = util * clock
    us_act = topo.per_us(act)
    us_gact = topo.per_us(act * ch.p_scale)
    if dyn_full is None:
        dyn_full = ch.dynamic_w(util)
    chip_p = power.chip_power_w(dyn_full, ch.idle_chip, clock, ch.cp.dvfs_exponent, load.alive)
    if tripped:
        chip_p = np.where(us_tripped[topo.chip_us], 0.0, chip_p)
    us_chip_p = topo.per_us(chip_p)
    us_chip_max = topo.max_per_us(chip_p * ch.r_scale)
    return act, chip_p, (us_act, us_gact, us_chip_p, us_chip_max)


def it_power(
    ch: Chips,
    sysm: System,
    us_tripped: BoolArray,
    load: Load,
    dyn_full: FloatArray | None,
    clock: FloatArray,
    full_clock: bool,
) -> ItPower:
    """Chip, host and switch power at ``clock``; rectifier losses are IT. Hosts follow their
    chips' work rate; switches are constant; a tripped UltraServer (``us_tripped``) draws nothing.

    Each chip draws g times the nominal chip's power at its load and runs its junction h R P
    above its coolant (``Chips``: g, h fixed per chip). At full clock (the common step) the
    UltraServer sums follow from the load's segments (``_segment_sums``; a load given chip by
    chip: ``_full_clock_sums``) and the per-chip arrays are built only when asked for
    (``ItPower.chip_p``, ``act_chip``). Below full clock every chip is computed."""
    topo, acc = ch.topo, ch.acc
    c = topo.chips_per_us
    tripped = bool(us_tripped.any())
    dp = acc.tdp_w - acc.idle_w
    chip_p: FloatArray | None = None
    act: FloatArray | None = None
    if full_clock:
        us_act, us_gact, us_chip_p, us_chip_max = _full_clock_us(ch, load, us_tripped, tripped)
    else:
        act, chip_p, (us_act, us_gact, us_chip_p, us_chip_max) = _clocked_chips(
            ch, load, dyn_full, clock, us_tripped, tripped
        )
    us_host_p = power.us_host_power_w(
        us_act, c, topo.servers_per_us, sysm.host_w_per_server, sysm.host_idle_fraction
    )
    us_dc = us_chip_p + us_host_p + sysm.switch_w
    us_it = cast(FloatArray, power.rectifier_input_w(us_dc, topo.servers_per_us, ch.pp))
    if tripped:  # a tripped UltraServer draws nothing
        us_dc = np.where(us_tripped, 0.0, us_dc)
        us_it = np.where(us_tripped, 0.0, us_it)
    add = np.add.reduce  # = .sum(), without its Python wrapper (every step)
    it_w = float(add(us_it))
    return ItPower(
        load,
        chip_p,
        act,
        us_it,
        it_w,
        it_w - float(add(us_dc)),
        us_chip_p,
        us_chip_max,
        us_act,
        us_gact,
        acc.idle_w,
        dp,
        ch.p_scale,
        us_tripped.copy() if tripped else None,
    )
