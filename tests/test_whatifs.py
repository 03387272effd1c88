"""What-if scenarios: power envelopes, variants, the shipped physics scenarios, twin compare."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from scenarios.spec import ScenarioError, builtin_names, load, parse
from tui.cli import main
from twin.spec import catalog

ENVELOPE = """
name = "env"
duration_h = 2
[hall]
it_envelope_w = 2.5e6
ultraservers_per_row = 4
[[services]]
replicas = 2
[[variants]]
name = "trn2"
hall = { system = "trn2-ultra" }
[[variants]]
name = "gb300"
hall = { system = "gb300-nvl72" }
"""


def test_power_envelope_sizes_the_hall_by_full_load_it_power() -> None:
    spec = parse(ENVELOPE, "env.toml")
    names = [v.name for v in spec.variants]
    assert names == ["trn2", "gb300"]
    for v, key in zip(spec.variants, ("trn2-ultra", "gb300-nvl72"), strict=True):
        p = v.to_params()
        sysm = catalog.system(key)
        per = catalog.system_full_load_it_w(sysm, catalog.accelerator_for(sysm))
        n = p.hall.ultraservers
        assert n == int(2.5e6 // per)
        assert n * per <= 2.5e6 < (n + 1) * per
    # The base keeps everything the variants do not override.
    assert spec.variants[0].services[0].replicas == 2


def test_envelope_and_count_together_or_too_small_are_errors() -> None:
    with pytest.raises(ScenarioError, match="not both"):
        parse('name = "x"\n[hall]\nultraservers = 2\nit_envelope_w = 1e6\n', "x.toml")
    spec = parse('name = "x"\n[hall]\nit_envelope_w = 1e3\n', "x.toml")
    with pytest.raises(ValueError, match="less than one"):
        spec.to_params()


def test_a_bad_variant_names_the_variant_and_key() -> None:
    bad = ENVELOPE.replace('hall = { system = "gb300-nvl72" }', 'hall = { sytem = "gb300-nvl72" }')
    with pytest.raises(ScenarioError, match=r"variant 'gb300'.*hall.sytem: unknown key"):
        parse(bad, "env.toml")


@pytest.mark.parametrize(
    "name", ["heatwave", "cooling-failure", "demand-response", "trn2-vs-trn3", "trainium3-vs-gb300"]
)
def test_shipped_physics_scenarios_validate(name: str) -> None:
    assert name in builtin_names()
    spec, _, _ = load(name)
    for s in spec.variants or [spec]:
        s.to_params()


def test_variant_run_writes_one_file_per_variant_and_compares(tmp_path: Path) -> None:
    f = tmp_path / "env.toml"
    f.write_text(ENVELOPE)
    out = tmp_path / "cmp.duckdb"
    r = CliRunner().invoke(main, ["run", str(f), "--hours", "2", "--out", str(out)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    for v in ("trn2", "gb300"):
        assert (tmp_path / f"cmp-{v}.duckdb").exists()
    assert "PUE" in r.stdout and "ratio" in r.stdout
    r = CliRunner().invoke(
        main,
        ["compare", str(tmp_path / "cmp-trn2.duckdb"), str(tmp_path / "cmp-gb300.duckdb"), "--json"],
        catch_exceptions=False,
    )
    assert r.exit_code == 0
    data = json.loads(r.stdout)
    (a, ka), (_, kb) = data.items()
    assert "env-trn2" in a or "trn2" in a
    # Same envelope: IT energies within the envelope, PUE >= 1, chips differ.
    for k in (ka, kb):
        assert k["pue"] >= 1.0
        assert k["it_mwh"] <= 2.5 * 2 * 1.01
    assert ka["chips"] != kb["chips"]


def test_compare_needs_two_runs(tmp_path: Path) -> None:
    r = CliRunner().invoke(main, ["compare", str(tmp_path / "a.duckdb")])
    assert r.exit_code == 2


def test_hardware_command_lists_every_catalog_entry() -> None:
    r = CliRunner().invoke(main, ["hardware", "--sources"], catch_exceptions=False)
    assert r.exit_code == 0
    for key in list(catalog.ACCELERATORS) + list(catalog.SYSTEMS):
        assert key in r.stdout
    assert "roadmap projection" in r.stdout and "ASM" in r.stdout and "OFF" in r.stdout


LIVE = """
name = "live"
seed = 3
dt_s = 60
duration_h = 100
[hall]
ultraservers = 4
ultraservers_per_row = 2
[[services]]
replicas = 2
[[events]]
at_h = 1
kind = "power_cap"
target = "row:1"
value = 250e3
duration_h = 1
"""


def test_live_what_ifs_rerun_headless_give_identical_telemetry(tmp_path: Path) -> None:
    from scenarios.runner import Session, read_recording, same_telemetry

    spec = parse(LIVE, "live.toml")
    live = tmp_path / "live.duckdb"
    s = Session(spec, LIVE, live, flush_interval_s=0.05)
    s.advance(37)
    s.sim.inject("fail_ultraserver", "2", duration_s=1800)
    s.advance(13)
    s.sim.inject("power_cap", "facility", value=0.8 * s.sim.last["facility_power_w"], duration_s=900)
    s.sim.inject("cdu_pump_failure", "0", value=0.0, duration_s=600)
    s.advance(90)
    s.sim.inject("inference_surge", "", value=3.0, duration_s=3600)
    s.advance(60)
    s.close("stopped")
    rec = read_recording(live)
    assert [e.kind for e in rec.operator_events] == [
        "fail_ultraserver",
        "power_cap",
        "cdu_pump_failure",
        "inference_surge",
    ]
    assert rec.sim_time_s == 200 * 60
    r = CliRunner().invoke(main, ["rerun", str(live), "--out", str(tmp_path / "again.duckdb")])
    assert r.exit_code == 0, r.output
    assert "identical" in r.stdout
    assert same_telemetry(live, tmp_path / "again.duckdb", ("factory_ts", "ultraserver_ts", "chip_ts")) == []
    # Without the operator's what-ifs the run differs: the check is not vacuous.
    plain = tmp_path / "plain.duckdb"
    from scenarios.runner import run

    run(spec, LIVE, plain, duration_s=200 * 60)
    assert "factory_ts" in same_telemetry(live, plain)


def test_variants_ask_the_same_work_of_different_hardware() -> None:
    """Same scenario on Trn2 and Trn3 halls: the same jobs (same FLOP), different run times."""
    from twin.compose.hall import Hall

    spec = parse(
        ENVELOPE.replace(
            'name = "gb300"\nhall = { system = "gb300-nvl72" }',
            'name = "trn3"\nhall = { system = "trn3-gen2" }',
        ),
        "env.toml",
    )
    sims = [Hall(v.to_params()) for v in spec.variants]
    frames = [s.advance(240) for s in sims]
    jobs = [f["jobs"] for f in frames]
    n = min(len(j["job_id"]) for j in jobs)
    assert n > 50
    w = [dict(zip(j["job_id"].tolist(), j["work_flop"].tolist(), strict=True)) for j in jobs]
    common = sorted(set(w[0]) & set(w[1]))
    batch = [k for k in common if w[0][k] > 0]
    assert len(batch) > 50
    assert all(w[0][k] == pytest.approx(w[1][k], rel=1e-12) for k in batch)


def test_throttled_replicas_serve_less_prefill_bound_work() -> None:
    """Under a cap the replicas' compute-bound prefill slows with the clock while decode keeps its
    pace: capacity = n / (prefill / f + decode) per request."""
    from twin.compose.hall import Hall
    from twin.spec.params import ScheduledEvent

    toml = """
name = "cap"
[hall]
ultraservers = 1
[training]
arrivals_per_day = 0
[[services]]
replicas = 4
mean_requests_per_s = 5000.0
diurnal_peak_to_trough = 1.0
weekend_factor = 1.0
autoscale = false
"""
    spec = parse(toml, "cap.toml")
    free = Hall(spec.to_params())
    f0 = free.advance(30)["factory_ts"]
    p = spec.to_params()
    capped = Hall(
        __import__("dataclasses").replace(
            p, events=(ScheduledEvent(0, "power_cap", "facility", 0.85 * float(f0["facility_power_w"][-1])),)
        )
    )
    f1 = capped.advance(30)["factory_ts"]
    svc = free.pool.cluster.services[0]
    r = svc.roof
    clock = float(f1["mean_clock"][-1])
    assert clock < 1.0
    # Per request at clock f: prefill's compute / f, and the decode step's matrix products at
    # the batch, compute-bound, / f too; the KV streaming and the collectives keep their pace.
    prefill = 2 * r.active_params * r.prompt_tokens / (r.compute_flop_s * clock) + (
        r.prefill_s - 2 * r.active_params * r.prompt_tokens / r.compute_flop_s
    )
    gemm = 2 * r.active_params * r.batch / r.compute_flop_s
    assert gemm > r.weight_bytes / r.bw_bytes_s  # compute-bound at the batch
    step = r.decode_step_s - gemm + gemm / clock
    per_f = prefill + r.output_tokens * step / r.batch
    expect = float(f0["requests_served_per_s"][-1]) * (1 / svc.capacity_per_replica) / per_f
    assert float(f1["requests_served_per_s"][-1]) == pytest.approx(expect, rel=0.02)


def test_hardware_section_overrides_any_catalog_figure() -> None:
    spec = parse(
        'name = "x"\n[hall]\nultraservers = 1\n[hardware]\ntdp_w = 1100\npeak_flops = { mxfp8 = 3.0e15 }\n'
        "chips = 64\nservers = 16\n[[services]]\nreplicas = 1\n",
        "x.toml",
    )
    p = spec.to_params()
    acc, sysm = p.hall.accelerator, p.hall.system
    assert acc.tdp_w == 1100 and acc.peak("fp8") == 3.0e15
    assert acc.peak("bf16") == catalog.ACCELERATORS["trainium3"].peak("bf16")  # the rest kept
    assert sysm.chips == 64 and sysm.chips_per_server == 4
    with pytest.raises(ScenarioError, match="unknown precision"):
        parse('name = "x"\n[hardware]\npeak_flops = { int2 = 1e15 }\n', "x.toml")
    with pytest.raises(ScenarioError, match="divide evenly"):
        parse('name = "x"\n[hardware]\nchips = 10\nservers = 4\n', "x.toml")
