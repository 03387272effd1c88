"""A live metrics endpoint: the latest step of a running twin as OpenMetrics / Prometheus text.

``MetricsExporter.update(frames)`` is called with the frames of every commit of the run (the
runner's ``on_chunk`` hook, at least once a second of wall time live and headless) and keeps only
the last step's values (a snapshot, swapped under a lock), so a scrape costs the same however long
the run is. A commit without steps (the run's closing one) keeps the values of the last step, so
the final values are served until the endpoint is closed.

``serve(port)`` answers ``GET /metrics`` on 127.0.0.1 in the exposition format of
``prometheus_client`` (plain Prometheus text, or OpenMetrics when the scraper asks for it) from
``storage.metrics_server.MetricsServer``, bounded whatever a client does.

Names follow Prometheus conventions (base units in the name: ``_watts``, ``_celsius``,
``_seconds``, ``_ratio``, ``_total``) and neuron-monitor's Prometheus exporter where it has the
quantity: ``neuroncore_utilization_ratio`` (0-1). neuron-monitor reports it per NeuronCore; the
twin reports the mean activity of each UltraServer's chips (label ``ultraserver``).
"""

from __future__ import annotations

import gzip
import logging
import math
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder, gzip_accepted
from prometheus_client.registry import Collector, CollectorRegistry

from storage.metrics_server import IDLE_TIMEOUT_S, MAX_CONNECTIONS, MetricsServer

log = logging.getLogger("twin.metrics")

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
    ("ultraservers_tripped", "ultraservers_tripped", "UltraServers powered off by thermal protection"),
    ("outdoor_temp_c", "outdoor_temperature_celsius", "Outdoor dry-bulb temperature"),
    ("outdoor_wetbulb_c", "outdoor_wetbulb_temperature_celsius", "Outdoor wet-bulb temperature"),
    ("mean_clock", "mean_clock_ratio", "Mean clock of busy chips (1 = full)"),
    ("activity", "activity_ratio", "Mean chip activity over all chips"),
    ("queue_jobs", "queue_jobs", "Batch jobs waiting in the queue"),
    ("running_jobs", "running_jobs", "Batch jobs running"),
    ("requests_queued", "inference_requests_queued", "Inference requests waiting"),
    ("tokens_per_s", "tokens_per_second", "Output tokens per second served by inference"),
    ("input_tokens_per_s", "input_tokens_per_second", "Prompt tokens per second prefilled by inference"),
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
    (
        "water_l",
        "water_liters",
        "Site cooling water (towers, wet coolers, evaporative intake) since the start",
    ),
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


def _ultraserver_metrics(us: dict[str, Any]) -> Iterator[Metric]:
    """The per-UltraServer gauges of a snapshot (``us``: column -> array over UltraServers),
    labelled by UltraServer and row; non-finite values are left out."""
    ids = [str(int(i)) for i in us["ultraserver_id"]]
    rows = [str(int(r)) for r in us["row_id"]]
    util = GaugeMetricFamily(
        "neuroncore_utilization_ratio",
        "Mean activity of the UltraServer's chips, 0-1 (neuron-monitor reports it per NeuronCore)",
        labels=["ultraserver", "row"],
    )
    for i, r, v in zip(ids, rows, us["activity"], strict=True):
        if (x := _finite(v)) is not None:
            util.add_metric([i, r], x)
    yield util
    for col, name, doc in US_GAUGES:
        g = GaugeMetricFamily(PREFIX + name, doc, labels=["ultraserver", "row"])
        for i, r, v in zip(ids, rows, us[col], strict=True):
            if (x := _finite(v)) is not None:
                g.add_metric([i, r], x)
        yield g


def _service_metrics(svc: list[dict[str, Any]]) -> Iterator[Metric]:
    """The per-service gauges of a snapshot (latency quantiles, then the plain gauges);
    non-finite values are left out."""
    for key, name, doc in SVC_QUANTILES:
        g = GaugeMetricFamily(PREFIX + name, doc, labels=["service", "quantile"])
        for s in svc:
            for q in ("50", "90", "99"):
                if (x := _finite(s[f"{key}_p{q}_s"])) is not None:
                    g.add_metric([str(s["service"]), f"0.{q}"], x)
        yield g
    for col, name, doc in SVC_GAUGES:
        g = GaugeMetricFamily(PREFIX + name, doc, labels=["service"])
        for s in svc:
            if col in s and (x := _finite(s[col])) is not None:
                g.add_metric([str(s["service"])], x)
        yield g


class MetricsExporter(Collector):
    """Holds the latest step and renders it at each scrape (a ``prometheus_client`` collector)."""

    def __init__(self, labels: dict[str, str] | None = None) -> None:
        self._lock = threading.Lock()
        self._snap = _Snapshot()
        self._totals: dict[str, float] = {}
        self.labels = dict(labels or {})
        self.chunks = 0
        self.errors = 0  # updates that failed (logged; the run went on)
        self._version = 0  # changes with every update and set_run (the rendered text's cache key)
        self._rendered: dict[tuple[str, bool], tuple[int, bytes]] = {}
        self.updated = threading.Condition(self._lock)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)
        self.server: MetricsServer | None = None
        self.port = 0

    # ------------------------------------------------------------------ feeding
    def set_run(self, **labels: str) -> None:
        """Labels of ``twin_run_info`` (run id, scenario); counters restart for a new run."""
        with self._lock:
            self.labels = dict(labels)
            self._totals = {}
            self._snap = _Snapshot()
            self._version += 1

    def update(self, frames: dict[str, dict[str, Any]]) -> None:
        """Take the last step of a commit's frames (the runner's ``on_chunk`` hook). Never raises:
        a failure is logged and counted, and the run goes on with the previous values."""
        try:
            self._update(frames)
        except Exception:
            self.errors += 1
            if self.errors == 1 or self.errors % 1000 == 0:
                log.exception("metrics: update %d failed; the run goes on", self.errors)

    def _update(self, frames: dict[str, dict[str, Any]]) -> None:
        # Tables without rows (a commit of no steps: the run's closing one) keep the values they had.
        fac = frames.get("factory_ts", {})
        factory: dict[str, float] | None = None
        added: dict[str, float] = {}
        time_s = None
        if fac and len(fac.get("time_s", ())):
            time_s = float(fac["time_s"][-1])
            factory = {c: float(fac[c][-1]) for c, _, _ in FACTORY_GAUGES if c in fac}
            factory.update({c: float(fac[c][-1]) for c, _ in CHIP_STATES if c in fac})
            added = {c: float(np.nansum(fac[c])) for c, _, _ in COUNTERS if c in fac}
        us_rows: dict[str, Any] | None = None
        us = frames.get("ultraserver_ts", {})
        m = _last_step(us)
        if m is not None:
            us_rows = {
                c: np.asarray(us[c])[m]
                for c in ("ultraserver_id", "row_id", "activity", *(g[0] for g in US_GAUGES))
            }
        svc_rows: list[dict[str, Any]] | None = None
        svc = frames.get("service_ts", {})
        m = _last_step(svc)
        if m is not None:
            names = [k for k in svc if k != "run_id"]
            rows = {k: np.asarray(svc[k])[m] for k in names}
            svc_rows = [{k: rows[k][i] for k in names} for i in range(int(m.sum()))]
        with self._lock:
            prev = self._snap
            totals = dict(self._totals)
            for c, v in added.items():
                totals[c] = totals.get(c, 0.0) + v
            self._snap = _Snapshot(
                time_s=prev.time_s if time_s is None else time_s,
                factory=prev.factory if factory is None else factory,
                totals=totals,
                us=prev.us if us_rows is None else us_rows,
                svc=prev.svc if svc_rows is None else svc_rows,
            )
            self._totals = totals
            self.chunks += 1
            self._version += 1
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
            yield from _ultraserver_metrics(snap.us)
        if snap.svc:
            yield from _service_metrics(snap.svc)

    # ------------------------------------------------------------------ serving
    def render(self, accept: str = "", accept_encoding: str = "") -> tuple[bytes, list[tuple[str, str]]]:
        """The body and headers of a scrape, in the format the ``Accept`` header asks for (the
        same negotiation as ``prometheus_client``). Rendered once per update and format."""
        encoder, ctype = choose_encoder(accept)
        zipped = gzip_accepted(accept_encoding)
        with self._lock:
            version = self._version
            hit = self._rendered.get((ctype, zipped))
        if hit is not None and hit[0] == version:
            body = hit[1]
        else:
            body = encoder(self.registry)
            if zipped:
                body = gzip.compress(body, compresslevel=1)
            with self._lock:
                if self._version == version:  # not updated meanwhile: the text is this version's
                    self._rendered[(ctype, zipped)] = (version, body)
        headers = [("Content-Type", ctype)]
        if zipped:
            headers.append(("Content-Encoding", "gzip"))
        return body, headers

    def serve(
        self,
        port: int,
        addr: str = "127.0.0.1",
        max_connections: int = MAX_CONNECTIONS,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
    ) -> int:
        """Serve ``/metrics`` on ``addr:port`` (0: any free port) in a daemon thread; return the
        port. ``OSError`` if the port cannot be used."""
        self.server = MetricsServer(self.render, port, addr, max_connections, idle_timeout_s)
        self.port = self.server.port
        return self.port

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None
