"""The run's random streams: one SeedSequence per run, one child per subsystem, made here only.

    SeedSequence(seed)
    ├── child 0: weather (site noise)
    ├── children 1-3: reserved (kept so that the streams below stay where they always were)
    ├── child 4: the work
    │   ├── 0: batch arrivals (Poisson counts)
    │   ├── 1: batch jobs (sizes, models, lengths; one grandchild per job class)
    │   ├── 2: failures (counts, chips, causes, repair times)
    │   └── 3: services (one grandchild per service: requests, bursts)
    └── child 5: the chips' manufacturing and mounting spread (``chip_spread``; drawn once)

A subsystem draws only from its own stream, so a change in one (say, a new failure cause) leaves
the others' draws, and the runs that depend on them, exactly as they were.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Streams:
    weather: np.random.Generator
    arrivals: np.random.Generator
    jobs: np.random.Generator
    failures: np.random.Generator
    services: np.random.Generator


def chip_spread(seed: int) -> np.random.Generator:
    """The stream of the chips' fixed spread (child 5: spawning it leaves children 0-4, and so
    every other stream's draws, as they were)."""
    return np.random.default_rng(np.random.SeedSequence(seed).spawn(6)[5])


def streams(seed: int) -> Streams:
    root = np.random.SeedSequence(seed).spawn(5)
    weather = np.random.default_rng(root[0])
    arrivals, jobs, failures, services = (np.random.default_rng(s) for s in root[4].spawn(4))
    return Streams(weather, arrivals, jobs, failures, services)
