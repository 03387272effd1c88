"""The live metrics endpoint: scraped over loopback while a run is held after its first chunk."""

from __future__ import annotations

import socket
import threading
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families

from scenarios.runner import run
from storage.metrics import MetricsExporter
from tui.cli import main


def _scrape(
    port: int, openmetrics: bool = False
) -> tuple[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]]:
    req = urllib.request.Request(f"http://127.0.0.1:{port}/metrics")
    if openmetrics:
        req.add_header("Accept", "application/openmetrics-text; version=1.0.0")
    with urllib.request.urlopen(req, timeout=30) as r:
        ctype = r.headers["Content-Type"]
        text = r.read().decode()
    samples = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return ctype, samples


def test_scrape_during_a_run_shows_the_latest_step(tmp_path: Path, small_scenario) -> None:  # type: ignore[no-untyped-def]
    spec, text = small_scenario
    exporter = MetricsExporter()
    port = exporter.serve(0)
    seen: list[Any] = []
    scraped = threading.Event()

    def on_chunk(frames: Any) -> None:
        exporter.update(frames)
        seen.append({t: {k: np.array(v, copy=True) for k, v in cols.items()} for t, cols in frames.items()})
        if len(seen) == 2:
            scraped.wait(60)  # hold the run after its second chunk until the test has scraped

    exporter.set_run(scenario=spec.name, file="x")
    t = threading.Thread(
        target=run,
        args=(spec, text, tmp_path / "m.duckdb"),
        kwargs={"duration_s": 3 * 86400, "on_chunk": on_chunk},
    )  # 1,440 steps a chunk
    t.start()
    try:
        assert exporter.wait_for_chunks(2, timeout=120)
        ctype, m = _scrape(port)
        om_type, om = _scrape(port, openmetrics=True)
    finally:
        scraped.set()
        t.join()
        exporter.close()
    assert ctype.startswith("text/plain") and om_type.startswith("application/openmetrics-text")
    fac = seen[1]["factory_ts"]
    us = seen[1]["ultraserver_ts"]
    last = us["time_s"] == us["time_s"].max()
    assert m[("twin_sim_time_seconds", ())] == fac["time_s"][-1]
    assert m[("twin_facility_power_watts", ())] == pytest.approx(fac["facility_power_w"][-1])
    assert m[("twin_pue_ratio", ())] == pytest.approx(fac["pue"][-1])
    assert m[("twin_cooling_power_watts", ())] == pytest.approx(fac["cooling_power_w"][-1])
    assert m[("twin_chips", (("state", "busy"),))] == fac["chips_busy"][-1]
    assert m[("twin_chips", (("state", "failed"),))] == fac["chips_failed"][-1]
    # Counters integrate every step of both chunks.
    energy = sum(float(np.sum(f["factory_ts"]["energy_j"])) for f in seen[:2])
    assert m[("twin_facility_energy_joules_total", ())] == pytest.approx(energy)
    # Per UltraServer: power, temperature and neuron-monitor's utilisation ratio (0-1).
    for i, row, p, temp, act in zip(
        us["ultraserver_id"][last],
        us["row_id"][last],
        us["power_w"][last],
        us["max_chip_temp_c"][last],
        us["activity"][last],
        strict=True,
    ):
        labels = (("row", str(row)), ("ultraserver", str(i)))
        assert m[("twin_ultraserver_power_watts", labels)] == pytest.approx(p)
        assert m[("twin_ultraserver_max_chip_temperature_celsius", labels)] == pytest.approx(float(temp))
        assert m[("neuroncore_utilization_ratio", labels)] == pytest.approx(float(act))
        assert 0.0 <= m[("neuroncore_utilization_ratio", labels)] <= 1.0
    # No cap in this scenario: the cap gauge is absent, not NaN.
    assert ("twin_facility_power_cap_watts", ()) not in m
    assert all(not np.isnan(v) for v in m.values())
    svc = seen[1]["service_ts"]
    if svc["requests_served"][-1] > 0:
        assert m[("twin_service_ttft_seconds", (("quantile", "0.99"), ("service", "chat")))] == pytest.approx(
            svc["ttft_p99_s"][-1]
        )
    assert om[("twin_pue_ratio", ())] == m[("twin_pue_ratio", ())]


def test_a_busy_or_bad_port_exits_2_with_one_line(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        busy = s.getsockname()[1]
        r = CliRunner().invoke(
            main,
            [
                "run",
                "default",
                "--hours",
                "1",
                "--out",
                str(tmp_path / "x.duckdb"),
                "--metrics-port",
                str(busy),
            ],
        )
    assert (
        r.exit_code == 2 and f"--metrics-port {busy}" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    )
    assert not (tmp_path / "x.duckdb").exists()
    r = CliRunner().invoke(main, ["run", "default", "--metrics-port", "70000"])
    assert r.exit_code == 2 and "not a TCP port" in r.stderr
