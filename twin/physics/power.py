"""Power: chip power from activity, host/switch overhead, rack rectifiers and the power chain.

Pure vectorised functions. IT power is measured at the rack input (rectifier losses included, as
PUE defines IT equipment); the power chain upstream (PDU, UPS, transformer) adds conversion
losses that are reported per stage.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import overload

import numpy as np
import numpy.typing as npt

from twin.spec.params import PowerChainParams

FloatArray = npt.NDArray[np.float64]


def dvfs_power_factor(clock: FloatArray | float, exponent: float) -> FloatArray | float:
    """Dynamic power at a clock fraction f relative to full clock: f ** exponent (P ~ C V^2 f with
    V roughly proportional to f gives ~f^3; ASM)."""
    c = np.asarray(clock)
    return c * c * c if exponent == 3.0 else c**exponent


@overload
def dynamic_w(tdp_w: float, idle_w: float, util: float) -> float: ...
@overload
def dynamic_w(tdp_w: float, idle_w: float, util: FloatArray) -> FloatArray: ...
def dynamic_w(tdp_w: float, idle_w: float, util: FloatArray | float) -> FloatArray | float:
    """Dynamic chip power at full clock (P_tdp - P_idle) u [W]: the part of ``chip_power_w``
    that DVFS scales."""
    return (tdp_w - idle_w) * util


def chip_power_full_w(
    idle_w: float, dyn_w: float, util: FloatArray, scale: FloatArray | None = None
) -> FloatArray:
    """``chip_power_w`` of powered chips at full clock (f = 1), g (P_idle + (P_tdp - P_idle) u),
    from the dynamic range ``dyn_w`` = P_tdp - P_idle and the chips' power factors ``scale`` = g
    (None: 1) [W]."""
    out: FloatArray = util * dyn_w
    out += idle_w
    if scale is not None:
        out *= scale
    return out


def us_chip_power_full_w(
    powered: FloatArray, idle_w: float, dyn_w: float, util_sum: FloatArray
) -> FloatArray:
    """Summed ``chip_power_w`` of each UltraServer's chips at full clock [W], from the sum of
    its powered chips' power factors g and of g u (unpowered chips have u = 0):
    sum(g) P_idle + (P_tdp - P_idle) sum(g u) (identical chips: g = 1, n P_idle + ... sum(u))."""
    out: FloatArray = powered * idle_w + dyn_w * util_sum
    return out


def hottest_chip_power_full_w(
    hg: FloatArray, idle_w: float, dyn_w: float, util: FloatArray, dead: npt.NDArray[np.intp]
) -> FloatArray:
    """h ``chip_power_w`` of every chip at full clock [W], h g (P_idle + (P_tdp - P_idle) u),
    0 on the unpowered chips ``dead``: its largest per UltraServer is the hottest junction's
    (T_j = coolant + R h P)."""
    out: FloatArray = util * dyn_w
    out += idle_w
    out *= hg
    if len(dead):
        out[dead] = 0.0
    return out


@overload
def rack_dynamic_w(dyn_w: float, p: PowerChainParams) -> float: ...
@overload
def rack_dynamic_w(dyn_w: FloatArray, p: PowerChainParams) -> FloatArray: ...
def rack_dynamic_w(dyn_w: FloatArray | float, p: PowerChainParams) -> FloatArray | float:
    """Dynamic chip power as rack-input watts [W]: what a change of it changes at the rectifier
    input (``rectifier_input_w``, whose fixed part does not move with it)."""
    return dyn_w / p.psu_efficiency


def dvfs_clock(factor: float, exponent: float) -> float:
    """Clock fraction whose dynamic power is ``factor`` of full clock, clipped to 0..1 (the
    inverse of ``dvfs_power_factor``)."""
    return float(min(max(factor, 0.0), 1.0) ** (1 / exponent))


def dvfs_clocks(factor: FloatArray, exponent: float) -> FloatArray:
    """``dvfs_clock`` of many factors."""
    out: FloatArray = np.clip(factor, 0.0, 1.0) ** (1 / exponent)
    return out


def chip_power_w(
    dyn_full_w: FloatArray,
    idle_w: FloatArray | float,
    clock: FloatArray,
    exponent: float,
    alive: npt.NDArray[np.bool_],
) -> FloatArray:
    """Chip power P = P_idle + (P_tdp - P_idle) u f^k [W]: linear in utilisation u (3P:
    ExaDigiT/RAPS compute_node_power), dynamic part scaled by DVFS; ``dyn_full_w`` =
    (P_tdp - P_idle) u; an unpowered chip draws nothing. A chip with power factor g (``Chips``)
    passes g P_idle and g (P_tdp - P_idle) u."""
    out: FloatArray = np.where(alive, idle_w + dyn_full_w * dvfs_power_factor(clock, exponent), 0.0)
    return out


def host_power_w(server_activity: FloatArray, host_w: float, idle_fraction: float) -> FloatArray:
    """Host CPU/DRAM/NIC/fans per server, linear between idle and full with the mean chip
    activity of the server [W]."""
    return host_w * (idle_fraction + (1.0 - idle_fraction) * server_activity)


def us_full_load_dc_w(chips: int, tdp_w: float, servers: int, host_w: float, switch_w: float) -> float:
    """DC power of an UltraServer at full load and full clock [W]: every chip at TDP
    (``chip_power_w`` at u = f = 1), every host at full (``host_power_w`` at activity 1) and its
    switches."""
    return chips * tdp_w + servers * host_w + switch_w


def us_host_power_w(
    us_act: FloatArray, chips_per_us: int, servers_per_us: int, host_w: float, idle_fraction: float
) -> FloatArray:
    """Summed ``host_power_w`` of each UltraServer's servers [W] from its chips' summed activity
    ``us_act``: host power is linear in a server's mean chip activity, so an UltraServer's hosts
    sum to its servers' power at the UltraServer's mean activity (no per-server pass)."""
    return host_power_w(us_act / chips_per_us, host_w * servers_per_us, idle_fraction)


def rectifier_input_w(
    dc_load_w: FloatArray | float, servers: float, p: PowerChainParams
) -> FloatArray | float:
    """Rack rectifier input P_in = (P_out + fixed) / eff (3P: Frontier fit in ExaDigiT/RAPS)."""
    return (dc_load_w + p.psu_fixed_w_per_server * servers) / p.psu_efficiency


def tier_rating_w(nameplate_w: float, ratio: float) -> float:
    """Rating of a power-chain tier oversubscribed by ``ratio`` over the nameplate IT power
    below it: nameplate / (1 + ratio) [W] (3P: Google oversubscribes >= 25 %, Sakalkar et al.,
    ASPLOS 2020). A tier not oversubscribed (ratio <= 0) is rated at nameplate, which its load
    cannot exceed: inf (no standing cap)."""
    return nameplate_w / (1.0 + ratio) if ratio > 0 else math.inf


def ups_loss_w(out_w: float, rating_w: float, p: PowerChainParams) -> float:
    """UPS loss for eta(x) = x / (x + a + b x + c x^2), x = out/rating: loss = rating (a + b x + c x^2)
    (3P shape: Schneider WP108; ASM coefficients, facts §8.3). Zero output still pays the no-load
    term a."""
    x = out_w / rating_w
    return rating_w * (p.ups_a + p.ups_b * x + p.ups_c * x * x)


def cooling_w(chiller_w: float, pump_w: float, fan_w: float) -> float:
    """The cooling plant's electrical power: chillers + pumps + fans [W]."""
    return chiller_w + pump_w + fan_w


def facility_w(it_w: float, cooling_w: float, losses_w: float) -> float:
    """The facility's power: IT + cooling + the power chain's losses [W] (what PUE divides by IT)."""
    return it_w + cooling_w + losses_w


@dataclass(frozen=True)
class ChainLosses:
    pdu_w: float
    ups_w: float
    transformer_w: float

    @property
    def total_w(self) -> float:
        return self.pdu_w + self.ups_w + self.transformer_w


def chain_losses(it_w: float, cooling_w: float, ups_rating_w: float, p: PowerChainParams) -> ChainLosses:
    """Losses upstream of the racks. IT power flows transformer -> UPS -> PDU -> racks; the
    cooling plant is fed from the transformer directly (mechanical load is not on the UPS)."""
    pdu_in = it_w / p.pdu_efficiency
    pdu = pdu_in - it_w
    ups = ups_loss_w(pdu_in, ups_rating_w, p)
    tx_out = pdu_in + ups + cooling_w
    transformer = tx_out / p.transformer_efficiency - tx_out
    return ChainLosses(pdu, ups, transformer)
