"""Simulation speed: the five speed levels and the pacer that turns wall time into steps.

Pure Python (no Textual), shared by the live worker thread and the UI thread: the UI changes the
level, the worker asks the pacer how many steps are due. Plain attribute reads and writes under a
lock; nothing here blocks.
"""

from __future__ import annotations

import math
import threading
from collections import deque

# (label, simulated seconds per wall second). Keys 1..5 select these levels.
SPEEDS: tuple[tuple[str, float], ...] = (
    ("pause", 0.0),
    ("1×", 1.0),
    ("60×", 60.0),
    ("3600×", 3600.0),
    ("max", math.inf),
)
PAUSE, MAX = 0, len(SPEEDS) - 1
DEFAULT_LEVEL = 3  # 3600×: one simulated hour per wall second


class SpeedControl:
    """The selected speed level; ``paused`` is level 0. Space toggles back to the last speed."""

    def __init__(self, level: int = DEFAULT_LEVEL) -> None:
        self._lock = threading.Lock()
        self.level = level
        self._resume = level if level != PAUSE else DEFAULT_LEVEL

    @property
    def paused(self) -> bool:
        return self.level == PAUSE

    @property
    def label(self) -> str:
        return SPEEDS[self.level][0]

    @property
    def factor(self) -> float:
        return SPEEDS[self.level][1]

    @property
    def resume_label(self) -> str:
        return SPEEDS[self._resume][0]

    def set(self, level: int) -> None:
        with self._lock:
            self.level = max(PAUSE, min(MAX, level))
            if self.level != PAUSE:
                self._resume = self.level

    def toggle(self) -> None:
        self.set(self._resume if self.paused else PAUSE)

    def step(self, delta: int) -> None:
        self.set(self.level + delta)


SLICE_S = 0.1  # wall time of simulation work per slice (the clock moves ~10 times a second); the
# worker looks at the controls after every step whatever the slice


class Pacer:
    """Converts elapsed wall time into due simulation steps at the selected speed.

    Simulated time owed accumulates at ``factor`` sim-seconds per wall second and is paid in whole
    steps of ``dt_s``; debt is capped at one slice so a slow step never triggers a catch-up burst.
    A slice is as many steps as fit in ``slice_s`` of wall time at the measured cost of a step (at
    least one, at most ``chunk_steps``); at "max" every call returns a full slice.
    """

    def __init__(self, speed: SpeedControl, dt_s: int, chunk_steps: int, slice_s: float = SLICE_S) -> None:
        self.speed = speed
        self.dt_s = dt_s
        self.chunk = max(1, chunk_steps)
        self.slice_s = slice_s
        self.step_cost_s: float | None = None  # measured wall seconds per step (moving average)
        self._owed_s = 0.0
        self._last: float | None = None
        self._level = speed.level

    @property
    def slice_steps(self) -> int:
        """Steps per slice at the measured cost of a step (1 before the first measurement)."""
        if not self.step_cost_s:
            return 1
        return max(1, min(self.chunk, int(self.slice_s / self.step_cost_s)))

    def record(self, steps: int, wall_s: float) -> None:
        """The worker ran ``steps`` steps in ``wall_s`` seconds (sizes the next slices)."""
        if steps <= 0 or wall_s <= 0:
            return
        cost = wall_s / steps
        self.step_cost_s = cost if self.step_cost_s is None else 0.7 * self.step_cost_s + 0.3 * cost

    def refund(self, steps: int) -> None:
        """Steps handed out but not run (the slice stopped early for a control): owed again."""
        if steps > 0 and not math.isinf(self.speed.factor) and self.speed.factor > 0:
            self._owed_s = min(self._owed_s + steps * self.dt_s, self.slice_steps * self.dt_s)

    def due(self, now: float) -> int:
        level, factor = self.speed.level, self.speed.factor
        if level != self._level:  # a speed change starts a fresh count
            self._level, self._owed_s = level, 0.0
        last, self._last = self._last, now
        if factor == 0.0:
            self._owed_s = 0.0
            return 0
        if math.isinf(factor):
            return self.slice_steps
        if last is not None:
            self._owed_s = min(self._owed_s + (now - last) * factor, max(1, self.slice_steps) * self.dt_s)
        k = int(self._owed_s // self.dt_s)
        self._owed_s -= k * self.dt_s
        return k

    def wait_s(self) -> float:
        """How long until the next step is due at the current speed (inf when paused)."""
        factor = self.speed.factor
        if factor == 0.0:
            return math.inf
        if math.isinf(factor):
            return 0.0
        return max(0.0, (self.dt_s - self._owed_s) / factor)


class RedrawBudget:
    """Spaces the panels' redraws so the UI thread stays within ``share`` of a core while the
    simulation runs flat out (redraws share the interpreter with it), but redraws at least every
    ``max_gap_s``. Fed with wall time and the UI thread's CPU time; below max speed every tick
    redraws."""

    def __init__(self, share: float, max_gap_s: float) -> None:
        self.share = share
        self.max_gap_s = max_gap_s
        self._mark: tuple[float, float] | None = None  # (wall, UI CPU) at the last redraw
        self.redraws = 0

    def due(self, now: float, cpu: float, limited: bool) -> bool:
        """Whether to redraw at wall time ``now`` with the UI thread's CPU time at ``cpu``: not when
        ``limited`` and the CPU used since the last redraw exceeds ``share`` of the wall time since,
        unless ``max_gap_s`` has passed."""
        if limited and self._mark is not None:
            wall0, cpu0 = self._mark
            if now - wall0 < self.max_gap_s and cpu - cpu0 > self.share * (now - wall0):
                return False
        self._mark = (now, cpu)
        self.redraws += 1
        return True


class RateMeter:
    """Measured simulated seconds per wall second over a sliding window: fed by the loop that
    advances the simulation, with its own clock, after each slice (the time it reached then), so
    the rate is what the loop achieved, not when the UI got round to hearing of it. ``add`` runs in
    the simulation thread, ``rate`` in the UI thread."""

    def __init__(self, window_s: float = 3.0) -> None:
        self.window_s = window_s
        self._pts: deque[tuple[float, float]] = deque()
        self._lock = threading.Lock()

    def add(self, wall: float, sim_t: float) -> None:
        with self._lock:
            if self._pts and sim_t < self._pts[-1][1]:
                self._pts.clear()
            self._pts.append((wall, sim_t))
            while len(self._pts) > 2 and wall - self._pts[1][0] >= self.window_s:
                self._pts.popleft()

    def reset(self) -> None:
        with self._lock:
            self._pts.clear()

    def rate(self) -> float | None:
        with self._lock:
            if len(self._pts) < 2:
                return None
            (w0, t0), (w1, t1) = self._pts[0], self._pts[-1]
        return (t1 - t0) / (w1 - w0) if w1 > w0 else None


def rate_text(sim_s_per_s: float) -> str:
    """'1.2 d/s', '3.4 h/s', '2,500×' style text for a measured rate."""
    if sim_s_per_s >= 86400:
        return f"{sim_s_per_s / 86400:.1f} d/s"
    if sim_s_per_s >= 3600:
        return f"{sim_s_per_s / 3600:.1f} h/s"
    return f"{sim_s_per_s:,.0f}×"


def live_speed_text(speed: SpeedControl, measured: float | None, wait_s: float) -> str:
    """The live speed label: the level, at "max" the rate the loop achieved (``measured``, sim s
    per wall s over the meter's window), and "behind" when a level above 1 h/s is not kept up."""
    label, factor = SPEEDS[speed.level]
    if factor == 1.0:
        return f"1× · next step in {math.ceil(wait_s)} s"
    if math.isinf(factor):
        return f"max ≈ {rate_text(measured)}" if measured else "max"
    if measured is not None and factor >= 3600 and measured < 0.8 * factor:
        return f"{label} (behind: {rate_text(measured)})"
    return label
