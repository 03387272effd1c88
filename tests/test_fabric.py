"""The parallelism plan behind the MFU (``twin.work.fabric``): collective costs, bubble, batch rule,
memory and step-time bookkeeping against hand formulas and conservation laws; the plan in the
simulation. Published figures: test_parallelism.py."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from scenarios.spec import ScenarioError, parse
from tests.conftest import SMALL_TOML, small_params
from twin.compose.hall import Hall
from twin.spec import catalog
from twin.spec.models import MODELS, ModelSpec
from twin.spec.params import JobTrace, SchedulerParams, TrainingParams
from twin.work import checkpoint, collectives, fabric

TRN3 = catalog.SYSTEMS["trn3-gen2"]
FP8 = catalog.ACCELERATORS["trainium3"].peak("fp8")
BF16 = catalog.ACCELERATORS["trainium3"].peak("bf16")
HGX = catalog.SYSTEMS["hgx-h100"]
H100 = catalog.ACCELERATORS["h100"]


def test_ring_allreduce_by_hand() -> None:
    # 1 GB over 4 participants at 25 GB/s, 15 us per hop: 2 * 3/4 * 0.04 s + 2 * 3 * 15 us.
    assert collectives.ring_allreduce_s(1e9, 4, 25e9, 15e-6) == pytest.approx(0.06 + 90e-6)
    # Two participants exchange half each way: 2 * 1/2 * S/B + 2 alpha.
    assert collectives.ring_allreduce_s(2e9, 2, 1e12, 1e-6) == pytest.approx(2e-3 + 2e-6)
    assert collectives.ring_allreduce_s(1e9, 1, 25e9, 15e-6) == 0.0
    # The bandwidth term tends to 2 S/B as p grows.
    assert collectives.ring_allreduce_s(1e9, 10_000, 1e9, 0.0) == pytest.approx(2.0, rel=1e-3)


def test_all_to_all_by_hand() -> None:
    # 640 MB per chip among 144 chips at 2 TB/s, 2 us: 143/144 * 0.32 ms + 143 * 2 us.
    assert collectives.all_to_all_s(640e6, 144, 2e12, 2e-6) == pytest.approx(143 / 144 * 320e-6 + 286e-6)
    assert collectives.all_to_all_s(1e9, 8, 1e9, 0.0) == pytest.approx(7 / 8)
    assert collectives.all_to_all_s(1e9, 1, 1e9, 1.0) == 0.0


def test_pipeline_bubble_by_hand() -> None:
    # Narayanan et al. 2021: (p - 1) / (v m + p - 1).
    assert fabric.pipeline_bubble(4, 12) == pytest.approx(3 / 15)
    assert fabric.pipeline_bubble(4, 12, 2) == pytest.approx(3 / 27)
    assert fabric.pipeline_bubble(1, 1) == 0.0
    assert fabric.pipeline_bubble(np.array([1.0, 16.0]), 16.0, 8.0).tolist() == pytest.approx([0.0, 15 / 143])


def test_global_batch_grows_with_the_replicas_within_its_bounds() -> None:
    cp = TrainingParams()
    assert fabric.global_batch_tokens(1, cp) == 4e6  # the floor
    assert fabric.global_batch_tokens(64, cp) == pytest.approx(64 * 131072)
    assert fabric.global_batch_tokens(128, cp) == 16e6  # 16.8 M capped at 16 M
    assert fabric.global_batch_tokens(4096, cp) == 16e6


def test_one_chip_runs_at_its_efficiency_less_attention_by_hand() -> None:
    """No parallelism, no communication: BF16 MFU = efficiency x 6 N / (6 N + 3 L h s) (causal
    attention), for a small model that fits one chip."""
    m = ModelSpec("tiny", 1e9, 1e9, 16, 8, 128, 2048)
    cp = TrainingParams()
    pl = fabric.plan(m, 6.0, 1, 1, BF16, 0.5, TRN3, cp)
    assert (pl.tp, pl.pp, pl.dp, pl.fits, pl.recompute) == (1, 1, 1, True, 0.0)
    attn = 3 * 16 * 2048 * cp.sequence_tokens
    assert pl.mfu == pytest.approx(0.5 * 6e9 / (6e9 + attn))
    # At FP8 (3.75x BF16 on Trainium3) the GEMMs speed up but the non-GEMM share does not.
    r = BF16 / FP8
    f = cp.nongemm_time_share
    fp8 = fabric.plan(m, 6.0, 1, 1, FP8, 0.5, TRN3, cp)
    assert fp8.mfu == pytest.approx(0.5 * r * 6e9 / (6e9 * ((1 - f) * r + f) + attn))


@pytest.mark.parametrize(
    ("model", "chips", "sysm", "peak"),
    [
        ("llama-3.1-405b", 16384, HGX, H100.peak("bf16")),
        ("llama-3.1-70b", 256, HGX, H100.peak("fp8")),
        ("gpt-oss-120b", 1152, TRN3, FP8),
        ("llama-3.1-70b", 4608, TRN3, FP8),
    ],
)
def test_step_time_is_the_sum_of_its_parts_and_the_plan_fits(
    model: str, chips: int, sysm: catalog.System, peak: float
) -> None:
    m = MODELS[model]
    cp = TrainingParams()
    spanned = -(-chips // sysm.chips)
    pl = fabric.plan(m, 6.0, chips, spanned, peak, m.mfu, sysm, cp)
    assert pl.step_s == pytest.approx(pl.compute_s + pl.bubble_s + pl.tp_s + pl.pp_s + pl.dp_s)
    assert pl.mfu == pytest.approx(6 * m.active_params * pl.batch_tokens / (chips * peak * pl.step_s))
    assert pl.tp * pl.pp * pl.dp == chips
    assert pl.tp <= min(sysm.chips, chips // spanned)  # TP stays on the scale-up tier
    assert (
        pl.fits and pl.mem_bytes <= fabric.TRAIN_HBM_USABLE * catalog.ACCELERATORS[sysm.accelerator].hbm_bytes
    )
    assert pl.batch_tokens == pytest.approx(pl.micro_batches * pl.dp * cp.sequence_tokens)
    assert cp.global_batch_tokens <= pl.batch_tokens <= cp.global_batch_tokens_max * (1 + 1e-9)
    # The bubble: (p - 1) / v micro-batch times of compute.
    assert pl.bubble_s == pytest.approx((pl.pp - 1) / pl.vpp * pl.compute_s / pl.micro_batches)
    assert 0 < pl.mfu < m.mfu


def test_memory_decides_what_fits() -> None:
    """405B: 16 B per parameter of training state alone is 6.5 TB: not on 8 H100 (640 GB); on 16,384
    it fits, with the optimiser state sharded over the replicas."""
    m = MODELS["llama-3.1-405b"]
    cp = TrainingParams()
    assert not fabric.plan(m, 6.0, 8, 1, H100.peak("bf16"), m.mfu, HGX, cp).fits
    big = fabric.plan(m, 6.0, 16384, 2048, H100.peak("bf16"), m.mfu, HGX, cp)
    assert big.fits
    # Weights + gradients of a stage's TP shard alone, by hand.
    assert big.mem_bytes >= 405e9 / (big.tp * big.pp) * 4


def test_forward_only_work_moves_no_gradients() -> None:
    m = MODELS["llama-3.1-70b"]
    ev = fabric.plan(m, 2.0, 288, 2, FP8, m.mfu, TRN3, TrainingParams())
    assert ev.dp_s == 0.0 and ev.recompute == 0.0
    assert fabric.job_mfu(None, 6.0, 288, 2, FP8, 0.4, TRN3, TrainingParams()) == 0.4  # no architecture


def test_slower_or_oversubscribed_scale_out_costs_more() -> None:
    m = MODELS["llama-3.1-70b"]
    cp = TrainingParams()
    slow = dataclasses.replace(TRN3, scaleout_bw_bytes_s=TRN3.scaleout_bw_bytes_s / 8)
    fast_mfu = fabric.job_mfu(m, 6.0, 8064, 56, FP8, m.mfu, TRN3, cp)
    assert fabric.job_mfu(m, 6.0, 8064, 56, FP8, m.mfu, slow, cp) < fast_mfu
    # A gang larger than a pod pays the oversubscribed aggregation layer.
    flat = dataclasses.replace(cp, pod_oversubscription=1.0)
    assert fabric.job_mfu(m, 6.0, 8064, 56, FP8, m.mfu, TRN3, flat) >= fast_mfu
    # Spanning two halls costs at least as much as one.
    assert fabric.job_mfu(m, 6.0, 8064, 56, FP8, m.mfu, TRN3, cp, halls=2) <= fast_mfu


def test_young_daly_interval_and_checkpoint_write_by_hand() -> None:
    cp = TrainingParams()
    # 405B: 14 B x 405e9 = 5.67 TB over min(16,384 x 1 GB/s, 2 TB/s) = 2.835 s.
    c = checkpoint.checkpoint_write_s(405e9, 16384, cp)
    assert c == pytest.approx(14 * 405e9 / 2e12)
    # 64 chips: 64 GB/s.
    assert checkpoint.checkpoint_write_s(70e9, 64, cp) == pytest.approx(14 * 70e9 / 64e9)
    # sqrt(2 C M): C = 50 s, M = 1e4 s -> 1,000 s.
    assert checkpoint.young_daly_interval_s(50.0, 1e4) == pytest.approx(1000.0)
    hazard = 2e-5
    m = 3600 / (16384 * hazard)
    assert checkpoint.checkpoint_interval_s(c, 16384, hazard, cp) == round((2 * c * m) ** 0.5)
    # No failures: the longest interval; bounded below.
    assert checkpoint.checkpoint_interval_s(c, 16384, 0.0, cp) == cp.checkpoint_max_interval_s
    assert checkpoint.checkpoint_interval_s(1e-6, 16384, hazard, cp) == cp.checkpoint_min_interval_s


def test_placement_in_the_simulation() -> None:
    """A 144-chip gang beside a 100-chip job: topology placement keeps it in one UltraServer,
    first fit splits it over two; its MFU is its plan's on that placement, lower when split."""
    model = "gpt-oss-120b"
    tr = JobTrace(
        submit_s=np.array([0, 0], dtype=np.int64),
        chips=np.array([100, 144], dtype=np.int64),
        duration_s=np.array([36000.0, 36000.0]),
        work_flop=np.array([np.nan, np.nan]),
        kind=np.array([0, 0], dtype=np.int8),
        priority=np.array([-1, -1], dtype=np.int64),
        model=(model, model),
    )
    tp = TrainingParams(arrivals_per_day=0, trace=tr)
    got = {}
    for placement in ("topology", "first_fit"):
        p = small_params(services=(), training=tp, scheduler=SchedulerParams(placement=placement))
        jobs = Hall(p).advance(3)["jobs"]
        k = int(np.flatnonzero(jobs["chips"] == 144)[0])
        got[placement] = (int(jobs["ultraservers_spanned"][k]), float(jobs["mfu"][k]))
    assert got["topology"][0] == 1 and got["first_fit"][0] == 2
    m = MODELS[model]
    for placement, (spanned, mfu) in got.items():
        assert mfu == pytest.approx(fabric.job_mfu(m, 6.0, 144, spanned, FP8, m.mfu, TRN3, tp)), placement
    assert got["first_fit"][1] < got["topology"][1]


def test_fabric_keys_are_checked() -> None:
    keys = "arrivals_per_day = 40\ntp_overlap = 0.8\nglobal_batch_tokens_max = 8e6\npod_oversubscription = 3"
    s = parse(SMALL_TOML.replace("arrivals_per_day = 40", keys), "f.toml")
    tp = s.to_params().training
    assert (tp.tp_overlap, tp.global_batch_tokens_max, tp.pod_oversubscription) == (0.8, 8e6, 3.0)
    for bad, key in (
        ("tp_overlap = 1.5", "tp_overlap"),
        ("global_batch_tokens = 0", "global_batch_tokens"),
        ("pod_oversubscription = 0.5", "pod_oversubscription"),
        ("sequence_tokens = 0", "sequence_tokens"),
    ):
        with pytest.raises(ScenarioError, match=key):
            parse(SMALL_TOML.replace("arrivals_per_day = 40", f"arrivals_per_day = 40\n{bad}"), "f.toml")
