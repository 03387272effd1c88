"""Energy & cost: the cost of ownership so far (its split per day, $ per chip-hour, per M tokens,
per EFLOP and per training run), the power chain stage by stage (where the watts go and what each stage loses), the
cooling plant (loop temperatures, free cooling vs chiller, water), weather, price and carbon, and
their plots over the selected window."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from textual.containers import Grid, VerticalScroll
from textual.widget import Widget

from storage.kpis import COST_SUMS, RATIOS, ratio
from storage.queries import COST_AGGREGATES
from tui.console import fmt
from tui.console.core import Console
from tui.console.feed import PanelReq
from tui.screens.base import TwinScreen
from tui.screens.overview import PlotSpec, plot_widget, show_plot
from tui.widgets.info import InfoList, Item
from twin.physics.plant import FAILED, RUNNING, UNIT_STATES, unit_states

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
    items: list[Item] = [
        (label, f"{fmt.power(w)} {fmt.pct(share(w), 1):>7}", share(w), kind) for label, w, kind in rows
    ]
    cap = _v(c, "facility_cap_w")
    thr = _v(c, "throttled_chips")
    items.append(
        ("power cap", "none" if not math.isfinite(cap) else fmt.power(cap), None, "warn" if thr else "")
    )
    items.append(
        (
            "throttled chips",
            f"{fmt.count(thr)} · clock {fmt.pct(_v(c, 'mean_clock'), 0)}",
            None,
            "warn" if thr else "",
        )
    )
    return items


# A rate per hour of a step's amount with no step length (runs.dt_s not positive).
NO_STEP = "n/a (the run's step dt_s is not positive)"


def plant_items(c: dict[str, Any], dt_s: int) -> list[Item]:
    free = _v(c, "free_cooling_fraction")
    unmet = _v(c, "unmet_heat_w")
    return [
        ("coolant supply", fmt.temp(_v(c, "coolant_supply_c")), None, ""),
        ("coolant return", fmt.temp(_v(c, "coolant_return_c")), None, ""),
        ("facility water", fmt.temp(_v(c, "facility_water_supply_c")), None, ""),
        ("hottest chip", fmt.temp(_v(c, "max_chip_temp_c")), None, ""),
        ("free cooling", fmt.pct(free, 0), free, ""),
        (
            "chiller",
            fmt.pct(1 - free, 0) if math.isfinite(free) else "–",
            1 - free if math.isfinite(free) else None,
            "loss",
        ),
        ("chiller COP", f"{_v(c, 'chiller_cop'):.1f}", None, ""),
        ("chiller power", fmt.power(_v(c, "chiller_power_w")), None, ""),
        ("water", f"{_v(c, 'water_l') / dt_s * 3600:,.0f} L/h" if dt_s > 0 else NO_STEP, None, ""),
        ("unrejected heat", fmt.power(unmet), None, "warn" if unmet > 0 else ""),
    ]


def site_items(c: dict[str, Any], dt_s: int) -> list[Item]:
    items: list[Item] = [
        ("outdoor dry bulb", fmt.temp(_v(c, "outdoor_temp_c")), None, ""),
        ("wet bulb", fmt.temp(_v(c, "outdoor_wetbulb_c")), None, ""),
        ("humidity", fmt.pct(_v(c, "outdoor_rh"), 0), None, ""),
        ("price", f"${_v(c, 'price_usd_per_mwh'):,.1f}/MWh", None, ""),
        ("carbon", f"{_v(c, 'carbon_g_per_kwh'):,.0f} g/kWh", None, ""),
    ]
    if dt_s <= 0:  # a recording no run writes (the recording check refuses it): no rates
        return [*items, ("rates", NO_STEP, None, "warn")]
    per_h = 3600 / dt_s
    return [
        *items,
        ("cost rate", f"{fmt.money(_v(c, 'cost_usd') * per_h)}/h", None, ""),
        ("CO₂ rate", f"{_v(c, 'co2_kg') * per_h:,.0f} kg/h", None, ""),
        ("energy rate", f"{fmt.power(_v(c, 'energy_j') / dt_s)}", None, ""),
    ]


def pue_items(c: dict[str, Any]) -> list[Item]:
    """Why PUE moved: the overheads that make it (each as a share of IT power, the PUE's own
    terms: PUE = 1 + cooling/IT + losses/IT) and the plant's conditions, now, an hour and a day
    earlier, side by side."""
    n = len(c.get("at", ()))

    def col(k: str) -> list[float]:
        return [float(c[k][i]) if c[k][i] is not None else math.nan for i in range(n)]

    it = col("it_power_w")

    def share(k: str) -> list[float]:
        return [w / i if i else math.nan for w, i in zip(col(k), it, strict=True)]

    def row(label: str, vals: list[float], f: Any, kind: str = "") -> Item:
        cells = [f(v) if math.isfinite(v) else "–" for v in vals] + ["–"] * (3 - len(vals))
        return (label, "".join(x.rjust(9) for x in cells), None, kind)

    pct1 = lambda v: fmt.pct(v, 1)  # noqa: E731
    temp = lambda v: f"{v:.1f}°C"  # noqa: E731
    items: list[Item] = [("", "".join(x.rjust(9) for x in ("now", "-1 h", "-1 d")), None, "")]
    items += [
        row("PUE", col("pue"), lambda v: f"{v:.3f}"),
        row("cooling/IT", share("cooling_power_w"), pct1),
        row("  chiller", share("chiller_power_w"), pct1),
        row("  pumps", share("pump_power_w"), pct1),
        row("  fans", share("fan_power_w"), pct1),
        row("losses/IT", share("power_loss_w"), pct1),
        row("  UPS", share("ups_loss_w"), pct1),
        row("  PDU", share("pdu_loss_w"), pct1),
        row("  transf.", share("transformer_loss_w"), pct1),
        row("IT power", it, fmt.power),
        row("free cooling", col("free_cooling_fraction"), lambda v: fmt.pct(v, 0)),
        row("dry bulb", col("outdoor_temp_c"), temp),
        row("wet bulb", col("outdoor_wetbulb_c"), temp),
        row("chiller load", col("chiller_load_w"), fmt.power),
        row("chiller COP", col("chiller_cop"), lambda v: f"{v:.1f}"),
    ]
    return items


def unit_items(cdus: dict[str, Any], plant: dict[str, Any], meta: Any = None) -> list[Item]:
    """The plant's units: each CDU (one per row) with its heat load and loop return, each chiller
    and each cooling tower / dry cooler with its state (running, standby, failed) and load."""
    items = _cdu_items(cdus)
    return items + _plant_items(plant, meta) if plant else items


def _cdu_items(cdus: dict[str, Any]) -> list[Item]:
    """Each CDU (one per row): its heat load, loop return and state."""
    items: list[Item] = []
    loads = [float(v) for v in cdus.get("load_w", ())]
    top = max(loads) if loads else 0.0
    flows = cdus.get("flow")
    for i, unit in enumerate(cdus.get("unit", ())):
        failed = int(cdus["chips_failed"][i] or 0)
        flow = float(flows[i]) if flows is not None and flows[i] is not None else math.nan
        pumps_lost = math.isfinite(flow) and flow <= 0.0  # NaN: a file from before the CDU flow column
        state = "FAILED (pumps)" if pumps_lost else (f"{failed} chips down" if failed else "running")
        items.append(
            (
                str(unit),
                f"{fmt.power(loads[i])} · ret {float(cdus['return_c'][i]):.1f}°C · {state}",
                loads[i] / top if top else None,
                "warn" if failed or pumps_lost else "",
            )
        )
    return items


def _plant_items(plant: dict[str, Any], meta: Any) -> list[Item]:
    """Each chiller and economizer unit with its state and load (or, in a file from before the
    per-unit columns, the chillers' and the economizer's stage), and any heat short of capacity."""
    items: list[Item] = []
    chillers = int(getattr(meta, "chillers", 0) or 0)
    econ = int(getattr(meta, "economizers", 0) or 0)
    running = _v(plant, "chillers_running")
    if chillers and math.isfinite(running):  # files from before the per-unit columns: the stage only
        econ_name = {"dry": "dry cooler", "hybrid": "hybrid cooler"}.get(
            getattr(meta, "plant", "tower"), "tower"
        )
        groups = (
            ("chiller", chillers, "chillers", "chiller_load_fraction", "load"),
            (econ_name, econ, "economizers", "economizer_load_fraction", "fans"),
        )
        for name, n, key, load_key, what in groups:
            lost = _v(plant, f"{key}_failed")
            on = _v(plant, f"{key}_running")
            load = _v(plant, load_key)
            states = unit_states(n, n - int(lost), int(on))
            for k, st in enumerate(states.tolist()):
                if st == RUNNING:
                    items.append((f"{name} {k + 1}", f"running · {what} {fmt.pct(load, 0)}", load, ""))
                else:
                    items.append((f"{name} {k + 1}", UNIT_STATES[st], None, "warn" if st == FAILED else ""))
    else:
        free = _v(plant, "free_cooling_fraction")
        chiller_w = _v(plant, "chiller_power_w")
        items.append(
            ("chillers", f"{'running' if chiller_w > 0 else 'idle'} · {fmt.power(chiller_w)}", None, "")
        )
        items.append(
            (
                "economizer",
                f"{'on' if free > 0 else 'off'} · {fmt.pct(free, 0)} of the heat",
                free if math.isfinite(free) else None,
                "",
            )
        )
    unmet = _v(plant, "unmet_heat_w")
    if unmet > 0:
        items.append(("short of capacity", fmt.power(unmet), None, "warn"))
    return items


def cost_kpis(c: dict[str, Any], prefix: str = "") -> dict[str, float | None]:
    """The run summary's cost KPIs (``storage.kpis``: the cost sums and ratios) from the cost panel's
    aggregates; ``prefix`` "day_": the cost split of the day so far."""
    row: dict[str, Any] = {}
    for k in (*COST_AGGREGATES, "pretrain_job_flop"):
        v = _v(c, prefix + k)
        row[k] = v if math.isfinite(v) else None
    for name, (plus, minus) in COST_SUMS.items():
        row[name] = sum(row[k] or 0.0 for k in plus) - sum(row[k] or 0.0 for k in minus)
    for name in ("usd_per_chip_hour", "usd_per_mtok", "usd_per_mtok_all_in", "usd_per_eflop"):
        row[name] = ratio(row, name) if all(k in row for k in RATIOS[name][:2]) else None
    eflop, per_job = row["usd_per_eflop"], row["pretrain_job_flop"]
    row["usd_per_pretrain_job"] = eflop * per_job / 1e18 if eflop is not None and per_job else None
    return row


def usd(v: float | None) -> str:
    """Dollars in at most 8 cells: '$0.52', '$580', '$6.8 k', '$1.23 M'."""
    if v is None or not math.isfinite(v):
        return "–"
    a = abs(v)
    if a >= 1e6:
        return f"${v / 1e6:.2f} M"
    if a >= 1e3:
        return f"${v / 1e3:.1f} k"
    return f"${v:.0f}" if a >= 10 else f"${v:.2f}"


def cost_items(c: dict[str, Any]) -> list[Item]:
    """Cost of ownership so far: the split (capital / energy / cooling / other) per day on average
    and for the day shown so far, the total, $ per chip-hour, per M tokens (all-in and energy only),
    per EFLOP of batch work and per pre-training job's work. Every figure is total cost of ownership
    except the one marked "elec." (electricity only)."""
    run, day = cost_kpis(c), cost_kpis(c, "day_")
    days = run.get("days") or 0.0
    total = run["total_cost_usd"] or 0.0
    items: list[Item] = [("", f"{'per day':>8}{'today':>8}", None, "")]
    for label, key in (
        ("capital", "capex_usd"),
        ("energy", "energy_cost_usd"),
        ("cooling", "cooling_cost_usd"),
        ("other", "other_cost_usd"),
        ("total (TCO)", "total_cost_usd"),
    ):
        v = run[key]
        mean = v / days if days and v is not None else None
        share = v / total if total and v is not None and key != "total_cost_usd" else None
        items.append((label, f"{usd(mean):>8}{usd(day[key]):>8}", share, ""))
    job = run["usd_per_pretrain_job"]
    items += [
        (f"TCO so far ({days:,.1f} d)", usd(total), None, ""),
        ("TCO $/chip-hour", usd(run["usd_per_chip_hour"]), None, ""),
        ("TCO $/M tokens", usd(run["usd_per_mtok_all_in"]), None, ""),
        ("elec. $/M tokens", usd(run["usd_per_mtok"]), None, ""),
        ("TCO $/EFLOP batch", usd(run["usd_per_eflop"]), None, ""),
        ("TCO $/pretrain job", usd(job) if job is not None else "none done", None, ""),
    ]
    return items


class EnergyScreen(TwinScreen):
    MODE = "energy"
    HAS_WINDOW = True

    def __init__(self, core: Console) -> None:
        super().__init__(core)
        self._plant: dict[str, Any] = {}
        self._cdus: dict[str, Any] = {}

    def compose_body(self) -> Iterable[Widget]:
        with VerticalScroll(id="energy-body"):
            with Grid(id="energy-top"):
                for pid, title in (
                    ("chain", "Power chain"),
                    ("cost", "Cost of ownership"),
                    ("plant", "Cooling plant"),
                    ("site", "Site & grid"),
                    ("pue-why", "Why PUE moved"),
                    ("units", "Plant units"),
                ):
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
        p = self.core.params()
        reqs = [
            PanelReq("chain", "power_chain", p),
            PanelReq("plant", "cooling_plant", p),
            PanelReq("site", "site_grid", p),
            PanelReq("pue-why", "pue_why", p),
            PanelReq("units", "plant_units", p),
            PanelReq("cost", "cost", p),
        ]
        return reqs + [PanelReq(s[0], s[1], p) for s in PLOTS]

    def show_panel(self, panel: str, cols: dict[str, Any]) -> None:
        dt = self.core.meta.dt_s
        if panel == "chain":
            self.query_one("#chain", InfoList).show(chain_items(cols))
        elif panel == "plant":
            self._plant = cols
            self.query_one("#plant", InfoList).show(plant_items(cols, dt))
            self.query_one("#units", InfoList).show(unit_items(self._cdus, cols, self.core.meta))
        elif panel == "units":
            self._cdus = cols
            self.query_one("#units", InfoList).show(unit_items(cols, self._plant, self.core.meta))
        elif panel == "cost":
            self.query_one("#cost", InfoList).show(cost_items(cols))
        elif panel == "pue-why":
            self.query_one("#pue-why", InfoList).show(pue_items(cols))
        elif panel == "site":
            self.query_one("#site", InfoList).show(site_items(cols, dt))
        else:
            show_plot(self, next(s for s in PLOTS if s[0] == panel), cols)
