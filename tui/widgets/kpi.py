"""KPI tiles: a label, a value and a trend arrow against the value one simulated hour earlier."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from textual.app import ComposeResult
from textual.containers import Grid
from textual.content import Content
from textual.widgets import Static

from tui import fmt
from tui.feed import Snapshot
from twin.telemetry import column

Row = dict[str, float]


def _co2(kg: float) -> str:
    return f"{kg / 1000:,.1f} t" if abs(kg) >= 1000 else f"{kg:,.0f} kg"


def _busy(r: Row) -> float:
    return r["chips_busy"] / r["chips_total"] if r.get("chips_total") else math.nan


@dataclass(frozen=True)
class Kpi:
    key: str
    label: str
    rate: Callable[[Row], float]  # the quantity compared for the trend arrow
    text: Callable[[Snapshot], str]  # the displayed value
    good_up: bool | None  # colour of ▲: True good, False bad, None neutral
    help: str


def _col(name: str) -> Callable[[Row], float]:
    return lambda r: r.get(name, math.nan)


KPIS: tuple[Kpi, ...] = (
    Kpi("it", "IT power", _col("it_power_w"), lambda s: fmt.power(s.row["it_power_w"]), None,
        column("factory_ts", "it_power_w").description),
    Kpi("facility", "Facility", _col("facility_power_w"), lambda s: fmt.power(s.row["facility_power_w"]), None,
        column("factory_ts", "facility_power_w").description),
    Kpi("pue", "PUE", _col("pue"), lambda s: f"{s.row['pue']:.3f}", False,
        column("factory_ts", "pue").description),
    Kpi("busy", "Busy chips", _busy, lambda s: fmt.pct(_busy(s.row)), True,
        "Share of all chips doing work (chips_busy / chips_total)"),
    Kpi("tokens", "Tokens/s", _col("tokens_per_s"), lambda s: fmt.si(s.row["tokens_per_s"]), True,
        column("factory_ts", "tokens_per_s").description),
    Kpi("jpt", "J/token", _col("energy_per_token_j"),
        lambda s: "–" if math.isnan(s.row["energy_per_token_j"]) else f"{s.row['energy_per_token_j']:.2f} J",
        False, column("factory_ts", "energy_per_token_j").description),
    Kpi("queue", "Queue", _col("queue_jobs"), lambda s: f"{s.row['queue_jobs']:.0f} jobs", False,
        column("factory_ts", "queue_jobs").description),
    Kpi("outdoor", "Outdoor", _col("outdoor_temp_c"), lambda s: fmt.temp(s.row["outdoor_temp_c"]), None,
        column("factory_ts", "outdoor_temp_c").description),
    Kpi("chipmax", "Max chip", _col("max_chip_temp_c"), lambda s: fmt.temp(s.row["max_chip_temp_c"]), False,
        column("factory_ts", "max_chip_temp_c").description),
    Kpi("failed", "Failed", _col("chips_failed"), lambda s: f"{s.row['chips_failed']:,.0f}", False,
        column("factory_ts", "chips_failed").description),
    Kpi("cost", "Cost total", _col("cost_usd"), lambda s: fmt.money(s.cost_usd), False,
        "Electricity cost since the start of the run (arrow: spending rate vs an hour ago)"),
    Kpi("co2", "CO₂ total", _col("co2_kg"), lambda s: _co2(s.co2_kg), False,
        "CO2 emitted since the start of the run (arrow: emission rate vs an hour ago)"),
)


def trend(now: float, before: float | None) -> int:
    """+1, -1 or 0: change beyond 0.5 % (any change for counts near zero)."""
    if before is None or not (math.isfinite(now) and math.isfinite(before)):
        return 0
    tol = 0.005 * max(abs(before), abs(now))
    if now - before > tol:
        return 1
    if before - now > tol:
        return -1
    return 0


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

    def show(self, snap: Snapshot | None) -> None:
        if snap is None:
            value, arrow = "–", 0
        else:
            value = self.kpi.text(snap)
            before = self.kpi.rate(snap.prev) if snap.prev is not None else None
            arrow = trend(self.kpi.rate(snap.row), before)
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
        parts: list[str | tuple[str, str]] = [(self.kpi.label, "$text-muted"), "\n", (self.value_text, "bold"), " "]
        parts.append((mark, style) if style else mark)
        self.update(Content.assemble(*parts), layout=False)  # fixed-size tile: no relayout


class KpiGrid(Grid):
    """All KPI tiles; the column count follows the terminal width (see twin.tcss)."""

    def compose(self) -> ComposeResult:
        for k in KPIS:
            yield KpiTile(k)

    def show(self, snap: Snapshot | None) -> None:
        for tile in self.query(KpiTile):
            tile.show(snap)
