"""Active alarms and their acknowledgement (no Textual here).

The ``alarms`` panel query (``storage.queries``) lists the conditions active at the time shown and
since when; ``Alarms`` keeps the latest answer for every screen (the count in the status line) and
which of them the operator acknowledged. An acknowledgement holds for one episode of a condition:
the same alarm raised again later (a new "since") counts again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Alarm:
    alarm: str
    target: str
    since_s: int
    value: float

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.alarm, self.target, self.since_s)


class Alarms:
    """The latest alarms answer (a requester of the app's loader, like a screen)."""

    is_attached = True  # the loader's answers are always wanted

    def __init__(self) -> None:
        self.active: list[Alarm] = []
        self.acked: set[tuple[str, str, int]] = set()
        self.load_count = 0
        self.error = ""

    def show_panel(self, panel: str, cols: dict[str, Any]) -> None:
        n = len(cols.get("alarm", ()))
        self.active = [
            Alarm(
                str(cols["alarm"][i]),
                str(cols["target"][i]),
                int(cols["since_s"][i]),
                float(cols["value"][i]) if cols["value"][i] is not None else float("nan"),
            )
            for i in range(n)
        ]
        self.error = ""
        self.load_count += 1

    def show_error(self, panel: str, error: Exception) -> None:
        self.error = str(error).splitlines()[0]

    def acknowledge(self, alarm: Alarm) -> None:
        self.acked.add(alarm.key)

    def acknowledge_all(self) -> None:
        self.acked.update(a.key for a in self.active)

    def is_acked(self, alarm: Alarm) -> bool:
        return alarm.key in self.acked

    @property
    def unacked(self) -> int:
        return sum(1 for a in self.active if a.key not in self.acked)
