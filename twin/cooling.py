"""Cooling: direct-to-chip liquid loops with thermal capacitance, air side, and the plant.

Loop temperatures use the exact exponential solution of C dT/dt = Q - m c_p (T - T_supply), which is
stable and exact for piecewise-constant heat at any step size. The plant rejects liquid heat
through a dry-cooler economizer when the outdoor air is cold enough and trims with a chiller whose
COP is a fraction of the Carnot limit between evaporator and condenser temperatures.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from twin.params import CoolingParams

FloatArray = npt.NDArray[np.float64]

WATER_CP_J_KG_K = 4180.0  # water c_p 4.18 kJ/kg K (facts §8.5)
WATER_RHO_KG_M3 = 997.0


def loop_flow_kg_s(design_heat_w: FloatArray | float, p: CoolingParams) -> FloatArray | float:
    """Design mass flow from the OCP rule of thumb (litres per minute per kW) [kg/s]."""
    litres_per_s = p.flow_l_min_per_kw * (np.asarray(design_heat_w) / 1000.0) / 60.0
    return litres_per_s * WATER_RHO_KG_M3 / 1000.0


def steady_return_c(supply_c: float | FloatArray, heat_w: FloatArray, flow_kg_s: FloatArray) -> FloatArray:
    """Steady-state return temperature from Q = m c_p dT [°C]."""
    return supply_c + heat_w / (flow_kg_s * WATER_CP_J_KG_K)


def loop_return_step_c(
    return_c: FloatArray, steady_c: FloatArray, tau_s: FloatArray | float, dt_s: float
) -> FloatArray:
    """Exact update of a well-mixed loop towards its steady state over dt."""
    decay = np.exp(-dt_s / np.asarray(tau_s))
    return steady_c + (return_c - steady_c) * decay


def loop_tau_s(volume_l: float, flow_kg_s: FloatArray | float) -> FloatArray | float:
    """Loop time constant tau = C / (m c_p) = V rho / m [s]."""
    return volume_l * WATER_RHO_KG_M3 / 1000.0 / np.asarray(flow_kg_s)


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
    return float(np.clip(p.carnot_fraction * t_evap / lift, p.cop_min, p.cop_max))


def economizer_fraction(supply_c: float, return_c: float, outdoor_c: float, p: CoolingParams) -> float:
    """Share of a loop's heat the dry cooler removes: all of it when outdoor + approach is at or
    below the supply setpoint, none when at or above the return, linear in between."""
    leaving = outdoor_c + p.drycooler_approach_k
    if leaving <= supply_c:
        return 1.0
    if leaving >= return_c:
        return 0.0
    return (return_c - leaving) / (return_c - supply_c)


@dataclass(frozen=True)
class PlantPower:
    chiller_w: float
    pumps_w: float
    fans_w: float
    free_fraction: float
    cop: float

    @property
    def total_w(self) -> float:
        return self.chiller_w + self.pumps_w + self.fans_w


def plant_power(
    liquid_heat_w: float,
    air_heat_w: float,
    liquid_return_c: float,
    outdoor_c: float,
    design_liquid_flow_kg_s: float,
    p: CoolingParams,
) -> PlantPower:
    """Cooling plant electrical power for the current heat loads."""
    # Liquid side: economizer first, chiller trims the rest.
    f_liq = (
        economizer_fraction(p.supply_setpoint_c, liquid_return_c, outdoor_c, p) if liquid_heat_w > 0 else 1.0
    )
    cop_liq = chiller_cop(p.supply_setpoint_c - 2.0, outdoor_c, p)
    chiller = (1.0 - f_liq) * liquid_heat_w / cop_liq
    # Air side: chilled water at chilled_water_c, 6 K range, same plant.
    f_air = economizer_fraction(p.chilled_water_c, p.chilled_water_c + 6.0, outdoor_c, p)
    cop_air = chiller_cop(p.chilled_water_c - 2.0, outdoor_c, p)
    chiller += (1.0 - f_air) * air_heat_w / cop_air
    # Pumps: variable speed, flow follows load (min 30 %); affinity law P ~ flow^3. Two loops
    # (CDU secondary + facility water), each P_design = dp * Vdot / eta (facts §8.5).
    design_vdot = design_liquid_flow_kg_s / WATER_RHO_KG_M3
    design_pump_w = 2.0 * p.pump_head_pa * design_vdot / p.pump_efficiency
    design_heat = design_liquid_flow_kg_s * WATER_CP_J_KG_K * 10.0  # ~10 K design range
    speed = float(np.clip(liquid_heat_w / design_heat, 0.3, 1.0)) if design_heat > 0 else 0.0
    pumps = design_pump_w * speed**3
    # Fans: dry coolers reject all heat (plus compressor work); CRAH fans move the air-side heat.
    rejected = liquid_heat_w + air_heat_w + chiller
    fans = p.drycooler_fan_w_per_w * rejected + p.crah_fan_w_per_w * air_heat_w
    total_heat = liquid_heat_w + air_heat_w
    free = (f_liq * liquid_heat_w + f_air * air_heat_w) / total_heat if total_heat > 0 else 1.0
    chilled_load = (1.0 - f_liq) * liquid_heat_w + (1.0 - f_air) * air_heat_w
    cop = chilled_load / chiller if chiller > 0 else cop_air
    return PlantPower(chiller, pumps, fans, free, cop)
