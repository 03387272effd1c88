"""The job table: every live job and replica slot as a struct of arrays.

Rows are *slots*. A job keeps its slot while it is queued or running and for one more
``advance`` after it finished (so its final row is recorded and callers can still read it); then
the slot is evicted and reused by a later job. A job's identity is its ``id`` (the ``job_id`` of
the telemetry), never its slot, so memory stays flat over any run length: the table holds the
live jobs, not the run's history (that is in the ``jobs`` table of the run file).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from twin.spec.params import KIND_NAMES

QUEUED, RUNNING, DONE, STOPPED, FREE = 0, 1, 2, 3, 4
STATE_NAMES = ("queued", "running", "done", "stopped", "free")
PRETRAIN, INFERENCE, FINETUNE, EVAL, BATCH_INFERENCE = range(5)
TRAINING = PRETRAIN
KIND_CODE = {name: i for i, name in enumerate(KIND_NAMES)}
SOURCES = ("synthetic", "trace", "service", "manual")
RESTART_ACTIVITY = 0.1  # chips of a gang reloading its checkpoint (ASM)
NEVER = np.iinfo(np.int64).max // 2
# Fields ``JobTable.add`` sets for every job it adds (whatever ``values`` hold besides).
_SET_ON_ADD = frozenset(("start", "first_start", "end", "service", "ckpt_every", "source", "id", "inf"))


Rows = slice | npt.NDArray[np.int64]


def rows(slots: list[int]) -> Rows:
    """An index of the job-table rows ``slots`` (in order): a slice when they are consecutive
    ascending (one job; new slots), whose reads and writes cost a fraction of a gather's, else
    an array."""
    n = len(slots)
    lo = slots[0] if n else 0
    if n and slots[-1] - lo + 1 == n and (n <= 2 or slots == list(range(lo, lo + n))):
        return slice(lo, lo + n)
    return np.asarray(slots, dtype=np.int64)


class JobTable:
    """Struct-of-arrays job store over reusable slots; grows by doubling while more jobs are
    live than it has slots."""

    FIELDS: ClassVar[dict[str, Any]] = {
        "id": np.int64,
        "kind": np.int8,
        "chips": np.int32,
        "params": np.float64,
        "tokens": np.float64,
        "work": np.float64,
        "done": np.float64,
        "ckpt_done": np.float64,
        "ckpt_time": np.int64,
        "ckpt_every": np.int64,
        "ckpt_due": np.int64,
        "ckpt_eff": np.float64,  # share of running time not spent writing checkpoints
        "lost": np.float64,
        "submit": np.int64,
        "start": np.int64,
        "first_start": np.int64,
        "end": np.int64,
        "state": np.int8,
        "spanned": np.int32,
        "mfu": np.float64,
        "mfu_base": np.float64,
        "rate": np.float64,
        "activity": np.float64,
        "train_activity": np.float64,  # a batch gang's activity while it trains (its plan)
        "restarts": np.int32,
        "failures": np.int32,
        "preemptions": np.int32,
        "service": np.int32,
        "priority": np.int32,
        "preemptible": np.bool_,
        "est": np.float64,
        "est_end": np.float64,
        "restart_until": np.int64,
        "wait": np.float64,
        "queued_since": np.int64,
        "run_s": np.float64,
        "prog_s": np.float64,
        "ckpt_prog_s": np.float64,
        "lost_s": np.float64,
        "source": np.int8,
        "inf": np.bool_,
        "warm_at": np.int64,
        "nominal": np.float64,
    }

    def __init__(self, capacity: int = 256) -> None:
        self.n = 0  # slots ever used (high-water mark); rows past n are zero
        self.next_id = 0  # sequence number of the next job added
        # Ids are next_id x stride + offset: on a mixed floor each system's table numbers its
        # jobs apart from the others' (``number``).
        self.id_stride = 1
        self.id_offset = 0
        self.names: list[str] = []
        self.precision: list[str] = []
        self.a: dict[str, npt.NDArray[Any]] = {k: np.zeros(capacity, dtype=t) for k, t in self.FIELDS.items()}
        self._free: list[int] = []  # evicted slots, reused lowest first
        # Moves with every change of a slot's state or ``warm_at`` made for a replica (its
        # request, start, stop; a slot added): the services' replica views
        # (``twin.work.serving``) hold while it stays put.
        self.replica_ver = 0

    def add(self, name: str, precision: str, **values: float) -> int:
        """Add a job in a free slot and return the slot (``add_many`` of one)."""
        return self.add_many([name], [precision], {k: [v] for k, v in values.items()})[0]

    def add_many(
        self, names: list[str], precisions: list[str], values: Mapping[str, Sequence[Any]]
    ) -> list[int]:
        """Add jobs in free slots (evicted ones lowest first, then new ones) and return the
        slots; column ``k`` of job ``i`` is ``values[k][i]`` (unset fields: zero;
        start/end/service -1, checkpoint interval -1 = the class default, base MFU 0 = the
        model's). Their ids are ``a["id"][slot]``, the next in sequence, in order."""
        n = len(names)
        a = self.a
        reused = [self._free.pop() for _ in range(min(n, len(self._free)))]
        if reused:
            # The evicted jobs' rows back to zero, but for the fields set below in any case.
            at = reused[0] if len(reused) == 1 else rows(reused)
            for k, arr in a.items():
                if k not in values and k not in _SET_ON_ADD:
                    arr[at] = 0
            for i, j in enumerate(reused):
                self.names[j] = names[i]
                self.precision[j] = precisions[i]
        new = n - len(reused)
        if new:
            cap = len(a["kind"])
            while self.n + new > cap:
                cap *= 2
            if cap > len(a["kind"]):
                for k, arr in a.items():
                    grown = np.zeros(cap, dtype=arr.dtype)
                    grown[: self.n] = arr[: self.n]
                    a[k] = grown
            self.names.extend(names[len(reused) :])
            self.precision.extend(precisions[len(reused) :])
            self.n += new
        slots = reused + list(range(self.n - new, self.n))
        # One job (most steps of a small hall): a scalar index and values, the cheapest writes.
        jj: int | Rows = slots[0] if n == 1 else rows(slots)
        for k in ("start", "first_start", "end", "service", "ckpt_every"):
            a[k][jj] = -1
        a["source"][jj] = SOURCES.index("manual")
        for k, v in values.items():
            a[k][jj] = v[0] if n == 1 else v
        ids = [(self.next_id + i) * self.id_stride + self.id_offset for i in range(n)]
        a["id"][jj] = ids[0] if n == 1 else ids
        self.next_id += n
        inf = a["kind"][jj] == INFERENCE
        a["inf"][jj] = inf
        self.replica_ver += int(np.count_nonzero(inf))
        return slots

    def number(self, stride: int, offset: int) -> None:
        """Number this table's jobs ``k x stride + offset`` (k = 0, 1, ...), the jobs already
        added included: ``stride`` tables with offsets 0..stride-1 never share an id."""
        used = self.a["id"][: self.n]
        used[:] = (used - self.id_offset) // self.id_stride * stride + offset
        self.id_stride, self.id_offset = stride, offset

    def evict(self, slots: list[int]) -> None:
        """Free the slots of finished jobs whose rows have been recorded."""
        for j in slots:
            self.a["state"][j] = FREE
            self.names[j] = ""
        self._free.extend(slots)
        self._free.sort(reverse=True)  # pop() takes the lowest: slots stay compact

    @property
    def live(self) -> int:
        """Slots holding a job (live or finished but not yet evicted)."""
        return self.n - len(self._free)

    def ids(self, slots: npt.NDArray[np.integer[Any]] | list[int]) -> npt.NDArray[np.int64]:
        out: npt.NDArray[np.int64] = self.a["id"][np.asarray(slots, dtype=np.int64)]
        return out

    def id_of(self, slot: int) -> int:
        return int(self.a["id"][slot])
