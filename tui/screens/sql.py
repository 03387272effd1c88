"""SQL console: an editor with SQL highlighting and history, a virtual result table (millions of
rows), the telemetry schema with units, saved queries, export to CSV or Parquet, cancel.

Queries run through the console's ``SqlRunner`` (a thread worker) in ``storage.sandbox.UserSql``:
the database's own user cursor (a replay's read-only file, or the live file through the writer's
sandboxed database), only reading statements, a time and a memory limit shown in the status line;
ctrl+g interrupts them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Static, TextArea, Tree

from tui.console.core import Console
from tui.console.sqlrunner import SqlAnswer
from tui.screens.base import TwinScreen
from tui.screens.messages import ExportTable
from tui.screens.prompt import PromptScreen
from tui.widgets.arrowtable import WideArrowTable
from twin.spec.telemetry import TABLES

HISTORY_MAX = 200


def examples(run_id: str) -> list[tuple[str, str]]:
    r = "'" + run_id.replace("'", "''") + "'"
    return [
        (
            "Hourly PUE and power",
            f"SELECT time_s // 3600 AS hour, avg(pue) AS pue,\n       avg(it_power_w) / 1e6 AS it_mw, "
            f"avg(facility_power_w) / 1e6 AS facility_mw\nFROM factory_ts WHERE run_id = {r}\nGROUP BY hour ORDER BY hour",
        ),
        (
            "Hottest UltraServers",
            "SELECT ultraserver_id, row_id, max(max_chip_temp_c) AS hottest_c, avg(power_w) AS mean_w\n"
            f"FROM ultraserver_ts WHERE run_id = {r}\nGROUP BY ALL ORDER BY hottest_c DESC LIMIT 20",
        ),
        (
            "Failures by cause",
            f"SELECT level, cause, count(*) AS n, sum(jobs_interrupted) AS jobs_hit\nFROM failures "
            f"WHERE run_id = {r}\nGROUP BY ALL ORDER BY n DESC",
        ),
        (
            "Waits by job class",
            "SELECT kind, count(*) AS jobs, quantile_cont(wait_s, 0.5) AS p50_wait_s,\n"
            "       quantile_cont(wait_s, 0.99) AS p99_wait_s\n"
            f"FROM jobs WHERE run_id = {r} AND first_start_time_s >= 0\nGROUP BY kind ORDER BY jobs DESC",
        ),
        (
            "Inference latency",
            "SELECT time_s // 3600 AS hour, service, avg(ttft_p99_s) AS ttft_p99_s,\n"
            "       avg(tpot_p99_s) AS tpot_p99_s, sum(slo_met) / nullif(sum(requests_served + requests_dropped), 0) AS slo\n"
            f"FROM service_ts WHERE run_id = {r}\nGROUP BY ALL ORDER BY hour, service",
        ),
        (
            "Operator what-ifs",
            "SELECT time_s, kind, target, detail, arg, value, duration_s\nFROM events "
            f"WHERE run_id = {r} AND source = 'operator'\nORDER BY time_s",
        ),
        ("Every chip sample", f"SELECT * FROM chip_ts WHERE run_id = {r}"),
        ("Run summary", "SELECT * FROM run_summary"),
    ]


class SqlEditor(TextArea):
    """The query editor: Textual's code editor with select all on ctrl+a (its f7 is the Services
    screen everywhere; home still goes to the line start), ctrl+l to clear the query, and ? for
    the help (the editor would type it: the console's SQL takes no ``?`` parameters, and a pasted
    query keeps its question marks)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+a", "select_all", "Select all", key_display="^a"),
        Binding("ctrl+l", "clear_query", "Clear the query", key_display="^l"),
        Binding("question_mark", "app.help", "Help", key_display="?", priority=True, show=False),
    ]

    def action_clear_query(self) -> None:
        # One edit: undo (ctrl+z) brings the query back.
        self.replace("", self.document.start, self.document.end)


class SqlDone(Message):
    """A user query finished (or failed, or was cancelled)."""

    def __init__(self, table: pa.Table | None, info: str, error: str = "", request: int = 0) -> None:
        super().__init__()
        self.table = table
        self.info = info
        self.error = error
        self.request = request  # the run it answers (an older run's answer is dropped)


class SqlScreen(TwinScreen):
    MODE = "sql"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+r", "run", "Run", key_display="^r", tooltip="Run the query"),
        Binding("ctrl+g", "cancel", "Cancel", key_display="^g", tooltip="Cancel the running query"),
        Binding(
            "ctrl+o", "export", "Export", key_display="^o", tooltip="Export the result to CSV or Parquet"
        ),
        Binding("ctrl+s", "save", "Save", key_display="^s", tooltip="Save the query (Saved queries)"),
        Binding(
            "ctrl+up", "history(-1)", "History", key_display="^↑↓", tooltip="Previous query in the history"
        ),
        Binding("ctrl+down", "history(1)", "Next", show=False, tooltip="Next query in the history"),
        Binding(
            "tab", "app.focus_next", "Focus", key_display="⇥", show=False, tooltip="Editor / result / schema"
        ),
    ]

    def __init__(self, core: Console) -> None:
        super().__init__(core)
        self.history: list[str] = []
        self.saved: list[tuple[str, str]] = []
        self._hist_pos = 0
        self.running = False
        self.request = 0  # id of the run whose answer the screen waits for
        self.started = 0.0
        self.result: pa.Table | None = None
        self.last_sql = ""
        self.source = ""

    def compose_body(self) -> Iterable[Widget]:
        with Horizontal(id="sql-main"):
            with Vertical(id="sql-left"):
                ed = SqlEditor.code_editor(
                    "", language="sql", theme="css", tab_behavior="focus", id="editor", classes="panel"
                )
                ed.border_title = "SQL · ^r run · ^a select all · ^l clear · ? help"
                yield ed
                yield Static("", id="sql-status", markup=False)
                res = WideArrowTable(row_numbers=True, empty="run a query (^r)", id="result", classes="panel")
                res.border_title = "Result"
                yield res
            with Vertical(id="sql-side"):
                tree: Tree[str] = Tree("telemetry", id="schema", classes="panel")
                tree.border_title = "Schema · saved · history"
                yield tree
                yield Static("", id="schema-help", markup=False)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "open_sql":
            return False
        return True

    # ------------------------------------------------------------------ setup
    def on_mount(self) -> None:
        super().on_mount()
        self.history = self._load("sql_history.json")[-HISTORY_MAX:]
        self.saved = [
            (d["name"], d["sql"])
            for d in self._load("saved_queries.json")
            if isinstance(d, dict) and "name" in d and "sql" in d
        ]
        self._hist_pos = len(self.history)
        self._fill_tree()
        ed = self.query_one("#editor", TextArea)
        if not self._take_pending():
            ed.text = examples(self.core.meta.run_id)[0][1]
        ed.focus()
        self._status(
            f"ready · ^r runs · only reading statements (SELECT, DESCRIBE, SUMMARIZE, …) · "
            f"{self.core.user_sql.limits.text()}"
        )

    def on_screen_resume(self) -> None:
        super().on_screen_resume()
        self._take_pending()

    def _take_pending(self) -> bool:
        pending = self.core.take_pending_sql()
        if pending is None:
            return False
        sql, run, source = pending
        ed = self.query_one("#editor", TextArea)
        ed.text = sql
        ed.focus()
        self.source = source
        if run:
            self.action_run()
        return True

    def _config(self, name: str) -> Path:
        return self.core.config_dir / name

    def _load(self, name: str) -> list[Any]:
        try:
            data = json.loads(self._config(name).read_text())
            return data if isinstance(data, list) else []
        except (OSError, ValueError):
            return []

    def _store(self, name: str, data: list[Any]) -> None:
        try:
            path = self._config(name)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(data, indent=1))
        except OSError as e:
            self.notify(f"could not save {name}: {e}", severity="warning")

    def _fill_tree(self) -> None:
        tree = self.query_one("#schema", Tree)
        tree.clear()
        tree.root.expand()
        tables = tree.root.add("Tables", expand=True)
        for table, cols in TABLES.items():
            node = tables.add(table, data=f"table:{table}")
            for c in cols:
                unit = f" [{c.unit}]" if c.unit and c.unit != "-" else ""
                node.add_leaf(f"{c.name}{unit}", data=f"col:{c.name}:{c.description}{unit}")
        tables.add_leaf("run_summary (view)", data="table:run_summary")
        saved = tree.root.add("Saved queries", expand=True)
        for name, sql in examples(self.core.meta.run_id) + self.saved:
            saved.add_leaf(name, data=f"sql:{sql}")
        hist = tree.root.add("History", expand=False)
        for sql in reversed(self.history[-50:]):
            hist.add_leaf(" ".join(sql.split())[:60], data=f"sql:{sql}")

    # ------------------------------------------------------------------ tree
    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted[str]) -> None:
        data = event.node.data or ""
        help_ = ""
        if data.startswith("col:"):
            _, name, desc = data.split(":", 2)
            help_ = f"{name}: {desc}"
        elif data.startswith("table:"):
            help_ = f"{data[6:]} · Enter inserts the name"
        elif data.startswith("sql:"):
            help_ = "Enter loads the query into the editor"
        self.query_one("#schema-help", Static).update(help_)

    def on_tree_node_selected(self, event: Tree.NodeSelected[str]) -> None:
        data = event.node.data or ""
        ed = self.query_one("#editor", TextArea)
        if data.startswith("sql:"):
            ed.text = data[4:]
            ed.focus()
        elif data.startswith("col:") or data.startswith("table:"):
            name = data.split(":")[1].split(" ")[0]
            ed.insert(name)

    # ------------------------------------------------------------------ run
    def action_run(self) -> None:
        sql = self.query_one("#editor", TextArea).text.strip()
        if not sql:
            self._status("empty query")
            return
        if not self.history or self.history[-1] != sql:
            self.history.append(sql)
            self.history = self.history[-HISTORY_MAX:]
            self._store("sql_history.json", self.history)
            self._fill_tree()
        self._hist_pos = len(self.history)
        self.last_sql = sql
        self.running = True
        self.started = time.monotonic()
        self._status("running… (^g cancels)")
        self.request = self.core.sql.run(sql, self._answered)
        self.set_timer(0.5, self._progress)

    def _progress(self) -> None:
        if self.running:
            limit = self.core.user_sql.limits.timeout_s
            self._status(f"running… {time.monotonic() - self.started:.1f} s of {limit:g} s (^g cancels)")
            self.set_timer(0.5, self._progress)

    def action_cancel(self) -> None:
        if self.running:
            self.core.sql.cancel()
            self._status("cancelling…")

    def _answered(self, answer: SqlAnswer) -> None:
        """The runner's answer (from its thread), handed to the UI thread."""
        self.post_message(SqlDone(answer.table, answer.info, answer.error, request=answer.request))

    def on_sql_done(self, msg: SqlDone) -> None:
        if msg.request != self.request:
            return  # a run replaced by a newer one: its answer (often "cancelled") is not this one's
        self.running = False
        if msg.error:
            self._status(msg.error, error=True)
            return
        assert msg.table is not None
        self.result = msg.table
        res = self.query_one("#result", WideArrowTable)
        res.set_table(msg.table, keep_cursor=False)
        res.border_title = f"Result · {msg.table.num_rows:,} rows × {msg.table.num_columns} columns"
        self._status(msg.info + (f" · from {self.source}" if self.source else ""))
        self.source = ""

    def _status(self, text: str, error: bool = False) -> None:
        st = self.query_one("#sql-status", Static)
        st.set_class(error, "-error")
        st.update(text)

    # ------------------------------------------------------------------ history, save, export
    def action_history(self, delta: int) -> None:
        if not self.history:
            return
        ed = self.query_one("#editor", TextArea)
        current = ed.text.strip()
        pos = max(0, min(len(self.history), self._hist_pos + delta))
        if pos < len(self.history) and self.history[pos] == current and 0 < pos + delta <= len(self.history):
            pos += delta  # the editor already shows that one
        self._hist_pos = max(0, min(len(self.history), pos))
        ed.text = self.history[self._hist_pos] if self._hist_pos < len(self.history) else ""

    def action_save(self) -> None:
        sql = self.query_one("#editor", TextArea).text.strip()
        if not sql:
            return

        def done(name: str | None) -> None:
            if name and name.strip():
                self.saved = [(n, s) for n, s in self.saved if n != name.strip()] + [(name.strip(), sql)]
                self._store("saved_queries.json", [{"name": n, "sql": s} for n, s in self.saved])
                self._fill_tree()
                self.notify(f"saved “{name.strip()}”", timeout=3)

        first = sql.splitlines()[0].lstrip("- ").strip()
        self.app.push_screen(
            PromptScreen("Save query", "Name of the saved query:", first if sql.startswith("--") else ""),
            done,
        )

    def action_export(self) -> None:
        if self.result is None:
            self.notify("run a query first", timeout=3)
            return
        table = self.result
        default = f"twin-result-{time.strftime('%H%M%S')}.csv"

        def done(path: str | None) -> None:
            if path and path.strip():
                try:
                    dest = Path(path.strip()).expanduser()
                except RuntimeError:  # ~user of no user
                    self.notify(f"{path.strip()}: no such user's home folder", severity="error", timeout=6)
                    return
                self.app.post_message(ExportTable(table, dest))

        self.app.push_screen(
            PromptScreen("Export result", f"{table.num_rows:,} rows · path (.csv or .parquet):", default),
            done,
        )
