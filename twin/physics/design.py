"""The design of a run: the fixed facts derived once from the parameters.

Shapes, nominal and full-load powers (hardware overrides applied), thermal masses and resistances,
plant capacities and protection limits. The model reads them from here; the Design is recorded
with the run (``runs.design_json``) so that storage, ``twin compare`` and the TUI read the run's
own shape and nominal figures instead of deriving them again from the catalog.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from typing import Any

from twin.physics import cooling, power
from twin.spec.params import FactoryParams

DESIGN_VERSION = 1


@dataclass(frozen=True)
class Design:
    version: int
    system: str  # catalog key
    accelerator: str  # catalog key
    ultraservers: int
    ultraservers_per_row: int
    rows: int
    chips_per_us: int
    servers_per_us: int
    chips: int
    chip_tdp_w: float  # chip power at full clock and full load [W]
    chip_idle_w: float  # chip power idle [W]
    us_full_load_dc_w: float  # one UltraServer, chips at TDP, hosts full, switches [W]
    us_full_load_it_w: float  # the same at rack input (rectifier losses included) [W]
    design_it_w: float  # the hall at full load, rack input [W]
    liquid_fraction: float  # share of IT heat into the liquid loops [-]
    cold_plate_r_k_per_w: float  # junction to coolant at design flow [K/W]
    air_r_k_per_w: float  # junction to inlet air [K/W]
    us_loop_mass_kg: float  # water in one UltraServer's rack loop [kg]
    us_design_flow_kg_s: float  # rack loop flow at full load [kg/s]
    facility_loop_mass_kg: float  # water in the facility loop [kg]
    facility_design_flow_kg_s: float  # facility loop flow at full load [kg/s]
    chiller_unit_w: float  # heat one chiller rejects at full load [W]
    ups_rating_w: float  # UPS rating [W]
    throttle_temp_c: float  # T_j where throttling starts [°C]
    throttle_full_c: float  # T_j at the throttle curve's floor (50 % clock) [°C]
    shutdown_temp_c: float  # T_j that powers an UltraServer off [°C]

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Design:
        """A recorded Design; unknown keys (a newer writer) are ignored, missing ones refused."""
        raw: dict[str, Any] = json.loads(text)
        if not isinstance(raw, dict):
            raise ValueError("design_json is not an object")
        names = {f.name for f in fields(cls)}
        missing = names - raw.keys()
        if missing:
            raise ValueError(f"design_json lacks {', '.join(sorted(missing))}")
        return cls(**{k: raw[k] for k in names})


def derive(p: FactoryParams) -> Design:
    """The Design of a run from its parameters (pure; call once per run)."""
    hall, cp, pp = p.hall, p.cooling, p.power
    sysm, acc = hall.system, hall.accelerator
    nus = hall.ultraservers
    us_dc = power.us_full_load_dc_w(
        sysm.chips, acc.tdp_w, sysm.servers, sysm.host_w_per_server, sysm.switch_w
    )
    us_it = float(power.rectifier_input_w(us_dc, sysm.servers, pp))
    design_it = nus * us_dc  # sizing basis of the plant and the UPS (DC load at full power)
    lf = sysm.liquid_fraction
    us_liquid = max(lf * us_dc, 1.0)
    liquid = nus * us_liquid
    return Design(
        version=DESIGN_VERSION,
        system=sysm.key,
        accelerator=sysm.accelerator,
        ultraservers=nus,
        ultraservers_per_row=hall.ultraservers_per_row,
        rows=-(-nus // hall.ultraservers_per_row),
        chips_per_us=sysm.chips,
        servers_per_us=sysm.servers,
        chips=nus * sysm.chips,
        chip_tdp_w=acc.tdp_w,
        chip_idle_w=acc.idle_w,
        us_full_load_dc_w=us_dc,
        us_full_load_it_w=us_it,
        design_it_w=design_it,
        liquid_fraction=lf,
        cold_plate_r_k_per_w=cp.cold_plate_r_k_per_w or cp.junction_rise_at_tdp_k / acc.tdp_w,
        air_r_k_per_w=cp.air_r_k_per_w or cp.air_junction_rise_at_tdp_k / acc.tdp_w,
        us_loop_mass_kg=cp.loop_volume_l_per_ultraserver * cooling.WATER_RHO_KG_M3 / 1000.0,
        us_design_flow_kg_s=float(cooling.loop_flow_kg_s(us_liquid, cp)),
        facility_loop_mass_kg=cp.facility_volume_l_per_kw
        * liquid
        / 1000.0
        * cooling.WATER_RHO_KG_M3
        / 1000.0,
        facility_design_flow_kg_s=float(cooling.loop_flow_kg_s(liquid, cp)),
        chiller_unit_w=design_it / max(cp.chiller_units - cp.chiller_redundancy, 1),
        ups_rating_w=pp.ups_rating_factor * design_it / (1.0 + pp.oversubscription) / pp.pdu_efficiency,
        throttle_temp_c=cp.throttle_temp_c,
        throttle_full_c=cp.throttle_full_c,
        shutdown_temp_c=cp.shutdown_temp_c,
    )
