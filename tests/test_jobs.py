"""Batch-job classes against the published trace statistics they were fitted to, the model
catalog against the model cards, arrival shapes, and scenario-defined models."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from scenarios.spec import parse
from tests.conftest import SMALL_TOML, job_history, small_params
from twin.compose.hall import Hall
from twin.spec.models import MODELS
from twin.spec.params import JOB_CLASSES, KIND_NAMES, FailureParams, TrainingParams
from twin.work import workload
from twin.work.jobs import FREE, JobTable

# AcmeTrace data/cluster_summary.csv, Seren (Hu et al., NSDI 2024; facts §9.2).
SEREN = {"median_run_s": 122.0, "mean_run_s": 1414.3, "mean_gpus": 5.68, "gpu_s_per_job": 21.51e9 / 663_813}


def _mixture(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    tp = TrainingParams()
    shares = np.array([tp.job_class(k).share for k in JOB_CLASSES])
    shares /= shares.sum()
    rng = np.random.default_rng(seed)
    chips, runs = [], []
    for k, sh in zip(JOB_CLASSES, shares, strict=True):
        d = workload.draw_jobs(tp.job_class(k), int(round(n * sh)), rng, 4096)
        chips.append(d.chips)
        runs.append(d.nominal_s)
    return np.concatenate(chips), np.concatenate(runs)


def test_class_mix_reproduces_the_seren_job_statistics() -> None:
    chips, runs = _mixture(2_000_000)
    assert np.median(runs) == pytest.approx(SEREN["median_run_s"], rel=0.03)
    assert np.median(chips) == 1
    assert chips.mean() == pytest.approx(SEREN["mean_gpus"], rel=0.03)
    # Heavy tails converge slowly: the mean run and the GPU time per job within 10 %.
    assert runs.mean() == pytest.approx(SEREN["mean_run_s"], rel=0.10)
    assert (chips * runs).mean() == pytest.approx(SEREN["gpu_s_per_job"], rel=0.15)
    assert chips.max() == 1024
    # Heavy-tailed, as in the traces: mean/median run ratio 10-20x (facts §9.2).
    assert 8 < runs.mean() / np.median(runs) < 20


def test_model_catalog_matches_the_model_cards() -> None:
    g = MODELS["gpt-oss-120b"]
    assert (g.params, g.active_params, g.layers, g.kv_heads, g.head_dim, g.experts, g.experts_active) == (
        117e9,
        5.1e9,
        36,
        8,
        64,
        128,
        4,
    )
    g = MODELS["gpt-oss-20b"]
    assert (g.params, g.active_params, g.layers, g.experts) == (21e9, 3.6e9, 24, 32)
    m = MODELS["llama-3.1-405b"]
    assert (m.params, m.active_params, m.layers, m.kv_heads, m.head_dim, m.hidden) == (
        405e9,
        405e9,
        126,
        8,
        128,
        16384,
    )
    m = MODELS["llama-3.1-70b"]
    assert (m.layers, m.kv_heads, m.head_dim, m.hidden) == (80, 8, 128, 8192)
    # KV cache per token (facts §13): gpt-oss-120b BF16 72 KiB, Llama 3.1 70B 320 KiB.
    assert MODELS["gpt-oss-120b"].kv_bytes_per_token(2) == 73_728
    assert MODELS["llama-3.1-70b"].kv_bytes_per_token(2) == 327_680
    # Llama 3 405B: 6 N D with 15.6 T tokens is the published 3.8e25 FLOP.
    assert workload.training_flop(405e9, 15.6e12) == pytest.approx(3.8e25, rel=0.01)
    # MoE trains on its active parameters; dense MFU above MoE MFU (facts §9.5).
    assert MODELS["gpt-oss-120b"].mfu < MODELS["llama-3.1-70b"].mfu


def test_arrival_shape_has_weekday_mean_one_and_lower_weekends() -> None:
    t = np.arange(0, 7 * 86400, 60)
    f = np.array([workload.diurnal_factor(x, 2.0, 14.0, 0.5) for x in t])
    day = f.reshape(7, -1)
    np.testing.assert_allclose(day[:5].mean(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(day[5:].mean(axis=1), 0.5, rtol=1e-12)
    assert day[0].max() / day[0].min() == pytest.approx(2.0)
    assert int(np.argmax(day[0])) * 60 // 3600 == 14


def test_arrivals_per_class_over_a_week() -> None:
    tp = TrainingParams(arrivals_per_day=400.0, diurnal_peak_to_trough=2.0, weekend_factor=0.5)
    p = small_params(ultraservers=2, training=tp, services=(), failures=FailureParams(chip_hazard_per_h=0.0))
    sim = Hall(p)
    jobs = job_history([sim.advance(1440) for _ in range(7)])
    kinds = np.array([KIND_NAMES.index(k) for k in jobs["kind"]])
    shares = np.array([tp.job_class(k).share for k in JOB_CLASSES])
    expect_total = 400.0 * (5 + 2 * 0.5)  # weekday mean, halved on the weekend
    for name, sh in zip(JOB_CLASSES, shares / shares.sum(), strict=True):
        mu = expect_total * sh
        got = int((kinds == KIND_NAMES.index(name)).sum())
        assert abs(got - mu) <= 3.3 * math.sqrt(mu) + 1, (name, got, mu)
    # Submissions follow the working day: afternoon and night counts each within 4 sigma of the
    # shape's expectation (and the afternoon far above the night).
    hours = (jobs["submit_time_s"] % 86400) // 3600
    steps = np.arange(0, 7 * 86400, 60)
    rate = np.array([workload.diurnal_factor(t, 2.0, 14.0, 0.5) for t in steps]) * 400.0 / 1440
    step_hours = (steps % 86400) // 3600
    for window in ((12, 16), (0, 4)):
        sel = (hours >= window[0]) & (hours <= window[1])
        mu = rate[(step_hours >= window[0]) & (step_hours <= window[1])].sum()
        assert abs(int(sel.sum()) - mu) < 4 * math.sqrt(mu), (window, int(sel.sum()), mu)
    assert ((hours >= 12) & (hours <= 16)).sum() > 1.5 * (hours <= 4).sum()


def test_scenario_defined_model_serves_and_trains(tmp_path: object) -> None:
    text = (
        SMALL_TOML
        + """
[[models]]
name = "my-moe-30b"
params = 30e9
active_params = 3e9
layers = 48
kv_heads = 4
head_dim = 128
experts = 64
experts_active = 8
"""
    )
    text = text.replace('model = "llama-3.1-70b"', 'model = "my-moe-30b"\nchips_per_replica = 1')
    # Class keys directly under [training]: one class of pre-training jobs with this model.
    text = text.replace(
        "arrivals_per_day = 40", 'arrivals_per_day = 40\nmodels = ["my-moe-30b"]\nmodel_weights = [1.0]'
    )
    spec = parse(text, "small.toml")
    p = spec.to_params()
    svc = p.services[0]
    assert (svc.params, svc.active_params, svc.layers, svc.kv_heads) == (30e9, 3e9, 48, 4)
    assert p.models[0].mfu == MODELS["gpt-oss-120b"].mfu  # the MoE default
    sim = Hall(p)
    fr = sim.advance(600)
    jobs = fr["jobs"]
    trained = [i for i, k in enumerate(jobs["kind"]) if k == "pretrain"]
    assert trained and all(jobs["name"][i] == "my-moe-30b" and jobs["params"][i] == 3e9 for i in trained)
    assert fr["service_ts"]["tokens_per_s"].sum() > 0


def test_finished_jobs_leave_memory_once_recorded() -> None:
    """A week of 150 jobs a day: the job table holds the live jobs (slots reused once a
    finished job's row has been recorded), not the run's history; ids stay unique."""
    tp = TrainingParams(arrivals_per_day=150.0)
    p = small_params(ultraservers=2, training=tp, services=(), failures=FailureParams(chip_hazard_per_h=0.0))
    sim = Hall(p)
    frames = [sim.advance(1440) for _ in range(7)]
    jobs = sim.jobs
    assert jobs.next_id > 800
    # Slots ever used: at most the most jobs live at once (queued or running) plus those that
    # finished within two consecutive advances (kept for one advance after being recorded).
    live = max(int((f["factory_ts"]["queue_jobs"] + f["factory_ts"]["running_jobs"]).max()) for f in frames)
    ended = [sum(1 for k in f["events"]["kind"] if k == "job_end") for f in frames]
    assert jobs.n <= live + max(a + b for a, b in itertools.pairwise(ended))
    assert jobs.n < 0.5 * jobs.next_id
    assert len(sim.pool.cluster.last_us) <= jobs.live
    ids = np.concatenate([f["jobs"]["job_id"] for f in frames])
    hist = job_history(frames)
    assert len(hist["job_id"]) == jobs.next_id  # every job recorded once under its own id
    assert len(set(ids.tolist())) == jobs.next_id
    # Chips name their job by id: the jobs on the chips now are the ones recorded as running.
    on_chips = set(sim.chip_job_ids().tolist()) - {-1}
    assert on_chips == set(hist["job_id"][hist["state"] == "running"].tolist())
    # Events name jobs by id: every job_end names a job recorded as done.
    ends = {
        int(t.split(":")[1])
        for f in frames
        for k, t in zip(f["events"]["kind"], f["events"]["target"], strict=True)
        if k == "job_end"
    }
    done = set(hist["job_id"][hist["state"] == "done"].tolist())
    assert ends == done


def test_adding_jobs_together_equals_adding_them_one_by_one() -> None:
    """``JobTable.add_many`` leaves the table as adding the same jobs one by one does (slots
    reused lowest first, then new ones; the table grown by doubling; ids in sequence; the
    evicted jobs' rows back to zero), over random runs of arrivals and evictions."""
    rng = np.random.default_rng(3)
    for _ in range(40):
        one, many = JobTable(capacity=2), JobTable(capacity=2)
        for _ in range(12):
            live = [j for j in range(one.n) if one.a["state"][j] != FREE]
            if live and rng.random() < 0.4:  # some recorded jobs leave
                gone = rng.choice(live, size=int(rng.integers(1, len(live) + 1)), replace=False).tolist()
                for t in (one, many):
                    t.a["done"][gone] = 1.0  # a field add() does not set: must be zero again
                    t.evict(gone)
            k = int(rng.integers(0, 6))
            cols = {
                "kind": rng.integers(0, len(KIND_NAMES), k).tolist(),
                "chips": rng.integers(1, 300, k).tolist(),
                "work": rng.random(k).tolist(),
                "priority": rng.integers(0, 3, k).tolist(),
            }
            names = [f"m{i}" for i in rng.integers(0, 4, k)]
            precisions = ["fp8"] * k
            got = [one.add(names[i], precisions[i], **{c: v[i] for c, v in cols.items()}) for i in range(k)]
            assert many.add_many(names, precisions, cols) == got
            assert (one.n, one.next_id, one.replica_ver) == (many.n, many.next_id, many.replica_ver)
            assert (one.names, one.precision) == (many.names, many.precision)
            for f, col in one.a.items():
                np.testing.assert_array_equal(col, many.a[f], err_msg=f)
