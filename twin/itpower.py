"""IT power of a step: chips, hosts and switches at the chips' clocks, rectifier losses included.

``it_power`` is a function of the chips (``twin.capping.Chips``), the system's host and switch
figures, the UltraServers powered off, and the step's utilisation and clocks; the relations are
``twin.power``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from twin import power
from twin.capping import Chips
from twin.catalog import System

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(slots=True)
class ItPower:
    """IT power of a step. Per-chip power is needed only by chip samples, junction protection,
    the live view and the services' share: at full clock it is derived from the utilisation when
    first asked (``chip_p``, ``chip_p_at``), not computed every step."""

    full_p: FloatArray | None  # per chip [W], or None: g (P_idle + (P_tdp - P_idle) u) on demand
    act_chip: FloatArray  # work rate per chip = utilisation x clock [-]
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
    dead: npt.NDArray[np.intp] | None = None  # unpowered chips (utilisation 0 there)
    p_scale: FloatArray | None = None  # g of every chip (None: 1)

    @property
    def chip_p(self) -> FloatArray:
        """Power of every chip [W] (``power.chip_power_w``; 0 on unpowered chips)."""
        if self.full_p is None:
            # Full clock: the work rate is the utilisation.
            p = power.chip_power_full_w(self.idle_w, self.dyn_w, self.act_chip, self.p_scale)
            if self.dead is not None and len(self.dead):
                p[self.dead] = 0.0
            self.full_p = p
        return self.full_p

    def chip_p_at(self, chips: npt.NDArray[np.int64]) -> FloatArray:
        """Power of ``chips`` [W], without the whole per-chip array where it is not built yet
        (``chips`` held by jobs: powered, so never among the unpowered)."""
        if self.full_p is not None:
            out: FloatArray = self.full_p[chips]
            return out
        g = None if self.p_scale is None else self.p_scale[chips]
        return power.chip_power_full_w(self.idle_w, self.dyn_w, self.act_chip[chips], g)


def _full_clock_sums(
    ch: Chips, util: FloatArray, dead: npt.NDArray[np.intp], us_gact: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """At full clock: each UltraServer's chip power from the sums of g and g u over its powered
    chips (``power.us_chip_power_full_w``), and its hottest junction's h P from one pass
    (``power.hottest_chip_power_full_w``)."""
    topo, acc = ch.topo, ch.acc
    nus, c = topo.ultraservers, topo.chips_per_us
    dp = acc.tdp_w - acc.idle_w
    powered = ch.us_p_scale
    if len(dead):
        us_dead = topo.chip_us[dead]
        powered = powered - np.bincount(us_dead, weights=ch.p_scale[dead], minlength=nus)
        # An UltraServer with no powered chip sums to exactly 0 (not the subtraction's rounding).
        powered = np.where(np.bincount(us_dead, minlength=nus) < c, powered, 0.0)
    us_chip_p = power.us_chip_power_full_w(powered, acc.idle_w, dp, us_gact)
    us_chip_max = topo.max_per_us(power.hottest_chip_power_full_w(ch.hg, acc.idle_w, dp, util, dead))
    return us_chip_p, us_chip_max


def it_power(
    ch: Chips,
    sysm: System,
    us_tripped: BoolArray,
    util: FloatArray,
    alive: BoolArray,
    dead: npt.NDArray[np.intp],
    dyn_full: FloatArray | None,
    clock: FloatArray,
    full_clock: bool,
) -> ItPower:
    """Chip, host and switch power at ``clock``; rectifier losses are IT. Hosts follow their
    chips' work rate; switches are constant; a tripped UltraServer (``us_tripped``) draws nothing.

    Each chip draws g times the nominal chip's power at its load and runs its junction h R P
    above its coolant (``Chips``: g, h fixed per chip). At full clock (the common step) the
    UltraServer sums follow from the sums of g and g u over its powered chips (``util`` is 0 on
    the unpowered, ``dead``; ``_full_clock_sums``) and the per-chip array is built only when
    asked for (``ItPower.chip_p``)."""
    topo, acc = ch.topo, ch.acc
    c = topo.chips_per_us
    tripped = us_tripped.any()
    dp = acc.tdp_w - acc.idle_w
    act_chip = util if full_clock else util * clock
    us_act = topo.per_us(act_chip)
    gact = act_chip * ch.p_scale
    us_gact = topo.per_us(gact)
    chip_p: FloatArray | None = None
    if full_clock and not tripped:
        us_chip_p, us_chip_max = _full_clock_sums(ch, util, dead, us_gact)
    else:
        if dyn_full is None:
            dyn_full = ch.dynamic_w(util)
        chip_p = power.chip_power_w(dyn_full, ch.idle_chip, clock, ch.cp.dvfs_exponent, alive)
        if tripped:
            chip_p = np.where(us_tripped[topo.chip_us], 0.0, chip_p)
        us_chip_p = topo.per_us(chip_p)
        us_chip_max = topo.max_per_us(chip_p * ch.r_scale)
    us_host_p = power.us_host_power_w(
        us_act, c, topo.servers_per_us, sysm.host_w_per_server, sysm.host_idle_fraction
    )
    us_dc = np.where(us_tripped, 0.0, us_chip_p + us_host_p + sysm.switch_w)
    us_it = np.where(us_tripped, 0.0, power.rectifier_input_w(us_dc, topo.servers_per_us, ch.pp))
    it_w = float(us_it.sum())
    return ItPower(
        chip_p,
        act_chip,
        us_it,
        it_w,
        it_w - float(us_dc.sum()),
        us_chip_p,
        us_chip_max,
        us_act,
        us_gact,
        acc.idle_w,
        dp,
        dead,
        ch.p_scale,
    )
