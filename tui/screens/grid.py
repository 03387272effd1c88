"""The grid's view: power at the grid connection over the plot window (sub-step, after the
connection's storage, when the run records ``grid_ts``; else facility power per step), its peak,
peak-to-average, largest ramps and the variance in the utility's frequency bands
(``storage.kpis.grid_figures``, the run's KPIs over the window), the steps over the scenario's
ramp limit (the alarm's own condition, ``grid_ramp``) and the site battery's ratings."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np
from textual.containers import Grid, VerticalScroll
from textual.widget import Widget

from storage.gridkpis import grid_figures
from tui.console import fmt
from tui.console.feed import PanelReq
from tui.console.meta import Meta
from tui.screens.base import TwinScreen
from tui.widgets.info import InfoList, Item
from tui.widgets.plot import BraillePlot
from twin.compose import grid


def _w(mw: float | None, unit: str) -> str:
    """A figure in MW (or MW/s, MW/min) in engineering notation of ``unit`` (W, W/s, W/min)."""
    return fmt.si(mw * 1e6 if mw is not None else None, unit, 4)


def power_source(cols: dict[str, Any]) -> tuple[str, float]:
    """Where the window's power comes from and its sampling interval [s] (0: no data)."""
    t = cols.get("time_s")
    src = cols.get("source")
    if t is None or src is None or len(t) < 2:
        return "", 0.0
    return str(src[0]), float(t[1] - t[0])


def figure_items(cols: dict[str, Any]) -> list[Item]:
    """The connection's figures over the window (``grid_figures``, the KPIs' definition)."""
    src, tau = power_source(cols)
    if not tau:
        return [("power", "no data in the window", None, "")]
    p = np.asarray(cols["p_w"], dtype=np.float64)
    f = grid_figures(p, tau)
    where = f"grid_ts, {tau:g} s" if src == "grid_ts" else f"factory_ts, {tau:g} s steps"
    ratio = f["grid_peak_to_average"]
    items: list[Item] = [("source", where, None, "")]
    bad = int(np.count_nonzero(~np.isfinite(p)))
    if bad:  # a recording no run writes (edited or damaged): what depends on them is n/a
        items.append(("note", f"{bad:,} of {len(p):,} samples not a number: figures n/a", None, "warn"))
    items += [
        ("peak", _w(f["grid_peak_mw"], "W"), None, ""),
        ("mean", _w(f["grid_mean_mw"], "W"), None, ""),
        ("peak/avg", "n/a" if ratio is None or not math.isfinite(ratio) else f"{ratio:.4f}", None, ""),
        ("swing", _w(f["grid_swing_mw"], "W"), None, ""),
        ("ramp", _w(f["grid_ramp_mw_per_s"], "W/s"), None, ""),
        ("ramp/min", _w(f["grid_ramp_mw_per_min"], "W/min"), None, ""),
    ]
    items.append(("variance per band", "", None, "head"))
    for name, (lo, hi) in zip(grid.BAND_NAMES, grid.BANDS_HZ, strict=True):
        v = f["grid_band_" + name + "_mw2"]
        band = f"{lo:g}-{hi:g} Hz" if math.isfinite(hi) else f"> {lo:g} Hz"
        text = "> Nyquist" if v is None else f"{v:.4g} MW²" if math.isfinite(v) else "n/a"
        items.append((band, text, None, ""))
    return items


def limit_items(cols: dict[str, Any], meta: Meta) -> list[Item]:
    """The ramp limit, the steps of the window over it and the largest step ramp (ALARM_FLAGS)."""
    limit = meta.ramp_limit_mw_per_min
    if limit <= 0:
        return [("ramp limit", "none ([grid] ramp_limit_mw_per_min)", None, "")]
    steps = cols.get("breach_steps")
    top = cols.get("ramp_max_mw_per_min")
    n = int(steps[0]) if steps is not None and len(steps) and steps[0] is not None else 0
    v = float(top[0]) if top is not None and len(top) and top[0] is not None else math.nan
    return [
        ("ramp limit", f"{limit:g} MW/min", None, ""),
        ("steps over it", f"{n:,}", None, "warn" if n else ""),
        (
            "largest step ramp",
            f"{v:.4g} MW/min" if math.isfinite(v) else "n/a",
            None,
            "warn" if v > limit else "",
        ),
    ]


def battery_items(meta: Meta) -> list[Item]:
    """The site battery's ratings (its state of charge is not recorded)."""
    if meta.battery_power_w <= 0 or meta.battery_energy_j <= 0:
        return [("site battery", "none", None, "")]
    return [
        ("power", fmt.power(meta.battery_power_w), None, ""),
        ("energy", f"{meta.battery_energy_j / 3.6e9:,.3f} MWh", None, ""),
        ("round trip", fmt.pct(meta.battery_efficiency, 0), None, ""),
        ("state of charge", "not recorded", None, ""),
    ]


class GridScreen(TwinScreen):
    MODE = "grid"
    HAS_WINDOW = True

    def compose_body(self) -> Iterable[Widget]:
        with VerticalScroll(id="grid-body"):
            p = BraillePlot(fmt.power, 86400, id="grid-power", classes="panel")
            p.border_title = "Power at the grid connection"
            yield p
            with Grid(id="grid-top"):
                for pid, title in (
                    ("grid-figures", "Peak, ramps, spectrum"),
                    ("grid-limit", "Ramp limit"),
                    ("grid-battery", "Site battery"),
                ):
                    w = InfoList(id=pid, classes="panel")
                    w.border_title = title
                    yield w

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#grid-figures").focus()

    def panel_requests(self) -> list[PanelReq]:
        p = self.core.params()
        ramp = {**p, "lo": p["t"] - p["window_s"]}
        return [PanelReq("grid-power", "grid_power", p), PanelReq("grid-limit", "grid_ramp", ramp)]

    def show_panel(self, panel: str, cols: dict[str, Any]) -> None:
        meta = self.core.meta
        if panel == "grid-power":
            plot = self.query_one("#grid-power", BraillePlot)
            t = cols["time_s"].astype(float) if "time_s" in cols else np.zeros(0)
            p = [cols["p_w"].astype(float)] if "p_w" in cols else []
            plot.set_data(t, p, self.core.t or 0, self.core.window_s)
            what = (
                "grid_ts, after the connection's storage"
                if power_source(cols)[0] == "grid_ts"
                else "facility power per step (no grid_ts)"
            )
            plot.border_subtitle = f"last {fmt.window(self.core.window_s)} · {what}"
            self.query_one("#grid-figures", InfoList).show(figure_items(cols))
            self.query_one("#grid-battery", InfoList).show(battery_items(meta))
        elif panel == "grid-limit":
            self.query_one("#grid-limit", InfoList).show(limit_items(cols, meta))
