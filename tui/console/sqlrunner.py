"""User SQL in the background: one query at a time through the sandbox, with request ids.

``run`` cancels the query still going (its answer is stale) and starts the new one in a thread;
each run ends with one ``SqlAnswer`` carrying its request id, so a caller keeps the answer to its
latest run only. The sandbox (``storage.sandbox.UserSql``: statement check, own cursor, time and
memory limits) runs one query at a time and is interrupted to cancel.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from storage.errors import QueryError
from storage.sandbox import UserSqlRunner

MAX_RESULT_ROWS = 2_000_000  # user query results kept (virtual table)
CANCEL_REPEAT_S = 0.05  # a cancelled query still waiting its turn is interrupted again this often


@dataclass(frozen=True)
class SqlAnswer:
    """A user query finished (``table``), failed or was cancelled (``error``)."""

    request: int
    table: pa.Table | None
    info: str
    error: str = ""


def _thread(job: Callable[[], None]) -> None:
    threading.Thread(target=job, name="sql", daemon=True).start()


class SqlRunner:
    """``start(job)`` runs a job in another thread (a plain daemon thread unless given one)."""

    def __init__(
        self,
        user_sql: UserSqlRunner,
        start: Callable[[Callable[[], None]], Any] = _thread,
        max_rows: int = MAX_RESULT_ROWS,
    ) -> None:
        self.user_sql = user_sql
        self.max_rows = max_rows
        self._start = start
        self._lock = threading.Lock()
        self._rid = 0  # request id of the latest query
        self._cancelled: set[int] = set()
        self._live: set[int] = set()  # request ids whose job has not ended
        self.executing: int | None = None  # request id of the query handed to the database

    @property
    def latest(self) -> int:
        return self._rid

    def running(self) -> bool:
        """Whether a query's job has not ended yet."""
        with self._lock:
            return bool(self._live)

    def run(self, sql: str, on_done: Callable[[SqlAnswer], None]) -> int:
        """Run ``sql`` in the background; ``on_done`` gets its answer (from the job's thread).
        A run still going is cancelled first. Returns the request id."""
        self.cancel()
        with self._lock:
            self._rid += 1
            rid = self._rid
            self._live.add(rid)
        self._start(lambda: self._job(rid, sql, on_done))
        return rid

    def _job(self, rid: int, sql: str, on_done: Callable[[SqlAnswer], None]) -> None:
        try:
            answer = self._answer(rid, sql)
        finally:
            with self._lock:
                if self.executing == rid:
                    self.executing = None
                self._cancelled.discard(rid)
                self._live.discard(rid)
        on_done(answer)

    def _answer(self, rid: int, sql: str) -> SqlAnswer:
        def cancelled() -> bool:
            return rid in self._cancelled

        try:
            with self._lock:
                if cancelled():
                    raise QueryError("cancelled")
                self.executing = rid
            res = self.user_sql.run(sql, max_rows=self.max_rows, cancelled=cancelled)
            if cancelled():
                raise QueryError("cancelled")
        except QueryError as e:
            return SqlAnswer(rid, None, "", str(e))
        except Exception as e:
            text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            return SqlAnswer(rid, None, "", text)
        table = res.table
        info = f"{table.num_rows:,} rows in {res.wall_s:.2f} s"
        if res.truncated:
            info = f"first {self.max_rows:,} rows kept (more not fetched) · {res.wall_s:.2f} s"
        if res.statements > 1:
            info += f" · the last of {res.statements} statements"
        return SqlAnswer(rid, table, info)

    def cancel(self) -> None:
        """Cancel the latest query. The sandbox interrupts the one running; a query still waiting
        its turn is interrupted as soon as it runs (a short-lived thread repeats the interrupt until
        the query's job ends)."""
        with self._lock:
            rid = self._rid
            if rid not in self._live:
                return
            self._cancelled.add(rid)
        self.user_sql.interrupt()

        def repeat() -> None:
            while True:
                with self._lock:
                    if rid not in self._live or self._rid != rid:
                        return
                self.user_sql.interrupt()
                time.sleep(CANCEL_REPEAT_S)

        threading.Thread(target=repeat, name="sql-cancel", daemon=True).start()
