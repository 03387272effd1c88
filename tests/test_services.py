"""Online inference: roofline capacity by hand, request conservation, latency and SLO, the
autoscaler with its start-up delay, demand shapes and bursts, trace replay, energy per token."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import small_params
from twin.compose.hall import Hall
from twin.spec import catalog
from twin.spec.params import FailureParams, RequestTrace, ServiceParams, TrainingParams
from twin.work import inference, jobs, queues, services, workload

FLAT = dict(diurnal_peak_to_trough=1.0, weekend_factor=1.0)
NO_JOBS = dict(training=TrainingParams(arrivals_per_day=0.0), failures=FailureParams(chip_hazard_per_h=0.0))


def _sim(svc: ServiceParams, ultraservers: int = 1, **kw: object) -> Hall:
    return Hall(small_params(ultraservers=ultraservers, services=(svc,), **{**NO_JOBS, **kw}))


TRN3 = catalog.SYSTEMS["trn3-gen2"]
BW_4 = 4 * 4.9e12 * 0.92  # 4 Trainium3, nominal HBM bandwidth x the measured efficiency
COMPUTE_4 = 4 * 2.517e15 * 0.5  # 4 Trainium3 at MXFP8, MFU 0.5
# One tensor-parallel all-reduce of one token's activations (8,192 x 2 B) over 4 chips of
# NeuronLink (2 TB/s, 2 us a hop): 2 (p-1)/p S / B plus 2 log2(4) = 4 hops; 160 per step (two
# per layer, 80 layers).
AR_FIXED = 160 * 4 * 2e-6
AR_PER_TOKEN = 160 * 1.5 * 8192 * 2 / 2e12


def _hand_roofline(acc: catalog.Accelerator) -> dict[str, float]:
    """Llama 3.1 70B, FP8 weights, BF16 KV, 4 Trainium3, conversation means (facts §9.5)."""
    weights = 70e9 * 1.0
    kv = 2 * 80 * 8 * 128 * 2  # bytes per token
    seq = 1155 + 211 / 2  # resident tokens per sequence while decoding
    batch_kv = math.floor((4 * acc.hbm_bytes * 0.9 - weights) / (seq * kv))

    def step(n: int) -> float:
        gemm = max(weights / BW_4, 2 * 70e9 * n / COMPUTE_4)
        return gemm + n * seq * kv / BW_4 + AR_FIXED + n * AR_PER_TOKEN

    prefill = 2 * 70e9 * 1155 / COMPUTE_4 + AR_FIXED + 1155 * AR_PER_TOKEN
    # The largest batch whose mean TPOT (step + the prefills admitted per step) meets 200 ms.
    batch = max(n for n in range(1, batch_kv + 1) if step(n) + n * prefill / 211 <= 0.2)
    cap = 1 / (prefill + 211 * step(batch) / batch)
    return {
        "batch": batch,
        "batch_kv": batch_kv,
        "step": step(batch),
        "prefill": prefill,
        "cap": cap,
        "decode_tok_s": batch / step(batch),
    }


def test_saturated_replica_decodes_at_the_roofline_by_hand() -> None:
    acc = catalog.accelerator("trainium3")
    h = _hand_roofline(acc)
    assert 64 < h["batch"] < h["batch_kv"]  # the TPOT SLO, not the KV cache, sets the batch
    roof = inference.roofline(ServiceParams(), acc, TRN3)
    assert roof.batch == h["batch"] and roof.batch_kv == h["batch_kv"]
    assert roof.decode_tokens_per_s == pytest.approx(h["decode_tok_s"], rel=1e-12)
    assert roof.requests_per_s == pytest.approx(h["cap"], rel=1e-12)
    svc = ServiceParams(replicas=1, mean_requests_per_s=500.0, **FLAT)
    s = _sim(svc).advance(30)["service_ts"]
    # Served whole requests at capacity: within one request of cap x 30 min.
    assert abs(int(s["requests_served"].sum()) - h["cap"] * 1800) < 1
    # Output tokens/s = decode tokens/s x the share of time not spent prefilling; prompt
    # tokens/s = requests/s x the mean prompt.
    tok = float(s["tokens_per_s"].mean())
    assert tok == pytest.approx(h["decode_tok_s"] * (1 - h["cap"] * h["prefill"]), rel=1e-3)
    assert float(s["input_tokens_per_s"].mean()) == pytest.approx(h["cap"] * 1155, rel=1e-3)
    # Resident sequences: the batch. Whole requests leave a step up to one request (0.1 %) below
    # capacity, and near capacity Little's law n = k b / (1 - k m) moves ~1/(1 - k m) times
    # faster than the rate: within 3 %.
    np.testing.assert_allclose(s["occupancy"], h["batch"], rtol=0.03)
    assert (s["utilization"] > 0.999).all()
    # TPOT: the decode step stretched by interleaved prefills, step / (1 - prefill share), at
    # the SLO by construction of the batch.
    tpot_mean = h["step"] / (1 - h["cap"] * h["prefill"])
    assert tpot_mean == pytest.approx(0.2, rel=0.01)
    assert h["step"] < s["tpot_p50_s"][-1] < 1.2 * tpot_mean
    assert s["tpot_p99_s"][-1] > s["tpot_p50_s"][-1]


def test_light_load_ttft_is_prefill_plus_one_decode_step() -> None:
    svc = ServiceParams(replicas=4, mean_requests_per_s=1.0, **FLAT)
    s = _sim(svc).advance(10)["service_ts"]
    # Median prompt: the conversation profile's median scaled to the 1,155-token mean.
    u = (np.arange(100_000) + 0.5) / 100_000
    shape = workload.token_quantiles(workload.TOKEN_PROFILES["conversation"].input_q, u)
    median = 1020 * 1155 / shape.mean()
    prefill = 2 * 70e9 * median / COMPUTE_4 + AR_FIXED + median * AR_PER_TOKEN
    # Under one sequence resident: a step of one, weights and its KV cache streamed.
    kv = 2 * 80 * 8 * 128 * 2 * (1155 + 211 / 2)
    step_one = (70e9 + kv) / BW_4 + AR_FIXED + AR_PER_TOKEN
    assert s["ttft_p50_s"][-1] == pytest.approx(prefill + step_one, rel=0.03)
    assert s["slo_attainment"][-1] == 1.0
    assert (s["requests_dropped"] == 0).all()


def test_every_request_is_served_queued_or_dropped_through_overload_and_failures() -> None:
    svc = ServiceParams(replicas=4, mean_requests_per_s=40.0, burst_rate_per_day=200.0, burst_multiplier=4.0)
    sim = _sim(svc, ultraservers=1, failures=FailureParams(chip_hazard_per_h=0.0))
    first = sim.advance(60)
    sim.inject("inference_surge", "chat", value=6.0, duration_s=1800)
    sim.inject("fail_server", "1", duration_s=1200)  # takes one replica down
    second = sim.advance(120)
    s = {k: np.concatenate([first["service_ts"][k], second["service_ts"][k]]) for k in first["service_ts"]}
    arrived = np.cumsum(s["requests_arrived"])
    accounted = np.cumsum(s["requests_served"] + s["requests_dropped"]) + s["requests_queued"]
    np.testing.assert_array_equal(arrived, accounted)
    assert s["requests_dropped"].sum() > 0  # the surge overloads it
    assert s["replicas_running"].min() < 4  # the failed server's replica was down
    # Dropped requests count against the SLO; attainment falls under overload.
    assert np.nanmin(s["slo_attainment"]) < 0.9 <= np.nanmax(s["slo_attainment"][:60])
    f = {
        k: np.concatenate([first["factory_ts"][k], second["factory_ts"][k]])
        for k in ("requests_per_s", "requests_served_per_s", "requests_dropped_per_s")
    }
    np.testing.assert_allclose(f["requests_per_s"], s["requests_arrived"] / 60)
    np.testing.assert_allclose(f["requests_dropped_per_s"], s["requests_dropped"] / 60)


def test_autoscaler_adds_replicas_that_serve_only_after_their_startup() -> None:
    svc = ServiceParams(
        replicas=2,
        autoscale=True,
        replicas_min=1,
        replicas_max=10,
        startup_s=600.0,
        scale_interval_s=60.0,
        scale_down_delay_s=1800.0,
        mean_requests_per_s=5.0,
        **FLAT,
    )
    sim = _sim(svc)
    cap = sim.pool.cluster.services[0].capacity_per_replica
    quiet = sim.advance(60)["service_ts"]
    assert quiet["replicas_target"][-1] == 1  # scaled down to the minimum after the delay
    sim.inject("inference_surge", "chat", value=cap * 3.0 / 5.0, duration_s=3600)  # 3 replicas' worth
    s = sim.advance(150)["service_ts"]
    up = int(np.argmax(s["replicas_target"] > 1))
    assert up <= 2  # decided within the first scale intervals of the surge
    want = int(s["replicas_target"][up + 25])
    assert want >= math.ceil(3.0 / svc.target_utilization)  # demand / (capacity x target)
    # A replica requested at step k loads weights for startup_s = 10 steps and serves from k + 10:
    # the warm count follows the target ten steps late (the hall has room, so no other wait).
    tgt, run = s["replicas_target"], s["replicas_running"]
    assert (run[up : up + 10] == 1).all() and s["replicas_starting"][up] > 0
    np.testing.assert_array_equal(run[up + 10 : up + 35], tgt[up : up + 25])
    # The surge ends at step 60; capacity is kept for scale_down_delay_s (30 steps) of low demand.
    assert (tgt[60:88] >= want - 1).all()
    assert tgt[-1] == 1


def test_daily_and_weekly_shape_preserve_the_weekday_mean() -> None:
    svc = ServiceParams(
        replicas=16, mean_requests_per_s=20.0, diurnal_peak_to_trough=3.0, peak_hour=15.0, weekend_factor=0.5
    )
    sim = _sim(svc, dt_s=3600, ultraservers=1)
    s = sim.advance(24 * 7)["service_ts"]
    per_day = s["requests_arrived"].reshape(7, 24).sum(axis=1)
    expect = 20.0 * 86400
    assert np.abs(per_day[:5] / expect - 1).max() < 0.01  # Poisson: sigma 0.08 %
    assert np.abs(per_day[5:] / (0.5 * expect) - 1).max() < 0.01
    hourly = s["requests_arrived"].reshape(7, 24)[:5].mean(axis=0)
    assert int(np.argmax(hourly)) == 15 and hourly.max() / hourly.min() == pytest.approx(3.0, rel=0.03)


def test_code_profile_bursts_keep_the_mean_but_not_the_poisson_spread() -> None:
    def counts(profile: str) -> np.ndarray:
        svc = dataclasses.replace(
            ServiceParams(replicas=16, mean_requests_per_s=20.0, **FLAT), token_profile=profile
        )
        if profile == "code":
            p = workload.TOKEN_PROFILES["code"]
            svc = dataclasses.replace(
                svc,
                burst_rate_per_day=p.burst_rate_per_day,
                burst_multiplier=p.burst_multiplier,
                burst_duration_s=p.burst_duration_s,
            )
        return _sim(svc).advance(3 * 1440)["service_ts"]["requests_arrived"]

    conv, code = counts("conversation"), counts("code")
    for c in (conv, code):
        assert c.mean() == pytest.approx(20.0 * 60, rel=0.03)
    assert 0.85 < conv.var() / conv.mean() < 1.15  # Poisson
    assert code.var() / code.mean() > 50  # bursty (the Azure code trace: CV 13 between arrivals)


def test_token_sample_matches_the_configured_means_and_the_profile_shape() -> None:
    acc = catalog.accelerator("trainium3")
    svc = ServiceParams(context_tokens=2000.0, output_tokens=300.0)
    m = services.ServiceModel(svc, acc, TRN3, np.random.default_rng(0), 60)
    inp = m.inp_i
    assert inp.mean() == pytest.approx(2000.0) and m.out_i.mean() == pytest.approx(300.0, rel=1e-9)
    # The shape is the fitted one: median / mean of the Azure conversation prompts (1,020 and
    # 1,139 on the interpolated quantile curve).
    assert np.median(inp) / inp.mean() == pytest.approx(1020 / 1139.2, rel=0.02)


def _trace(times: list[float], n_in: int = 500, n_out: int = 50) -> RequestTrace:
    t = np.asarray(times, dtype=float)
    return RequestTrace(
        t - t[0], np.full(len(t), n_in, dtype=np.int64), np.full(len(t), n_out, dtype=np.int64)
    )


def test_trace_replay_counts_requests_per_step_exactly_and_loops() -> None:
    rng = np.random.default_rng(3)
    times = np.sort(rng.uniform(0, 1800, 900))
    times[0] = 0.0
    tr = _trace(list(times))
    svc = ServiceParams(replicas=4, trace=tr, trace_loop=True)
    s = _sim(svc).advance(60)["service_ts"]
    period = tr.span_s + tr.span_s / 899  # span + one mean gap
    edges = np.arange(0, 3601, 60)
    looped = np.concatenate([tr.time_s, tr.time_s + period])
    expect = np.histogram(looped, bins=edges)[0]
    np.testing.assert_array_equal(s["requests_arrived"], expect)
    # Twice as fast: the first 30 minutes hold the whole trace once.
    fast = _sim(dataclasses.replace(svc, trace_speedup=2.0, trace_loop=False)).advance(30)["service_ts"]
    assert fast["requests_arrived"].sum() == 900
    # The trace's own token lengths replace the profile's.
    assert s["input_tokens_per_s"][5] == pytest.approx(s["requests_served"][5] * 500 / 60)


def test_inference_energy_is_the_sum_of_the_services_and_gives_j_per_token() -> None:
    a = ServiceParams(name="chat", replicas=4, mean_requests_per_s=30.0, **FLAT)
    b = ServiceParams(
        name="code",
        model="gpt-oss-20b",
        params=21e9,
        active_params=3.6e9,
        layers=24,
        head_dim=64,
        chips_per_replica=1,
        replicas=8,
        mean_requests_per_s=30.0,
        **FLAT,
    )
    sim = Hall(small_params(ultraservers=1, services=(a, b), **NO_JOBS))
    fr = sim.advance(20)
    f, s = fr["factory_ts"], fr["service_ts"]
    per_step = s["power_w"].reshape(20, 2).sum(axis=1)
    np.testing.assert_allclose(f["inference_power_w"], per_step, rtol=1e-12)
    np.testing.assert_allclose(
        f["energy_per_token_j"], f["inference_power_w"] / f["tokens_per_s"], rtol=1e-12
    )
    # Attributed power: the replicas' chips grossed up by facility / chip power.
    assert (f["inference_power_w"] < f["facility_power_w"]).all()
    chips_inf = 4 * 4 + 8 * 1
    assert f["inference_power_w"][-1] > chips_inf * sim.pool.acc.idle_w


@settings(max_examples=40, deadline=None)
@given(order=st.permutations(range(9)), prio=st.lists(st.integers(0, 3), min_size=3, max_size=3))
def test_replica_requests_wait_by_priority_then_arrival_whatever_order_they_come_in(
    order: list[int], prio: list[int]
) -> None:
    """The replica queue is kept sorted on insertion (bisect over the queue, not a rebuilt list):
    any order of requests leaves it in (priority high first, then job id) order, as a full sort."""
    svcs = tuple(
        ServiceParams(name=f"s{i}", replicas=0, chips_per_replica=4, priority=prio[i], **FLAT)
        for i in range(3)
    )
    sim = Hall(small_params(ultraservers=1, services=svcs, **NO_JOBS))
    cl = sim.pool.cluster
    slots = [j for ids in cl.replicas for j in ids]
    assert len(slots) == 0  # replicas = 0 and no autoscaler: no slots; make them by hand below
    ids = [
        cl.jobs.add(
            f"r{k}",
            "fp8",
            kind=jobs.INFERENCE,
            chips=4,
            params=70e9,
            service=k % 3,
            priority=prio[k % 3],
            state=jobs.STOPPED,
            source=0,
        )
        for k in range(9)
    ]
    for k in order:
        queues.request_replica(cl.queues, cl.jobs, cl.log, ids[k], 0)
    a = cl.jobs.a
    expect = sorted(ids, key=lambda j: (-int(a["priority"][j]), int(a["id"][j])))
    assert cl.rqueue == expect


def test_cached_service_power_equals_the_sum_over_the_replicas_chips_through_changes() -> None:
    """The services' power, kept per replica chips until a replica starts or stops or a chip
    fails or is repaired, equals each step the sum of the chip power over the chips each
    service's replicas hold now, in chip order, grossed up by facility / chip power."""
    from twin.work import serving

    a = ServiceParams(
        name="chat",
        replicas=2,
        autoscale=True,
        replicas_min=1,
        replicas_max=8,
        startup_s=120.0,
        scale_interval_s=60.0,
        scale_down_delay_s=300.0,
        mean_requests_per_s=5.0,
        **FLAT,
    )
    b = dataclasses.replace(a, name="code", autoscale=False, replicas=3)
    sim = Hall(
        small_params(
            ultraservers=2,
            services=(a, b),
            failures=FailureParams(chip_hazard_per_h=5e-3),
            training=TrainingParams(arrivals_per_day=200.0),
        )
    )
    pool = sim.pool
    cl, cp = pool.cluster, pool.cluster.pool
    seen_svc, seen_fail = set(), set()
    for k in range(90):
        if k == 5:
            cap = cl.services[0].capacity_per_replica
            sim.inject("inference_surge", "chat", value=cap * 4.0 / 5.0, duration_s=1200)
        if k in (10, 40):
            sim.inject("fail_server", str(k // 10), duration_s=600)  # down, then repaired
        sim.advance(1)
        ph = pool._ph
        assert ph is not None
        gross = ph.facility_power_w / ph.chip_power_w
        got = serving.service_power_w(cl, ph.pw, gross).copy()
        want = np.zeros(2)
        for si, slots in enumerate(cl.svc.replicas):
            held = [cp.placement[j] for j in slots if j in cp.placement]
            if held:
                chips = np.concatenate(held)
                want[si] = np.add.accumulate(ph.chip_p[chips])[-1]  # every chip's power, in order
        np.testing.assert_array_equal(got, want * gross)
        seen_svc.add(cp.svc_ver)
        seen_fail.add(cp.fail_ver)
    # Replicas started and stopped and chips failed and were repaired along the way.
    assert len(seen_svc) > 3 and len(seen_fail) > 2
