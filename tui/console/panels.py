"""The panel loader: one thread with its own cursor runs the panels' SQL.

Each requester (a screen) has at most one request waiting: a newer one replaces the one not yet
started, so a screen never waits behind its own stale queries. Live, the loader also follows the
last step committed to the file (``t_file``), and a panel's query is run at that step when the
clock shown is ahead of the file (``file_req``).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from typing import Any

from storage.queries import run_sql
from tui.console.feed import PanelReq

POLL_S = 0.05  # the loader wakes at least this often (to notice stop)
FILE_POLL_S = 0.5  # live: how often the committed time is read between requests

Results = dict[str, Any]  # panel -> its columns, or the exception its query raised


def _never() -> bool:
    return False


class PanelLoader:
    """``request`` (UI thread) queues panels for ``run`` (the loader thread), which calls
    ``on_result(requester, seq, results)`` for each request it ran; the UI thread passes each
    answer through ``accept`` (False: older than one the requester already showed).

    ``live_run`` = (run id, step length) of a live session's run: the loader then keeps
    ``t_file``, the time of the last step committed to the file."""

    def __init__(
        self,
        on_result: Callable[[Any, int, Results], object],
        live_run: tuple[str, int] | None = None,
        run: Callable[[Any, str], Any] = run_sql,
    ) -> None:
        self.on_result = on_result
        self.live_run = live_run
        self._run = run
        self.t_file: int | None = None
        self.thread_id: int | None = None
        self.done = threading.Event()
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._requests: dict[int, tuple[Any, int, list[PanelReq]]] = {}
        self._seq = 0
        self._asked: dict[int, int] = {}
        self._answered: dict[int, int] = {}
        self._cur: Any = None

    # ------------------------------------------------------------------ UI thread
    def request(self, requester: Any, reqs: list[PanelReq]) -> int:
        """Queue these panels for ``requester`` (replacing its request not yet started); returns
        the request's sequence number."""
        with self._lock:
            self._seq += 1
            self._requests[id(requester)] = (requester, self._seq, list(reqs))
            self._asked[id(requester)] = self._seq
        self._wake.set()
        return self._seq

    def accept(self, requester: Any, seq: int) -> bool:
        """Whether an answer is newer than the one ``requester`` shows (then it is the one shown)."""
        if seq <= self._answered.get(id(requester), 0):
            return False
        self._answered[id(requester)] = seq
        return True

    def pending(self) -> bool:
        """Whether a request has not been answered yet (tests and the bench wait on it)."""
        return any(self._answered.get(k, 0) < v for k, v in self._asked.items())

    def file_req(self, r: PanelReq) -> PanelReq:
        """The request as it can run on the file: live, not past the last committed step."""
        t = r.params.get("t")
        if self.live_run is None or self.t_file is None or t is None or t <= self.t_file:
            return r
        return dataclasses.replace(r, params={**r.params, "t": self.t_file})

    def stop(self) -> None:
        """End ``run`` (any thread): the query running is interrupted."""
        self._stopping.set()
        self._wake.set()
        if self._cur is not None:
            try:
                self._cur.interrupt()
            except Exception:
                pass

    # ------------------------------------------------------------------ loader thread
    def run(self, cur: Any, cancelled: Callable[[], bool] = _never) -> None:
        """Answer requests on ``cur`` until stopped; closes ``cur``."""
        self._cur = cur
        self.thread_id = threading.get_native_id()
        polled = 0.0

        def stopped() -> bool:
            return cancelled() or self._stopping.is_set()

        try:
            while not stopped():
                woke = self._wake.wait(POLL_S)
                if stopped():
                    return
                if self.live_run is not None and (woke or time.monotonic() - polled > FILE_POLL_S):
                    polled = time.monotonic()
                    self.t_file = self._committed_t(cur)  # also between requests: for ``s``
                if not woke:
                    continue
                with self._lock:
                    self._wake.clear()
                    pending, self._requests = list(self._requests.values()), {}
                for requester, seq, items in pending:
                    results: Results = {}
                    for r in items:
                        if stopped():
                            return
                        try:
                            results[r.panel] = self._run(cur, self.file_req(r).sql)
                        except Exception as e:  # shown on the panel's screen
                            results[r.panel] = e
                    self.on_result(requester, seq, results)
        finally:
            try:
                cur.close()
            except Exception:
                pass
            self.done.set()

    def _committed_t(self, cur: Any) -> int | None:
        """Live: time of the last step in the file (the writer commits behind the simulation)."""
        assert self.live_run is not None
        run_id, dt_s = self.live_run
        rows = cur.execute("SELECT sim_time_s FROM runs WHERE run_id = ?", [run_id]).fetchall()
        return int(rows[0][0]) - dt_s if rows and rows[0][0] else None
