"""KPI tiles: a label, a value and a trend arrow against the step one simulated hour earlier.

Fed with the ``kpis`` panel query's columns: row 0 is the step shown, row 1 (if any) the step an
hour earlier.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from textual.app import ComposeResult
from textual.containers import Grid
from textual.content import Content
from textual.widgets import Static

from tui.console import fmt
from twin.spec.telemetry import column

Row = dict[str, float]


def _co2(kg: float) -> str:
    return "–" if not math.isfinite(kg) else (f"{kg / 1000:,.1f} t" if abs(kg) >= 1000 else f"{kg:,.0f} kg")


@dataclass(frozen=True)
class Kpi:
    key: str
    label: str
    col: str  # column of the kpis query shown
    text: Callable[[float], str]
    good_up: bool | None  # colour of ▲: True good, False bad, None neutral
    help: str
    trend_col: str = ""  # column compared for the arrow (default: col)


def _desc(name: str) -> str:
    return column("factory_ts", name).description


def _num(fmt_: str) -> Callable[[float], str]:
    return lambda v: "–" if not math.isfinite(v) else fmt_.format(v)


def _jobs(v: float) -> str:
    """'999 jobs', '9.9k jobs', '141k jobs', '1.2M jobs': at most 9 characters, so a campus's
    queue and its trend mark fit the tile at 150 columns (the exact count is on the Jobs screen)."""
    if not math.isfinite(v):
        return "–"
    if abs(v) < 1000:
        return f"{v:,.0f} jobs"
    k = v / 1000
    if abs(k) < 9.95:
        return f"{k:.1f}k jobs"
    return f"{k:.0f}k jobs" if abs(k) < 999.5 else f"{v / 1e6:.1f}M jobs"


KPIS: tuple[Kpi, ...] = (
    Kpi("it", "IT power", "it_power_w", fmt.power, None, _desc("it_power_w")),
    Kpi("facility", "Facility", "facility_power_w", fmt.power, None, _desc("facility_power_w")),
    Kpi("pue", "PUE", "pue", _num("{:.3f}"), False, _desc("pue")),
    Kpi(
        "busy",
        "Busy chips",
        "busy_share",
        fmt.pct,
        True,
        "Share of all chips doing work (chips_busy / chips_total)",
    ),
    Kpi("tokens", "Tokens/s", "tokens_per_s", fmt.si, True, _desc("tokens_per_s")),
    Kpi("jpt", "J/token", "energy_per_token_j", _num("{:.2f} J"), False, _desc("energy_per_token_j")),
    Kpi(
        "usdtok",
        "Elec $/Mtok",
        "usd_per_mtok",
        _num("${:.3f}"),
        False,
        "Electricity cost per million output tokens: J/token × price",
    ),
    Kpi("queue", "Queue", "queue_jobs", _jobs, False, _desc("queue_jobs")),
    Kpi(
        "slo",
        "SLO met",
        "slo_attainment",
        fmt.pct,
        True,
        "Requests served within the TTFT and TPOT SLO / requests decided, this step, all services",
    ),
    Kpi("chipmax", "Max chip", "max_chip_temp_c", fmt.temp, False, _desc("max_chip_temp_c")),
    # Running totals only grow: no trend arrow (the rates are on the Energy screen).
    Kpi(
        "cost",
        "Electricity",
        "cost_so_far_usd",
        fmt.money,
        False,
        "Electricity cost since the start of the run (the total cost of ownership is on F5)",
        "-",
    ),
    Kpi("co2", "CO₂ so far", "co2_so_far_kg", _co2, False, "CO2 emitted since the start of the run", "-"),
)


def trend(now: float, before: float | None) -> int:
    """+1, -1 or 0: change beyond 0.5 %."""
    if before is None or not (math.isfinite(now) and math.isfinite(before)):
        return 0
    tol = 0.005 * max(abs(before), abs(now))
    if now - before > tol:
        return 1
    if before - now > tol:
        return -1
    return 0


def _val(cols: dict[str, Any], key: str, i: int) -> float:
    v = cols.get(key)
    if v is None or i >= len(v) or v[i] is None:
        return math.nan
    return float(v[i])


class KpiTile(Static):
    """One KPI: label on the first line, value and arrow on the second."""

    def __init__(self, kpi: Kpi) -> None:
        super().__init__(id=f"kpi-{kpi.key}", classes="kpi")
        self.kpi = kpi
        self.value_text = "–"
        self.arrow = 0
        self.tooltip = kpi.help

    def on_mount(self) -> None:
        self._draw()

    def show(self, cols: dict[str, Any] | None) -> None:
        if not cols or not len(cols.get("time_s", ())):
            value, arrow = "–", 0
        else:
            k = self.kpi
            value = k.text(_val(cols, k.col, 0))
            tc = k.trend_col or k.col
            before = _val(cols, tc, 1) if len(cols["time_s"]) > 1 and tc != "-" else None
            arrow = 0 if tc == "-" else trend(_val(cols, tc, 0), before)
        if (value, arrow) != (self.value_text, self.arrow):
            self.value_text, self.arrow = value, arrow
            self._draw()

    def _draw(self) -> None:
        good = self.kpi.good_up
        if self.arrow == 0:
            mark, style = " ", ""
        else:
            mark = "▲" if self.arrow > 0 else "▼"
            style = "$text-muted" if good is None else ("$success" if (self.arrow > 0) == good else "$error")
        parts: list[str | tuple[str, str]] = [
            (self.kpi.label, "$text-muted"),
            "\n",
            (self.value_text, "bold"),
            " ",
        ]
        parts.append((mark, style) if style else mark)
        self.update(Content.assemble(*parts), layout=False)  # fixed-size tile: no relayout


class KpiGrid(Grid, can_focus=True):
    """All KPI tiles; the column count follows the terminal width (see twin.tcss)."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.draw_count = 0

    def compose(self) -> ComposeResult:
        for k in KPIS:
            yield KpiTile(k)

    def show(self, cols: dict[str, Any] | None) -> None:
        self.draw_count += 1
        for tile in self.query(KpiTile):
            tile.show(cols)
