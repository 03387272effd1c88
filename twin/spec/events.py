"""What phases report: (kind, target, detail) rows for the run's events table.

Every phase returns the events it caused (no shared log drained by someone else); the step
records them in phase order.
"""

from __future__ import annotations

Event = tuple[str, str, str]
Events = list[Event]
