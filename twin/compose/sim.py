"""The model of a site, built from its parameters.

``build(params)`` gives a hall (``twin.compose.hall.Hall``: one system or several on one plant, one
power chain and one grid connection) or a campus (``twin.compose.campus.Campus``: several halls under
one substation). Both have one face: ``advance(n)`` runs ``n`` fixed steps of ``dt_s`` integer
seconds and returns the telemetry frames of those steps (``table -> column -> array``, column
names as in ``twin.spec.telemetry``; ``run_id`` is added by storage); ``inject`` queues an operator
event for the next step; ``t_s``, ``design``, ``topo``, ``jobs``, ``queue_view`` and the per-chip
arrays describe the state. Same parameters and seed give bit-identical frames; a live session
replayed headlessly with its recorded events gives identical telemetry.

The run state lives in the pools (``twin.compose.pool``: work state ``twin.work.cluster``, facility
state ``twin.physics.facility``: clocks, cap, trips, rack loops), the hall's one plant state, its
cap's shares, its site (weather, price, carbon) and event queue, and the random streams
(``twin.spec.rng``: one SeedSequence, one child per subsystem). The hall never assigns into a
pool: it hands each pool's step the hall's cap and the pool's share as values. What a hall is
built from, its floor plan (``twin.compose.floorplan.plan``), is worked out once from the
parameters; the scenario checks work it out and hand it to ``build``. The step, phase by phase, is
``twin.compose.hall.Hall.step``.
"""

from __future__ import annotations

import math

from twin.compose import campus, floorplan
from twin.compose.campus import Campus
from twin.compose.floorplan import FloorPlan
from twin.compose.hall import EVENT_KINDS, Hall
from twin.compose.record import Frames
from twin.spec.params import FactoryParams

# The model of a site, whichever its shape.
Simulation = Hall | Campus


def build(p: FactoryParams, floors: tuple[FloorPlan, ...] | None = None) -> Hall | Campus:
    """A ``Hall`` for one hall (of one system or several), a ``Campus`` for several halls.
    ``floors``: each hall's floor plan, as the scenario checks worked them out (``floor_plans``);
    None: worked out here."""
    if p.halls:
        return Campus(p, floors)
    return Hall(p, floor=floors[0] if floors else None)


def floor_plans(p: FactoryParams) -> tuple[FloorPlan, ...]:
    """Each hall's floor plan (``twin.compose.floorplan.plan``; a campus's halls by
    ``campus.hall_params``): what validation checks and ``build`` builds from."""
    if p.halls:
        return tuple(floorplan.plan(campus.hall_params(p, k)) for k in range(len(p.halls)))
    return (floorplan.plan(p),)


def steps_for(duration_s: float, dt_s: int) -> int:
    return int(math.ceil(duration_s / dt_s))


__all__ = [
    "EVENT_KINDS",
    "Campus",
    "FloorPlan",
    "Frames",
    "Hall",
    "Simulation",
    "build",
    "floor_plans",
    "steps_for",
]
