"""A live metrics endpoint: the latest step of a running twin as OpenMetrics / Prometheus text.

``MetricsExporter.update(frames)`` is called after each simulated chunk (the runner's ``on_chunk``
hook) and keeps only the last step's values (a snapshot, swapped under a lock), so a scrape costs
the same however long the run is. ``serve(port)`` answers ``GET /metrics`` on 127.0.0.1 through
``prometheus_client`` (plain Prometheus text, or OpenMetrics when the scraper asks for it).

Names follow Prometheus conventions (base units in the name: ``_watts``, ``_celsius``,
``_seconds``, ``_ratio``, ``_total``) and neuron-monitor's Prometheus exporter where it has the
quantity: ``neuroncore_utilization_ratio`` (0-1). neuron-monitor reports it per NeuronCore; the
twin reports the mean activity of each UltraServer's chips (label ``ultraserver``).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

PREFIX = "twin_"

# factory_ts column -> (metric name, help). Units are in the names.
FACTORY_GAUGES: tuple[tuple[str, str, str], ...] = (
    ("facility_power_w", "facility_power_watts", "Facility power = IT + cooling + power-chain losses"),
    ("it_power_w", "it_power_watts", "IT power (chips + hosts + switches, at rack input)"),
    ("cooling_power_w", "cooling_power_watts", "Cooling plant power (chiller, pumps, fans)"),
    ("power_loss_w", "power_loss_watts", "Power-chain losses (transformer, UPS, PDU)"),
    ("chip_power_w", "chip_power_watts", "Accelerator chips' power"),
    ("chiller_power_w", "chiller_power_watts", "Chiller compressor power"),
    ("pump_power_w", "pump_power_watts", "CDU and facility water pump power"),
    ("fan_power_w", "fan_power_watts", "Cooling tower / dry cooler and CRAH fan power"),
    ("unmet_heat_w", "unmet_heat_watts", "Heat the plant could not reject"),
    ("facility_cap_w", "facility_power_cap_watts", "Active facility power cap (absent: none)"),
    ("pue", "pue_ratio", "Power usage effectiveness = facility / IT"),
    ("free_cooling_fraction", "free_cooling_ratio", "Share of heat rejected by the economizer"),
    ("chiller_cop", "chiller_cop_ratio", "Chiller coefficient of performance"),
    ("facility_water_supply_c", "facility_water_supply_temperature_celsius", "Facility water supply"),
    ("coolant_supply_c", "coolant_supply_temperature_celsius", "Liquid loop supply to cold plates"),
    ("coolant_return_c", "coolant_return_temperature_celsius", "Liquid loop return (mean)"),
    ("max_chip_temp_c", "max_chip_temperature_celsius", "Hottest chip junction temperature"),
    ("outdoor_temp_c", "outdoor_temperature_celsius", "Outdoor dry-bulb temperature"),
    ("outdoor_wetbulb_c", "outdoor_wetbulb_temperature_celsius", "Outdoor wet-bulb temperature"),
    ("mean_clock", "mean_clock_ratio", "Mean clock of busy chips (1 = full)"),
    ("activity", "activity_ratio", "Mean chip activity over all chips"),
    ("queue_jobs", "queue_jobs", "Batch jobs waiting in the queue"),
    ("running_jobs", "running_jobs", "Batch jobs running"),
    ("requests_queued", "inference_requests_queued", "Inference requests waiting"),
    ("tokens_per_s", "tokens_per_second", "Output tokens per second served by inference"),
    ("requests_per_s", "inference_requests_per_second", "Inference requests arriving per second"),
    (
        "requests_dropped_per_s",
        "inference_requests_dropped_per_second",
        "Inference requests dropped per second",
    ),
    ("energy_per_token_j", "energy_per_token_joules", "Facility energy per output token"),
    ("training_flops", "training_flops", "Model FLOP/s delivered to training"),
    ("price_usd_per_mwh", "electricity_price_usd_per_mwh", "Electricity price"),
    ("carbon_g_per_kwh", "grid_carbon_g_per_kwh", "Grid carbon intensity"),
)
# factory_ts column -> chip state label of twin_chips.
CHIP_STATES: tuple[tuple[str, str], ...] = (
    ("chips_total", "total"),
    ("chips_allocated", "allocated"),
    ("chips_busy", "busy"),
    ("chips_failed", "failed"),
    ("throttled_chips", "throttled"),
    ("chips_free", "free"),
    ("chips_drained", "drained"),
)
# per-step factory_ts column -> counter (summed over every step seen).
COUNTERS: tuple[tuple[str, str, str], ...] = (
    ("energy_j", "facility_energy_joules", "Facility energy since the start"),
    ("cost_usd", "electricity_cost_usd", "Electricity cost since the start"),
    ("co2_kg", "co2_kilograms", "CO2 emitted for electricity since the start"),
    ("water_l", "water_liters", "Cooling-tower make-up water since the start"),
    ("failures", "failures", "Failures since the start (random and injected)"),
    ("preemptions", "preemptions", "Jobs preempted since the start"),
)
# ultraserver_ts column -> (metric, help); label ultraserver (and row).
US_GAUGES: tuple[tuple[str, str, str], ...] = (
    ("power_w", "ultraserver_power_watts", "IT power of the UltraServer"),
    ("max_chip_temp_c", "ultraserver_max_chip_temperature_celsius", "Hottest chip of the UltraServer"),
    ("coolant_return_c", "ultraserver_coolant_return_temperature_celsius", "Cold-plate loop return"),
    ("chips_busy", "ultraserver_chips_busy", "Chips doing work"),
    ("chips_failed", "ultraserver_chips_failed", "Failed chips"),
    ("clock", "ultraserver_clock_ratio", "Mean chip clock (1 = full)"),
)
# service_ts: latency percentiles (label quantile) and per-service gauges.
SVC_QUANTILES: tuple[tuple[str, str, str], ...] = (
    ("ttft", "service_ttft_seconds", "Time to first token of requests served this step"),
    ("tpot", "service_tpot_seconds", "Time per output token of requests served this step"),
)
SVC_GAUGES: tuple[tuple[str, str, str], ...] = (
    ("slo_attainment", "service_slo_attainment_ratio", "Requests within the TTFT and TPOT SLO / decided"),
    ("tokens_per_s", "service_tokens_per_second", "Output tokens per second"),
    ("request_rate_per_s", "service_requests_per_second", "Arrival rate"),
    ("requests_queued", "service_requests_queued", "Requests waiting"),
    ("replicas_running", "service_replicas_running", "Warm replicas serving"),
    ("kv_cache_fraction", "service_kv_cache_ratio", "KV cache in use / capacity"),
)


def _finite(v: Any) -> float | None:
    x = float(v)
    return x if math.isfinite(x) else None


@dataclass
class _Snapshot:
    time_s: float | None = None
    factory: dict[str, float] = field(default_factory=dict)
    totals: dict[str, float] = field(default_factory=dict)
    us: dict[str, Any] = field(default_factory=dict)  # column -> array over UltraServers
    svc: list[dict[str, Any]] = field(default_factory=list)


def _last_step(cols: dict[str, Any]) -> np.ndarray[Any, np.dtype[np.bool_]] | None:
    t = np.asarray(cols.get("time_s", ()))
    if not t.size:
        return None
    mask: np.ndarray[Any, np.dtype[np.bool_]] = t == t.max()
    return mask


class MetricsExporter(Collector):
    """Holds the latest step and renders it at each scrape (a ``prometheus_client`` collector)."""

    def __init__(self, labels: dict[str, str] | None = None) -> None:
        self._lock = threading.Lock()
        self._snap = _Snapshot()
        self._totals: dict[str, float] = {}
        self.labels = dict(labels or {})
        self.chunks = 0
        self.updated = threading.Condition(self._lock)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)
        self._server: Any = None
        self.port = 0

    # ------------------------------------------------------------------ feeding
    def set_run(self, **labels: str) -> None:
        """Labels of ``twin_run_info`` (run id, scenario); counters restart for a new run."""
        with self._lock:
            self.labels = dict(labels)
            self._totals = {}
            self._snap = _Snapshot()

    def update(self, frames: dict[str, dict[str, Any]]) -> None:
        """Take the last step of a chunk of frames (the runner's ``on_chunk`` hook)."""
        snap = _Snapshot()
        fac = frames.get("factory_ts", {})
        totals = dict(self._totals)
        if fac and len(fac.get("time_s", ())):
            snap.time_s = float(fac["time_s"][-1])
            snap.factory = {c: float(fac[c][-1]) for c, _, _ in FACTORY_GAUGES if c in fac}
            snap.factory.update({c: float(fac[c][-1]) for c, _ in CHIP_STATES if c in fac})
            for c, _, _ in COUNTERS:
                if c in fac:
                    totals[c] = totals.get(c, 0.0) + float(np.nansum(fac[c]))
        us = frames.get("ultraserver_ts", {})
        m = _last_step(us)
        if m is not None:
            snap.us = {
                c: np.asarray(us[c])[m]
                for c in ("ultraserver_id", "row_id", "activity", *(g[0] for g in US_GAUGES))
            }
        svc = frames.get("service_ts", {})
        m = _last_step(svc)
        if m is not None:
            names = [k for k in svc if k != "run_id"]
            rows = {k: np.asarray(svc[k])[m] for k in names}
            snap.svc = [{k: rows[k][i] for k in names} for i in range(int(m.sum()))]
        snap.totals = totals
        with self._lock:
            self._snap = snap
            self._totals = totals
            self.chunks += 1
            self.updated.notify_all()

    def wait_for_chunks(self, n: int, timeout: float | None = None) -> bool:
        """Block until ``n`` chunks have been taken in (for callers that scrape after a condition)."""
        with self._lock:
            return self.updated.wait_for(lambda: self.chunks >= n, timeout)

    # ------------------------------------------------------------------ scraping
    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            snap, labels = self._snap, dict(self.labels)
        info = GaugeMetricFamily(
            PREFIX + "run_info", "The run being simulated (value 1)", labels=list(labels)
        )
        info.add_metric(list(labels.values()), 1.0)
        yield info
        if snap.time_s is None:
            return
        g = GaugeMetricFamily(PREFIX + "sim_time_seconds", "Simulated time of the latest step")
        g.add_metric([], snap.time_s)
        yield g
        for col, name, doc in FACTORY_GAUGES:
            v = _finite(snap.factory[col]) if col in snap.factory else None
            if v is not None:
                g = GaugeMetricFamily(PREFIX + name, doc)
                g.add_metric([], v)
                yield g
        chips = GaugeMetricFamily(PREFIX + "chips", "Chips by state", labels=["state"])
        for col, state in CHIP_STATES:
            if col in snap.factory:
                chips.add_metric([state], snap.factory[col])
        yield chips
        for col, name, doc in COUNTERS:
            if col in snap.totals:
                c = CounterMetricFamily(PREFIX + name, doc)
                c.add_metric([], snap.totals[col])
                yield c
        if snap.us:
            ids = [str(int(i)) for i in snap.us["ultraserver_id"]]
            rows = [str(int(r)) for r in snap.us["row_id"]]
            util = GaugeMetricFamily(
                "neuroncore_utilization_ratio",
                "Mean activity of the UltraServer's chips, 0-1 (neuron-monitor reports it per NeuronCore)",
                labels=["ultraserver", "row"],
            )
            for i, r, v in zip(ids, rows, snap.us["activity"], strict=True):
                if (x := _finite(v)) is not None:
                    util.add_metric([i, r], x)
            yield util
            for col, name, doc in US_GAUGES:
                g = GaugeMetricFamily(PREFIX + name, doc, labels=["ultraserver", "row"])
                for i, r, v in zip(ids, rows, snap.us[col], strict=True):
                    if (x := _finite(v)) is not None:
                        g.add_metric([i, r], x)
                yield g
        if snap.svc:
            for key, name, doc in SVC_QUANTILES:
                g = GaugeMetricFamily(PREFIX + name, doc, labels=["service", "quantile"])
                for s in snap.svc:
                    for q in ("50", "90", "99"):
                        if (x := _finite(s[f"{key}_p{q}_s"])) is not None:
                            g.add_metric([str(s["service"]), f"0.{q}"], x)
                yield g
            for col, name, doc in SVC_GAUGES:
                g = GaugeMetricFamily(PREFIX + name, doc, labels=["service"])
                for s in snap.svc:
                    if col in s and (x := _finite(s[col])) is not None:
                        g.add_metric([str(s["service"])], x)
                yield g

    # ------------------------------------------------------------------ serving
    def serve(self, port: int, addr: str = "127.0.0.1") -> int:
        """Serve ``/metrics`` on ``addr:port`` (0: any free port) in a daemon thread; return the port."""
        from prometheus_client import start_http_server

        self._server, _ = start_http_server(port, addr=addr, registry=self.registry)
        self.port = int(self._server.server_port)
        return self.port

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
