"""A job's timeline (submitted, starts, interruptions with the work lost, end), from its SQL."""

from __future__ import annotations

from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen

from tui.console import fmt
from tui.console.core import Console
from tui.console.feed import PanelReq
from tui.screens.messages import OpenSql
from tui.widgets.arrowtable import ArrowTable


class TimelineScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "dismiss", "Close", tooltip="Close the timeline"),
        Binding("s", "open_sql", "SQL", tooltip="Open the timeline's SQL in the SQL editor"),
    ]

    def __init__(self, core: Console, job: int) -> None:
        super().__init__()
        self.core = core
        self.job = job
        self.load_count = 0

    def compose(self) -> ComposeResult:
        with Vertical(id="timeline-box"):
            yield ArrowTable(
                formatters={"time_s": fmt.short_clock},
                labels={"time_s": "time"},
                empty="no events for this job",
                id="timeline",
            )

    def on_mount(self) -> None:
        box = self.query_one("#timeline-box")
        box.border_title = f"Job {self.job} · timeline"
        box.border_subtitle = "s SQL · esc closes"
        self.query_one(ArrowTable).focus()
        self.core.request_panels(self, [self.req()])

    def req(self) -> PanelReq:
        return PanelReq("timeline", "job_timeline", self.core.params(job=self.job))

    def show_panel(self, panel: str, cols: dict[str, Any]) -> None:
        self.query_one(ArrowTable).set_table(cols)
        self.load_count += 1

    def show_error(self, panel: str, error: Exception) -> None:
        self.notify(str(error).splitlines()[0], severity="error")

    def action_open_sql(self) -> None:
        sql = self.req().sql
        self.dismiss()
        self.app.post_message(OpenSql(sql, run=True, source=f"job {self.job} timeline"))
