"""What a hall (several system pools) and a campus (several halls) share as compositions of parts:
one numbering of chips, servers, UltraServers and rows across the parts, one event queue, and
one way to merge the parts' telemetry frames into the whole's.

Entities are numbered part by part (a hall's pools in the order of ``[[hall.rows]]``, a campus's
halls in the order of ``[[halls]]``); a target or an event argument given across the whole maps
to one part and its own index (``Numbering.locate``), and a part's events map back
(``Numbering.target``, ``Numbering.arg``).
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from twin.spec import telemetry
from twin.spec.params import ScheduledEvent

LEVELS = ("chip", "server", "ultraserver", "row")
_TARGET_RE = re.compile(r"^(row|ultraserver|server|chip):([0-9]+)$")


class EventQueue:
    """Scenario and operator events waiting for their time, in (time, arrival) order."""

    def __init__(self, kinds: Sequence[str]) -> None:
        self.kinds = tuple(kinds)
        self._pending: list[tuple[int, int, ScheduledEvent, str]] = []
        self._seq = 0

    def push(self, ev: ScheduledEvent, source: str) -> None:
        if ev.kind not in self.kinds:
            raise ValueError(f"unknown event kind {ev.kind!r}; expected one of {', '.join(self.kinds)}")
        heapq.heappush(self._pending, (int(ev.time_s), self._seq, ev, source))
        self._seq += 1

    def due(self, t: int) -> list[tuple[ScheduledEvent, str]]:
        """The events due at or before ``t``, in order; they leave the queue."""
        out = []
        while self._pending and self._pending[0][0] <= t:
            _, _, ev, source = heapq.heappop(self._pending)
            out.append((ev, source))
        return out


class Composite:
    """What a whole made of parts (a hall of pools, a campus of halls) shows of its chips, its
    queue and its operator events: the parts' per-chip arrays end to end (one part's are the
    whole's), their waiting jobs longest first, an operator event queued for the next step.
    Subclasses set ``t_s`` and ``events`` and give their parts (``_parts``)."""

    t_s: int
    events: EventQueue

    def _parts(self) -> Sequence[Any]:
        raise NotImplementedError

    def _cat(self, name: str) -> npt.NDArray[Any]:
        parts = self._parts()
        if len(parts) == 1:
            out: npt.NDArray[Any] = getattr(parts[0], name)
            return out
        return np.concatenate([getattr(p, name) for p in parts])

    @property
    def chip_clock(self) -> npt.NDArray[np.float64]:
        return self._cat("chip_clock")

    @property
    def chip_power(self) -> npt.NDArray[np.float64]:
        return self._cat("chip_power")

    @property
    def chip_activity(self) -> npt.NDArray[np.float64]:
        return self._cat("chip_activity")

    @property
    def chip_tj(self) -> npt.NDArray[np.float64]:
        return self._cat("chip_tj")

    @property
    def chip_hw_failed(self) -> npt.NDArray[np.bool_]:
        return self._cat("chip_hw_failed")

    @property
    def us_tripped(self) -> npt.NDArray[np.bool_]:
        return self._cat("us_tripped")

    def chip_job_ids(self) -> npt.NDArray[np.int32]:
        """The job id on each chip (-1 idle)."""
        return np.concatenate([p.chip_job_ids() for p in self._parts()])

    def queue_view(self, limit: int = 50) -> list[tuple[int, str, int, int]]:
        """First waiting jobs, longest waiting first: (job_id, name, chips, wait_s)."""
        return merge_queues([p.queue_view(limit) for p in self._parts()], limit)

    def refresh_jobs(self) -> None:
        """The next advance writes every waiting and running job's row, however long since the
        last (``jobs_interval_s``): the end of a run."""
        for p in self._parts():
            p.refresh_jobs()

    def inject(self, kind: str, target: str = "", value: float = 0.0, duration_s: int = 0) -> ScheduledEvent:
        """Queue an operator event (targets numbered across the whole); applied at the next step
        and recorded."""
        ev = ScheduledEvent(self.t_s, kind, str(target), float(value), int(duration_s))
        self.events.push(ev, "operator")
        return ev


class Numbering:
    """Offsets of each part's entities in the whole's numbering, by level."""

    def __init__(self, counts: dict[str, list[int]]) -> None:
        self.off: dict[str, list[int]] = {
            level: [int(x) for x in np.concatenate([[0], np.cumsum(counts[level])])] for level in LEVELS
        }

    def total(self, level: str) -> int:
        return self.off[level][-1]

    def locate(self, level: str, index: int) -> tuple[int, int]:
        """(part, index in the part) of a whole-wide index at ``level``."""
        off = self.off[level]
        if not 0 <= index < off[-1]:
            raise ValueError(f"{level} {index} out of range 0..{off[-1] - 1}")
        k = int(np.searchsorted(off, index, side="right")) - 1
        return k, index - off[k]

    def target(self, target: str, k: int) -> str:
        """Part ``k``'s event target (``row:3``, ``chip:12``) in the whole's numbering."""
        m = _TARGET_RE.match(target)
        if m is None:
            return target
        return f"{m.group(1)}:{int(m.group(2)) + self.off[m.group(1)][k]}"

    def arg(self, kind: str, arg: str, k: int) -> str:
        """An event's argument as given to part ``k``, in the whole's numbering (for re-runs)."""
        if not arg:
            return arg
        if arg.startswith("row:"):
            return self.target(arg, k)
        if kind == "cdu_pump_failure" and arg.isdigit():
            return str(int(arg) + self.off["row"][k])
        level = kind.split("_", 1)[1] if "_" in kind else ""
        if level in ("chip", "server", "ultraserver") and arg.isdigit():
            return str(int(arg) + self.off[level][k])
        return arg


def interleave(
    frames: list[dict[str, Any]], ids: tuple[tuple[str, str], ...], num: Numbering
) -> dict[str, Any]:
    """Rows of the parts' per-entity tables, time major: every part's rows of one recorded time,
    in the whole's order, then the next; entity ids shifted to the whole's numbering."""
    if len(frames) == 1:
        return frames[0]
    slots = len(np.unique(np.asarray(frames[0]["time_s"])))
    out: dict[str, Any] = {}
    for col in frames[0]:
        parts = []
        for k, f in enumerate(frames):
            a = np.asarray(f[col])
            for name, level in ids:
                if col == name:
                    a = a + np.asarray(num.off[level][k], dtype=a.dtype)
            parts.append(a.reshape(slots, -1) if slots else a)
        merged = np.concatenate(parts, axis=1).ravel() if slots else np.concatenate(parts)
        out[col] = list(merged) if isinstance(frames[0][col], list) else merged
    return out


def merge_services(per: list[dict[str, Any] | None], ids: list[list[int]], steps: int) -> dict[str, Any]:
    """``service_ts`` of the whole: each part's service rows put at its services' global ids
    (``ids[k]``), step by step."""
    ns = sum(len(x) for x in ids)
    frames = [(k, f) for k, f in enumerate(per) if f is not None]
    out: dict[str, Any] = {}
    for col in frames[0][1]:
        if col == "service":
            grid = np.empty((steps, ns), dtype=object)
        else:
            grid = np.zeros((steps, ns), dtype=np.asarray(frames[0][1][col]).dtype)
        for k, f in frames:
            grid[:, ids[k]] = np.asarray(f[col], dtype=grid.dtype).reshape(steps, len(ids[k]))
        out[col] = list(grid.ravel()) if col == "service" else grid.ravel()
    out["service_id"] = np.tile(np.arange(ns, dtype=np.int32), steps)
    return out


def merge_events(
    evs: list[dict[str, Any]],
    num: Numbering,
    target: Callable[[str, int], str] | None = None,
    detail: Callable[[str, int], str] | None = None,
    default_arg: Callable[[str, str, int], str] | None = None,
) -> dict[str, Any]:
    """The parts' events in time order (parts in order within a time), targets and arguments in
    the whole's numbering; ``target``, ``detail`` and ``default_arg`` adjust them further (a
    campus names the hall)."""
    rows = []
    for k, e in enumerate(evs):
        for r in range(len(e["time_s"])):
            kind, arg = e["kind"][r], e["arg"][r]
            if default_arg is not None and not arg:
                arg = default_arg(kind, e["source"][r], k)
            else:
                arg = num.arg(kind, arg, k)
            rows.append(
                (
                    int(e["time_s"][r]),
                    kind,
                    target(e["target"][r], k) if target else num.target(e["target"][r], k),
                    detail(e["detail"][r], k) if detail else e["detail"][r],
                    e["source"][r],
                    arg,
                    float(e["value"][r]),
                    int(e["duration_s"][r]),
                )
            )
    rows.sort(key=lambda x: x[0])  # stable: parts in order within a time
    return {
        "time_s": np.array([x[0] for x in rows], dtype=np.int64),
        "kind": [x[1] for x in rows],
        "target": [x[2] for x in rows],
        "detail": [x[3] for x in rows],
        "source": [x[4] for x in rows],
        "arg": [x[5] for x in rows],
        "value": np.array([x[6] for x in rows], dtype=np.float64),
        "duration_s": np.array([x[7] for x in rows], dtype=np.int64),
    }


def merge_failures(per: list[dict[str, Any]], num: Numbering) -> dict[str, Any]:
    """The parts' failures in time order, targets in the whole's numbering."""
    fails = []
    for k, f in enumerate(per):
        fr = dict(f)
        fr["target_id"] = np.array(
            [int(x) + num.off[lv][k] for x, lv in zip(fr["target_id"], fr["level"], strict=True)],
            dtype=np.int32,
        )
        fails.append(fr)
    return sort_by_time(concat(fails))


def concat(frames: list[dict[str, Any]]) -> dict[str, Any]:
    """The parts' rows of one table one after the other."""
    out: dict[str, Any] = {}
    for col in frames[0]:
        if isinstance(frames[0][col], list):
            out[col] = [x for f in frames for x in f[col]]
        else:
            out[col] = np.concatenate([np.asarray(f[col]) for f in frames])
    return out


def sort_by_time(f: dict[str, Any]) -> dict[str, Any]:
    order = np.argsort(np.asarray(f["time_s"]), kind="stable")
    return {k: ([v[i] for i in order] if isinstance(v, list) else np.asarray(v)[order]) for k, v in f.items()}


def merge_queues(views: list[list[tuple[int, str, int, int]]], limit: int) -> list[tuple[int, str, int, int]]:
    """The first waiting jobs of several parts, longest waiting first: (job_id, name, chips, wait_s)."""
    rows = [r for v in views for r in v]
    return sorted(rows, key=lambda r: -r[3])[:limit]


class JobsView:
    """Several job tables read as one (``a``, ``names``, ``precision``, ``n``: slots of each in
    turn): a copy, taken when asked."""

    def __init__(self, tabs: list[Any]) -> None:
        self.n = sum(t.n for t in tabs)
        self.names = [x for t in tabs for x in t.names[: t.n]]
        self.precision = [x for t in tabs for x in t.precision[: t.n]]
        self.a = {k: np.concatenate([t.a[k][: t.n] for t in tabs]) for k in tabs[0].a}


def merge_rows(table: str, rows: list[dict[str, Any]], campus: bool = False) -> dict[str, Any]:
    """The whole's rows of ``table`` from its parts' rows of the same steps, column by column by
    the column's rule (``twin.spec.telemetry.Column.merge``; ``campus``: a campus's rule where it
    differs). One part's rows under a hall's rules are the whole's."""
    if len(rows) == 1 and not campus:
        return rows[0]
    cols = [c for c in telemetry.TABLES[table] if c.name in rows[0]]
    rule = {c.name: (c.campus or c.merge) if campus else c.merge for c in cols}
    out: dict[str, Any] = {}
    for name, r in rule.items():
        if r in ("same", "max", "sum"):
            stack = np.stack([row[name] for row in rows])
            out[name] = (
                stack[0]
                if r == "same"
                else stack.max(axis=0)
                if r == "max"
                else stack.sum(axis=0).astype(stack.dtype)
            )
    for name, r in rule.items():
        if r.startswith("ratio:"):
            num, den = r[6:].split("/")
            with np.errstate(divide="ignore", invalid="ignore"):
                out[name] = np.where(out[den] > 0, out[num] / out[den], np.nan)
        elif r.startswith("mean:"):
            v = np.stack([row[name] for row in rows]).astype(np.float64)
            w = np.stack([row[r[5:]] for row in rows]).astype(np.float64)
            tot = w.sum(axis=0)
            if len(rows) == 1:
                mean = v[0]
            else:
                with np.errstate(divide="ignore", invalid="ignore"):
                    mean = np.where(tot > 0, (v * w).sum(axis=0) / tot, v.mean(axis=0))
            out[name] = mean.astype(np.asarray(rows[0][name]).dtype)
    return {c.name: out[c.name] for c in cols}


def system_rows(factory: list[dict[str, Any]], systems: list[str]) -> dict[str, Any]:
    """``system_ts`` frames from each system's ``factory_ts`` frames of the same steps, time
    major (every system's row of a step, in floor order, then the next step)."""
    k = len(systems)
    steps = len(factory[0]["time_s"]) if factory else 0
    out: dict[str, Any] = {
        "time_s": np.repeat(factory[0]["time_s"], k) if factory else np.zeros(0, dtype=np.int64),
        "system_id": np.tile(np.arange(k, dtype=np.int32), steps),
        "system": list(systems) * steps,
    }
    for c in telemetry.TABLES["system_ts"][4:-1]:
        out[c.name] = np.stack([f[c.name] for f in factory], axis=1).ravel()
    out["hall_id"] = np.zeros(steps * k, dtype=np.int32)
    return out
