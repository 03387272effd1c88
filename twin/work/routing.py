"""Routing on a mixed floor: which system each batch job and each service goes to.

A job class or a service may need a system family (``family = "gpu"`` for CUDA-only code,
``"trainium"`` for Neuron-only code) or accept any. Among the systems it may run on, the policy
(``[scheduler] routing``) ranks them by a figure per unit of work, lower is better:

- ``fastest``: seconds per FLOP of the gang, 1 / (chips x peak x MFU on its best placement);
  for a service, seconds per output token of one replica (its roofline capacity);
- ``energy``: IT joules per unit of work, chips x IT power per chip at the work's activity
  (chip, host and switch share, at rack input) / rate. The plant and the power chain are shared
  by every system on the floor, so PUE does not change the ranking and is left out;
- ``cheapest``: marginal dollars per unit of work, chips x (ownership $/chip-s from the TCO
  rates: capital recovery, maintenance, staff; plus IT energy at the flat price) / rate;
- ``pinned``: the class's or service's ``system`` (else the first system it may run on); work
  pinned to a system that cannot run it goes nowhere (a job is rejected).

A batch job goes to the best-ranked system with room for it now, else to the best-ranked one
(where it queues). A service's replicas all go to one system, chosen when the floor is built.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from twin.physics import power
from twin.spec import tco
from twin.spec.catalog import Accelerator, System
from twin.spec.models import ModelSpec
from twin.spec.params import (
    JOB_CLASSES,
    KIND_NAMES,
    JobClassParams,
    PowerChainParams,
    ServiceParams,
    TrainingParams,
)
from twin.work import fabric, inference, workload
from twin.work.jobs import KIND_CODE
from twin.work.workstate import Work

POLICIES = ("fastest", "cheapest", "energy", "pinned")
FAMILIES = ("any", "gpu", "trainium")


@dataclass(frozen=True)
class PoolFacts:
    """What routing needs to know of one system on the floor."""

    system: System
    acc: Accelerator
    chips: int  # chips of this system on the floor
    usd_per_chip_s: float  # ownership cost per chip-second (capital recovery and fixed opex)


def pool_facts(
    sysm: System, acc: Accelerator, systems: int, design_it_w: float, p: tco.TcoParams
) -> PoolFacts:
    rates = tco.cost_rates(sysm, systems, design_it_w, p)
    chips = systems * sysm.chips
    return PoolFacts(sysm, acc, chips, (rates.capex_usd_per_s + rates.fixed_opex_usd_per_s) / chips)


def chip_it_w(sysm: System, acc: Accelerator, activity: float, pp: PowerChainParams) -> float:
    """IT power per chip [W] at rack input with every chip of the system at ``activity``:
    its chip, its share of the hosts (which follow their chips) and of the switches."""
    chip = acc.idle_w + (acc.tdp_w - acc.idle_w) * activity
    host = float(power.host_power_w(activity, sysm.host_w_per_server, sysm.host_idle_fraction))  # type: ignore[arg-type]
    dc = sysm.chips * chip + sysm.servers * host + sysm.switch_w
    return float(power.rectifier_input_w(dc, sysm.servers, pp)) / sysm.chips


def job_rate_flop_s(
    model: ModelSpec | None,
    code: int,
    cls: JobClassParams,
    chips: int,
    acc: Accelerator,
    sysm: System,
    tp: TrainingParams,
) -> float:
    """FLOP/s of a gang of ``chips`` on its best placement on ``sysm`` (fabric MFU included)."""
    k = workload.FLOP_PER_PARAM_TOKEN[KIND_NAMES[code]]
    peak = acc.peak(cls.precision)
    base = workload.model_mfu(model, cls)
    mfu = fabric.job_mfu(model, k, chips, workload.ideal_spanned(chips, sysm.chips), peak, base, sysm, tp)
    return workload.training_rate_flop_s(chips, peak, mfu)


def per_unit(
    policy: str,
    pool: PoolFacts,
    chips: int,
    rate: float,
    activity: float,
    pp: PowerChainParams,
    price_usd_per_mwh: float,
) -> float:
    """The policy's figure per unit of work (lower is better) for ``chips`` chips of ``pool``
    delivering ``rate`` units of work per second at power ``activity``."""
    if rate <= 0:
        return float("inf")
    if policy == "fastest":
        return 1.0 / rate
    w = chips * chip_it_w(pool.system, pool.acc, activity, pp)
    if policy == "energy":
        return w / rate
    return (chips * pool.usd_per_chip_s + w * price_usd_per_mwh / 3.6e9) / rate


def allowed(family: str, pool: PoolFacts) -> bool:
    return family == "any" or pool.system.family == family


def candidates(
    family: str, system: str, policy: str, pools: Sequence[PoolFacts], fits: Sequence[bool]
) -> list[int]:
    """Pools the work may go to, before ranking: its family, room for it, and under ``pinned``
    its system (none when that system cannot run it), or the first pool allowed when it names
    none."""
    ok = [i for i, pl in enumerate(pools) if allowed(family, pl) and fits[i]]
    if policy == "pinned":
        if system:
            return [i for i in ok if pools[i].system.key == system]
        return ok[:1]
    return ok


def service_rate(s: ServiceParams, acc: Accelerator, sysm: System) -> float:
    """Output tokens/s of one replica of ``s`` on ``acc`` (its roofline capacity); 0 when the
    chip has no path for its precision or a replica cannot hold the model."""
    if not acc.supports(s.precision):
        return 0.0
    try:
        roof = inference.roofline(s, acc, sysm)
    except ValueError:
        return 0.0
    return roof.requests_per_s * s.output_tokens


def service_pool(
    s: ServiceParams, pools: Sequence[PoolFacts], policy: str, pp: PowerChainParams, price_usd_per_mwh: float
) -> int:
    """The pool a service's replicas run on; ValueError when none can hold them."""
    top = max(s.replicas, s.replicas_max if s.autoscale else 0)
    rates = [service_rate(s, pl.acc, pl.system) for pl in pools]
    fits = [r > 0 and top * s.chips_per_replica <= pl.chips for r, pl in zip(rates, pools, strict=True)]
    ok = candidates(s.family, s.system, policy, pools, fits)
    if not ok:
        raise ValueError(
            f"no system on the floor can hold its {top} replicas of "
            f"{s.chips_per_replica} chips (family {s.family!r}, precision {s.precision!r})"
        )
    scores = [
        per_unit(policy, pools[i], s.chips_per_replica, rates[i], s.decode_activity, pp, price_usd_per_mwh)
        for i in ok
    ]
    return ok[min(range(len(ok)), key=lambda q: (scores[q], q))]


class Router:
    """Routes each arriving batch job to one of the floor's work states (``twin.compose.hall``): it
    reads each one's parameters, models, batch capacity and free chips."""

    def __init__(
        self,
        clusters: Sequence[Work],
        pools: Sequence[PoolFacts],
        policy: str,
        pp: PowerChainParams,
        price_usd_per_mwh: float,
    ) -> None:
        self.clusters = list(clusters)
        self.pools = list(pools)
        self.policy = policy
        self.pp = pp
        self.price = price_usd_per_mwh
        tp = clusters[0].p.training
        self.classes = {KIND_CODE[k]: tp.job_class(k) for k in JOB_CLASSES}

    @property
    def capacity(self) -> int:
        """The largest gang some system on the floor can run."""
        return max(cl.training_capacity_chips for cl in self.clusters)

    def rank(self, code: int, cls: JobClassParams, chips: int, model_name: str) -> list[int]:
        """Pools a job may go to, best first."""
        fits = [
            chips <= cl.training_capacity_chips and pl.acc.supports(cls.precision)
            for cl, pl in zip(self.clusters, self.pools, strict=True)
        ]
        ok = candidates(cls.family, cls.system, self.policy, self.pools, fits)
        if len(ok) <= 1:
            return ok
        tp = self.clusters[0].p.training
        scores = {}
        for i in ok:
            pl = self.pools[i]
            m = self.clusters[i].models.get(model_name)
            rate = job_rate_flop_s(m, code, cls, chips, pl.acc, pl.system, tp)
            scores[i] = per_unit(self.policy, pl, chips, rate, tp.compute_activity, self.pp, self.price)
        return sorted(ok, key=lambda i: (scores[i], i))

    def pick(self, code: int, cls: JobClassParams, chips: int, model_name: str) -> Work | None:
        """The work state the job goes to: the best-ranked with room now, else the best-ranked;
        None when no system may run it."""
        order = self.rank(code, cls, chips, model_name)
        if not order:
            return None
        for i in order:
            if self.clusters[i].pool.n_free >= chips:
                return self.clusters[i]
        return self.clusters[order[0]]
