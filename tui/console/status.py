"""What the status line shows (built by ``core.Console.status``, drawn by ``tui.widgets.status``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Status:
    mode: str  # "LIVE" | "REPLAY"
    t_s: int | None  # time of the row shown (None before the first step)
    speed: str  # e.g. "3600×", "1× · next step in 37 s", "max ≈ 4.2 d/s"
    paused: bool
    resume: str  # the speed space resumes at
    scenario: str
    path: str
    position: str = ""  # replay: "/ day 2 00:00:00 (21 %)"
    alarms: int = 0  # active alarms
    unacked: int = 0  # of which not acknowledged
