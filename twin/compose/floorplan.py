"""A hall's floor plan: which systems it holds (one pool each), each pool's parameters and
seed, where its services run, its topology across pools, and its plant as the pools present it.
What the driver (``twin.compose.hall``) and the scenario checks (``scenarios.spec``) share.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import numpy.typing as npt

from twin.physics.design import derive
from twin.physics.facility import Facility
from twin.physics.plant import PlantDesign
from twin.spec.params import FactoryParams, HallParams, SystemRows
from twin.work import routing

# The largest number of different systems in one hall (each is a pool with its own arrays).
MAX_SYSTEMS = 8


def check(hall: HallParams) -> None:
    """A mixed hall's rows make sense together (ValueError naming ``hall.rows``)."""
    rows = hall.rows
    if len(rows) > MAX_SYSTEMS:
        raise ValueError(f"hall.rows: {len(rows)} systems; a floor may mix at most {MAX_SYSTEMS}")
    keys = [r.system.key for r in rows]
    dup = sorted({k for k in keys if keys.count(k) > 1})
    if dup:
        raise ValueError(f"hall.rows: system {dup[0]!r} appears twice; give it once with its total count")
    liquid = {r.system.liquid_fraction > 0 for r in rows}
    if len(liquid) > 1:
        raise ValueError(
            "hall.rows: liquid-cooled and air-cooled systems on one floor are not modelled "
            "(one plant serves either CDUs or CRAHs first); keep one kind per floor"
        )


def pool_params(p: FactoryParams, r: SystemRows) -> FactoryParams:
    """The parameters of a hall of only the system of ``r`` (a one-system hall's are its own)."""
    if not p.hall.rows:
        return p
    return dataclasses.replace(
        p, hall=HallParams(r.system, r.accelerator, r.ultraservers, r.ultraservers_per_row)
    )


def pool_facts(p: FactoryParams) -> list[routing.PoolFacts]:
    """What routing needs of each system in the hall (its design sizes its TCO rates)."""
    out = []
    for r in p.hall.pools():
        d = derive(pool_params(p, r))
        out.append(routing.pool_facts(r.system, r.accelerator, r.ultraservers, d.design_it_w, p.tco))
    return out


def service_pools(p: FactoryParams, facts: list[routing.PoolFacts]) -> list[int]:
    """The pool of each service (ValueError naming ``services[i]`` when none can hold it)."""
    out = []
    for i, s in enumerate(p.services):
        try:
            out.append(routing.service_pool(s, facts, p.scheduler.routing, p.power, p.site.price_usd_per_mwh))
        except ValueError as e:
            raise ValueError(f"services[{i}]: {e}") from None
    return out


def pool_seed(seed: int, k: int) -> int:
    """Pool ``k``'s seed: the hall's for the first pool (a one-system hall is that system's
    pool), an independent child of it for the others."""
    if k == 0:
        return seed
    return int(np.random.SeedSequence([seed, k]).generate_state(1, np.uint64)[0] >> np.uint64(1))


@dataclasses.dataclass(frozen=True)
class HallTopology:
    """A hall's (or a campus's) sizes and index arrays across its pools (UltraServers and rows
    numbered pool by pool)."""

    ultraservers: int
    chips: int
    rows: int
    us_row: npt.NDArray[np.int32]
    chip_us: npt.NDArray[np.int32]
    # The first system's shape (views that draw one grid of UltraServers use it).
    chips_per_us: int = 0
    servers_per_us: int = 0


def hall_plant(facs: list[Facility]) -> PlantDesign:
    """The design values of the one plant that serves several pools (``twin.physics.plant``): the
    first pool's cooling parameters and setpoints, the pools' design heat, flows, masses, pumps
    and fans summed; a chiller is sized on the summed IT load; the CDU pump figure is the mean
    per UltraServer (the plant's pumps scale it by the number of flowing UltraServers). One
    pool's plant is its own."""
    if len(facs) == 1:
        return facs[0].plant_design
    f0 = facs[0]
    cp = f0.cp
    design_it_w = sum(f.plant_design.design_it_w for f in facs)
    nus = sum(f.topo.ultraservers for f in facs)
    return PlantDesign(
        cp=cp,
        lf=max(f.lf for f in facs),
        fw_setpoint_c=f0.plant_design.fw_setpoint_c,
        econ_unit_effectiveness=f0.plant_design.econ_unit_effectiveness,
        chiller_unit_w=design_it_w / max(cp.chiller_units - cp.chiller_redundancy, 1),
        design_it_w=design_it_w,
        design_liquid_w=sum(f.plant_design.design_liquid_w for f in facs),
        fw_flow_design=sum(f.plant_design.fw_flow_design for f in facs),
        fw_mass_kg=sum(f.plant_design.fw_mass_kg for f in facs),
        fw_pump_design_w=sum(f.plant_design.fw_pump_design_w for f in facs),
        fan_design_w=sum(f.plant_design.fan_design_w for f in facs),
        cdu_pump_design_w=sum(f.plant_design.cdu_pump_design_w * f.topo.ultraservers for f in facs) / nus,
        chw_mass_kg=sum(f.plant_design.chw_mass_kg for f in facs),
    )
