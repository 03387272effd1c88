"""Training and inference formulas against hand calculations (facts §9.5, §13)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tests.conftest import small_params
from twin.compose.hall import Hall
from twin.spec import catalog
from twin.spec.models import MODELS
from twin.spec.params import FailureParams, ServiceParams, TrainingParams
from twin.work import fabric, inference, workload
from twin.work.jobs import DONE, TRAINING


def test_kv_cache_bytes_per_token_from_the_model_card() -> None:
    # Llama 3.1 70B BF16: 2*80*8*128*2 = 327,680 B; gpt-oss-120b BF16: 2*36*8*64*2 = 73,728 B.
    assert inference.kv_bytes_per_token(ServiceParams()) == 327_680
    gpt = ServiceParams(model="gpt-oss-120b", layers=36, kv_heads=8, head_dim=64)
    assert inference.kv_bytes_per_token(gpt) == 73_728


TRN3 = catalog.SYSTEMS["trn3-gen2"]
# Tensor-parallel all-reduces of a 4-chip replica of Llama 3.1 70B on NeuronLink (2 TB/s, 2 us a
# hop): two per layer, 80 layers; each 2 log2(4) = 4 hops plus 2 (p-1)/p x 8,192 x 2 B per token.
AR_FIXED = 160 * 4 * 2e-6
AR_PER_TOKEN = 160 * 1.5 * 8192 * 2 / 2e12


def test_decode_roofline_batch_one_matches_the_hand_calculation() -> None:
    # facts §9.5: 70 B FP8 weights on 4 Trainium3 (19.6 TB/s): batch 1 => <= 280 tok/s from the
    # memory roof; the all-reduces of the step come on top.
    acc = catalog.accelerator("trainium3")
    s = ServiceParams(batch_max=1, bw_efficiency=1.0, context_tokens=1.0, output_tokens=0.0)
    r = inference.roofline(s, acc, TRN3)
    assert r.batch == 1
    mem = (70e9 + 327_680) / 19.6e12
    assert 1 / mem == pytest.approx(280, rel=0.001)
    assert r.decode_tokens_per_s == pytest.approx(1 / (mem + AR_FIXED + AR_PER_TOKEN), rel=1e-9)
    # A one-chip replica has no collectives: the memory roof itself.
    one = inference.roofline(dataclasses.replace(s, chips_per_replica=1), acc, TRN3)
    assert one.decode_tokens_per_s == pytest.approx(4.9e12 / (70e9 + 327_680), rel=1e-9)


def test_decode_roofline_batch_64_and_prefill() -> None:
    acc = catalog.accelerator("trainium3")
    s = ServiceParams(
        batch_max=64,
        bw_efficiency=0.7,
        context_tokens=4096.0,
        output_tokens=0.0,
        prefill_mfu=0.5,
        tpot_slo_s=60.0,  # the cap, not the SLO, sets the batch
    )
    r = inference.roofline(s, acc, TRN3)
    bw = 4 * 4.9e12 * 0.7
    step = (70e9 + 64 * 4096 * 327_680) / bw + AR_FIXED + 64 * AR_PER_TOKEN
    assert r.decode_step_s == pytest.approx(step)
    assert r.decode_tokens_per_s == pytest.approx(64 / step)
    # Prefill 2*N*L / (peak*MFU): 70 B, 4096 tokens, 4 chips MXFP8 at 50 %, plus its all-reduces.
    compute = 2 * 70e9 * 4096 / (4 * 2517e12 * 0.5)
    assert r.prefill_s == pytest.approx(compute + AR_FIXED + 4096 * AR_PER_TOKEN)
    # Memory-bound: the compute a decode step needs is far below peak.
    assert 2 * 70e9 * 64 / step < 0.2 * 4 * 2517e12


def test_kv_cache_limits_the_batch() -> None:
    acc = catalog.accelerator("trainium3")
    s = ServiceParams(context_tokens=100_000.0, output_tokens=1000.0, tpot_slo_s=60.0)
    r = inference.roofline(s, acc, TRN3)
    hbm = 4 * acc.hbm_bytes * 0.9
    seq = 100_000 + 500
    assert r.batch == r.batch_kv == int((hbm - 70e9) // (seq * 327_680))
    assert r.batch * seq * 327_680 <= hbm - 70e9


def test_weights_that_do_not_fit_are_refused() -> None:
    acc = catalog.accelerator("trainium3")
    with pytest.raises(ValueError, match="do not fit"):
        inference.roofline(
            ServiceParams(params=405e9, weight_bytes_per_param=2.0, chips_per_replica=1), acc, TRN3
        )


def test_training_job_duration_is_6nd_over_chips_peak_mfu() -> None:
    """One 144-chip job on an empty UltraServer finishes after 6·N·D / (144·peak·MFU), the MFU
    of its parallelism plan (twin.work.fabric: test_fabric.py, test_parallelism.py)."""
    tp = TrainingParams(arrivals_per_day=0.0, checkpoint_bytes_per_param=0.0)
    p = small_params(ultraservers=1, training=tp, services=(), failures=FailureParams(chip_hazard_per_h=0.0))
    sim = Hall(p)
    n, d = 8e9, 2.0e12
    j = sim.jobs.add(
        "llama-3.1-8b",
        "mxfp8",
        kind=TRAINING,
        chips=144,
        params=n,
        tokens=d,
        work=workload.training_flop(n, d),
        submit=0,
    )
    sim.pool.queue.append(j)
    m = MODELS["llama-3.1-8b"]
    mfu = fabric.job_mfu(m, 6.0, 144, 1, 2517e12, m.mfu, p.hall.system, tp)
    assert 0.2 < mfu < m.mfu
    expected_s = 6 * n * d / (144 * 2517e12 * mfu)
    steps = int(np.ceil(expected_s / p.dt_s))
    sim.advance(steps - 1)
    assert sim.jobs.a["state"][j] != DONE
    sim.advance(1)
    assert sim.jobs.a["state"][j] == DONE
    assert sim.jobs.a["end"][j] == steps * p.dt_s
    assert sim.jobs.a["done"][j] == pytest.approx(6 * n * d)


def test_gang_spanning_ultraservers_gets_the_fabrics_mfu() -> None:
    """The MFU of a placement comes from the fabric (hand formulas in test_fabric.py): lower
    when the gang spans UltraServers."""
    tp = TrainingParams(arrivals_per_day=0.0)
    p = small_params(ultraservers=2, training=tp, services=(), failures=FailureParams(chip_hazard_per_h=0.0))
    m = MODELS["llama-3.1-8b"]
    peak = p.hall.accelerator.peak("fp8")
    for chips, spanned in ((144, 1), (288, 2)):
        sim = Hall(p)
        j = sim.jobs.add(
            m.key, "mxfp8", kind=TRAINING, chips=chips, params=8e9, tokens=1e15, work=6e24, submit=0
        )
        sim.pool.queue.append(j)
        sim.advance(1)
        assert sim.jobs.a["spanned"][j] == spanned
        expected = fabric.job_mfu(m, 6.0, chips, spanned, peak, m.mfu, p.hall.system, tp)
        assert sim.jobs.a["mfu"][j] == pytest.approx(expected)
    assert fabric.job_mfu(m, 6.0, 288, 2, peak, m.mfu, p.hall.system, tp) < fabric.job_mfu(
        m, 6.0, 288, 1, peak, m.mfu, p.hall.system, tp
    )


def test_inference_serves_up_to_capacity_and_counts_the_rest_as_dropped() -> None:
    base = small_params(
        ultraservers=1,
        training=TrainingParams(arrivals_per_day=0.0),
        failures=FailureParams(chip_hazard_per_h=0.0),
    )
    svc = dataclasses.replace(
        ServiceParams(),
        replicas=2,
        mean_requests_per_s=1000.0,
        diurnal_peak_to_trough=1.0,
        weekend_factor=1.0,
    )
    sim = Hall(dataclasses.replace(base, services=(svc,)))
    s = sim.advance(3)["service_ts"]
    cap = 2 * inference.roofline(svc, sim.pool.acc, sim.pool.sys).requests_per_s  # far below 1,000 req/s
    # Poisson arrivals around 1,000/s: within 5 sigma of 60,000 per step.
    assert (np.abs(s["requests_arrived"] - 60_000) < 5 * np.sqrt(60_000)).all()
    # Served: whole requests at capacity (fractions carry over to the next step).
    assert abs(int(s["requests_served"].sum()) - cap * 180) < 1
    # Queue capped at max_queue_wait_s of capacity; the rest is dropped, nothing is lost.
    assert (s["requests_queued"] == np.floor(cap * svc.max_queue_wait_s)).all()
    total = s["requests_served"].sum() + s["requests_dropped"].sum() + s["requests_queued"][-1]
    assert total == s["requests_arrived"].sum()
    np.testing.assert_allclose(s["tokens_per_s"], s["requests_served"] * svc.output_tokens / 60)
