"""The live metrics endpoint: scraped over loopback while a run is held after its first chunk;
published after every commit and kept after the run; bounded against a flood of idle connections."""

from __future__ import annotations

import gzip
import os
import socket
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families

import scenarios.runner as runner
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


def _every(k: int) -> Any:
    """An advance's ``stop`` as if a second of wall time passed every ``k`` steps (no clock)."""

    def past(due: float) -> Any:
        n = [0]

        def stop() -> bool:
            n[0] += 1
            return n[0] >= k

        return stop

    return past


def test_metrics_follow_every_commit_and_stay_after_the_run(
    tmp_path: Path,
    small_scenario: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spec, text = small_scenario
    # A "second" of wall time every 60 steps: the run hands over then, not once a chunk (a day).
    monkeypatch.setattr(runner, "_past", _every(60))
    exporter = MetricsExporter()
    port = exporter.serve(0)
    exporter.set_run(scenario=spec.name, file="x")
    committed: list[float] = []
    steps: list[int] = []
    scraped: list[float] = []
    names: list[set[str]] = []

    def on_chunk(frames: Any) -> None:
        exporter.update(frames)
        t = frames["factory_ts"]["time_s"]
        steps.append(len(t))
        if len(t):
            committed.append(float(t[-1]))
        _, m = _scrape(port)  # a scrape after each commit, while the run waits for it
        scraped.append(m[("twin_sim_time_seconds", ())])
        names.append({k[0] for k in m})

    try:
        result = run(spec, text, tmp_path / "c.duckdb", duration_s=86400, on_chunk=on_chunk)
        _, after = _scrape(port)  # the run has ended; the endpoint is still up
    finally:
        exporter.close()
    assert result.status == "complete" and result.steps == 1440
    # 24 hand-overs of 60 steps, then the closing one (no steps): never a day's chunk at once.
    assert steps == [60] * 24 + [0]
    assert scraped[:-1] == committed and scraped == sorted(scraped)
    # The closing commit keeps every series at the last step's values, served until close().
    assert names[-1] == names[-2] and "twin_pue_ratio" in names[-1]
    assert after[("twin_sim_time_seconds", ())] == committed[-1] == (1440 - 1) * 60
    assert {k[0] for k in after} == names[-2]
    with pytest.raises(OSError):
        _scrape(port)


def _closed_by_peer(c: socket.socket) -> bool:
    """End of stream, or a reset (a connection closed with half a request unread)."""
    try:
        return c.recv(64) == b""
    except ConnectionResetError:
        return True


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts descriptors in /proc")
def test_a_flood_of_idle_connections_cannot_harm_the_run(tmp_path: Path, small_scenario: Any) -> None:
    spec, text = small_scenario
    cap, extra = 4, 20
    exporter = MetricsExporter()
    port = exporter.serve(0, max_connections=cap, idle_timeout_s=2.0)
    server = exporter.server
    assert server is not None
    flooded = threading.Event()
    held = threading.Event()
    result: list[Any] = []

    def on_chunk(frames: Any) -> None:
        exporter.update(frames)
        if not held.is_set():
            held.set()
            flooded.wait(120)  # the run waits after its first commit while the flood is opened

    t = threading.Thread(
        target=lambda: result.append(
            run(spec, text, tmp_path / "f.duckdb", duration_s=6 * 3600, on_chunk=on_chunk)
        )
    )
    t.start()
    clients: list[socket.socket] = []
    try:
        assert held.wait(120)
        fds, threads = _fds(), threading.active_count()
        for i in range(cap + extra):
            c = socket.create_connection(("127.0.0.1", port), timeout=30)
            if i % 2:
                c.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # half a request, then silence
            clients.append(c)
        assert server.wait(lambda s: s.accepted >= cap + extra, timeout=120)
        # At most ``cap`` connections held (each new one closed the oldest idle one, if none had
        # timed out yet); no thread per connection.
        assert server.peak_connections <= cap and server.refused == 0
        assert _fds() - fds - len(clients) <= cap + 8
        assert threading.active_count() <= threads
        flooded.set()
        t.join(300)
        assert not t.is_alive() and result and result[0].status == "complete"
        # Every idle connection is closed by the endpoint (evicted, or timed out) ...
        assert server.wait(lambda s: s.open_connections == 0, timeout=120)
        assert all(_closed_by_peer(c) for c in clients)
        # ... and a normal scrape answers, with the run's last step.
        _, m = _scrape(port)
        assert m[("twin_sim_time_seconds", ())] == (6 * 60 - 1) * 60
        assert server.evicted + server.timed_out == cap + extra
    finally:
        flooded.set()
        for c in clients:
            c.close()
        t.join(300)
        exporter.close()
    import duckdb

    con = duckdb.connect(str(tmp_path / "f.duckdb"), read_only=True)
    try:
        assert con.sql("SELECT status FROM runs").fetchall() == [("complete",)]
    finally:
        con.close()


def test_a_failing_update_or_a_bad_request_leaves_the_run_and_the_endpoint_going() -> None:
    exporter = MetricsExporter()
    port = exporter.serve(0)
    try:
        exporter.update({"factory_ts": {"time_s": np.array([0.0, 60.0]), "pue": np.array([1.2, 1.3])}})
        exporter.update({"factory_ts": {"time_s": np.array([120.0]), "pue": "not a column"}})  # no raise
        assert exporter.errors == 1
        _, m = _scrape(port)
        assert m[("twin_sim_time_seconds", ())] == 60.0 and m[("twin_pue_ratio", ())] == 1.3
        with socket.create_connection(("127.0.0.1", port), timeout=30) as c:
            c.sendall(b"BREW /metrics HTTP/1.1\r\n\r\n")
            assert c.recv(64).startswith(b"HTTP/1.1 405")
        with socket.create_connection(("127.0.0.1", port), timeout=30) as c:
            c.sendall(b"x" * 20_000)  # no end of headers
            assert c.recv(64).startswith(b"HTTP/1.1 431")
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/nothing", timeout=30)
        assert e.value.code == 404
        e.value.close()
        assert _scrape(port)[1][("twin_pue_ratio", ())] == 1.3
        # Prometheus asks for gzip: the same text, compressed.
        req = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers={"Accept-Encoding": "gzip"})
        with urllib.request.urlopen(req, timeout=30) as r:
            assert r.headers["Content-Encoding"] == "gzip"
            assert b"twin_pue_ratio 1.3" in gzip.decompress(r.read())
    finally:
        exporter.close()
