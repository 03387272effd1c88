"""Cooling relations the step uses (``twin.physics.facility``): loops, cold plates, junctions, chillers.

Pure vectorised functions, units in the names. Loop temperatures use the exact solution of
C dT/dt = Q - m c_p (T - T_in) for piecewise-constant inputs, stable at any step size.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from twin.physics.site import STANDARD_PRESSURE_HPA, saturation_vapour_pressure_hpa
from twin.spec.params import CoolingParams

FloatArray = npt.NDArray[np.float64]

WATER_CP_J_KG_K = 4180.0  # water c_p 4.18 kJ/kg K (facts §8.5)
WATER_RHO_KG_M3 = 997.0  # water density near 25 °C
MIN_FLOW = 0.3  # variable-speed pumps and fans never go below 30 % flow (ASM)
AIR_CP_J_KG_K = 1006.0  # dry air c_p near 20 °C (standard psychrometric value)
# Latent heat of vaporisation of water at ~30 °C (2.43 MJ/kg; 2.257 MJ/kg at 100 °C, facts §8.5):
# 1 kWh of heat fully evaporated takes 3.6 MJ / 2.43 MJ/kg = 1.48 L.
LATENT_J_PER_KG = 2.43e6
WATER_AIR_MASS_RATIO = 0.622  # molar mass of water over dry air (18.015 / 28.965)


def loop_flow_kg_s(design_heat_w: FloatArray | float, p: CoolingParams) -> FloatArray | float:
    """Design mass flow from the OCP rule of thumb (litres per minute per kW) [kg/s]."""
    litres_per_s = p.flow_l_min_per_kw * (np.asarray(design_heat_w) / 1000.0) / 60.0
    return litres_per_s * WATER_RHO_KG_M3 / 1000.0


def pump_speed(load_w: float, design_w: float) -> float:
    """Speed of a variable-speed pump holding its loop's design temperature rise: flow in
    proportion to the heat load, between ``MIN_FLOW`` and full [-]."""
    return min(max(load_w / design_w, MIN_FLOW), 1.0)


def loop_pump_speed(load_w: FloatArray, design_w: float) -> FloatArray:
    """``pump_speed`` of many loops [-]."""
    out: FloatArray = load_w / design_w
    np.maximum(out, MIN_FLOW, out=out)  # = np.clip, without its dispatch (every step)
    np.minimum(out, 1.0, out=out)
    return out


def pump_design_w(flow_kg_s: float, p: CoolingParams) -> float:
    """Pump power at design flow [W]: head x volume flow / efficiency."""
    return p.pump_head_pa * (flow_kg_s / WATER_RHO_KG_M3) / p.pump_efficiency


def throttle_clock(t_junction_c: FloatArray, p: CoolingParams) -> FloatArray:
    """Clock factor from junction temperature: 1 below the throttle point, linear down to 0.5 at
    the full-throttle temperature (ASM, facts §8.7)."""
    x = np.clip((t_junction_c - p.throttle_temp_c) / (p.throttle_full_c - p.throttle_temp_c), 0.0, 1.0)
    return 1.0 - 0.5 * x


def chiller_cop(evap_c: float, outdoor_c: float, p: CoolingParams) -> float:
    """COP = eta_Carnot * T_evap / (T_cond - T_evap) with T_cond = outdoor + approach (ASM,
    facts §8.5: eta 0.5-0.6 gives COP 6-7 at design)."""
    t_evap = evap_c + 273.15
    t_cond = outdoor_c + p.condenser_approach_k + 273.15
    lift = max(t_cond - t_evap, 1.0)
    return min(max(p.carnot_fraction * t_evap / lift, p.cop_min), p.cop_max)  # scalar: no NumPy call


def chiller_part_load_fraction(plr: float) -> float:
    """Fraction of full-load power at part-load ratio PLR (EnergyPlus Chiller:Electric curve,
    FFL = 0.03303 + 0.6852 PLR + 0.2818 PLR^2; via SustainDC dc-rl, facts §8.5)."""
    return 0.03303 + 0.6852 * plr + 0.2818 * plr * plr


def mixed_loop_step(t0: float, t_inf: float, tau_s: float, dt_s: float) -> float:
    """Well-mixed volume relaxing towards ``t_inf`` with time constant ``tau_s`` over ``dt_s``
    (exact solution of tau dT/dt = t_inf - T) [°C]."""
    return t_inf + (t0 - t_inf) * math.exp(-dt_s / tau_s)


def loop_return_c(
    ret0_c: FloatArray,
    supply_c: float,
    heat_w: FloatArray,
    flow_kg_s: FloatArray,
    mass_kg: float,
    dt_s: float,
) -> FloatArray:
    """Return temperature of well-mixed loops after ``dt_s`` [°C]: exact solution of
    C dT/dt = Q - m c_p (T - T_supply), C = M c_p; a loop without flow stores all its heat,
    T = T0 + Q dt / C."""
    c_loop = mass_kg * WATER_CP_J_KG_K
    if flow_kg_s.min() > 0:  # every loop flowing (the usual case): no division guard needed
        steady = supply_c + heat_w / (flow_kg_s * WATER_CP_J_KG_K)
        out_flow: FloatArray = steady + (ret0_c - steady) * np.exp(
            -dt_s * flow_kg_s * WATER_CP_J_KG_K / c_loop
        )
        return out_flow
    with np.errstate(divide="ignore", invalid="ignore"):
        steady = supply_c + heat_w / (flow_kg_s * WATER_CP_J_KG_K)
        decay = np.exp(-dt_s * flow_kg_s * WATER_CP_J_KG_K / c_loop)
        ret_flow = steady + (ret0_c - steady) * decay
    out: FloatArray = np.where(flow_kg_s > 0, ret_flow, ret0_c + heat_w * dt_s / c_loop)
    return out


def cold_plate_r_k_per_w(
    design_r: float, convective_share: float, natural_speed: float, flow_fraction: FloatArray
) -> FloatArray:
    """Junction-to-coolant resistance [K/W]: a conduction part plus a forced-convection part
    that grows as flow falls (h ~ velocity^0.8, Dittus-Boelter); without flow only natural
    convection is left (as at ``natural_speed`` of design velocity; ASM)."""
    conv = design_r * convective_share
    out: FloatArray = (design_r - conv) + conv * np.maximum(flow_fraction, natural_speed) ** -0.8
    return out


def junction_c(coolant_c: FloatArray, r_k_per_w: FloatArray, chip_w: FloatArray | float) -> FloatArray:
    """Quasi-steady junction temperature T_j = T_coolant + R P [°C] (the package settles in
    seconds, well inside a step). At P = P_idle: the base that ``junction_dyn_c`` adds the
    dynamic part to."""
    out: FloatArray = coolant_c + r_k_per_w * chip_w
    return out


def junction_dyn_c(
    idle_junction_c: FloatArray, dyn_k: FloatArray, power_factor: FloatArray | float
) -> FloatArray:
    """``junction_c`` of a chip at clock f split as the junction at idle power plus the dynamic
    part: T_j = (T_coolant + R P_idle) + R (P_tdp - P_idle) u f^k [°C], with ``dyn_k`` =
    R (P_tdp - P_idle) u [K] and ``power_factor`` = f^k (``power.dvfs_power_factor``)."""
    out: FloatArray = idle_junction_c + dyn_k * power_factor
    return out


def loop_supply_c(fw_supply_c: float, p: CoolingParams) -> float:
    """Rack loop (CDU secondary) supply [°C]: the facility water supply plus the CDU approach."""
    return fw_supply_c + p.cdu_approach_k


def plate_coolant_c(supply_c: float, ret_c: FloatArray, flowing: npt.NDArray[np.bool_]) -> FloatArray:
    """Coolant the cold plates see [°C]: the mean of supply and return in a flowing loop, a
    stagnant loop's own (mixed) temperature."""
    out: FloatArray = np.where(flowing, 0.5 * (supply_c + ret_c), ret_c)
    return out


def humidity_ratio(dewpoint_c: float, pressure_hpa: float = STANDARD_PRESSURE_HPA) -> float:
    """Water vapour per kg of dry air [kg/kg] of air with this dew point: w = 0.622 e / (p - e),
    e the saturation vapour pressure at the dew point (Magnus, ``twin.physics.site``)."""
    e = float(saturation_vapour_pressure_hpa(dewpoint_c))
    return WATER_AIR_MASS_RATIO * e / (pressure_hpa - e)


def outside_air(
    drybulb_c: float, wetbulb_c: float, dewpoint_c: float, p: CoolingParams
) -> tuple[float, float]:
    """What the air-side economizer does with this outside air: (share of the air side's heat it
    carries [-], water its evaporative intake evaporates per J of air-side heat [kg/J]).

    The hall's air leaves the cold aisle at the supply setpoint T_s and returns at T_r = T_s +
    ``air_return_rise_k``; the air flow carrying heat Q is m c_p = Q / (T_r - T_s) (facts §8.5).
    Outside air at T_oa (after the evaporative intake, if any) is used when its dew point is in
    the envelope: T_oa <= T_s mixed with return air to T_s (all the heat); T_s < T_oa < T_r
    100 % outside air trimmed by the coils, which take m c_p (T_oa - T_s), the economizer the
    share (T_r - T_oa) / (T_r - T_s); T_oa >= T_r or too humid: closed, recirculation (none).

    The evaporative intake cools the air adiabatically (c_p dT = h_fg dw) towards the wet-bulb
    with the media's saturation effectiveness, never below T_s (no need) and never past the
    humidity ratio of the dew-point limit; it evaporates m c_p (T_oa - T_in) / h_fg."""
    if not p.air_economizer or dewpoint_c > p.air_max_dewpoint_c:
        return 0.0, 0.0
    t_s = p.air_supply_c
    rise = p.air_return_rise_k
    t_in = drybulb_c
    if p.evaporative_intake and drybulb_c > t_s:
        dw_max = max(humidity_ratio(p.air_max_dewpoint_c) - humidity_ratio(dewpoint_c), 0.0)
        t_in = max(
            drybulb_c - p.evaporative_effectiveness * (drybulb_c - wetbulb_c),
            t_s,
            drybulb_c - dw_max * LATENT_J_PER_KG / AIR_CP_J_KG_K,
        )
    if t_in >= t_s + rise:
        return 0.0, 0.0
    share = min((t_s + rise - t_in) / rise, 1.0)
    return share, (drybulb_c - t_in) / (rise * LATENT_J_PER_KG)


def air_fan_speed(air_w: float, design_air_w: float) -> float:
    """Speed of the air side's fans [-]: the air flow follows the heat (fixed supply-return rise),
    between ``MIN_FLOW`` and full; 0 with no air-side heat."""
    if air_w <= 0 or design_air_w <= 0:
        return 0.0
    return min(max(air_w / design_air_w, MIN_FLOW), 1.0)


def crah_supply_air_c(chw_supply_c: float, p: CoolingParams) -> float:
    """Supply air of the CRAHs [°C]: its design value, warmer by as much as the chilled water
    runs above its setpoint."""
    return p.air_supply_c + max(chw_supply_c - p.chilled_water_c, 0.0)


def loop_stored_w(mass_kg: float, ret_c: FloatArray, ret0_c: FloatArray, dt_s: float) -> float:
    """Heat the loops stored over ``dt_s`` (their temperature rise times their heat capacity)
    as a mean rate [W]."""
    stored = mass_kg * WATER_CP_J_KG_K * (ret_c - ret0_c)
    return float(stored.sum() / dt_s)


def allowed_junction_c(clock: FloatArray, p: CoolingParams) -> FloatArray:
    """Hottest junction a chip may run at ``clock`` [°C]: the throttle curve (``throttle_clock``)
    inverted; at or below the curve's floor (f <= 0.5) only the shutdown temperature limits it."""
    f = np.asarray(clock, dtype=np.float64)
    t = p.throttle_temp_c + 2.0 * (1.0 - f) * (p.throttle_full_c - p.throttle_temp_c)
    out: FloatArray = np.where(f > 0.5, t, p.shutdown_temp_c)
    return out


def thermal_clock(
    base_c: FloatArray, dyn_k: FloatArray, f_max: FloatArray, k: float, p: CoolingParams
) -> FloatArray:
    """Largest clock f in [0.5, f_max] whose junction temperature base + dyn_k f^k stays on the
    throttle curve (bisection, 30 halvings: 1e-9 of the range); 0.5 when none does."""
    lo = np.full(len(base_c), 0.5)
    hi = np.maximum(np.asarray(f_max, dtype=np.float64), 0.5)
    for _ in range(30):
        mid = 0.5 * (lo + hi)
        ok = throttle_clock(junction_dyn_c(base_c, dyn_k, mid**k), p) >= mid
        lo = np.where(ok, mid, lo)
        hi = np.where(ok, hi, mid)
    return lo
