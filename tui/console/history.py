"""The live session's rolling histories: the latest rows of the factory's columns (the plots) and
of each UltraServer's (its own plots), in fixed-size buffers. No Textual imports here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tui.console.meta import Array, Cols

US_HIST_COLS = ("power_w", "max_chip_temp_c", "coolant_return_c", "activity", "clock")  # kept per UltraServer


class History:
    """Rolling window of the latest rows (a fixed set of columns), amortised O(1) append."""

    def __init__(self, capacity: int) -> None:
        self.cap = max(2, capacity)
        self.buf: dict[str, Array] = {}
        self.n = 0

    def extend(self, cols: dict[str, Array]) -> None:
        k = len(cols["time_s"])
        if not self.buf:
            self.buf = {key: np.empty(2 * self.cap, dtype=np.float64) for key in cols}
        if k >= self.cap:
            for key, v in cols.items():
                self.buf[key][: self.cap] = v[-self.cap :]
            self.n = self.cap
            return
        if self.n + k > 2 * self.cap:
            keep = min(self.n, self.cap)
            for v in self.buf.values():
                v[:keep] = v[self.n - keep : self.n]
            self.n = keep
        for key, v in cols.items():
            self.buf[key][self.n : self.n + k] = v
        self.n += k

    def view(self) -> dict[str, Array]:
        lo = max(0, self.n - self.cap)
        return {key: v[lo : self.n] for key, v in self.buf.items()}


class UsHistory:
    """Rolling window of per-UltraServer columns: [steps, ultraservers] arrays."""

    def __init__(self, capacity: int, n_us: int) -> None:
        self.cap = max(2, capacity)
        self.n_us = n_us
        self.t = np.empty(2 * self.cap, dtype=np.int64)
        # The file's types: power float64, the rest float32 (so live equals the recording).
        self.buf = {
            k: np.empty((2 * self.cap, n_us), dtype=np.float64 if k == "power_w" else np.float32)
            for k in US_HIST_COLS
        }
        self.n = 0

    def extend(self, times: Array, u: dict[str, Any]) -> None:
        k = len(times)
        cols = {c: np.asarray(u[c], dtype=self.buf[c].dtype).reshape(k, self.n_us) for c in US_HIST_COLS}
        if k >= self.cap:
            self.t[: self.cap] = times[-self.cap :]
            for c, v in cols.items():
                self.buf[c][: self.cap] = v[-self.cap :]
            self.n = self.cap
            return
        if self.n + k > 2 * self.cap:
            keep = min(self.n, self.cap)
            self.t[:keep] = self.t[self.n - keep : self.n]
            for v in self.buf.values():
                v[:keep] = v[self.n - keep : self.n]
            self.n = keep
        self.t[self.n : self.n + k] = times
        for c, v in cols.items():
            self.buf[c][self.n : self.n + k] = v
        self.n += k

    def series(self, us: int, window_s: float) -> Cols:
        lo = max(0, self.n - self.cap)
        t = self.t[lo : self.n]
        a = lo + int(np.searchsorted(t, (t[-1] if len(t) else 0) - window_s, side="right"))
        out: Cols = {"time_s": self.t[a : self.n].copy()}
        for c in US_HIST_COLS:
            out[c] = self.buf[c][a : self.n, us].copy()
        return out
