"""Energy: the power chain stage by stage (where the watts go and what each stage loses), the
cooling plant (loop temperatures, free cooling vs chiller, water), weather, price and carbon, and
their plots over the selected window."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from textual.containers import Grid, VerticalScroll
from textual.widget import Widget

from tui import fmt
from tui.feed import PanelReq
from tui.screens.base import TwinScreen
from tui.screens.overview import PlotSpec, plot_widget, show_plot
from tui.widgets.info import InfoList, Item

PLOTS: tuple[PlotSpec, ...] = (
    ("plot-cooling", "plot_cooling", "Cooling / losses", fmt.power, ("cooling", "losses")),
    ("plot-free", "plot_free", "Free cooling", lambda v: fmt.pct(v, 0), ()),
    ("plot-loops", "plot_loops", "Loops", lambda v: f"{v:.0f}°C", ("return", "facility")),
    ("plot-weather", "plot_weather", "Weather", lambda v: f"{v:.0f}°C", ("dry", "wet bulb")),
    ("plot-price", "plot_price", "Price $/MWh", lambda v: f"{v:.0f}", ()),
    ("plot-carbon", "plot_carbon", "Carbon g/kWh", lambda v: f"{v:.0f}", ()),
)


def _v(cols: dict[str, Any], k: str) -> float:
    v = cols.get(k)
    return float(v[0]) if v is not None and len(v) and v[0] is not None else math.nan


def chain_items(c: dict[str, Any]) -> list[Item]:
    """Facility power split into where it goes: chips, the rest of IT, each loss, cooling."""
    fac = _v(c, "facility_power_w")
    share = (lambda w: w / fac) if fac and math.isfinite(fac) else (lambda w: math.nan)
    it, chip, psu = _v(c, "it_power_w"), _v(c, "chip_power_w"), _v(c, "psu_loss_w")
    rows: list[tuple[str, float, str]] = [
        ("facility", fac, ""),
        ("├ transformer loss", _v(c, "transformer_loss_w"), "loss"),
        ("├ UPS loss", _v(c, "ups_loss_w"), "loss"),
        ("├ PDU loss", _v(c, "pdu_loss_w"), "loss"),
        ("├ cooling", _v(c, "cooling_power_w"), ""),
        ("│  chiller", _v(c, "chiller_power_w"), ""),
        ("│  pumps", _v(c, "pump_power_w"), ""),
        ("│  fans", _v(c, "fan_power_w"), ""),
        ("└ IT", it, ""),
        ("   rectifier loss", psu, "loss"),
        ("   chips", chip, ""),
        ("   hosts + switches", it - chip - psu, ""),
    ]
    items: list[Item] = [(label, f"{fmt.power(w)} {fmt.pct(share(w), 1):>7}", share(w), kind)
                         for label, w, kind in rows]
    cap = _v(c, "facility_cap_w")
    thr = _v(c, "throttled_chips")
    items.append(("power cap", "none" if not math.isfinite(cap) else fmt.power(cap), None, "warn" if thr else ""))
    items.append(("throttled chips", f"{fmt.count(thr)} · clock {fmt.pct(_v(c, 'mean_clock'), 0)}", None,
                  "warn" if thr else ""))
    return items


def plant_items(c: dict[str, Any], dt_s: int) -> list[Item]:
    free = _v(c, "free_cooling_fraction")
    unmet = _v(c, "unmet_heat_w")
    return [
        ("coolant supply", fmt.temp(_v(c, "coolant_supply_c")), None, ""),
        ("coolant return", fmt.temp(_v(c, "coolant_return_c")), None, ""),
        ("facility water", fmt.temp(_v(c, "facility_water_supply_c")), None, ""),
        ("hottest chip", fmt.temp(_v(c, "max_chip_temp_c")), None, ""),
        ("free cooling", fmt.pct(free, 0), free, ""),
        ("chiller", fmt.pct(1 - free, 0) if math.isfinite(free) else "–",
         1 - free if math.isfinite(free) else None, "loss"),
        ("chiller COP", f"{_v(c, 'chiller_cop'):.1f}", None, ""),
        ("chiller power", fmt.power(_v(c, "chiller_power_w")), None, ""),
        ("water", f"{_v(c, 'water_l') / dt_s * 3600:,.0f} L/h", None, ""),
        ("unrejected heat", fmt.power(unmet), None, "warn" if unmet > 0 else ""),
    ]


def site_items(c: dict[str, Any], dt_s: int) -> list[Item]:
    per_h = 3600 / dt_s
    return [
        ("outdoor dry bulb", fmt.temp(_v(c, "outdoor_temp_c")), None, ""),
        ("wet bulb", fmt.temp(_v(c, "outdoor_wetbulb_c")), None, ""),
        ("humidity", fmt.pct(_v(c, "outdoor_rh"), 0), None, ""),
        ("price", f"${_v(c, 'price_usd_per_mwh'):,.1f}/MWh", None, ""),
        ("carbon", f"{_v(c, 'carbon_g_per_kwh'):,.0f} g/kWh", None, ""),
        ("cost rate", f"{fmt.money(_v(c, 'cost_usd') * per_h)}/h", None, ""),
        ("CO₂ rate", f"{_v(c, 'co2_kg') * per_h:,.0f} kg/h", None, ""),
        ("energy rate", f"{fmt.power(_v(c, 'energy_j') / dt_s)}", None, ""),
    ]


class EnergyScreen(TwinScreen):
    MODE = "energy"
    HAS_WINDOW = True

    def compose_body(self) -> Iterable[Widget]:
        with VerticalScroll(id="energy-body"):
            with Grid(id="energy-top"):
                for pid, title in (("chain", "Power chain"), ("plant", "Cooling plant"), ("site", "Site & grid")):
                    w = InfoList(id=pid, classes="panel")
                    w.border_title = title
                    yield w
            with Grid(id="energy-plots"):
                for spec in PLOTS:
                    yield plot_widget(spec)

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#chain").focus()

    def panel_requests(self) -> list[PanelReq]:
        p = self.twin.params()
        reqs = [PanelReq("chain", "power_chain", p), PanelReq("plant", "cooling_plant", p),
                PanelReq("site", "site_grid", p)]
        return reqs + [PanelReq(s[0], s[1], p) for s in PLOTS]

    def show_panel(self, panel: str, cols: dict[str, Any]) -> None:
        dt = self.twin.meta.dt_s
        if panel == "chain":
            self.query_one("#chain", InfoList).show(chain_items(cols))
        elif panel == "plant":
            self.query_one("#plant", InfoList).show(plant_items(cols, dt))
        elif panel == "site":
            self.query_one("#site", InfoList).show(site_items(cols, dt))
        else:
            show_plot(self, next(s for s in PLOTS if s[0] == panel), cols)
