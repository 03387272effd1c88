"""The fabric behind the MFU: communication time of a batch job's step on its placement.

A gang of G chips over S scale-up domains (UltraServers, NVL72 racks, HGX nodes) of g = G / S
chips each keeps its model sharded inside each domain and trains data-parallel across domains:

* inside a domain (scale-up tier: NeuronLink, NVLink), over the g chips: the parameters a token
  uses (N_active; MoE experts stay on their chips, expert-parallel) are all-gathered for the
  forward and the backward pass and their gradients reduce-scattered (sharded data parallel:
  three collectives of N_active x bytes), and every MoE layer sends each token's hidden state to
  its top-k experts and back (dispatch + combine all-to-alls, forward and backward);
* across domains (scale-out tier: EFA, InfiniBand/Ethernet): each chip all-reduces its 1/g shard
  of all N parameters' gradients with its counterparts in the other S - 1 domains (ring).

Per step (one global batch of ``global_batch_tokens``): compute time t_c = k N_active B / (G peak
MFU), step time = t_c + (1 - overlap) (t_intra + t_cross); the job runs at MFU x t_c / step.
Forward-only work (evaluation, batch inference) keeps its weights resident and moves no
gradients: only the MoE dispatch/combine. Not modelled: pipeline bubbles, tensor parallelism's activation all-reduces
(the catalog MFU is taken to include what a single domain loses besides these collectives),
memory fit, uneven splits (g is the mean). Costs are the alpha-beta costs of the textbook
algorithms (Thakur, Rabenseifner & Gropp 2005): ring all-reduce 2 (p-1)/p S/B + 2 (p-1) alpha;
all-to-all, all-gather and reduce-scatter (p-1)/p S/B + (p-1) alpha. Pure functions.
"""

from __future__ import annotations

from dataclasses import dataclass

from twin.catalog import System
from twin.models import ModelSpec
from twin.params import TrainingParams


def ring_allreduce_s(size_b: float, p: int, bw_b_s: float, alpha_s: float) -> float:
    """Ring all-reduce of ``size_b`` bytes per participant over ``p`` participants, each with
    ``bw_b_s`` bytes/s and ``alpha_s`` per hop [s]: 2 (p-1)/p S/B + 2 (p-1) alpha."""
    if p <= 1 or size_b <= 0:
        return 0.0
    return 2.0 * (p - 1) / p * size_b / bw_b_s + 2.0 * (p - 1) * alpha_s


def all_to_all_s(size_b: float, p: int, bw_b_s: float, alpha_s: float) -> float:
    """All-to-all of ``size_b`` bytes per participant (1/p of it to each peer) [s]:
    (p-1)/p S/B + (p-1) alpha. All-gather and reduce-scatter of ``size_b`` bytes in all cost
    the same."""
    if p <= 1 or size_b <= 0:
        return 0.0
    return (p - 1) / p * size_b / bw_b_s + (p - 1) * alpha_s


@dataclass(frozen=True)
class StepComm:
    """One step of a job on its placement [s]."""

    compute_s: float
    intra_s: float  # scale-up tier
    cross_s: float  # scale-out tier
    overlap: float  # share of communication hidden behind compute [-]

    @property
    def step_s(self) -> float:
        return self.compute_s + (1.0 - self.overlap) * (self.intra_s + self.cross_s)

    @property
    def efficiency(self) -> float:
        """Compute time / step time [-] (1 without exposed communication)."""
        return self.compute_s / self.step_s if self.step_s > 0 else 1.0


def job_mfu(
    model: ModelSpec | None,
    flop_per_param_token: float,
    chips: int,
    spanned: int,
    peak_flop_s: float,
    mfu: float,
    sysm: System,
    cp: TrainingParams,
) -> float:
    """MFU of a job on its placement: ``mfu`` x compute time / step time [-] (``mfu`` unchanged
    for a model without an architecture in the catalog)."""
    if model is None or chips <= 1 or mfu <= 0:
        return mfu
    return mfu * step_comm(model, flop_per_param_token, chips, spanned, peak_flop_s, mfu, sysm, cp).efficiency


def step_comm(
    model: ModelSpec,
    flop_per_param_token: float,
    chips: int,
    spanned: int,
    peak_flop_s: float,
    mfu: float,
    sysm: System,
    cp: TrainingParams,
) -> StepComm:
    """Compute and communication times of one step of a job of ``chips`` chips over ``spanned``
    domains of ``sysm`` at ``mfu`` (the model's MFU without exposed communication)."""
    b = cp.global_batch_tokens
    compute = flop_per_param_token * model.active_params * b / (chips * peak_flop_s * mfu)
    s = max(1, spanned)
    g = chips / s
    gi = max(1, round(g))
    training = flop_per_param_token > 2.0
    up_bw, up_a = sysm.scaleup_bw_bytes_s, sysm.scaleup_latency_s
    # Inside: all-gather for the forward and backward passes, reduce-scatter of the gradients
    # (forward-only work keeps its weights resident).
    gathers = 3 if training else 0
    intra = gathers * all_to_all_s(model.active_params * cp.grad_bytes_per_param, gi, up_bw, up_a)
    if model.moe and model.hidden > 0:
        # Dispatch + combine per MoE layer, forward (and backward for training).
        passes = 2 * (2 if training else 1)
        per_chip = b / chips * model.hidden * cp.activation_bytes * model.experts_active
        intra += passes * model.layers * all_to_all_s(per_chip, gi, up_bw, up_a)
    cross = 0.0
    if training:
        shard = model.params * cp.grad_bytes_per_param / g
        cross = ring_allreduce_s(shard, s, sysm.scaleout_bw_bytes_s, sysm.scaleout_latency_s)
    return StepComm(compute, intra, cross, cp.comm_overlap_fraction)
