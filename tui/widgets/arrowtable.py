"""A virtual table over an Arrow table: millions of rows, only the visible lines are drawn.

Line API (``ScrollView.render_line``): the header stays on the first line, each other line
formats one row on demand (cached while the table is the same). Column widths come from the
header and a sample of rows at both ends, so setting a 1M-row table does not read every row and
no widget per row or cell is ever built.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, ClassVar

import pyarrow as pa
from rich.segment import Segment
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

Formatter = Callable[[Any], str]
MAX_COL_W = 40
SAMPLE = 200
CACHE_ROWS = 4000


def default_format(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        return f"{v:.6g}" if (abs(v) >= 1e6 or (0 < abs(v) < 1e-3)) else f"{v:,.6g}"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, bytes):
        return v.hex()
    return str(v).replace("\n", "⏎")


def _float_format(col: pa.ChunkedArray) -> Formatter:
    """Fixed decimals for a float column: about four significant digits for its largest value."""
    vals = [abs(v) for v in col.to_pylist() if isinstance(v, float) and math.isfinite(v) and v]
    m = max(vals) if vals else 1.0
    if m >= 1e15 or m < 1e-4:
        return default_format
    dec = max(0, min(6, 3 - math.floor(math.log10(m))))

    def f(v: Any) -> str:
        if not isinstance(v, float) or not math.isfinite(v):
            return default_format(v)
        return f"{v:,.{dec}f}"

    return f


def _numeric(t: pa.DataType) -> bool:
    return bool(pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t))


class ArrowTable(ScrollView, can_focus=True):
    """Rows of an Arrow table; ↑↓ PgUp PgDn Home End move the cursor, Enter selects."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "cursor(-1)", "Up", show=False),
        Binding("down", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "edge(0)", "First row", show=False),
        Binding("end", "edge(1)", "Last row", show=False),
        Binding("enter", "select", "Open", show=False),
    ]
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "arrow-table--header",
        "arrow-table--cursor",
        "arrow-table--odd",
        "arrow-table--null",
        "arrow-table--index",
        "arrow-table--empty",
    }
    DEFAULT_CSS = """
    ArrowTable { background: $surface; }
    ArrowTable > .arrow-table--header { text-style: bold; color: $foreground; background: $panel; }
    ArrowTable > .arrow-table--cursor { background: $block-cursor-blurred-background; }
    ArrowTable:focus > .arrow-table--cursor { background: $block-cursor-background; color: $block-cursor-foreground; }
    ArrowTable > .arrow-table--odd { background: $surface-lighten-1; }
    ArrowTable > .arrow-table--null { color: $text-muted; }
    ArrowTable > .arrow-table--index { color: $text-muted; }
    ArrowTable > .arrow-table--empty { color: $text-muted; }
    """

    cursor_row: reactive[int] = reactive(0, always_update=True)

    class _RowMessage(Message):
        def __init__(self, table: ArrowTable, row: int) -> None:
            super().__init__()
            self.table = table
            self.row = row

        @property
        def control(self) -> ArrowTable:
            return self.table

    class Selected(_RowMessage):
        """Enter (or a click) on a row."""

    def __init__(
        self,
        *,
        formatters: dict[str, Formatter] | None = None,
        labels: dict[str, str] | None = None,
        row_numbers: bool = False,
        empty: str = "no rows",
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(id=id, classes=classes)
        self.formatters = formatters or {}
        self.labels = labels or {}
        self.row_numbers = row_numbers
        self.empty = empty
        self.table: pa.Table = pa.table({})
        self.columns: list[str] = []
        self.widths: list[int] = []
        self.right: list[bool] = []
        self._cache: dict[int, list[str]] = {}
        self._fmts: dict[str, Formatter] = {}
        self._index_w = 0
        self.set_count = 0  # how many times data was set (refresh-rate figures)
        self.sorted_by: tuple[str, bool] | None = None  # (column, descending): an arrow on its header

    def set_sort(self, column: str | None, desc: bool = False) -> None:
        self.sorted_by = (column, desc) if column else None
        self.refresh()

    def _label(self, name: str) -> str:
        label = self.labels.get(name, name)
        if self.sorted_by is not None and self.sorted_by[0] == name:
            label += " ↓" if self.sorted_by[1] else " ↑"
        return label

    def header_text(self) -> str:
        return self._line([self._label(c) for c in self.columns], "#" if self._index_w else "")

    # ------------------------------------------------------------------ data
    @property
    def row_count(self) -> int:
        return int(self.table.num_rows)

    def set_table(self, table: pa.Table | dict[str, Any], keep_cursor: bool = True) -> None:
        if not isinstance(table, pa.Table):
            table = pa.table(
                {
                    k: (v.tolist() if hasattr(v, "dtype") and v.dtype == object else v)
                    for k, v in table.items()
                }
            )
        self.set_count += 1
        self.table = table
        self.columns = list(table.column_names)
        self._cache.clear()
        n = table.num_rows
        self._index_w = len(f"{n:,}") + 1 if self.row_numbers else 0
        sample = sorted({*range(min(n, SAMPLE)), *range(max(0, n - SAMPLE), n)})
        cols = [table.column(c) for c in self.columns]
        self.right = [_numeric(c.type) for c in cols]
        picked = table.take(pa.array(sample, type=pa.int64())) if sample else table
        self.widths = []
        self._fmts = {}
        for name, col in zip(self.columns, picked.columns, strict=True):
            f = self.formatters.get(name) or (
                _float_format(col) if pa.types.is_floating(col.type) else default_format
            )
            self._fmts[name] = f
            w = max([len(self.labels.get(name, name)) + 2] + [len(f(v)) for v in col.to_pylist()])
            self.widths.append(min(MAX_COL_W, w))
        if not keep_cursor or self.cursor_row >= n:
            self.cursor_row = max(0, min(self.cursor_row if keep_cursor else 0, n - 1))
        width = self._index_w + sum(self.widths) + 2 * max(0, len(self.widths) - 1) + 1
        self.virtual_size = Size(width, n + 1)
        if not keep_cursor:
            self.scroll_to(0, 0, animate=False)
        self.refresh()

    def row(self, i: int) -> dict[str, Any]:
        return self.table.slice(i, 1).to_pylist()[0] if 0 <= i < self.row_count else {}

    def _cells(self, i: int) -> list[str]:
        cells = self._cache.get(i)
        if cells is None:
            if len(self._cache) > CACHE_ROWS:
                self._cache.clear()
            lo = max(0, i - 32)
            chunk = self.table.slice(lo, 96)
            cols = [c.to_pylist() for c in chunk.columns]
            for k in range(chunk.num_rows):
                self._cache[lo + k] = [
                    self._fmts.get(name, default_format)(col[k])
                    for name, col in zip(self.columns, cols, strict=True)
                ]
            cells = self._cache[i]
        return cells

    # ------------------------------------------------------------------ drawing
    def _line(self, cells: list[str], index: str, full: bool = False) -> str:
        """One line; a cell too long for its column ends with "…" (``full``: shown whole)."""
        parts = [index.rjust(self._index_w - 1) + " " if self._index_w else ""]
        for k, (text, w) in enumerate(zip(cells, self.widths, strict=True)):
            if len(text) > w and not full:
                text = text[: w - 1] + "…"
            parts.append(
                (text.rjust(w) if self.right[k] else text.ljust(w)) + ("  " if k < len(cells) - 1 else "")
            )
        return "".join(parts)

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        sx = int(self.scroll_x)
        if y == 0:
            head = self.header_text()
            style = self.get_component_rich_style("arrow-table--header")
            return Strip([Segment(head, style)]).crop(sx, sx + width).extend_cell_length(width, style)
        i = int(self.scroll_y) + y - 1
        base = self.rich_style
        if self.row_count == 0 and y == 1:
            return Strip([Segment(self.empty, self.get_component_rich_style("arrow-table--empty"))]).crop(
                0, width
            )
        if not 0 <= i < self.row_count:
            return Strip.blank(width, base)
        style = base
        if i == self.cursor_row:
            style = base + self.get_component_rich_style("arrow-table--cursor")
        elif i % 2:
            style = base + self.get_component_rich_style("arrow-table--odd")
        segs = []
        # The focused cursor row shows its cells whole (a cut cell spills over its neighbours).
        text = self._line(self._cells(i), f"{i + 1:,}", full=i == self.cursor_row and self.has_focus)
        if self._index_w:
            segs.append(
                Segment(text[: self._index_w], style + self.get_component_rich_style("arrow-table--index"))
            )
            text = text[self._index_w :]
        segs.append(Segment(text, style))
        return Strip(segs).crop(sx, sx + width).extend_cell_length(width, style)

    # ------------------------------------------------------------------ cursor
    def _visible_rows(self) -> int:
        return max(1, self.scrollable_content_region.height - 1)

    class CursorMoved(_RowMessage):
        """The cursor moved to another row."""

    def watch_cursor_row(self, old: int, new: int) -> None:
        if not self.is_mounted:
            return
        if old != new:
            self.post_message(self.CursorMoved(self, new))
        h = self._visible_rows()
        top = int(self.scroll_y)
        if new < top:
            self.scroll_to(y=new, animate=False)
        elif new >= top + h:
            self.scroll_to(y=new - h + 1, animate=False)
        self.refresh()

    def move_cursor(self, row: int) -> None:
        if self.row_count:
            self.cursor_row = max(0, min(self.row_count - 1, row))

    def action_cursor(self, delta: int) -> None:
        self.move_cursor(self.cursor_row + delta)

    def action_page(self, delta: int) -> None:
        self.move_cursor(self.cursor_row + delta * self._visible_rows())

    def action_edge(self, end: int) -> None:
        self.move_cursor(self.row_count - 1 if end else 0)

    def action_hscroll(self, delta: int) -> None:
        self.scroll_to(x=max(0, self.scroll_x + delta), animate=False)

    def action_select(self) -> None:
        if self.row_count:
            self.post_message(self.Selected(self, self.cursor_row))

    def on_click(self, event: Any) -> None:
        y = event.y
        if y >= 1:
            i = int(self.scroll_y) + y - 1
            if 0 <= i < self.row_count:
                if i == self.cursor_row and event.chain >= 2:
                    self.post_message(self.Selected(self, i))
                self.cursor_row = i


class WideArrowTable(ArrowTable):
    """An ArrowTable that also scrolls sideways with ← →."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("left", "hscroll(-4)", "Scroll left", show=False),
        Binding("right", "hscroll(4)", "Scroll right", show=False),
    ]
