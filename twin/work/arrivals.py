"""Batch-job arrivals: synthetic classes (Poisson, diurnal and weekly shape) and traces.

``ArrivalState`` is the arrivals' own state (their random streams, the classes' rates, the
buffered draws, the trace position); ``arrivals`` draws a step's jobs and adds each to the
queue of the hall's work state (``twin.work.workstate.Work``), or on a mixed floor to the one its
router picks. Each class draws its jobs from its own stream in batches (same stream, fewer
calls); a job asks the same FLOP of any hall.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from twin.spec.events import Events
from twin.spec.params import JOB_CLASSES, KIND_NAMES, JobClassParams, TrainingParams
from twin.work import queueing, queues, routing, workload
from twin.work.jobs import KIND_CODE
from twin.work.workstate import Work

DRAW_BATCH = 256  # jobs drawn per class at a time


@dataclass(eq=False)
class ArrivalState:
    """The batch classes (codes, parameters, arrivals per second at the mean), their random
    streams, each class's buffered draws and the next trace row."""

    rng: np.random.Generator
    classes: list[tuple[int, JobClassParams]]
    rate_s: npt.NDArray[np.float64]
    rng_cls: list[np.random.Generator]
    # Each class's buffered draws: (chips, model, nominal run length [s]) of the next jobs.
    draws: list[tuple[list[int], list[str], list[float]] | None] = field(default_factory=list)
    draw_pos: list[int] = field(default_factory=list)
    trace_next: int = 0

    @classmethod
    def build(
        cls, tp: TrainingParams, rng_arrivals: np.random.Generator, rng_jobs: np.random.Generator
    ) -> ArrivalState:
        classes = [(KIND_CODE[k], tp.job_class(k)) for k in JOB_CLASSES]
        shares = np.array([c.share for _, c in classes], dtype=float)
        rate_s = tp.arrivals_per_day / 86400.0 * shares / max(shares.sum(), 1e-300)
        n = len(classes)
        return cls(rng_arrivals, classes, rate_s, rng_jobs.spawn(n), [None] * n, [0] * n)


def arrivals(st: ArrivalState, w: Work, router: routing.Router | None, ev: Events, t: int, dt: int) -> None:
    """Jobs arriving in [t, t + dt) join ``w``'s queue, or on a mixed floor the queue of the
    system its router picks (``twin.work.routing``; ``w`` is then the floor's front door). Each
    system's arrivals join it together, in the order they arrived (nothing a router reads
    changes with them: it ranks by free chips)."""
    tp = w.p.training
    cap = w.training_capacity_chips if router is None else router.capacity
    to: dict[int, tuple[Work, list[Arrival]]] = {}

    def arrive(target: Work, row: Arrival) -> None:
        to.setdefault(id(target), (target, []))[1].append(row)

    if cap > 0 and tp.arrivals_per_day > 0:
        _drawn(st, w, router, ev, t, dt, cap, arrive)
    if tp.trace is not None:
        _traced(st, w, router, ev, t, cap, arrive)
    for target, rows in to.values():
        add_jobs(target, rows, t)


def _drawn(
    st: ArrivalState,
    w: Work,
    router: routing.Router | None,
    ev: Events,
    t: int,
    dt: int,
    cap: int,
    arrive: Callable[[Work, Arrival], None],
) -> None:
    """The classes' random arrivals in [t, t + dt), each to the system its router picks."""
    tp = w.p.training
    f = workload.diurnal_factor(t, tp.diurnal_peak_to_trough, tp.peak_hour, tp.weekend_factor) * dt
    # One scalar draw per class (an array of rates costs more in the generator's checks than
    # the few classes' calls); the classes' rates as Python floats, the same doubles.
    for ci, ((code, cls), rate) in enumerate(zip(st.classes, st.rate_s.tolist(), strict=True)):
        lam = rate * f
        k = int(st.rng.poisson(lam)) if lam > 0 else 0
        for _ in range(k):
            chips, model, nominal = next_draw(st, ci, cls, cap)
            target = w if router is None else router.pick(code, cls, chips, model)
            if target is None:
                ev.append(
                    (
                        "job_rejected",
                        KIND_NAMES[code],
                        f"{chips} chips: no system on the floor may run it",
                    )
                )
                continue
            arrive(target, (code, cls, chips, model, nominal, math.nan, -1, 0))


def _traced(
    st: ArrivalState,
    w: Work,
    router: routing.Router | None,
    ev: Events,
    t: int,
    cap: int,
    arrive: Callable[[Work, Arrival], None],
) -> None:
    """The trace's jobs submitted by ``t`` that have not arrived yet."""
    tr = w.p.training.trace
    assert tr is not None
    n = len(tr.submit_s)
    while st.trace_next < n and tr.submit_s[st.trace_next] <= t:
        r = st.trace_next
        st.trace_next += 1
        code = int(tr.kind[r])
        tcls = queueing.job_class(w.p, code)
        assert tcls is not None
        chips = int(tr.chips[r])
        if chips > cap:  # could never start: it would block the queue
            ev.append(
                ("job_rejected", f"trace:{r}", f"{chips} chips > the {cap} the hall has for batch work")
            )
            continue
        model = tr.model[r] or tcls.models[0]
        target = w if router is None else router.pick(code, tcls, chips, model)
        if target is None:
            ev.append(("job_rejected", f"trace:{r}", f"{chips} chips: no system on the floor may run it"))
            continue
        row = (
            code,
            tcls,
            chips,
            model,
            float(tr.duration_s[r]),
            float(tr.work_flop[r]),
            int(tr.priority[r]),
            1,
        )
        arrive(target, row)


def next_draw(st: ArrivalState, ci: int, cls: JobClassParams, cap: int) -> tuple[int, str, float]:
    """Next job of class ``ci`` from a buffer drawn in batches (same stream, fewer calls)."""
    buf = st.draws[ci]
    if buf is None or st.draw_pos[ci] >= len(buf[0]):
        d = workload.draw_jobs(cls, DRAW_BATCH, st.rng_cls[ci], cap)
        buf = st.draws[ci] = (d.chips.tolist(), d.model, d.nominal_s.tolist())
        st.draw_pos[ci] = 0
    i = st.draw_pos[ci]
    st.draw_pos[ci] = i + 1
    return buf[0][i], buf[1][i], buf[2][i]


# An arriving batch job: (kind code, class, chips, model, nominal run length [s], work [FLOP]
# (NaN: from the nominal run length), priority (-1: the class's), source code).
Arrival = tuple[int, JobClassParams, int, str, float, float, int, int]


def add_jobs(w: Work, rows: list[Arrival], t: int) -> list[int]:
    """Batch jobs arriving at ``t`` join ``w``'s job table and queue, in order; returns their
    slots. Each asks the given work, or D from its nominal run length — the time it takes on
    its ideal placement on the reference hardware (Trainium3 in 144-chip UltraServers), so
    the same scenario asks the same FLOP of any hall and the hardware decides how long the
    job runs."""
    if not rows:
        return []
    tp = w.p.training
    got: list[tuple[Any, ...]] = []
    names, precisions = [], []
    for code, cls, chips, model_name, nominal_s, work, priority, source in rows:
        key = (model_name, code, chips, id(cls))
        fixed = w.job_rates.get(key)
        if fixed is None:  # pure functions of the key
            m = w.models.get(model_name)
            n_act = m.active_params if m is not None else 1e9
            rate = routing.job_rate_flop_s(m, code, cls, chips, w.acc, w.p.hall.system, tp)
            fixed = w.job_rates[key] = (
                [rate, math.nan],  # FLOP/s here, and on the reference hardware once needed
                cls,
                n_act,
                workload.FLOP_PER_PARAM_TOKEN[KIND_NAMES[code]] * n_act,  # FLOP per token
                workload.model_mfu(m, cls),
            )
        rates, _, n_act, per_token, mfu_base = fixed
        if math.isnan(work):
            if math.isnan(rates[1]):
                ref, ref_sys = workload.REFERENCE_ACCELERATOR, workload.REFERENCE_SYSTEM
                rates[1] = routing.job_rate_flop_s(
                    w.models.get(model_name), code, cls, chips, ref, ref_sys, tp
                )
            work = nominal_s * rates[1]
        nominal_s = work / rates[0]
        names.append(model_name)
        precisions.append(cls.precision)
        every = cls.checkpoint_interval_s
        got.append(
            (
                code,
                chips,
                n_act,
                work / per_token,
                work,
                priority if priority >= 0 else cls.priority,
                cls.preemptible,
                -1 if every is None else every,
                mfu_base,
                nominal_s,
                nominal_s,
                source,
            )
        )
    cols: dict[str, Any] = dict(zip(_ADD_COLUMNS, zip(*got, strict=True), strict=True))
    cols["submit"] = cols["queued_since"] = [t] * len(rows)
    js = w.jobs.add_many(names, precisions, cols)
    queues.enqueue(w.queues, w.jobs, js)
    w.log.dirty.update(js)
    return js


# The job-table columns of an arriving job (``add_jobs``), in the order of its row.
_ADD_COLUMNS = (
    "kind",
    "chips",
    "params",
    "tokens",
    "work",
    "priority",
    "preemptible",
    "ckpt_every",
    "mfu_base",
    "est",
    "nominal",
    "source",
)
