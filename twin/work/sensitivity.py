"""How a Trainium3-against-GPU answer moves across the Trainium3 power range.

AWS publishes no Trainium3 TDP. The catalog's 700 W is derived from AWS's "40 % better energy
efficiency" than Trainium2 (peak FP8 per W, Trainium2 at ~500 W: 692 W); 900 W was the earlier
assumption and 1,100 W is the top of the fact sheet's range (facts §5). Every answer that weighs
power therefore carries that range: for each piece of a scenario's work (each batch job class on a
reference gang, each service's decode) and each routing policy that weighs power (``energy``,
``cheapest``), ``tdp_range`` gives at each end of the range the system the router picks and
Trainium3's figure over the best GPU's (``routing.per_unit``, the router's own figure per unit of
work; < 1: Trainium3 is better). Pure functions: no I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from twin.physics import power
from twin.spec.catalog import Accelerator, System
from twin.spec.params import JOB_CLASSES, FactoryParams
from twin.work import routing
from twin.work.jobs import KIND_CODE

# DER low end (AWS's efficiency claim), the earlier ASM default, the ASM top (facts §5).
TRN3_TDP_RANGE_W: tuple[float, ...] = (700.0, 900.0, 1100.0)
POLICIES = ("energy", "cheapest")
# The gang a batch job class is compared on [chips]: spans systems of 8 (HGX), 72 (NVL72) and
# 144 (Trn3 Gen2) alike, so the scale-out fabric counts where it would (ASM).
REFERENCE_GANG = 64
TRN3 = "trainium3"


@dataclass(frozen=True)
class Point:
    """The answer for one piece of work, one policy, at one Trainium3 TDP."""

    work: str  # "pretrain (fp8)" or "service chat (fp8)"
    policy: str
    tdp_w: float  # Trainium3 TDP [W]
    best: str  # the system the policy picks (catalog key)
    trn3_over_gpu: float  # Trainium3's figure / the best GPU's figure [-] (< 1: Trainium3 better)


def compared(systems: Sequence[tuple[System, Accelerator]]) -> bool:
    """Whether the systems put Trainium3 against a GPU."""
    return any(a.key == TRN3 for _, a in systems) and any(s.family == "gpu" for s, _ in systems)


def _at(acc: Accelerator, tdp_w: float) -> Accelerator:
    return dataclasses.replace(acc, tdp_w=tdp_w) if acc.key == TRN3 else acc


def _pool(p: FactoryParams, sysm: System, acc: Accelerator) -> routing.PoolFacts:
    """One system's routing facts; its TCO rates are per chip, so one system stands for many."""
    dc = power.us_full_load_dc_w(sysm.chips, acc.tdp_w, sysm.servers, sysm.host_w_per_server, sysm.switch_w)
    return routing.pool_facts(sysm, acc, 1, dc, p.tco)


def _verdict(
    work: str, policy: str, tdp_w: float, pools: list[routing.PoolFacts], figures: list[float]
) -> Point | None:
    trn3 = [f for pl, f in zip(pools, figures, strict=True) if pl.acc.key == TRN3]
    gpu = [f for pl, f in zip(pools, figures, strict=True) if pl.system.family == "gpu"]
    if not trn3 or not gpu or min(gpu) == float("inf") or min(trn3) == float("inf"):
        return None
    best = min(range(len(pools)), key=lambda i: (figures[i], i))
    return Point(work, policy, tdp_w, pools[best].system.key, min(trn3) / min(gpu))


def tdp_range(
    p: FactoryParams,
    systems: Sequence[tuple[System, Accelerator]],
    tdps: Sequence[float] = TRN3_TDP_RANGE_W,
    policies: Sequence[str] = POLICIES,
) -> list[Point]:
    """The routing answer for ``p``'s work among ``systems`` at every Trainium3 TDP of ``tdps``
    (work that only one family may run, or no Trainium3 or no GPU can, is left out)."""
    if not compared(systems):
        return []
    tp, pp, price = p.training, p.power, p.site.price_usd_per_mwh
    out: list[Point] = []
    for tdp in tdps:
        pools = [_pool(p, s, _at(a, tdp)) for s, a in systems]
        for kind in JOB_CLASSES:
            cls = tp.job_class(kind)
            if cls.family != "any":
                continue
            rates = [
                routing.job_rate_flop_s(None, KIND_CODE[kind], cls, REFERENCE_GANG, pl.acc, pl.system, tp)
                if pl.acc.supports(cls.precision)
                else 0.0
                for pl in pools
            ]
            for policy in policies:
                figs = [
                    routing.per_unit(policy, pl, REFERENCE_GANG, r, tp.compute_activity, pp, price)
                    for pl, r in zip(pools, rates, strict=True)
                ]
                pt = _verdict(f"{kind} ({cls.precision})", policy, tdp, pools, figs)
                if pt:
                    out.append(pt)
        for svc in p.services:
            if svc.family != "any":
                continue
            rates = [routing.service_rate(svc, pl.acc, pl.system) for pl in pools]
            for policy in policies:
                figs = [
                    routing.per_unit(policy, pl, svc.chips_per_replica, r, svc.decode_activity, pp, price)
                    for pl, r in zip(pools, rates, strict=True)
                ]
                pt = _verdict(f"service {svc.name} ({svc.precision})", policy, tdp, pools, figs)
                if pt:
                    out.append(pt)
    return out


def floor_systems(p: FactoryParams) -> list[tuple[System, Accelerator]]:
    """The systems of a scenario: its hall's (or every campus hall's) pools, each once."""
    halls = p.halls or (p.hall,)
    seen: dict[str, tuple[System, Accelerator]] = {}
    for h in halls:
        for r in h.pools():
            seen.setdefault(r.system.key, (r.system, r.accelerator))
    return list(seen.values())
