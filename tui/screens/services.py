"""Services: every inference service at the time shown — replicas running / loading / wanted,
demand and drops, the request queue, TTFT and TPOT percentiles against the service's SLO, KV-cache
use and energy per token — and plots of the selected service over the plot window. Live and in a
replay the panels run their SQL on ``service_ts`` (``s`` opens it)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, ClassVar

import numpy as np
from textual.containers import Grid
from textual.widget import Widget

from tui.console import fmt
from tui.console.core import Console
from tui.console.feed import PanelReq
from tui.screens.base import TwinScreen
from tui.screens.overview import legend
from tui.widgets.arrowtable import ArrowTable, WideArrowTable
from tui.widgets.plot import BraillePlot

# Plots of the selected service: widget id, title, value format, columns, legend names.
SVC_PLOTS: tuple[tuple[str, str, Any, tuple[str, ...], tuple[str, ...]], ...] = (
    ("svc-ttft", "TTFT", lambda v: fmt.span_ms(v), ("ttft_p99_s", "ttft_p50_s"), ("p99", "p50")),
    ("svc-tpot", "TPOT", lambda v: fmt.span_ms(v), ("tpot_p99_s", "tpot_p50_s"), ("p99", "p50")),
    (
        "svc-rate",
        "Requests/s",
        lambda v: fmt.si(v, "", 3),
        ("request_rate_per_s", "dropped_per_s"),
        ("arriving", "dropped"),
    ),
    ("svc-replicas", "Replicas", lambda v: f"{v:,.0f}", ("replicas_up", "replicas_target"), ("up", "wanted")),
    ("svc-kv", "KV cache", lambda v: fmt.pct(v, 0), ("kv_cache_fraction",), ()),
    ("svc-queue", "Queued requests", lambda v: f"{v:,.0f}", ("requests_queued",), ()),
)

LABELS = {
    "service": "service",
    "replicas": "replicas",
    "rate": "req/s",
    "drops": "drop/s",
    "queued": "queue",
    "ttft": "TTFT p50/p99 (SLO)",
    "tpot": "TPOT p50/p99 (SLO)",
    "slo": "in SLO",
    "kv": "KV",
    "tokens": "tok/s in/out",
    "jpt": "J/out tok",
    "util": "util",
}


def _f(v: Any) -> float:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return math.nan
    return x


def service_rows(cols: dict[str, Any], slos: dict[str, tuple[float, float]]) -> dict[str, list[Any]]:
    """The services table: one row per service, latencies against its SLO ('!' marks a p99 over it)."""
    out: dict[str, list[Any]] = {k: [] for k in LABELS}
    for i in range(len(cols.get("service", ()))):
        name = str(cols["service"][i])
        ttft_slo, tpot_slo = slos.get(name, (math.nan, math.nan))

        def lat(p50: str, p99: str, slo: float, i: int = i) -> str:
            a, b = _f(cols[p50][i]), _f(cols[p99][i])
            over = " !" if math.isfinite(b) and math.isfinite(slo) and b > slo else ""
            return f"{fmt.span_ms(a)}/{fmt.span_ms(b)} ({fmt.span_ms(slo)}){over}"

        up, loading, wanted = (
            int(_f(cols[k][i])) for k in ("replicas_running", "replicas_starting", "replicas_target")
        )
        out["service"].append(name)
        out["replicas"].append(f"{up}/{loading}/{wanted}")
        out["rate"].append(fmt.si(_f(cols["request_rate_per_s"][i]), "", 3))
        out["drops"].append(fmt.si(_f(cols["dropped_per_s"][i]), "", 3))
        out["queued"].append(f"{int(_f(cols['requests_queued'][i])):,}")
        out["ttft"].append(lat("ttft_p50_s", "ttft_p99_s", ttft_slo))
        out["tpot"].append(lat("tpot_p50_s", "tpot_p99_s", tpot_slo))
        out["slo"].append(fmt.pct(_f(cols["slo_attainment"][i]), 1))
        out["kv"].append(fmt.pct(_f(cols["kv_cache_fraction"][i]), 0))
        tin, tout = _f(cols["input_tokens_per_s"][i]), _f(cols["tokens_per_s"][i])
        out["tokens"].append(f"{fmt.si(tin, '', 3)}/{fmt.si(tout, '', 3)}")
        jpt = _f(cols["energy_per_token_j"][i])
        out["jpt"].append(f"{jpt:.2f}" if math.isfinite(jpt) else "–")
        out["util"].append(fmt.pct(_f(cols["utilization"][i]), 0))
    return out


class ServicesScreen(TwinScreen):
    MODE = "services"
    HAS_WINDOW = True
    ALIASES: ClassVar[dict[str, str]] = {p[0]: "svc-series" for p in SVC_PLOTS}

    def __init__(self, core: Console) -> None:
        super().__init__(core)
        self.sel = 0  # the service whose plots are shown
        self.names: list[str] = []

    def compose_body(self) -> Iterable[Widget]:
        t = WideArrowTable(
            labels=LABELS, empty="no inference services in this scenario", id="services", classes="panel"
        )
        t.border_title = "Services"
        yield t
        with Grid(id="svc-plots"):
            for pid, title, f, _, names in SVC_PLOTS:
                p = BraillePlot(f, 86400, id=pid, classes="panel")
                p.border_title = legend(title, names)
                if pid == "svc-kv":
                    p.bounds = (0.0, 1.0)
                yield p

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#services", ArrowTable).focus()

    def panel_requests(self) -> list[PanelReq]:
        core = self.core
        return [
            PanelReq("services", "services", core.params()),
            PanelReq("svc-series", "svc_series", core.params(service_id=self.sel)),
        ]

    def show_panel(self, panel: str, cols: dict[str, Any]) -> None:
        core = self.core
        if panel == "services":
            t = self.query_one("#services", ArrowTable)
            slos = {n: (a, b) for n, a, b in core.meta.slos}
            self.names = [str(n) for n in cols.get("service", ())]
            t.set_table(service_rows(cols, slos))
            n = len(self.names)
            t.border_title = f"Services · {n} at {fmt.short_clock(core.t or 0)}" if n else "Services"
            t.border_subtitle = "replicas up/loading/wanted · ! p99 over SLO · ↑↓ plots"
            return
        name = self.names[self.sel] if self.sel < len(self.names) else f"service {self.sel}"
        for pid, title, _, keys, names in SVC_PLOTS:
            p = self.query_one(f"#{pid}", BraillePlot)
            series = [np.asarray(cols[k], dtype=float) for k in keys]
            p.set_data(np.asarray(cols["time_s"], dtype=float), series, core.t or 0, core.window_s)
            p.border_title = legend(f"{title} · {name}", names)
            p.border_subtitle = f"last {fmt.window(core.window_s)}"

    def on_arrow_table_cursor_moved(self, event: ArrowTable.CursorMoved) -> None:
        if event.table.id == "services" and event.row != self.sel:
            self.sel = event.row
            self.refresh_view(force=True)
