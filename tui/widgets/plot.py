"""A cheap braille time-series plot: up to two series over a fixed time window.

Each cell holds a 2x4 braille dot matrix. Points are averaged per pixel column with
``np.bincount``, joined vertically to the previous column, and packed into braille code points
with one vectorised weight sum; only the final per-cell string assembly loops, over cells (a few
hundred), never over data points. Redraws happen only when ``set_data`` is called.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import ClassVar

import numpy as np
from rich.style import Style
from rich.text import Text
from textual.widget import Widget

# Braille dot bits for (row 0..3, column 0..1) inside a cell.
_DOT_BITS = np.array([[0x01, 0x08], [0x02, 0x10], [0x04, 0x20], [0x40, 0x80]], dtype=np.int32)


def _columns(t: np.ndarray, v: np.ndarray, t0: float, window: float, px: int) -> np.ndarray:
    """Mean of ``v`` per pixel column (NaN where a column has no data)."""
    ok = np.isfinite(v)
    x = np.floor((t[ok] - t0) / window * (px - 1) + 0.5).astype(np.int64)
    inside = (x >= 0) & (x < px)
    x, vv = x[inside], v[ok][inside]
    n = np.bincount(x, minlength=px)
    s = np.bincount(x, weights=vv, minlength=px)
    out = np.full(px, np.nan)
    has = n > 0
    out[has] = s[has] / n[has]
    return out


def _dots(ypx: np.ndarray, py: int) -> np.ndarray:
    """Boolean dot grid [py, px]; row 0 is the top. Consecutive columns are joined vertically."""
    px = len(ypx)
    grid = np.zeros((py, px), dtype=bool)
    prev = None
    for x in np.flatnonzero(ypx >= 0).tolist():
        y = int(ypx[x])
        lo, hi = (y, y) if prev is None or x - prev[0] > 2 else sorted((prev[1], y))
        grid[py - 1 - hi : py - lo, x] = True
        prev = (x, y)
    return grid


def _pack(grid: np.ndarray) -> np.ndarray:
    """[4h, 2w] dots -> [h, w] braille bit patterns."""
    py, px = grid.shape
    cells = grid.reshape(py // 4, 4, px // 2, 2)
    packed: np.ndarray = np.einsum("rycx,yx->rc", cells.astype(np.int32), _DOT_BITS)
    return packed


def distinct_labels(labels: dict[int, str], near: int = 0) -> dict[int, str]:
    """The y-axis labels by row with each text once: of the rows that show one text (a flat
    series' range rounds to one value, and '100 %' three times down the axis says nothing more
    than once) the one nearest row ``near`` keeps it (where the data lie)."""
    best: dict[str, int] = {}
    for r in sorted(labels):
        t = labels[r]
        if t not in best or abs(r - near) < abs(best[t] - near):
            best[t] = r
    return {r: t for t, r in sorted(best.items(), key=lambda kv: kv[1])}


class BraillePlot(Widget, can_focus=True):
    """Time-series plot; series 0 is drawn over series 1 where both use a cell."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"plot--axis", "plot--s0", "plot--s1"}
    DEFAULT_CSS = """
    BraillePlot { text-wrap: nowrap; text-overflow: clip; }
    BraillePlot { height: 1fr; min-height: 2; }
    BraillePlot > .plot--axis { color: $text-muted; }
    BraillePlot > .plot--s0 { color: $accent; }
    BraillePlot > .plot--s1 { color: $success; }
    """

    def __init__(
        self,
        fmt_y: Callable[[float], str],
        window_s: float,
        *,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(id=id, classes=classes)
        self.fmt_y = fmt_y
        self.window_s = float(window_s)
        self._t: np.ndarray = np.zeros(0)
        self._series: Sequence[np.ndarray] = ()
        self._t_end = 0.0
        self.draw_count = 0
        self.bounds: tuple[float, float] | None = None  # the axis never goes beyond these (fractions)

    def set_data(
        self, t: np.ndarray, series: Sequence[np.ndarray], t_end: float, window_s: float | None = None
    ) -> None:
        self._t, self._series, self._t_end = t, series, float(t_end)
        if window_s is not None:
            self.window_s = float(window_s)
        self.draw_count += 1
        self.refresh()

    def render(self) -> Text:
        w, h = self.content_size
        axis = self.get_component_rich_style("plot--axis")
        if w < 4 or h < 1:
            return Text("")
        if not len(self._t):
            return Text("waiting for data…", style=axis)
        t0 = self._t_end - self.window_s
        # Gutter labels are computed from a first guess of the range, then the plot fills the rest.
        finite = [s[np.isfinite(s)] for s in self._series]
        vals = np.concatenate([f for f in finite if len(f)]) if any(len(f) for f in finite) else None
        if vals is None:
            return Text("no data", style=axis)
        lo, hi = float(vals.min()), float(vals.max())
        pad = max(abs(hi - lo) * 0.05, abs(hi) * 0.005, 1e-9)
        lo, hi = (lo - pad if lo - pad >= 0 or lo < 0 else 0.0), hi + pad
        if self.bounds is not None:
            lo, hi = max(lo, self.bounds[0]), min(hi, self.bounds[1])
            if hi <= lo:
                lo, hi = self.bounds
        labels = {0: self.fmt_y(hi), h - 1: self.fmt_y(lo)}
        if h >= 5:
            labels[(h - 1) // 2] = self.fmt_y((lo + hi) / 2)
        mid = float(np.median(vals))
        labels = distinct_labels(labels, int(round((hi - mid) / (hi - lo) * (h - 1))) if hi > lo else 0)
        gutter = max(len(s) for s in labels.values()) + 1
        pw = max(1, w - gutter)
        px, py = 2 * pw, 4 * h
        packed = []
        for s in self._series:
            col = _columns(self._t, s, t0, self.window_s, px)
            ypx = np.full(px, -1, dtype=np.int64)
            ok = np.isfinite(col)
            ypx[ok] = np.clip(np.rint((col[ok] - lo) / (hi - lo) * (py - 1)), 0, py - 1).astype(np.int64)
            packed.append(_pack(_dots(ypx, py)))
        styles: list[Style] = [self.get_component_rich_style(f"plot--s{i}") for i in range(2)]
        codes = np.stack(packed)  # [series, h, pw]
        bits = np.bitwise_or.reduce(codes, axis=0)
        owner = np.full(bits.shape, -1)  # which series colours the cell (series 0 on top)
        for i in range(len(packed) - 1, -1, -1):
            owner[codes[i] > 0] = min(i, 1)
        chars = np.where(bits > 0, 0x2800 + bits, 0x20)
        text = Text(no_wrap=True, overflow="crop", end="")
        for r in range(h):
            if r:
                text.append("\n")
            text.append(
                labels[r].rjust(gutter - 1) + "┤" if r in labels else " " * (gutter - 1) + "│", style=axis
            )
            row = "".join(map(chr, chars[r].tolist()))
            cuts = [0, *(np.flatnonzero(np.diff(owner[r])) + 1).tolist(), pw]
            for a, b in itertools.pairwise(cuts):
                o = int(owner[r, a])
                text.append(row[a:b], style=styles[o] if o >= 0 else None)
        return text
