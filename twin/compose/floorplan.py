"""A hall's floor plan: which systems it holds (one pool each), each pool's parameters,
design and seed, where its services run, its topology across pools, and its plant as the pools
present it. ``plan`` works it out once from the hall's parameters (a ``FloorPlan``): the scenario
checks (``scenarios.spec``) make it, and the hall (``twin.compose.hall``) is built from it.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import numpy.typing as npt

from twin.physics.design import Design, derive
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
    return list(_facts(p, tuple(derive(pool_params(p, r)) for r in p.hall.pools())))


def _facts(p: FactoryParams, designs: tuple[Design, ...]) -> tuple[routing.PoolFacts, ...]:
    return tuple(
        routing.pool_facts(r.system, r.accelerator, r.ultraservers, d.design_it_w, p.tco)
        for r, d in zip(p.hall.pools(), designs, strict=True)
    )


@dataclasses.dataclass(frozen=True)
class FloorPlan:
    """A hall's floor plan, worked out once from its parameters (``plan``): what the scenario
    checks ask of it and what the hall is built from."""

    hall: HallParams  # the floor it is the plan of
    pools: tuple[FactoryParams, ...]  # each pool's parameters (``pool``)
    designs: tuple[Design, ...]  # each pool's design (``twin.physics.design``)
    facts: tuple[routing.PoolFacts, ...]  # what routing needs of each pool (several pools only)
    svc_pool: tuple[int, ...]  # the pool of each of the hall's services


def plan(p: FactoryParams) -> FloorPlan:
    """The floor plan of a hall's parameters ``p``: its rows checked (``check``), each pool's
    design, routing facts and parameters, and the pool of each service (ValueError naming the
    key when the rows do not fit together or a service fits no pool)."""
    check(p.hall)
    rows = p.hall.pools()
    bare = tuple(pool_params(p, r) for r in rows)
    designs = tuple(derive(b) for b in bare)
    facts = _facts(p, designs) if len(rows) > 1 else ()
    svc_pool = tuple(service_pools(p, list(facts))) if facts else (0,) * len(p.services)
    pools = tuple(pool(p, b, i, svc_pool) for i, b in enumerate(bare))
    return FloorPlan(p.hall, pools, designs, facts, svc_pool)


def pool(p: FactoryParams, bare: FactoryParams, i: int, svc_pool: tuple[int, ...]) -> FactoryParams:
    """Pool ``i``'s parameters: a hall of its system (``bare``, ``pool_params``) with its own seed,
    its services and no events (the hall routes them); the front door (pool 0) draws every
    batch arrival and routes it."""
    training = p.training
    if i > 0:
        training = dataclasses.replace(training, arrivals_per_day=0.0, trace=None)
    return dataclasses.replace(
        bare,
        seed=pool_seed(p.seed, i),
        training=training,
        services=tuple(s for s, q in zip(p.services, svc_pool, strict=True) if q == i),
        events=(),
    )


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
