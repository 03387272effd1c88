"""twin ingest on documented fixtures and hostile input: values by hand, unmapped fields counted,
bad input flagged or refused with one line, nothing recorded lost, memory bounded."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner

from storage.interop import ingest, sources
from storage.interop.normalise import Normalised, Normaliser, normalise
from storage.interop.observed import ObservedRecorder
from storage.interop.parse_prometheus import parse_prometheus_text
from storage.interop.parsed import MAX_LABEL_CHARS, IngestError, Parsed
from storage.liveread import open_for_reading
from tests.servers import mosquitto, wait_for
from tui.cli import main

FIX = Path(__file__).parent / "fixtures" / "interop"
NOW = 1_782_691_200_000_000  # 2026-06-29 00:00 UTC in us: the fixtures' times are near it


def rows(tab: pa.Table) -> dict[tuple[str, str], list[tuple[float | None, str]]]:
    out: dict[tuple[str, str], list[tuple[float | None, str]]] = {}
    for e, m, v, q in zip(
        *(tab.column(c).to_pylist() for c in ("entity", "metric", "value", "quality")), strict=True
    ):
        out.setdefault((e, m), []).append((v, q))
    return out


def parse_fixture(name: str, now: int = NOW) -> tuple[Parsed, Normalised]:
    p = ingest.parse_bytes((FIX / name).read_bytes(), name, now)
    return p, normalise(p.table, now)


def test_neuron_monitor_report_of_the_docs() -> None:
    p, n = parse_fixture("neuron_monitor.json")
    r = rows(n.table)
    host = "i-0011223344556677a"
    assert r[(f"{host}/chip0", "chip.utilization")] == [(0.425, "good")]
    assert r[(f"{host}/chip1", "chip.utilization")] == [(1.0, "good")]
    assert r[(f"{host}/chip0", "chip.failed")] == [(0.0, "good")]
    assert r[(f"{host}/chip1", "chip.failed")] == [(1.0, "good")]  # 2 uncorrectable ECC errors
    # execution_stats, memory_used, neuron_runtime_vcpu_usage; vcpu_usage, memory_info
    assert (p.fmt, p.unmapped, p.malformed) == ("neuron-monitor", 5, 0)


def test_dcgm_exporter_text_of_the_docs() -> None:
    p, n = parse_fixture("dcgm.prom")
    r = rows(n.table)
    power = sorted(r[("node-a/chip0", "chip.power")], key=lambda x: x[1])
    # Gauge 312.5 W; the energy counter: 1e6 -> 4e6 mJ in 10 s = 300 W, then a drop to 5e5 mJ
    # (a reset): 500 J in 10 s = 50 W.
    assert power == [(312.5, "good"), (300.0, "rate"), (50.0, "reset")]
    assert r[("node-a/chip0", "chip.temperature")] == [(41.0, "good")]
    assert r[("node-a/chip0", "chip.clock")] == [(pytest.approx(1980 / 1200), "good")]
    assert r[("node-a/chip0", "chip.utilization")] == [(0.731, "good")]
    assert r[("node-a/chip0", "chip.failed")] == [(0.0, "good")]
    assert r[("node-a/chip1", "chip.failed")] == [(1.0, "good")]  # XID 79
    assert (p.unmapped, p.malformed, n.resets) == (2, 0, 1)  # MEM_CLOCK, FB_USED
    assert p.unmapped_names == {"DCGM_FI_DEV_MEM_CLOCK": 1, "DCGM_FI_DEV_FB_USED": 1}


def test_redfish_resources_of_the_schemas() -> None:
    _, n = parse_fixture("redfish_power.json")
    assert rows(n.table) == {("1U", "us.power"): [(344.0, "good")]}
    _, n = parse_fixture("redfish_cdu.json")
    assert rows(n.table) == {
        ("1", "cdu.supply_temperature"): [(30.25, "good")],
        ("1", "cdu.return_temperature"): [(40.75, "good")],
        ("1", "cdu.flow"): [(0.625, "good")],
    }


def test_slurm_sacct_and_squeue_of_the_docs() -> None:
    p, n = parse_fixture("sacct.json")
    r = rows(n.table)
    assert r[("job4242", "job.submit_time")] == [(1700000000.0, "good")]
    assert r[("job4242", "job.start_time")] == [(1700000100.0, "good")]
    assert r[("job4242", "job.end_time")] == [(1700003700.0, "good")]
    assert r[("job4242", "job.chips")] == [(32.0, "good")]
    assert r[("job4242", "job.state")] == [(2.0, "good")]  # COMPLETED
    assert p.unmapped == 5  # account, allocation_nodes, cluster, user, exit_code
    p, n = parse_fixture("squeue.json")
    r = rows(n.table)
    assert set(r) == {("job4243", "job.submit_time"), ("job4243", "job.state")}  # not started
    assert r[("job4243", "job.state")] == [(0.0, "good")]
    assert p.unmapped == 1  # user_name


def test_bms_csv_units_duplicates_and_flags() -> None:
    p, n = parse_fixture("bms.csv")
    r = rows(n.table)
    assert r[("site", "site.power")] == [(1_200_500.0, "good"), (1_201_000.0, "good")]  # kW, W
    assert r[("cdu7", "cdu.return_temperature")] == [(pytest.approx(40.0), "good")]  # 313.15 K
    assert r[("cdu7", "cdu.flow")] == [(0.55, "source_bad")]
    assert (p.unmapped, p.malformed, n.duplicates) == (1, 1, 1)  # the AHU point, the bad time


HOSTILE_PROM = "\n".join(
    [
        "# HELP DCGM_FI_DEV_POWER_USAGE x",
        'DCGM_FI_DEV_POWER_USAGE{gpu="0",Hostname="h"} NaN',
        'DCGM_FI_DEV_POWER_USAGE{gpu="1",Hostname="h"} +Inf',
        'DCGM_FI_DEV_POWER_USAGE{gpu="2",Hostname="' + "A" * 1_000_000 + '"} 5',
        'DCGM_FI_DEV_POWER_USAGE{gpu="3",Hostname="x\'; DROP TABLE observed; --\\""} 7',
        'DCGM_FI_DEV_POWER_USAGE{gpu="4",Hostname="h"} 9 99999999999999',
        'DCGM_FI_DEV_POWER_USAGE{gpu="5",Hostname="h"} 9 1000',
        "this is not a sample",
        'DCGM_FI_DEV_POWER_USAGE{gpu="6" 3',
        'DCGM_FI_DEV_POWER_USAGE{gpu="7",Hostname="h"} 1e999999',
        "",
    ]
)


def test_hostile_prometheus_text_is_flagged_and_recorded_safely(tmp_path: Path) -> None:
    p = parse_prometheus_text(HOSTILE_PROM, "hostile", NOW)
    n = normalise(p.table, NOW)
    r = rows(n.table)
    assert r[("h/chip0", "chip.power")] == [(None, "invalid")]
    assert r[("h/chip1", "chip.power")] == [(None, "invalid")]
    assert r[("h/chip7", "chip.power")] == [(None, "invalid")]  # overflows to inf
    assert r[("h/chip4", "chip.power")] == [(9.0, "clock")]  # year 5138
    assert r[("h/chip5", "chip.power")] == [(9.0, "clock")]  # 1970
    big = [e for e, _ in r if e.startswith("AAA")]
    assert len(big) == 1 and len(big[0]) == MAX_LABEL_CHARS
    assert p.malformed == 2
    rec = ObservedRecorder(tmp_path / "o.duckdb")
    rec.append(n.table)
    rec.close([])
    reading = open_for_reading(tmp_path / "o.duckdb")
    try:
        got = reading.con.sql("SELECT entity FROM observed WHERE entity LIKE 'x%'").fetchall()
    finally:
        reading.close()
    assert got == [("x'; DROP TABLE observed; --\\\"/chip3",)]


@pytest.mark.parametrize(
    "text, why",
    [
        ("{not json", "malformed JSON"),
        ('{"neuron_runtime_data": "x", "system_data": 3}\n{"neuron_runtime_data": [1]}', None),
        (
            '{"jobs": [{"job_id": 1, "time": "x", "tres": [1], "state": 5}, {"job_id": 10000000000000000000000, "time": {"submission": 1e400}}]}',
            None,
        ),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ('{"@odata.id": "/redfish/v1/Chassis/a/Power", "Oem": "x", "PowerControl": 5}', None),
        ("\x00\x01binary", "not a known telemetry format"),
    ],
)
def test_wrong_shapes_are_an_error_or_counted(tmp_path: Path, text: str, why: str | None) -> None:
    data = text.encode()
    if why:
        with pytest.raises(IngestError, match=why):
            ingest.parse_bytes(data, "f", NOW)
    else:
        p = ingest.parse_bytes(data, "f", NOW)
        assert p.malformed >= 1 or len(p.table) == 0


def test_a_bad_file_is_one_line_exit_2_and_nothing_written(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"jobs": [1, 2')
    shutil.copy(FIX / "dcgm.prom", tmp_path / "ok.prom")
    r = CliRunner().invoke(
        main, ["ingest", str(tmp_path / "ok.prom"), str(bad), "--out", str(tmp_path / "o.duckdb")]
    )
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and "bad.json" in r.stderr, r.stderr
    assert sorted(x.name for x in tmp_path.iterdir()) == ["bad.json", "ok.prom"]


def test_ingest_then_sql(tmp_path: Path) -> None:
    out = tmp_path / "o.duckdb"
    srcs = [
        str(FIX / n)
        for n in ("dcgm.prom", "neuron_monitor.json", "bms.csv", "sacct.json", "redfish_cdu.json")
    ]
    r = CliRunner().invoke(main, ["ingest", *srcs, "--out", str(out)])
    assert r.exit_code == 0, r.stderr
    assert "2 unmapped" in r.stdout and "1 resets" in r.stdout
    r = CliRunner().invoke(main, ["sql", str(out), "SELECT count(*) AS n FROM observed", "--format", "csv"])
    # dcgm 9 (2 clocks, temp, power, 2 energy rates, 2 XID, tensor), neuron 4, BMS 4 (of 7 rows:
    # a duplicate, an unmapped point, a bad time), sacct 5, Redfish CDU 3
    assert r.exit_code == 0 and r.stdout.split() == ['"n"', "25"], (r.stdout, r.stderr)
    r = CliRunner().invoke(
        main, ["sql", str(out), "SELECT sum(unmapped) AS u FROM observed_sources", "--format", "csv"]
    )
    assert r.stdout.split() == ['"u"', "13"], r.stdout


def test_the_observed_table_is_readable_while_written(tmp_path: Path) -> None:
    _, n = parse_fixture("dcgm.prom")
    rec = ObservedRecorder(tmp_path / "o.duckdb")
    rec.append(n.table)
    reading = open_for_reading(tmp_path / "o.duckdb")  # the ingest has not ended
    try:
        assert reading.con.sql("SELECT count(*) FROM observed").fetchall() == [(len(n.table),)]
    finally:
        reading.close()
    rec.append(n.table)
    rec.close([{"source": "x", "format": "prometheus-text", "samples": 2 * len(n.table)}])
    reading = open_for_reading(tmp_path / "o.duckdb")
    try:
        assert reading.con.sql("SELECT count(*) FROM observed").fetchall() == [(2 * len(n.table),)]
    finally:
        reading.close()


def _publish(port: int, msgs: list[tuple[str, bytes]]) -> None:
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    c = mqtt.Client(CallbackAPIVersion.VERSION2)
    c.connect("127.0.0.1", port)
    c.loop_start()
    try:
        infos = [c.publish(t, p, qos=1) for t, p in msgs]
        for i in infos:
            i.wait_for_publish(timeout=60)
    finally:
        c.loop_stop()
        c.disconnect()


@pytest.mark.parametrize("bound", ["messages", "bytes"])
def test_an_mqtt_flood_is_bounded_and_nothing_received_is_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bound: str
) -> None:
    """A flood of BMS messages (a tenth of them garbage, some with hostile topics) into a broker
    faster than the ingest takes them: the queue between the broker's thread and the parser holds
    at most QUEUE_MESSAGES and QUEUE_BYTES, what does not fit is counted dropped, batches are at most
    BATCH_MESSAGES; every message is recorded, counted malformed or counted dropped; the source
    that then stops is flagged stale."""
    if bound == "messages":
        monkeypatch.setattr(sources, "QUEUE_MESSAGES", 3000)
    else:  # some 3,000 messages' payloads
        monkeypatch.setattr(sources, "QUEUE_BYTES", 270_000)
    monkeypatch.setattr(sources, "BATCH_MESSAGES", 1000)
    n = 8000
    msgs = []
    for i in range(n):
        ts = f"2026-06-29T00:{(i // 60) % 60:02d}:{i % 60:02d}Z"
        if i % 10 == 0:
            msgs.append((f"bms/site/cdu/cdu'{i}\"/flow_pct", b"{not json"))
        else:
            payload = {"value": float(i), "unit": "kW", "timestamp": ts, "quality": "good"}
            msgs.append(
                (
                    f"bms/site/power_meter/main/active_power/{i % 3}"
                    if i % 7 == 0
                    else "bms/site/power_meter/main/active_power",
                    json.dumps(payload).encode(),
                )
            )
    with mosquitto(tmp_path, "max_queued_messages 0\n") as port:
        sub = sources.Mqtt(f"mqtt://127.0.0.1:{port}", 600.0, 10**9, 2.0)
        try:
            _publish(port, msgs)
            # Every message delivered before the ingest reads one: the queue fills, whatever the speed.
            wait_for(lambda: sub.received == n, "the broker delivering the flood")
            batches = []
            rec = ObservedRecorder(tmp_path / "o.duckdb")
            for b in sub.batches():
                assert len(b.table) + b.malformed + b.unmapped <= sources.BATCH_MESSAGES
                rec.append(normalise(b.table, NOW).table)
                batches.append(b)
            rec.close([])
        finally:
            sub.close()
    assert sub.stale and sub.dropped > 0 and len(batches) >= 2
    got = sum(len(b.table) for b in batches)
    bad = sum(b.malformed for b in batches)
    unmapped = sum(b.unmapped for b in batches)
    assert got + bad + unmapped + sub.dropped == n
    reading = open_for_reading(tmp_path / "o.duckdb")
    try:
        ((stored,),) = reading.con.sql("SELECT count(*) FROM observed").fetchall()
    finally:
        reading.close()
    assert stored <= got and stored > 0  # duplicates of a time (the same second) dropped


def test_a_counter_keeps_its_rate_across_batches() -> None:
    """The energy counter's samples in two batches (two scrapes): the rate over the boundary is
    the second batch's first sample, 3e6 mJ in 10 s = 300 W, and nothing of the carry shows."""
    lab = 'DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="0",Hostname="h"}'
    t0 = NOW // 1000
    norm = Normaliser()
    first = norm(parse_prometheus_text(f"{lab} 1000000 {t0}\n", "a", NOW).table, NOW)
    second = norm(parse_prometheus_text(f"{lab} 4000000 {t0 + 10_000}\n", "b", NOW).table, NOW)
    assert len(first.table) == 0  # a first sample has no rate
    assert rows(second.table) == {("h/chip0", "chip.power"): [(300.0, "rate")]}
    assert second.table.column("source").to_pylist() == ["b"] and second.duplicates == 0


@pytest.mark.parametrize("jobs", ["1.5", "7", '"x"', "{}", "null"])
def test_a_slurm_document_whose_jobs_are_not_a_list_is_counted(jobs: str) -> None:
    p = ingest.parse_bytes(f'{{"jobs": {jobs}}}'.encode(), "f", NOW)
    assert len(p.table) == 0 and p.malformed == (0 if jobs == "null" else 1)


@pytest.mark.parametrize(
    "spec, needle",
    [
        ("bogus:1", "--emit bogus:1"),
        ("prometheus:99999", "not a TCP port"),
        ("mqtt://127.0.0.1", "mqtt://HOST:PORT"),
        ("neuron:missing-dir/x.jsonl", "cannot open a sink"),
    ],
)
def test_a_bad_emit_is_one_line_exit_2_and_nothing_written(tmp_path: Path, spec: str, needle: str) -> None:
    from tests.conftest import SMALL_TOML

    (tmp_path / "s.toml").write_text(SMALL_TOML)
    out = tmp_path / "o.duckdb"
    r = CliRunner().invoke(
        main,
        [
            "run",
            str(tmp_path / "s.toml"),
            "--hours",
            "0.1",
            "--out",
            str(out),
            "--emit",
            spec.replace("missing-dir", str(tmp_path / "missing-dir")),
        ],
    )
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and needle in r.stderr, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.toml"]


def test_twin_run_emits_to_files(tmp_path: Path) -> None:
    from tests.conftest import SMALL_TOML

    (tmp_path / "s.toml").write_text(SMALL_TOML)
    r = CliRunner().invoke(
        main,
        [
            "run",
            str(tmp_path / "s.toml"),
            "--hours",
            "1",
            "--out",
            str(tmp_path / "o.duckdb"),
            "--emit",
            f"neuron:{tmp_path / 'n.jsonl'},slurm:{tmp_path / 's'}",
            "--emit",
            f"bms-csv:{tmp_path / 'b.csv'},prometheus:0,redfish:0",
        ],
    )
    assert r.exit_code == 0, r.stderr
    assert "emitting redfish at http://127.0.0.1:" in r.stderr
    p, _ = ingest.parse_bytes((tmp_path / "n.jsonl").read_bytes(), "n", NOW), None
    assert p.fmt == "neuron-monitor" and len(p.table) > 0
    assert json.loads((tmp_path / "s" / "squeue.json").read_text())["jobs"] is not None
    assert (tmp_path / "b.csv").read_text().startswith("Timestamp,Point,Value,Units,Status\n")
