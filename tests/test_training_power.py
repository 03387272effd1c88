"""A training gang's power follows its plan: busy compute at ``training.compute_activity``, the
pipeline bubble and exposed communication waiting near idle at ``COMM_ACTIVITY``
(3P: Choukse et al., arXiv 2508.14318, 2025: production DGX-H100 training swings from near TDP
in compute to near idle in communication)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import small_params
from twin.compose import grid
from twin.compose.hall import Hall
from twin.physics import power
from twin.spec import catalog
from twin.spec.models import MODELS
from twin.spec.params import COMM_ACTIVITY, FailureParams, TrainingParams
from twin.work import fabric, queueing
from twin.work.jobs import PRETRAIN, RESTART_ACTIVITY

TRN3 = catalog.SYSTEMS["trn3-gen2"]
TRAINIUM3 = catalog.ACCELERATORS["trainium3"]
FP8 = TRAINIUM3.peak_flops["fp8"]


def _hand_activity(pl: fabric.Plan, a_compute: float) -> tuple[float, float]:
    """(duty, mean activity) from the plan's parts: the step is busy compute, the pipeline
    bubble and the exposed TP, PP and DP communication."""
    duty = pl.compute_s / (pl.compute_s + pl.bubble_s + pl.tp_s + pl.pp_s + pl.dp_s)
    return duty, duty * a_compute + (1.0 - duty) * COMM_ACTIVITY


def _plan(model: str, chips: int) -> fabric.Plan:
    m = MODELS[model]
    return fabric.plan(m, 6.0, chips, -(-chips // TRN3.chips), FP8, m.mfu, TRN3, TrainingParams())


def test_a_gangs_activity_is_its_plans_duty_weighted_levels_from_start_to_restart() -> None:
    p = small_params(
        ultraservers=2,
        failures=FailureParams(chip_hazard_per_h=0.0),
        training=TrainingParams(arrivals_per_day=0.0, checkpoint_bytes_per_param=0.0),
        services=(),
    )
    sim = Hall(p)
    a = sim.jobs.a
    j = sim.jobs.add(
        "llama-3.1-70b",
        "fp8",
        kind=PRETRAIN,
        chips=144,
        params=70e9,
        work=1e30,
        submit=0,
        queued_since=0,
        est=86400,
        nominal=86400,
        ckpt_every=1800,
        preemptible=True,
    )
    sim.pool.cluster._enqueue(j)
    sim.advance(2)
    m = MODELS["llama-3.1-70b"]
    pl = fabric.plan(m, 6.0, 144, int(a["spanned"][j]), FP8, float(a["mfu_base"][j]), TRN3, p.training)
    duty, mean = _hand_activity(pl, p.training.compute_activity)
    assert 0.9 < duty < 0.999  # exposed TP all-reduces: the gang waits a few % of its step
    assert a["activity"][j] == pytest.approx(mean, rel=1e-12)
    assert a["activity"][j] < p.training.compute_activity
    # Interrupted, it reloads at the restart activity, then trains at its plan's mean again.
    first = sim.pool.cluster.placement[j].tolist()
    sim.inject("fail_server", str(first[0] // (TRN3.chips // TRN3.servers)), duration_s=86400)
    sim.advance(1)
    assert a["activity"][j] == RESTART_ACTIVITY
    sim.advance(p.training.restart_cost_s // p.dt_s + 1)
    assert a["spanned"][j] == 1 and a["activity"][j] == pytest.approx(mean, rel=1e-12)


def test_a_communication_heavy_gang_draws_less_per_chip_by_its_waiting_share() -> None:
    cp = TrainingParams()
    heavy = _plan("gpt-oss-120b", 16384)  # MoE, 114 UltraServers: all-to-alls and DP over the rails
    light = _plan("llama-3.1-70b", 144)  # one UltraServer: TP inside the switch domain
    d_h, a_h = _hand_activity(heavy, cp.compute_activity)
    d_l, a_l = _hand_activity(light, cp.compute_activity)
    assert d_h < 0.6 < 0.9 < d_l
    assert queueing.training_activity(heavy, cp.compute_activity) == pytest.approx(a_h, rel=1e-12)
    assert queueing.training_activity(light, cp.compute_activity) == pytest.approx(a_l, rel=1e-12)
    # Per chip at full clock: P = idle + (TDP - idle) a, so the difference is (TDP - idle) x
    # (compute - wait activity) x (duty difference).
    dyn = TRAINIUM3.tdp_w - TRAINIUM3.idle_w
    acts = np.array([queueing.training_activity(pl, cp.compute_activity) for pl in (light, heavy)])
    w = power.chip_power_w(dyn * acts, TRAINIUM3.idle_w, np.ones(2), 2.0, np.ones(2, dtype=bool))
    expected = dyn * (cp.compute_activity - COMM_ACTIVITY) * (d_l - d_h)
    assert w[0] - w[1] == pytest.approx(expected, rel=1e-9)
    assert expected > 0.3 * dyn  # a few hundred watts per chip


def test_the_waveform_runs_at_the_physical_levels_of_a_planned_gang() -> None:
    # A gang whose mean comes from its plan swings between the compute and the wait activity
    # (not levels stretched to keep a fixed mean), and keeps its step's energy.
    cp = TrainingParams()
    pl = _plan("gpt-oss-120b", 16384)
    duty, mean = _hand_activity(pl, cp.compute_activity)
    hi, lo = grid.phase_activities(np.array([mean]), np.array([duty]), cp.compute_activity)
    assert hi[0] == cp.compute_activity and lo[0] == COMM_ACTIVITY
    assert duty * hi[0] + (1 - duty) * lo[0] == pytest.approx(mean, rel=1e-12)
    # Any other mean keeps the fallback: communication at COMM_ACTIVITY, compute what keeps it.
    hi, lo = grid.phase_activities(np.array([0.5]), np.array([0.8]), cp.compute_activity)
    assert lo[0] == COMM_ACTIVITY and hi[0] == pytest.approx((0.5 - 0.2 * COMM_ACTIVITY) / 0.8)
