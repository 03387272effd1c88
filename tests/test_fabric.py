"""The fabric behind the MFU (``twin.fabric``): collective costs and placements against hand formulas."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from scenarios.spec import ScenarioError, parse
from tests.conftest import SMALL_TOML, small_params
from twin import catalog, fabric
from twin.hall import Hall
from twin.models import MODELS
from twin.params import JobTrace, SchedulerParams, TrainingParams

TRN3 = catalog.SYSTEMS["trn3-gen2"]
FP8 = catalog.ACCELERATORS["trainium3"].peak("fp8")


def test_ring_allreduce_by_hand() -> None:
    # 1 GB over 4 participants at 25 GB/s, 15 us per hop: 2 * 3/4 * 0.04 s + 2 * 3 * 15 us.
    assert fabric.ring_allreduce_s(1e9, 4, 25e9, 15e-6) == pytest.approx(0.06 + 90e-6)
    # Two participants exchange half each way: 2 * 1/2 * S/B + 2 alpha.
    assert fabric.ring_allreduce_s(2e9, 2, 1e12, 1e-6) == pytest.approx(2e-3 + 2e-6)
    assert fabric.ring_allreduce_s(1e9, 1, 25e9, 15e-6) == 0.0
    # The bandwidth term tends to 2 S/B as p grows.
    assert fabric.ring_allreduce_s(1e9, 10_000, 1e9, 0.0) == pytest.approx(2.0, rel=1e-3)


def test_all_to_all_by_hand() -> None:
    # 640 MB per chip among 144 chips at 2 TB/s, 2 us: 143/144 * 0.32 ms + 143 * 2 us.
    assert fabric.all_to_all_s(640e6, 144, 2e12, 2e-6) == pytest.approx(143 / 144 * 320e-6 + 286e-6)
    assert fabric.all_to_all_s(1e9, 8, 1e9, 0.0) == pytest.approx(7 / 8)
    assert fabric.all_to_all_s(1e9, 1, 1e9, 1.0) == 0.0


def _hand_step(
    model: str, chips: int, spanned: int, sysm: catalog.System, tp: TrainingParams
) -> tuple[float, float, float]:
    """Compute, intra and cross seconds of one training step, written out from the formulas."""
    m = MODELS[model]
    b = tp.global_batch_tokens
    compute = 6 * m.active_params * b / (chips * FP8 * m.mfu)
    g = chips / spanned
    p_in = round(g)
    up, a_up = sysm.scaleup_bw_bytes_s, sysm.scaleup_latency_s
    intra = 3 * ((p_in - 1) / p_in * m.active_params * 2 / up + (p_in - 1) * a_up) if p_in > 1 else 0.0
    if m.experts:
        msg = b / chips * m.hidden * 2 * m.experts_active
        intra += 4 * m.layers * ((p_in - 1) / p_in * msg / up + (p_in - 1) * a_up)
    shard = m.params * 2 / g
    out, a_out = sysm.scaleout_bw_bytes_s, sysm.scaleout_latency_s
    cross = 2 * (spanned - 1) / spanned * shard / out + 2 * (spanned - 1) * a_out if spanned > 1 else 0.0
    return compute, intra, cross


@pytest.mark.parametrize("model", ["llama-3.1-70b", "gpt-oss-120b"])
def test_a_gang_split_over_three_ultraservers_runs_slower_by_its_communication(model: str) -> None:
    tp = TrainingParams()
    m = MODELS[model]
    one = fabric.step_comm(m, 6.0, 36, 1, FP8, m.mfu, TRN3, tp)
    three = fabric.step_comm(m, 6.0, 36, 3, FP8, m.mfu, TRN3, tp)
    for got, spanned in ((one, 1), (three, 3)):
        c, i, x = _hand_step(model, 36, spanned, TRN3, tp)
        assert got.compute_s == pytest.approx(c)
        assert got.intra_s == pytest.approx(i)
        assert got.cross_s == pytest.approx(x)
    # Same compute; the split adds the exposed EFA all-reduce (and shrinks the NeuronLink groups).
    slowdown = three.step_s - one.step_s
    _, i1, _ = _hand_step(model, 36, 1, TRN3, tp)
    c3, i3, x3 = _hand_step(model, 36, 3, TRN3, tp)
    assert slowdown == pytest.approx(0.5 * (i3 + x3) - 0.5 * i1)
    assert slowdown > 0
    assert fabric.job_mfu(m, 6.0, 36, 3, FP8, m.mfu, TRN3, tp) == pytest.approx(
        m.mfu * c3 / (c3 + 0.5 * (i3 + x3))
    )


def test_overlap_hides_communication_and_forward_only_work_moves_no_gradients() -> None:
    m = MODELS["llama-3.1-70b"]
    hidden = TrainingParams(comm_overlap_fraction=1.0)
    assert fabric.job_mfu(m, 6.0, 288, 2, FP8, 0.4, TRN3, hidden) == pytest.approx(0.4)
    ev = fabric.step_comm(m, 2.0, 288, 2, FP8, 0.4, TRN3, TrainingParams())
    assert ev.intra_s == 0.0 and ev.cross_s == 0.0  # dense, forward-only: weights resident
    assert fabric.job_mfu(None, 6.0, 288, 2, FP8, 0.4, TRN3, TrainingParams()) == 0.4  # no architecture
    assert fabric.job_mfu(m, 6.0, 1, 1, FP8, 0.4, TRN3, TrainingParams()) == 0.4


def test_slower_scale_out_costs_more() -> None:
    m = MODELS["llama-3.1-405b"]
    slow = dataclasses.replace(TRN3, scaleout_bw_bytes_s=TRN3.scaleout_bw_bytes_s / 4)
    tp = TrainingParams()
    assert fabric.job_mfu(m, 6.0, 288, 2, FP8, 0.4, slow, tp) < fabric.job_mfu(
        m, 6.0, 288, 2, FP8, 0.4, TRN3, tp
    )


def test_placement_in_the_simulation() -> None:
    """A 144-chip gang beside a 100-chip job: topology placement keeps it in one UltraServer,
    first fit splits it over two; its MFU drops by the computed communication."""
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
        c, i, x = _hand_step(model, 144, spanned, TRN3, tp)
        assert mfu == pytest.approx(m.mfu * c / (c + 0.5 * (i + x))), placement
    assert got["first_fit"][1] < got["topology"][1]


def test_fabric_keys_are_checked() -> None:
    keys = "arrivals_per_day = 40\ncomm_overlap_fraction = 0.8\nglobal_batch_tokens = 8e6"
    s = parse(SMALL_TOML.replace("arrivals_per_day = 40", keys), "f.toml")
    assert s.to_params().training.comm_overlap_fraction == 0.8
    with pytest.raises(ScenarioError, match="comm_overlap_fraction"):
        parse(
            SMALL_TOML.replace("arrivals_per_day = 40", "arrivals_per_day = 40\ncomm_overlap_fraction = 1.5"),
            "f.toml",
        )
    with pytest.raises(ScenarioError, match="global_batch_tokens"):
        parse(
            SMALL_TOML.replace("arrivals_per_day = 40", "arrivals_per_day = 40\nglobal_batch_tokens = 0"),
            "f.toml",
        )
