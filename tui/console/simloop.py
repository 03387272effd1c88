"""The live simulation driver: advance a session in slices at the selected speed, report ticks.

A slice is a few steps (about ``SLICE_S`` of work, ``tui.console.pacing.Pacer``); between two steps the
loop looks at the controls, so pause, a speed change, a what-if or stop take effect after the step
in progress. The steps are held for the writer and committed in large batches (every chunk of
steps and at least every ``COMMIT_S``, paused too).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from scenarios.runner import COMMIT_S  # steps are handed to the writer (and metrics) this often
from tui.console.feed import LiveFeed
from tui.console.pacing import MAX, Pacer, RateMeter, SpeedControl

MIN_PERIOD_S = 0.05  # at most ~20 ticks per wall second below "max"


def _never() -> bool:
    return False


class SimLoop:
    """Runs in one thread (``run``); ``on_tick(t, steps_done)`` is called from it after each
    slice. ``stop`` (any thread) ends it after the step in progress; ``done`` is set once ``run``
    has returned, ``idle`` while it is between slices (paused, waiting or ended). ``rate`` measures
    the simulated time the loop advanced per wall second, on ``clock`` (``sleep`` waits on it)."""

    def __init__(
        self,
        live: LiveFeed,
        pacer: Pacer,
        speed: SpeedControl,
        on_tick: Callable[[int, int], object],
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] = time.sleep,
    ) -> None:
        self.live = live
        self.clock = clock
        self.sleep = sleep
        self.rate = RateMeter()
        self.pacer = pacer
        self.speed = speed
        self.on_tick = on_tick
        self.stopping = threading.Event()
        self.idle = threading.Event()
        self.done = threading.Event()
        self.thread_id: int | None = None  # native id of the thread running the loop

    def stop(self) -> None:
        self.stopping.set()

    def run(self, cancelled: Callable[[], bool] = _never) -> None:
        """Advance until stopped (``stop`` or ``cancelled()``); the session's end only idles."""
        live = self.live
        self.thread_id = threading.get_native_id()
        clock = self.clock
        committed = clock()
        level = self.speed.level
        try:
            while not (cancelled() or self.stopping.is_set()):
                t0 = clock()
                if self.speed.level != level:  # a new speed: measure it afresh
                    level = self.speed.level
                    self.rate.reset()
                k = min(self.pacer.due(t0), live.remaining)
                if k == 0:
                    committed = self._wait(t0, committed)
                    continue
                self.idle.clear()
                t = self._slice(k, t0, cancelled)
                self.rate.add(clock(), t)
                if clock() - committed >= COMMIT_S:
                    live.commit()
                    committed = clock()
                if cancelled():
                    break
                self.on_tick(t, live.steps_done)
                if self.speed.level != MAX:
                    self.sleep(max(0.0, MIN_PERIOD_S - (clock() - t0)))
        finally:
            self.idle.set()
            self.done.set()

    def _wait(self, t0: float, committed: float) -> float:
        """Nothing due (paused, between 1× steps, or the end): commit what is held, then wait a
        little (not at once: the key's screen update goes first). Returns the last commit's time."""
        live = self.live
        if live.session.held_steps and (live.remaining == 0 or t0 - committed >= COMMIT_S):
            live.commit()
            committed = t0
        done = live.remaining == 0
        self.idle.set()
        self.sleep(MIN_PERIOD_S if done else min(MIN_PERIOD_S, self.pacer.wait_s()))
        return committed

    def _slice(self, k: int, t0: float, cancelled: Callable[[], bool]) -> int:
        """Run up to ``k`` steps, ending early when a control changes; returns the time reached."""
        live = self.live
        level = self.speed.level

        def stop() -> bool:
            return cancelled() or self.stopping.is_set() or self.speed.level != level or live.inject_pending()

        t = live.advance(k, stop)
        wall = self.clock() - t0
        if live.last_steps == k:
            self.pacer.record(k, wall)
        else:
            self.pacer.refund(k - live.last_steps)
        return t
