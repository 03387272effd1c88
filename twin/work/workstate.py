"""The work state of one hall, in slices: the chip pool (``twin.work.chips``), the job table
(``twin.work.jobs``), the queues, the running batch jobs, the drains, the services and the job log
(``twin.work.joblog``).

Each slice is a small dataclass; the work phases (``twin.work.arrivals``, ``twin.work.outages``,
``twin.work.queueing``, ``twin.work.serving``) are functions over the slices they need. ``Work`` groups
the slices of one hall with its fixed facts (parameters, accelerator, topology, models); the
phases that move jobs between the queues and the chips take it whole.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from twin.spec.catalog import Accelerator
from twin.spec.models import ModelSpec
from twin.spec.params import KIND_NAMES, FactoryParams
from twin.spec.topology import Topology
from twin.work import services
from twin.work.chips import ChipPool
from twin.work.joblog import JobLog
from twin.work.jobs import FINETUNE, PRETRAIN, JobTable

__all__ = ["Drains", "JobLog", "Queues", "Running", "ServiceState", "Work"]

I64 = npt.NDArray[np.int64]
# Which job kinds train (pre-training and fine-tuning), by kind code.
_TRAINS = np.isin(np.arange(len(KIND_NAMES)), (PRETRAIN, FINETUNE))


@dataclass(eq=False)
class Queues:
    """Batch jobs waiting in the policy's order (``keys``: their sort keys), and replica
    requests waiting (always ahead of batch jobs). The scheduler runs when a queue changed
    (``changed``) or the chip pool did (its ``ver`` moved past ``seen_ver``)."""

    policy: str
    queue: list[int] = field(default_factory=list)
    keys: list[tuple[float, ...]] = field(default_factory=list)
    rqueue: list[int] = field(default_factory=list)
    changed: bool = True
    seen_ver: int = -1
    # (chip pool ``ver``, chips, UltraServer) of the last gang placed in one UltraServer: while
    # the pool is at that version, the best fit of a gang of that size (``scheduler.place``).
    last_fit: tuple[int, int, int] = (-1, 0, -1)


@dataclass(eq=False)
class Running:
    """Batch jobs running, in start order (a dict as an ordered set: removal is O(1), which a
    list's remove was not with thousands of jobs on a campus), with their array and which of
    them train (built again only after a change)."""

    jobs: dict[int, None] = field(default_factory=dict)
    arr: I64 = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    train: npt.NDArray[np.bool_] = field(default_factory=lambda: np.zeros(0, dtype=bool))
    stale: bool = False
    # The gangs restarting (or whose restart ended in the last step), with when it ends: the
    # gangs whose activity ``twin.work.cluster.restart_activity`` sets.
    restarting: dict[int, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.jobs)

    def __iter__(self) -> Iterator[int]:
        return iter(self.jobs)

    def __contains__(self, j: object) -> bool:
        return j in self.jobs

    def add(self, j: int, restart_until: int | None) -> None:
        """Gang ``j`` runs, restarting until ``restart_until`` (None: not restarting)."""
        self.jobs[j] = None
        self.stale = True
        if restart_until is not None:
            self.restarting[j] = restart_until

    def discard(self, j: int) -> None:
        if self.jobs.pop(j, 0) is None:
            self.stale = True
            self.restarting.pop(j, None)

    def array(self, jobs: JobTable) -> I64:
        """The running batch jobs' slots, in start order (``train``: which train)."""
        if self.stale:
            self.arr = np.fromiter(self.jobs, dtype=np.int64, count=len(self.jobs))
            self.train = _TRAINS[jobs.a["kind"][self.arr]]
            self.stale = False
        return self.arr


@dataclass(eq=False)
class Drains:
    """Per UltraServer: when its running jobs are evicted, the maintenance once empty [s], and
    until when it is in maintenance (-2: not, -1: open-ended). Whether it is drained is the chip
    pool's (``ChipPool.drained``)."""

    deadline: I64
    maint_s: I64
    maint_until: I64

    @classmethod
    def empty(cls, ultraservers: int) -> Drains:
        return cls(
            np.full(ultraservers, -1, dtype=np.int64),
            np.zeros(ultraservers, dtype=np.int64),
            np.full(ultraservers, -2, dtype=np.int64),
        )


@dataclass(eq=False)
class ServiceState:
    """Online services: each one's model and its replica slots (job-table slots), the facility
    power attributed to each, and the replica chips by service (cached for the pool's
    ``svc_ver``)."""

    models: list[services.ServiceModel] = field(default_factory=list)
    replicas: list[list[int]] = field(default_factory=list)
    replica_arr: list[I64] = field(default_factory=list)
    power_w: npt.NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    # The replicas' chips (service after service), where each service's begin (n + 1 offsets),
    # their power factors and their owners (the replicas' slots): as of the pool's ``svc_ver``
    # ``chips_ver``; which of them are out of service: as of its ``fail_ver`` ``failed_ver``.
    chips: tuple[I64, I64, npt.NDArray[np.float64] | None, npt.NDArray[np.int32]] | None = None
    chips_ver: int = -1
    chips_failed: npt.NDArray[np.bool_] = field(default_factory=lambda: np.zeros(0, dtype=bool))
    failed_ver: int = -1
    n: int = 0  # services
    # Per service: (warm slots, warm, running, not stopped), as of the job table's
    # ``replica_ver`` ``view_ver`` and valid until ``view_until`` (the next replica to warm up).
    views: list[tuple[I64, int, int, int]] = field(default_factory=list)
    view_ver: int = -1
    view_until: float = -math.inf
    view_fresh: bool = False  # built again since ``serve`` last set every slot's activity


@dataclass(eq=False)
class Work:
    """The slices of one hall's work state and its fixed facts."""

    p: FactoryParams
    acc: Accelerator
    topo: Topology
    models: dict[str, ModelSpec]
    pool: ChipPool
    jobs: JobTable
    queues: Queues
    running: Running
    drains: Drains
    svc: ServiceState
    log: JobLog
    # The largest gang the hall can ever run once every initial replica is placed (a bigger one
    # would block a FIFO queue for good).
    training_capacity_chips: int = 0
    # An arriving batch job's fixed facts by (model, kind, chips, id of the class): its gang's
    # FLOP/s on its best placement here and on the reference hardware (NaN: not yet needed), the
    # class (held so the id stays its own), the model's active parameters, FLOP per token and
    # the base MFU. Fixed for a run (``twin.work.arrivals.add_jobs``).
    job_rates: dict[tuple[str, int, int, int], tuple[list[float], object, float, float, float]] = field(
        default_factory=dict
    )
    # A batch gang's start on a placement, by (model, kind, chips, UltraServers spanned,
    # precision, base MFU): (peak FLOP/s, MFU, training activity, checkpoint write time [s],
    # checkpoint interval [s]; NaN: a job without a catalogued model, its own). Fixed for a run
    # (``twin.work.queueing``).
    start_plans: dict[tuple[str, int, int, int, str, float], tuple[float, float, float, float, float]] = (
        field(default_factory=dict)
    )
