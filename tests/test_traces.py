"""Trace replay: Azure LLM inference request traces and job-trace CSVs, read from fixtures the
tests write themselves; bad rows are refused with their line numbers, at the CLI too."""

from __future__ import annotations

import datetime as dt
import gc
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from scenarios import traces
from scenarios.spec import parse
from tests.conftest import SMALL_TOML
from tui.cli import main
from twin.compose.hall import Hall
from twin.spec.models import MODELS
from twin.spec.params import KIND_NAMES
from twin.work import fabric

T0 = dt.datetime(2023, 11, 16, 18, 15, 0)


def azure_csv(path: Path, n: int = 50, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A small trace in the Azure format: 7-digit fractional seconds, rows slightly out of order."""
    rng = np.random.default_rng(seed)
    offsets = np.sort(rng.uniform(0, 600, n))
    inp = rng.integers(1, 8000, n)
    out = rng.integers(1, 600, n)
    lines = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    order = np.arange(n)
    order[[3, 4]] = order[[4, 3]]  # two rows swapped: the reader sorts by time
    for i in order:
        ts = T0 + dt.timedelta(microseconds=int(round(offsets[i] * 1e6)))
        lines.append(f"{ts:%Y-%m-%d %H:%M:%S}.{ts.microsecond:06d}0,{inp[i]},{out[i]}")
    path.write_text("\n".join(lines) + "\n")
    return offsets, inp, out


def test_azure_trace_round_trip(tmp_path: Path) -> None:
    f = tmp_path / "azure.csv"
    offsets, inp, out = azure_csv(f)
    tr = traces.read_request_trace(f)
    np.testing.assert_allclose(tr.time_s, offsets - offsets[0], atol=1e-6)
    np.testing.assert_array_equal(tr.input_tokens, inp)
    np.testing.assert_array_equal(tr.output_tokens, out)
    assert tr.span_s == pytest.approx(offsets[-1] - offsets[0], abs=1e-6)


@pytest.mark.parametrize(
    ("line", "bad", "needle"),
    [
        (7, "2023-11-16 18:17:xx.1,10,10", "azure.csv:7: TIMESTAMP: not a timestamp"),
        (
            12,
            "2023-11-16 18:17:03.1,-5,10",
            "azure.csv:12: ContextTokens: not a non-negative integer (got '-5')",
        ),
        (20, "2023-11-16 18:17:03.1,10,ten", "azure.csv:20: GeneratedTokens: not a non-negative integer"),
        (31, "2023-11-16 18:17:03.1,10", "azure.csv:31: expected 3 fields"),
    ],
)
def test_bad_request_rows_name_their_line(tmp_path: Path, line: int, bad: str, needle: str) -> None:
    f = tmp_path / "azure.csv"
    azure_csv(f)
    rows = f.read_text().splitlines()
    rows[line - 1] = bad
    f.write_text("\n".join(rows) + "\n")
    with pytest.raises(traces.TraceError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        traces.read_request_trace(f)


def test_request_trace_header_and_empty_files(tmp_path: Path) -> None:
    f = tmp_path / "t.csv"
    f.write_text("time,in,out\n1,2,3\n")
    with pytest.raises(
        traces.TraceError, match=r"t\.csv:1: expected the header TIMESTAMP,ContextTokens,GeneratedTokens"
    ):
        traces.read_request_trace(f)
    f.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n")
    with pytest.raises(traces.TraceError, match="no rows"):
        traces.read_request_trace(f)
    with pytest.raises(traces.TraceError, match="no such file"):
        traces.read_request_trace(tmp_path / "nope.csv")


JOBS_CSV = """submit_time_s,chips,kind,duration_s,work_flop,model,priority
0,144,pretrain,,1.0e21,gpt-oss-120b,
60,8,eval,600,,,3
120,16,sft,1800,,llama-3.1-8b,
3600,4,batch-inference,900,,,
"""


def test_job_trace_columns_aliases_and_kinds(tmp_path: Path) -> None:
    f = tmp_path / "jobs.csv"
    f.write_text(JOBS_CSV)
    tr = traces.read_job_trace(f)
    assert tr.submit_s.tolist() == [0, 60, 120, 3600]
    assert [KIND_NAMES[k] for k in tr.kind] == ["pretrain", "eval", "finetune", "batch_inference"]
    assert np.isnan(tr.duration_s[0]) and tr.work_flop[0] == 1e21
    assert tr.priority.tolist() == [-1, 3, -1, -1] and tr.model[0] == "gpt-oss-120b"
    # AcmeTrace-style names and timestamps (relative to the first submit).
    g = tmp_path / "acme.csv"
    g.write_text(
        "job_id,gpu_num,type,submit_time,duration\n1,8,debug,2023-03-01 10:00:00,100\n2,1,evaluation,2023-03-01 10:05:30,50\n"
    )
    tr = traces.read_job_trace(g)
    assert tr.submit_s.tolist() == [0, 330] and tr.chips.tolist() == [8, 1]


@pytest.mark.parametrize(
    ("row", "needle"),
    [
        ("60,0,eval,600,,,", "jobs.csv:3: chips: not a positive integer (got '0')"),
        ("60,8,meeting,600,,,", "jobs.csv:3: kind: unknown kind 'meeting'"),
        ("60,8,eval,600,1e20,,", "jobs.csv:3: give exactly one of duration_s and work_flop"),
        ("60,8,eval,,,,", "jobs.csv:3: give exactly one of duration_s and work_flop"),
        ("soon,8,eval,600,,,", "jobs.csv:3: submit_time_s: not a time"),
        ("60,8,eval,-600,,,", "jobs.csv:3: duration_s: not a non-negative number"),
        ("60,8,eval,600,,gpt-9,", "jobs.csv:3: model: unknown model 'gpt-9'"),
    ],
)
def test_bad_job_rows_name_their_line(tmp_path: Path, row: str, needle: str) -> None:
    f = tmp_path / "jobs.csv"
    lines = JOBS_CSV.splitlines()
    lines[2] = row
    f.write_text("\n".join(lines) + "\n")
    with pytest.raises(traces.TraceError) as e:
        traces.read_job_trace(f, known_models={"gpt-oss-120b", "llama-3.1-8b"})
    assert needle in str(e.value)


def test_replayed_moe_job_takes_6_n_active_d_over_chips_peak_mfu(tmp_path: Path) -> None:
    """gpt-oss-120b pre-training from the job trace: work 1e21 FLOP on 144 Trainium3 at FP8 at
    the MFU of its parallelism plan takes 1e21 / (144 x 2,517 TFLOPS x MFU) s; its D is work /
    (6 x 5.1e9)."""
    (tmp_path / "jobs.csv").write_text(JOBS_CSV)
    # Checkpoint writes take no time here (their cost: test_parallelism.py).
    text = SMALL_TOML.replace(
        "arrivals_per_day = 40", 'arrivals_per_day = 0\ntrace = "jobs.csv"\ncheckpoint_bytes_per_param = 0.0'
    )
    spec = parse(text, "small.toml", base_dir=tmp_path)
    p = spec.to_params()
    sim = Hall(p)
    fr = sim.advance(180)
    jobs = fr["jobs"]
    k = list(jobs["kind"]).index("pretrain")
    assert jobs["params"][k] == 5.1e9  # active parameters
    assert jobs["tokens"][k] == pytest.approx(1e21 / (6 * 5.1e9))
    m = MODELS["gpt-oss-120b"]
    mfu = fabric.job_mfu(m, 6.0, 144, 1, 2517e12, m.mfu, p.hall.system, p.training)
    assert 0.25 <= mfu <= 0.35  # MoE pre-training (facts §9.5)
    assert jobs["mfu"][k] == pytest.approx(mfu)
    t_run = 1e21 / (144 * 2517e12 * mfu)
    assert jobs["state"][k] == "done"
    assert jobs["end_time_s"][k] == int(np.ceil(t_run / 60)) * 60
    assert (
        sorted(jobs["source"][i] for i in range(len(jobs["source"])) if jobs["kind"][i] != "inference")
        == ["trace"] * 4
    )
    # Submitted at the trace's times.
    subs = sorted(
        int(s) for s, kd in zip(jobs["submit_time_s"], jobs["kind"], strict=True) if kd != "inference"
    )
    assert subs == [0, 60, 120, 3600]


def test_service_replays_an_azure_trace_from_the_scenario(tmp_path: Path) -> None:
    offsets, _, _ = azure_csv(tmp_path / "azure.csv", n=50)
    text = SMALL_TOML.replace("mean_requests_per_s = 20.0", 'trace = "azure.csv"\ntrace_loop = false')
    spec = parse(text, "small.toml", base_dir=tmp_path)
    s = Hall(spec.to_params()).advance(20)["service_ts"]
    assert s["requests_arrived"].sum() == 50
    expect = np.histogram(offsets - offsets[0], bins=np.arange(0, 1201, 60))[0]
    np.testing.assert_array_equal(s["requests_arrived"], expect)


def test_bad_trace_row_at_the_cli_is_one_line_with_exit_2_and_no_file(tmp_path: Path) -> None:
    azure_csv(tmp_path / "azure.csv")
    rows = (tmp_path / "azure.csv").read_text().splitlines()
    rows[9] = "2023-11-16 18:17:03.1,many,10"
    (tmp_path / "azure.csv").write_text("\n".join(rows) + "\n")
    f = tmp_path / "bad.toml"
    f.write_text(SMALL_TOML.replace("mean_requests_per_s = 20.0", 'trace = "azure.csv"'))
    out = tmp_path / "out.duckdb"
    for args in (["run", str(f), "--out", str(out)], ["validate", str(f)]):
        r = CliRunner().invoke(main, args, catch_exceptions=False)
        assert r.exit_code == 2
        err = r.stderr.strip()
        assert len(err.splitlines()) == 1
        assert "bad.toml: services[0].trace:" in err and "azure.csv:10: ContextTokens" in err
    assert not out.exists()
    (tmp_path / "jobs.csv").write_text(JOBS_CSV.replace("120,16,sft", "120,-16,sft"))
    f.write_text(SMALL_TOML.replace("arrivals_per_day = 40", 'arrivals_per_day = 40\ntrace = "jobs.csv"'))
    r = CliRunner().invoke(main, ["validate", str(f)], catch_exceptions=False)
    assert r.exit_code == 2 and "training.trace:" in r.stderr and "jobs.csv:4: chips" in r.stderr


def test_trace_job_bigger_than_the_batch_capacity_is_rejected_not_queued(tmp_path: Path) -> None:
    # SMALL_TOML: 288 chips, 8 of them for the chat replicas: a 288-chip job could never start.
    (tmp_path / "jobs.csv").write_text(
        "submit_time_s,chips,kind,duration_s\n0,288,pretrain,600\n0,280,pretrain,600\n"
    )
    text = SMALL_TOML.replace("arrivals_per_day = 40", 'arrivals_per_day = 0\ntrace = "jobs.csv"')
    sim = Hall(parse(text, "small.toml", base_dir=tmp_path).to_params())
    fr = sim.advance(15)
    assert "job_rejected" in fr["events"]["kind"]
    batch = [c for c, k in zip(fr["jobs"]["chips"], fr["jobs"]["kind"], strict=True) if k != "inference"]
    assert batch == [280] and "done" in fr["jobs"]["state"]


@pytest.mark.parametrize(
    ("read", "content", "message"),
    [
        (traces.read_job_trace, b"submit_time_s,chips,\xff\xfe\n1,2,3\n", "not UTF-8 text"),  # the header
        (traces.read_request_trace, b"TIMESTAMP,\xff\n", "not UTF-8 text"),
        (
            traces.read_job_trace,
            b"submit_time_s,chips,kind,duration_s\n0,8,pretrain,60\n1,x,pretrain,60\n",
            ":3: ",
        ),
        (
            traces.read_request_trace,
            b"TIMESTAMP,ContextTokens,GeneratedTokens\n0,1,1\n1,-1,2\n",
            ":3: ",
        ),  # a row
    ],
)
def test_a_broken_file_is_refused_and_closed(
    tmp_path: Path, read: object, content: bytes, message: str
) -> None:
    """A trace that breaks in its header or in a row is refused naming the file (and the line),
    and the file is closed before the error (an open file left to the garbage collector warns,
    and leaks a descriptor)."""
    import warnings

    f = tmp_path / "t.csv"
    f.write_bytes(content)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResourceWarning)
        with pytest.raises(traces.TraceError, match=str(f)):
            try:
                read(f)  # type: ignore[operator]
            except traces.TraceError as e:
                assert message in str(e)
                raise
        gc.collect()
