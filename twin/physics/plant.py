"""The cooling plant over one step: air side (outside air through an air-side economizer,
CRAHs on chilled water for the rest), liquid side (the facility water loop with its thermal
mass), economizer (towers with a plate heat exchanger, dry coolers, or hybrid coolers that run
wet when hot) with chiller trim, and the plant's electrical power and water.

Functions of the plant's design values (``PlantDesign``, fixed for a run), its state
(``PlantState``: units up, loop temperatures) and the CDUs' flow; the relations are
``twin.physics.cooling``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from twin.physics import cooling, design, power
from twin.physics.design import Design
from twin.physics.site import HOUR_S, Conditions, SiteModel, dewpoint_c
from twin.spec import telemetry
from twin.spec.params import CoolingParams, FactoryParams, PowerChainParams

CP = cooling.WATER_CP_J_KG_K
MIN_FLOW = cooling.MIN_FLOW
# Cooling-tower range (water in - water out): 5 K (3P: design condenser water 35/30 °C,
# aircondlounge.com, facts §8.5).
TOWER_RANGE_K = 5.0


# State of a plant unit (chiller, cooling tower / dry cooler): running, standby (healthy, not needed),
# failed (tripped or lost, until restored).
RUNNING, STANDBY, FAILED = 0, 1, 2
UNIT_STATES = ("running", "standby", "failed")
# What ``plant_step`` reports about the units, recorded as ``factory_ts`` columns of these names.
UNIT_COLUMNS = telemetry.PLANT_UNIT_COLUMNS


@dataclass
class PlantState:
    chillers_up: int
    towers_up: int
    fw_supply_c: float  # facility water supply to the CDUs
    chw_supply_c: float  # chilled water supply to the CRAHs

    @classmethod
    def initial(cls, cp: CoolingParams) -> PlantState:
        """A plant at the start of a run: every unit up, the loops at their setpoints."""
        return cls(
            cp.chiller_units,
            cp.economizer_units,
            cp.supply_setpoint_c - cp.cdu_approach_k,
            cp.chilled_water_c,
        )


@dataclass(frozen=True, slots=True)
class PlantResult:
    """The plant over one step (``run``): its electrical power, free-cooling share, COP, water,
    the heat balance of the water and its units; each field is the ``factory_ts`` column of its
    name."""

    chiller_power_w: float
    pump_power_w: float
    fan_power_w: float
    free_cooling_fraction: float
    chiller_cop: float
    water_l: float
    unmet_heat_w: float
    heat_rejected_w: float
    heat_stored_w: float
    unrejected_fraction: float
    chilled_water_supply_c: float
    chillers_running: float
    chillers_failed: float
    chiller_load_fraction: float
    economizers_running: float
    economizers_failed: float
    economizer_load_fraction: float

    @property
    def cooling_w(self) -> float:
        """The plant's electrical power [W] (``power.cooling_w``)."""
        return power.cooling_w(self.chiller_power_w, self.pump_power_w, self.fan_power_w)

    def share(self, fraction: float, same: frozenset[str]) -> PlantResult:
        """A pool's part of the hall's plant: every figure times ``fraction`` except those named
        in ``same`` (temperatures, COP, shares, units: the hall's as they are)."""
        return PlantResult(
            **{
                f.name: (v if f.name in same else v * fraction)
                for f in dataclasses.fields(self)
                for v in (getattr(self, f.name),)
            }
        )


@dataclass(frozen=True)
class PlantDesign:
    """The plant's design values, fixed for a run (a facility's, or a floor's sums)."""

    cp: CoolingParams
    lf: float  # liquid-cooled share of IT heat [-]
    fw_setpoint_c: float  # facility water supply setpoint [°C]
    econ_unit_effectiveness: float  # one economizer unit's share of the effectiveness [-]
    chiller_unit_w: float  # one chiller's capacity [W]
    design_it_w: float
    design_liquid_w: float
    fw_flow_design: float  # facility water flow at design [kg/s]
    fw_mass_kg: float  # facility water loop mass [kg]
    fw_pump_design_w: float
    fan_design_w: float
    cdu_pump_design_w: float  # per UltraServer loop [W]
    chw_mass_kg: float = 0.0  # chilled-water loop mass of the air side [kg] (``chw_mass_kg``)

    @classmethod
    def of(cls, cp: CoolingParams, d: Design, ultraservers: int, us_design_liquid_w: float) -> PlantDesign:
        """A facility's plant from its design (``twin.physics.design``): pumps and fans at design flow /
        full speed (affinity laws scale them from here); all IT power becomes heat."""
        eff_units = max(cp.economizer_units - cp.economizer_redundancy, 1)
        return cls(
            cp=cp,
            lf=d.liquid_fraction,
            fw_setpoint_c=cp.supply_setpoint_c - cp.cdu_approach_k,
            econ_unit_effectiveness=cp.economizer_effectiveness / eff_units,
            chiller_unit_w=d.chiller_unit_w,
            design_it_w=d.design_it_w,
            design_liquid_w=ultraservers * us_design_liquid_w,
            fw_flow_design=d.facility_design_flow_kg_s,
            fw_mass_kg=d.facility_loop_mass_kg,
            fw_pump_design_w=cooling.pump_design_w(d.facility_design_flow_kg_s, cp),
            fan_design_w=cp.drycooler_fan_w_per_w * d.design_it_w,
            cdu_pump_design_w=cooling.pump_design_w(d.us_design_flow_kg_s, cp),
            chw_mass_kg=chw_mass_kg(cp, (1 - d.liquid_fraction) * d.design_it_w),
        )


def chw_mass_kg(cp: CoolingParams, design_air_w: float) -> float:
    """Water in the air side's chilled-water loop [kg]: sized like the facility water loop,
    ``facility_volume_l_per_kw`` litres per kW of its own design heat (ASM, as that loop's).
    The room air, the CRAH coils and the building's structure are not counted (air holds 1.2
    kJ/m3 K, water 4,180: a 10,000 m3 hall's air is 12 MJ/K next to 28 MJ/K of a 450 kW air
    side's loop), so the air side warms if anything too fast: protection acts early."""
    return cp.facility_volume_l_per_kw * design_air_w / 1000.0 * cooling.WATER_RHO_KG_M3 / 1000.0


def cdu_flow(
    d: PlantDesign, row_flow_fraction: npt.NDArray[np.float64], us_row: npt.NDArray[np.int32]
) -> float:
    """UltraServer loops' summed CDU flow fraction (what the CDU pumps drive) [-]; 0 without
    liquid cooling."""
    return float(row_flow_fraction[us_row].sum()) if d.lf > 0 else 0.0


def unit_states(units: int, up: int, running: int) -> npt.NDArray[np.int8]:
    """State of each of ``units`` identical units with ``up`` healthy and ``running`` of those
    running (the model loads running units equally and does not tell them apart, so the running
    ones are numbered first, then standby, the failed last)."""
    i = np.arange(max(units, 0))
    out: npt.NDArray[np.int8] = np.where(i < running, RUNNING, np.where(i < up, STANDBY, FAILED)).astype(
        np.int8
    )
    return out


def evaporating(cp: CoolingParams, cond: Conditions) -> bool:
    """Whether the plant rejects its heat by evaporation now: cooling towers always, hybrid
    coolers while the dry-bulb is above their switch-over temperature, dry coolers never."""
    return cp.plant == "tower" or (cp.plant == "hybrid" and cond.drybulb_c > cp.hybrid_switch_c)


def sink_c(cp: CoolingParams, cond: Conditions) -> tuple[float, float]:
    """(coldest water the economizer makes, chiller condensing temperature) [°C]: wet-bulb
    driven while evaporating (``evaporating``), dry-bulb driven otherwise."""
    if evaporating(cp, cond):
        tower_water = cond.wetbulb_c + cp.tower_approach_k
        return tower_water + cp.hx_approach_k, tower_water + cp.condenser_approach_k
    return cond.drybulb_c + cp.drycooler_approach_k, cond.drybulb_c + cp.condenser_approach_k


def air_side(
    d: PlantDesign, st: PlantState, air_w: float, sink: float, eps: float, cap_total: float, dt_s: int
) -> tuple[float, float, float]:
    """(economizer, chiller, stored) heat of the air side [W]: the CRAHs' chilled water at its
    setpoint, the economizer precools when cold enough. Heat is conserved: what the economizer
    and the chillers cannot carry is stored in the chilled-water loop (C = ``chw_mass_kg`` c_p),
    which warms at stored / C and so warms the CRAH supply air (``cooling.crah_supply_air_c``);
    once the chillers can, they carry the heat in and remove the stored heat within the step
    (``stored`` < 0). Economizer + chiller + stored = ``air_w`` exactly."""
    chw = d.cp.chilled_water_c
    t0 = st.chw_supply_c
    c_chw = d.chw_mass_kg * CP
    chw_ret = t0 + 6.0
    air_econ = min(air_w, max(eps * air_w * (chw_ret - sink) / 6.0, 0.0)) if air_w > 0 else 0.0
    need = air_w - air_econ
    if c_chw <= 0:  # no air side to store heat in (a design without one): none is stored
        return air_econ, min(need, cap_total), 0.0
    excess = c_chw * max(t0 - chw, 0.0) / dt_s  # stored heat, as a rate over this step
    # The economizer helps release it (its pumps at least at their minimum flow), down to its
    # sink at most; the chillers take the rest.
    flow_w = max(air_w, MIN_FLOW * (1 - d.lf) * d.design_it_w)
    spare = max(eps * flow_w * (chw_ret - sink) / 6.0 - air_econ, 0.0)
    econ_release = min(excess, spare, c_chw * max(t0 - sink, 0.0) / dt_s)
    air_chiller = min(need + excess - econ_release, cap_total)
    air_econ += econ_release
    stored = air_w - air_econ - air_chiller
    st.chw_supply_c = max(t0 + stored * dt_s / c_chw, min(chw, t0))
    return air_econ, air_chiller, stored


def liquid_side(
    d: PlantDesign, st: PlantState, liquid_w: float, sink: float, eps: float, cap_left: float, dt_s: int
) -> tuple[float, float, float, float]:
    """(economizer, chiller, stored) heat of the facility water loop [W] and its pump speed [-].
    m c_p (T_ret - T_set) must go; what the economizer and the chillers cannot carry stays in
    the loop's thermal mass C, whose supply temperature moves by stored dt / C. Economizer +
    chiller + stored = ``liquid_w`` exactly (``liquid_w`` < 0: the rack loops draw heat from
    the facility water)."""
    speed = cooling.pump_speed(liquid_w, d.design_liquid_w) if liquid_w > 0 else MIN_FLOW
    c_fw = d.fw_mass_kg * CP
    if c_fw <= 0:  # no facility water loop (an air-cooled hall)
        return 0.0, 0.0, 0.0, speed
    mcp = d.fw_flow_design * speed * CP
    t_set = d.fw_setpoint_c
    t0 = st.fw_supply_c
    q_in = max(liquid_w, 0.0)

    def econ(t_supply: float) -> float:
        t_ret = t_supply + q_in / mcp
        return max(eps * mcp * (t_ret - sink), 0.0)

    if min(econ(t_set), q_in) + cap_left >= liquid_w:
        # The plant holds the setpoint: econ first, chiller trims; heat stored in the loop
        # (above the setpoint) is removed within the step as far as the economizer's spare
        # capacity and the chillers' allow.
        excess = c_fw * max(t0 - t_set, 0.0) / dt_s
        base = min(econ(t_set), q_in)
        # The economizer's spare capacity at the warmer water releases stored heat (down to
        # its sink at most), the chillers the rest.
        spare = max(econ(t0) - base, 0.0)
        release = min(excess, spare, c_fw * max(t0 - sink, 0.0) / dt_s)
        liq_econ = base + release
        liq_chiller = min(max(liquid_w - base + excess - release, 0.0), cap_left)
        stored = liquid_w - liq_econ - liq_chiller
        st.fw_supply_c = t0 + stored * dt_s / c_fw
        if liquid_w >= 0 and t0 >= t_set:  # released at most the excess: rounding only
            st.fw_supply_c = max(st.fw_supply_c, t_set)
        return liq_econ, liq_chiller, stored, speed
    # Capacity-limited: C dT/dt = Q (1 - eps) - eps m c_p (T - sink) - chiller cap
    # => exact exponential towards T_ss with tau = C / (eps m c_p); the economizer's heat over
    # the step is what the balance leaves: Q - cap - C (T1 - T0) / dt.
    liq_chiller = cap_left
    if eps > 0:
        t_ss = sink + (liquid_w * (1 - eps) - cap_left) / (eps * mcp)
        t1 = cooling.mixed_loop_step(t0, t_ss, c_fw / (eps * mcp), dt_s)
    else:
        t1 = t0 + (liquid_w - cap_left) * dt_s / c_fw
    liq_econ = liquid_w - liq_chiller - c_fw * (t1 - t0) / dt_s
    if liq_econ < 0:  # the sink is warmer than the water: the economizer is bypassed
        liq_econ = 0.0
        t1 = t0 + (liquid_w - cap_left) * dt_s / c_fw
    st.fw_supply_c = t1
    return liq_econ, liq_chiller, liquid_w - liq_econ - liq_chiller, speed


def chillers(
    d: PlantDesign, air_chiller: float, liq_chiller: float, t_cond: float
) -> tuple[float, int, float, float]:
    """(electrical power [W], units running, part-load ratio, COP) of the chillers carrying
    ``air_chiller`` + ``liq_chiller`` [W]: Carnot-fraction COP at the current lift, EnergyPlus
    part-load curve over the units that must run."""
    cp = d.cp
    chiller_load = air_chiller + liq_chiller
    cop_liq = cooling.chiller_cop(d.fw_setpoint_c - 2.0, t_cond - cp.condenser_approach_k, cp)
    cop_air = cooling.chiller_cop(cp.chilled_water_c - 2.0, t_cond - cp.condenser_approach_k, cp)
    chiller_w = 0.0
    running = 0
    plr = 0.0
    if chiller_load > 0:
        running = max(math.ceil(chiller_load / d.chiller_unit_w - 1e-9), 1)
        plr = chiller_load / (running * d.chiller_unit_w)
        cop_mix = chiller_load / (air_chiller / cop_air + liq_chiller / cop_liq)
        full_w = running * d.chiller_unit_w / cop_mix
        chiller_w = full_w * cooling.chiller_part_load_fraction(plr)
    cop = chiller_load / chiller_w if chiller_w > 0 else cop_air
    return chiller_w, running, plr, cop


def tower_water_l(cp: CoolingParams, rejected_w: float, dt_s: int) -> float:
    """Cooling-tower make-up water over ``dt_s`` [L]: evaporation of the share of rejected heat
    carried as latent heat, plus blowdown for the cycles of concentration (make-up = evap x N /
    (N - 1); facts §8.5), plus drift (``tower_drift_fraction`` of the circulating water, which
    carries the heat over the tower's range: m = Q / (c_p range))."""
    evap_kg_s = cp.evaporative_fraction * rejected_w / cooling.LATENT_J_PER_KG
    n = cp.cycles_of_concentration
    drift_kg_s = cp.tower_drift_fraction * rejected_w / (CP * TOWER_RANGE_K)
    return (evap_kg_s * n / (n - 1) + drift_kg_s) * dt_s  # 1 kg = 1 L


def _pumps_w(d: PlantDesign, liquid_w: float, flow: float, speed: float) -> float:
    """CDU secondary pumps (per UltraServer loop, ``flow``: the loops' summed CDU flow) and
    facility water pumps (at ``speed``) by the affinity law, P ~ flow^3; 0 without liquid cooling."""
    if d.lf <= 0:
        return 0.0
    us_speed = cooling.pump_speed(liquid_w, d.design_liquid_w)
    return d.cdu_pump_design_w * us_speed**3 * flow + d.fw_pump_design_w * speed**3


def _outside_air(cp: CoolingParams, cond: Conditions, air_w: float) -> tuple[float, float]:
    """The air side's heat taken by outside air first (``cooling.outside_air``; it leaves with
    the exhaust air, not through the chilled water, the towers or the dry coolers) and the
    evaporative intake's water per joule of the air side's heat."""
    oa_share, oa_evap_kg_per_j = cooling.outside_air(
        cond.drybulb_c, cond.wetbulb_c, dewpoint_c(cond.drybulb_c, cond.rel_humidity), cp
    )
    return oa_share * max(air_w, 0.0), oa_evap_kg_per_j


def _fans_w(d: PlantDesign, st: PlantState, rejected: float, air_w: float) -> tuple[float, float]:
    """The towers' / dry coolers' fans at the speed of the heat ``rejected`` over the design load
    (shared by the units up) and the air side's fans by the cube law on their flow
    (``cooling.air_fan_speed``); returns (fan power, the towers' fan speed)."""
    cp = d.cp
    fan_speed = min(rejected / max(d.design_it_w, 1.0), 1.0)
    design_air_w = (1 - d.lf) * d.design_it_w
    air_fans_w = cp.crah_fan_w_per_w * design_air_w * cooling.air_fan_speed(air_w, design_air_w) ** 3
    fans_w = d.fan_design_w * fan_speed**3 * (st.towers_up / max(cp.economizer_units, 1)) + air_fans_w
    return fans_w, fan_speed


def _water_l(
    cp: CoolingParams, cond: Conditions, rejected: float, oa_evap_kg_per_j: float, air_w: float, dt_s: int
) -> float:
    """Water: the towers' (or wet hybrid coolers') make-up for the heat they evaporate away
    (``tower_water_l``), and the evaporative intake's; dry paths use none."""
    water_l = tower_water_l(cp, rejected, dt_s) if evaporating(cp, cond) else 0.0
    water_l += oa_evap_kg_per_j * max(air_w, 0.0) * dt_s
    return water_l


def run(
    d: PlantDesign, st: PlantState, flow: float, liquid_w: float, air_w: float, cond: Conditions, dt_s: int
) -> PlantResult:
    """The plant over one step with ``liquid_w`` into the facility water and ``air_w`` into the
    air (``st`` moves over the step; ``flow``: ``cdu_flow``): its electrical power (chillers,
    pumps, fans), free-cooling share, COP, water and unmet heat.

    Heat balance, exact every step: ``liquid_w`` + ``air_w`` = ``heat_rejected_w`` (carried
    out by outside air, taken from the water by the economizer and the chillers' evaporators)
    + ``heat_stored_w`` (the change of the heat held in the facility water and the chilled
    water over the step, as a rate; negative while stored heat is released). Pump and fan power
    are electrical loads of the plant, not heat into the water (the tower fans' heat leaves with
    their air; the pumps' shaft heat, ~1 % of the load, and the air side's fans' heat, at
    most ``crah_fan_w_per_w`` of its load, are neglected); the chillers' compressor work is
    rejected at their condensers with the heat they lift and counts in the towers' water, not here."""
    cp = d.cp
    sink, t_cond = sink_c(cp, cond)
    eps = min(st.towers_up * d.econ_unit_effectiveness, 0.95)
    cap_total = st.chillers_up * d.chiller_unit_w
    oa_w, oa_evap_kg_per_j = _outside_air(cp, cond, air_w)
    air_econ, air_chiller, air_stored = air_side(d, st, air_w - oa_w, sink, eps, cap_total, dt_s)
    liq_econ, liq_chiller, liq_stored, speed = liquid_side(
        d, st, liquid_w, sink, eps, cap_total - air_chiller, dt_s
    )

    chiller_load = air_chiller + liq_chiller
    chiller_w, running, plr, cop = chillers(d, air_chiller, liq_chiller, t_cond)
    pumps_w = _pumps_w(d, liquid_w, flow, speed)
    # Heat the towers / dry coolers reject: the water's, with the chillers' compressor work.
    rejected = liq_econ + air_econ + chiller_load + chiller_w
    fans_w, fan_speed = _fans_w(d, st, rejected, air_w)
    water_l = _water_l(cp, cond, rejected, oa_evap_kg_per_j, air_w, dt_s)
    air_econ += oa_w
    total_heat = liquid_w + air_w
    free = (liq_econ + air_econ) / total_heat if total_heat > 0 else 1.0
    # Heat the plant did not reject this step: stored in the facility water or the chilled water.
    unmet = max(liq_stored, 0.0) + max(air_stored, 0.0)
    return PlantResult(
        chiller_power_w=chiller_w,
        pump_power_w=pumps_w,
        fan_power_w=fans_w,
        free_cooling_fraction=min(max(free, 0.0), 1.0),
        chiller_cop=cop,
        water_l=water_l,
        unmet_heat_w=unmet,
        # The heat balance of the water (``run``'s docstring): heat in = rejected + stored.
        heat_rejected_w=liq_econ + air_econ + chiller_load,
        heat_stored_w=liq_stored + air_stored,
        unrejected_fraction=min(unmet / total_heat, 1.0) if total_heat > 0 else 0.0,
        chilled_water_supply_c=st.chw_supply_c,
        # The units: chillers running (the load shared equally, at part-load ratio ``plr``) and
        # failed; the towers / dry coolers all run while there is heat to reject, their fans at
        # ``fan_speed`` (heat rejected over the design load).
        chillers_running=float(min(running, st.chillers_up)),
        chillers_failed=float(cp.chiller_units - st.chillers_up),
        chiller_load_fraction=plr,
        economizers_running=float(st.towers_up if rejected > 0 else 0),
        economizers_failed=float(cp.economizer_units - st.towers_up),
        economizer_load_fraction=fan_speed if st.towers_up and rejected > 0 else 0.0,
    )


def it_per_facility_w(
    d: PlantDesign,
    st: PlantState,
    flow: float,
    it_w: float,
    cond: Conditions,
    dt_s: int,
    ups_rating_w: float,
    pp: PowerChainParams,
) -> float:
    """IT over facility power if IT power ``it_w`` met the plant (design ``d``, a copy of its
    state ``st``, which is left as it was) and the power chain: a first step's ratio, before any
    step has measured one. The liquid share goes to the facility water at once (the loops store
    none), so the plant's power is if anything overstated: a cap converted with it errs towards
    holding."""
    out = run(d, dataclasses.replace(st), flow, d.lf * it_w, (1 - d.lf) * it_w, cond, dt_s)
    cooling_w = out.cooling_w
    facility_w = power.facility_w(
        it_w, cooling_w, power.chain_losses(it_w, cooling_w, ups_rating_w, pp).total_w
    )
    return it_w / facility_w if facility_w > 0 else 1.0


def of_params(p: FactoryParams) -> PlantDesign:
    """The plant of one hall's parameters, as its facility builds it (``PlantDesign.of``)."""
    d = design.derive(p)
    return PlantDesign.of(p.cooling, d, d.ultraservers, max(d.liquid_fraction * d.us_full_load_dc_w, 1.0))


@dataclass(frozen=True)
class YearFigures:
    """A plant's year at a steady IT load (``year``)."""

    pue: float  # facility over IT energy [-]
    wue_l_per_kwh: float  # site water over IT energy [L/kWh] (The Green Grid WUE)
    free_cooling_share: float  # share of the heat rejected without the chillers [-]
    chiller_hours: float  # hours with a chiller running [h]


def year(p: FactoryParams, it_load: float = 0.7, seed: int = 0) -> YearFigures:
    """PUE, WUE and free-cooling share of one hall's plant over a year of its site's weather
    (from 1 January, hourly steps, the synthetic climate's anomalies drawn with ``seed``) at a
    steady IT load of ``it_load`` x the design IT power, with its power chain's losses: the
    annual figures operators report. The plant's thermal masses settle within the hour (time
    constants of minutes), so hourly steps give the energy of the year."""
    pd = of_params(p)
    cp = p.cooling
    d = design.derive(p)
    st = PlantState(cp.chiller_units, cp.economizer_units, pd.fw_setpoint_c, cp.chilled_water_c)
    site_model = SiteModel(dataclasses.replace(p.site, start_day_of_year=1), np.random.default_rng(seed))
    it_w = it_load * d.design_it_w
    liquid_w, air_w = pd.lf * it_w, (1 - pd.lf) * it_w
    flow = d.ultraservers * cooling.pump_speed(liquid_w, pd.design_liquid_w) if pd.lf > 0 else 0.0
    hours = 8760
    facility_j = water_l = free_j = 0.0
    chiller_h = 0
    for h in range(hours):
        cond = site_model.step(h * HOUR_S, HOUR_S)
        out = run(pd, st, flow, liquid_w, air_w, cond, HOUR_S)
        cooling_w = out.cooling_w
        losses = power.chain_losses(it_w, cooling_w, d.ups_rating_w, p.power).total_w
        facility_j += power.facility_w(it_w, cooling_w, losses) * HOUR_S
        water_l += out.water_l
        free_j += out.free_cooling_fraction * (liquid_w + air_w) * HOUR_S
        chiller_h += out.chillers_running > 0
    it_j = it_w * hours * HOUR_S
    return YearFigures(facility_j / it_j, water_l / (it_j / 3.6e6), free_j / it_j, float(chiller_h))
