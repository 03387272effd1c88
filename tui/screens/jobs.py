"""Jobs: the queue and the running jobs at the time shown (or done / all), sortable and
filterable; waits, placement, progress, restarts. Enter opens a job's timeline.

One query (``storage.queries.jobs_sql``) in live and replay alike; the view, filter and sort are
part of its SQL, so ``s`` opens exactly what is on screen."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, ClassVar

from textual.binding import Binding, BindingType
from textual.content import Content
from textual.widget import Widget
from textual.widgets import Input, Static

from storage import queries as Q
from tui.console import fmt
from tui.console.core import Console
from tui.console.feed import PanelReq
from tui.screens.base import TwinScreen
from tui.screens.messages import OpenJob
from tui.widgets.arrowtable import ArrowTable, WideArrowTable

VIEWS = tuple(Q.JOB_VIEWS)
LABELS = {
    "job_id": "job",
    "model": "model",
    "chips": "chips",
    "priority": "prio",
    "state": "state",
    "replicas": "replicas",
    "submit_time_s": "submitted",
    "waiting_s": "waiting",
    "progress": "progress",
    "restarts": "restarts",
    "placement": "UltraServers",
    "mfu": "MFU",
    "total_wait_s": "total wait",
}


def _opt(f: Any) -> Any:
    return lambda v: "" if v is None or (isinstance(v, float) and math.isnan(v)) else f(v)


# Counts: whole numbers even where the column arrives as floats (a replica row's NULLs turn the
# live view's merged column to float, which printed restarts as "0.000").
_WHOLE = _opt(lambda v: f"{int(v):,}")

FORMATS = {
    "submit_time_s": _opt(fmt.short_clock),
    "waiting_s": _opt(fmt.span),
    "total_wait_s": _opt(fmt.span),
    "progress": _opt(lambda v: fmt.pct(v, 0)),
    "mfu": _opt(lambda v: fmt.pct(v, 0)),
    "chips": _opt(lambda v: f"{v:,}"),
    "replicas": _WHOLE,
    "restarts": _WHOLE,
    "priority": _WHOLE,
}


class JobsScreen(TwinScreen):
    MODE = "jobs"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "v", "view", "View", tooltip="Jobs shown: active (queued + running), queued, running, done, all"
        ),
        Binding("o", "sort", "Sort", tooltip="Sort by the next column"),
        Binding("r", "reverse", "Reverse", show=False, tooltip="Reverse the sort order"),
        Binding("slash", "filter", "Filter", key_display="/", tooltip="Filter by model, kind or job id"),
        Binding("escape", "clear_filter", "Clear", show=False, tooltip="Clear the filter"),
    ]

    def __init__(self, core: Console) -> None:
        super().__init__(core)
        self.view = "active"
        self.sort = "state"
        self.desc = False
        self.text = ""

    def compose_body(self) -> Iterable[Widget]:
        yield Static(id="jobs-bar")
        yield Input(placeholder="filter: model, kind or job id (Enter applies, Esc clears)", id="jobs-filter")
        t = WideArrowTable(
            formatters=FORMATS, labels=LABELS, empty="no jobs in this view", id="jobs", classes="panel"
        )
        yield t

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#jobs-filter").display = False
        self.query_one("#jobs", ArrowTable).focus()
        self._bar()

    def options(self) -> tuple[tuple[str, Any], ...]:
        return (("view", self.view), ("text", self.text), ("sort", self.sort), ("desc", self.desc))

    def panel_requests(self) -> list[PanelReq]:
        return [PanelReq("jobs", "jobs", self.core.params(), self.options())]

    def show_panel(self, panel: str, cols: dict[str, Any]) -> None:
        t = self.query_one("#jobs", ArrowTable)
        # Counts of every matching job, on each row; the rows are the first JOBS_LIMIT of them.
        n = {k: cols.pop(k) for k in ("n_rows", "n_queued", "n_running") if k in cols}
        t.set_table(cols)
        t.set_sort(self.sort, self.desc)
        shown = t.row_count
        title = f"Jobs · {self.view} · {shown:,} shown"
        if n:
            total = int(n["n_rows"][0]) if len(n["n_rows"]) else 0
            if total > shown:
                title += f" of {total:,}"
            if len(n["n_rows"]):
                title += f" · {int(n['n_queued'][0]):,} queued, {int(n['n_running'][0]):,} running"
            else:
                title += " · 0 queued, 0 running"
        elif "state" in cols:
            counts = {s: int((cols["state"] == s).sum()) for s in ("queued", "running")}
            title += f" · {counts['queued']:,} queued, {counts['running']:,} running"
        t.border_title = title
        core = self.core
        lag = ""
        if core.live is not None and core.t_file is not None and core.t is not None and core.t_file < core.t:
            lag = f"as committed at {fmt.short_clock(core.t_file)} · "
        t.border_subtitle = f"{lag}⏎ timeline"

    def _bar(self) -> None:
        parts: list[str | tuple[str, str]] = [
            "view ",
            (self.view, "bold"),
            " (v) · sort ",
            (f"{self.sort}{' ↓' if self.desc else ' ↑'}", "bold"),
            " (o, r)",
        ]
        if self.text:
            parts += [" · filter “", (self.text, "bold"), "” (esc clears)"]
        self.query_one("#jobs-bar", Static).update(Content.assemble(*parts))

    def _changed(self) -> None:
        self._bar()
        self.refresh_view(force=True)

    def action_view(self) -> None:
        self.view = VIEWS[(VIEWS.index(self.view) + 1) % len(VIEWS)]
        self._changed()

    def action_sort(self) -> None:
        self.sort = Q.JOB_SORTS[(Q.JOB_SORTS.index(self.sort) + 1) % len(Q.JOB_SORTS)]
        self.desc = self.sort in (
            "waiting_s",
            "chips",
            "replicas",
            "restarts",
            "priority",
            "progress",
            "mfu",
            "total_wait_s",
        )
        self._changed()

    def action_reverse(self) -> None:
        self.desc = not self.desc
        self._changed()

    def action_filter(self) -> None:
        box = self.query_one("#jobs-filter", Input)
        box.display = True
        box.value = self.text
        box.focus()

    def action_clear_filter(self) -> None:
        box = self.query_one("#jobs-filter", Input)
        box.display = False
        self.text = ""
        self.query_one("#jobs", ArrowTable).focus()
        self._changed()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.text = event.value.strip()
        event.input.display = bool(self.text)
        self.query_one("#jobs", ArrowTable).focus()
        self._changed()

    def on_arrow_table_selected(self, event: ArrowTable.Selected) -> None:
        row = event.table.row(event.row)
        job = row.get("job_id")
        if row.get("kind") == "inference" or job is None or (isinstance(job, float) and math.isnan(job)):
            self.notify("a service's replicas: see the Services screen (F7)", timeout=3)
        else:
            self.app.post_message(OpenJob(int(job)))
