"""The parallelism plan behind a batch job's MFU: how its gang splits the model, how long a step
takes on its placement, and what that leaves of the chips' compute efficiency.

A gang of G chips over S scale-up domains (UltraServers, NVL72 racks, HGX nodes) of g = G / S
chips each trains the way practitioners lay out large runs (Megatron-LM: Shoeybi et al. 2019,
Narayanan et al. 2021; Llama 3 405B: TP 8 x PP 16 x DP 128 on 16,384 H100, Llama 3 paper
Table 4):

* tensor parallel (TP, degree t) inside the scale-up domain (t <= g: NeuronLink/NVLink only),
  sequence-parallel: per layer and micro-batch two all-reduces of the micro-batch's activations
  forward and two backward, on the scale-up tier;
* pipeline parallel (PP, p stages, v interleaved chunks per stage) across domains: a micro-batch's
  activations go point-to-point between stages (forward and backward), and the pipeline idles
  (p - 1) / v micro-batch times per step (1F1B interleaved, Narayanan et al. 2021: bubble
  (p - 1) / (v m + p - 1) of the step);
* data parallel (DP, d = G / (t p) replicas) with a distributed optimiser (ZeRO-1, Rajbhandari et
  al. 2020): each chip's 1/(t p) of the gradients is reduced over its d peers hierarchically:
  inside the domain on the scale-up tier, inside a pod at the scale-out rails' full bandwidth,
  across pods at the rails' bandwidth over ``pod_oversubscription``, across halls at the rails'
  bandwidth over ``hall_link_oversubscription`` (each level on the shard the level below left);
* expert parallel (EP, e) for MoE: the routed experts are spread over e data-parallel ranks; every
  MoE layer sends each token's hidden state to its top-k experts and back (dispatch + combine
  all-to-alls, forward and backward), on the scale-up tier when the e x t chips fit in a domain.

The global batch grows with the number of replicas: d x ``replica_batch_tokens`` within
[``global_batch_tokens``, ``global_batch_tokens_max``] (Llama 3 405B: 4 M tokens at the start,
8 M, then 16 M = 128 replicas x 16 sequences of 8,192 tokens; Llama 3 paper §3.4.1, Table 4); a
replica runs m = batch / (d x ``sequence_tokens``) micro-batches of one sequence per step.

A chip holds its share of the weights and gradients (``weight_bytes_per_param`` +
``grad_bytes_per_param`` over t p, experts also over e), of the optimiser state
(``optimizer_bytes_per_param`` over t p d) and the activations of the micro-batches in flight on
the first stage (p of them for L / p layers: L layers of one micro-batch) at 34 s h / t bytes
per layer (Korthikanti et al. 2022, sequence parallel + selective recomputation, BF16); layers
that do not fit are recomputed in full (their input kept, a second forward pass paid). A plan
fits when all that stays within ``TRAIN_HBM_USABLE`` of the chip's HBM.

Step time = (m + (p - 1) / v) x (compute + exposed TP/EP + exposed PP per micro-batch) + exposed
DP. Compute runs at the chip's ``efficiency`` (the kernel-level share of the BF16 peak: the
model's ``mfu``): the linear layers' FLOP (model and recomputation) at the job's precision but
for ``nongemm_time_share`` of their time (norms, activations, optimiser: no faster in FP8),
causal attention (k L h s / 2 per token, PaLM App. B with the mask halving it) at BF16; each collective kind hides behind compute by its own
overlap fraction (DP additionally at most behind one micro-batch). MFU = k N_active batch /
(G peak step). The plan is the feasible candidate (t, p, v, e) with the highest MFU; plans are
cached per (model, system, chips, domains, halls, peak, efficiency, knobs); the shortest step per
token is the highest MFU. Forward-only work
(evaluation, batch inference) keeps its weights resident: TP and MoE traffic only.

Collective costs are ``twin.work.collectives``. Pure functions plus the plan cache.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from twin.spec.catalog import ACCELERATORS, System
from twin.spec.models import ModelSpec
from twin.spec.params import TrainingParams
from twin.work import collectives

# HBM a training plan may fill: the rest is runtime, communication buffers and fragmentation
# (ASM: PyTorch/Neuron runtimes keep a few GB; Megatron users plan for ~90 % of HBM).
TRAIN_HBM_USABLE = 0.9
# Activation bytes per token, layer and hidden unit at 2-byte activations with sequence
# parallelism and selective recomputation: 34 s b h / t (3P: Korthikanti et al. 2022, "Reducing
# Activation Recomputation in Large Transformer Models", Table 2).
ACT_BYTES_SELECTIVE = 34.0 / 2.0  # x activation_bytes
ACT_BYTES_FULL = 1.0  # full recomputation keeps each layer's input only (x activation_bytes)
POW2 = (1, 2, 4, 8, 16, 32, 64, 128)
VIRTUAL = (1, 2, 4, 8)  # interleaved chunks per pipeline stage (Narayanan et al. 2021)


@dataclass(frozen=True)
class Plan:
    """A job's parallelism plan on its placement and the parts of one step [s]."""

    tp: int
    pp: int
    dp: int
    ep: int
    vpp: int  # interleaved chunks per pipeline stage
    batch_tokens: float  # global batch of one step
    micro_batches: float  # per replica and step
    recompute: float  # share of layers recomputed in full [-]
    mem_bytes: float  # per chip (weights, gradients, optimiser state, activations)
    fits: bool  # False: no candidate fits the HBM (the fastest is taken anyway)
    compute_s: float  # busy compute per step (model FLOP + attention + recomputation)
    bubble_s: float  # pipeline fill and drain
    tp_s: float  # exposed TP all-reduces (and MoE all-to-alls)
    pp_s: float  # exposed pipeline point-to-point
    dp_s: float  # exposed data-parallel gradient reduction
    step_s: float
    mfu: float  # model FLOP / (chips x peak x step) [-]


@dataclass(frozen=True)
class Fabric:
    """The network a gang's collectives take beyond its scale-up domains (per chip)."""

    pod_chips: int
    pod_oversubscription: float
    hall_link_oversubscription: float


def fabric_of(cp: TrainingParams) -> Fabric:
    return Fabric(cp.pod_chips, cp.pod_oversubscription, cp.hall_link_oversubscription)


def global_batch_tokens(dp: Any, cp: TrainingParams) -> Any:
    """Tokens per step for ``dp`` data-parallel replicas (a number or an array):
    ``replica_batch_tokens`` each, within [``global_batch_tokens``, ``global_batch_tokens_max``]
    (Llama 3 paper §3.4.1, Table 4)."""
    return np.clip(
        np.multiply(dp, cp.replica_batch_tokens), cp.global_batch_tokens, cp.global_batch_tokens_max
    )


def pipeline_bubble(p: Any, m: Any, v: Any = 1.0) -> Any:
    """Share of a step the pipeline idles (numbers or arrays): (p - 1) / (v m + p - 1)
    (Narayanan et al. 2021)."""
    return np.divide(np.subtract(p, 1.0), np.multiply(v, m) + np.subtract(p, 1.0))


_CACHE: dict[tuple[object, ...], Plan] = {}


def plan(
    model: ModelSpec,
    flop_per_param_token: float,
    chips: int,
    spanned: int,
    peak_flop_s: float,
    efficiency: float,
    sysm: System,
    cp: TrainingParams,
    halls: int = 1,
) -> Plan:
    """The parallelism plan of a gang of ``chips`` over ``spanned`` domains of ``sysm`` (and
    ``halls`` halls) with the shortest step per token among those that fit (cached)."""
    k = (
        model.key, model.params, model.active_params, model.layers, model.hidden, model.experts,
        model.experts_active, sysm.key, sysm.chips, sysm.scaleup_bw_bytes_s, sysm.scaleup_latency_s,
        sysm.scaleout_bw_bytes_s, sysm.scaleout_latency_s, flop_per_param_token, chips, spanned, halls,
        peak_flop_s, efficiency, _knobs(cp),
    )  # fmt: skip
    hit = _CACHE.get(k)
    if hit is None:
        if len(_CACHE) > 4096:
            _CACHE.clear()
        hit = _CACHE[k] = _search(
            model, flop_per_param_token, chips, spanned, peak_flop_s, efficiency, sysm, cp, halls
        )
    return hit


def _knobs(cp: TrainingParams) -> tuple[float, ...]:
    return (
        cp.nongemm_time_share,
        cp.global_batch_tokens, cp.global_batch_tokens_max, cp.replica_batch_tokens, cp.sequence_tokens,
        cp.grad_bytes_per_param, cp.weight_bytes_per_param, cp.optimizer_bytes_per_param, cp.activation_bytes,
        cp.tp_overlap, cp.pp_overlap, cp.dp_overlap, cp.pod_chips, cp.pod_oversubscription,
        cp.hall_link_oversubscription,
    )  # fmt: skip


def _candidates(model: ModelSpec, chips: int, g: int, training: bool) -> npt.NDArray[np.float64]:
    """(t, p, v, e) rows: t a power of two up to the domain, p up to the layers, v interleaved
    chunks (training with p > 1), e a power of two dividing d (MoE)."""
    rows = []
    for t in POW2:
        if t > g or chips % t:
            continue
        for p in POW2:
            if p > model.layers or chips % (t * p):
                continue
            d = chips // (t * p)
            vs = [v for v in VIRTUAL if v == 1 or (training and p > 1 and v * p <= model.layers)]
            es = [e for e in POW2 if e == 1 or (model.moe and e <= model.experts and d % e == 0)]
            rows += [(t, p, v, e) for v in vs for e in es]
    return np.asarray(rows, dtype=np.float64)


def _search(
    model: ModelSpec,
    kf: float,
    chips: int,
    spanned: int,
    peak: float,
    eff: float,
    sysm: System,
    cp: TrainingParams,
    halls: int,
) -> Plan:
    G = float(chips)
    S = max(1, spanned)
    g = max(1, round(chips / S))
    training = kf > 2.0
    c = _candidates(model, chips, g, training)
    t, p, v, e = c[:, 0], c[:, 1], c[:, 2], c[:, 3]
    d = G / (t * p)
    L, s = float(model.layers), float(cp.sequence_tokens)
    h, n_exp, n_sh = _widths(model, L)
    m, batch, ok = _batch(d, s, cp)
    rec, fits, mem = _memory(model, t, p, e, d, m, h, n_exp, n_sh, ok, training, sysm, cp)
    comp_mb = _compute_mb(model, kf, t, p, h, rec, training, peak, eff, sysm, cp)
    tp_mb, pp_mb = _comm_mb(model, t, p, v, e, g, G, h, training, sysm, cp, halls)
    per_mb = comp_mb + (1.0 - cp.tp_overlap) * tp_mb + (1.0 - cp.pp_overlap) * pp_mb
    # The pipeline idles a share of the step: m micro-batch times of work take m / (1 - bubble).
    n_mb = m / (1.0 - pipeline_bubble(p, m, v))  # = m + (p - 1) / v
    pipe = n_mb * per_mb
    if training:
        dp_x = _dp_exposed(t, p, e, d, g, G, n_exp, n_sh, comp_mb, sysm, cp, halls)
    else:
        dp_x = np.zeros_like(t)
    step = pipe + dp_x
    model_flop = kf * model.active_params * batch
    mfu = model_flop / (G * peak * step)
    pick = np.flatnonzero(fits)
    fit = bool(len(pick))
    if not fit:
        pick = np.arange(len(t))
    i = int(pick[np.argmax(mfu[pick])])  # the shortest step per token of the batch
    compute = m[i] * comp_mb[i]
    return Plan(
        tp=int(t[i]),
        pp=int(p[i]),
        dp=int(round(d[i])),
        ep=int(e[i]),
        vpp=int(v[i]),
        batch_tokens=float(batch[i]),
        micro_batches=float(m[i]),
        recompute=float(rec[i]),
        mem_bytes=float(mem[i]),
        fits=fit,
        compute_s=float(compute),
        bubble_s=float((p[i] - 1.0) / v[i] * comp_mb[i]),
        tp_s=float(n_mb[i] * (1.0 - cp.tp_overlap) * tp_mb[i]),
        pp_s=float(n_mb[i] * (1.0 - cp.pp_overlap) * pp_mb[i]),
        dp_s=float(dp_x[i]),
        step_s=float(step[i]),
        mfu=float(mfu[i]),
    )


def _batch(d: npt.NDArray[np.float64], s: float, cp: TrainingParams) -> tuple[Any, Any, Any]:
    """Micro-batches per replica (at least one), the global batch in tokens, and whether each
    replica holds at least one sequence."""
    batch = global_batch_tokens(d, cp)
    m = batch / (d * s)
    ok = d * s <= max(cp.global_batch_tokens_max, s)  # at least one sequence per replica
    m = np.maximum(m, 1.0)
    batch = m * d * s
    return m, batch, ok


def _dp_exposed(
    t: npt.NDArray[np.float64],
    p: npt.NDArray[np.float64],
    e: npt.NDArray[np.float64],
    d: npt.NDArray[np.float64],
    g: int,
    G: float,
    n_exp: float,
    n_sh: float,
    comp_mb: npt.NDArray[np.float64],
    sysm: System,
    cp: TrainingParams,
    halls: int,
) -> npt.NDArray[np.float64]:
    """The gradient reduction time not hidden behind compute, per candidate (training)."""
    # DP: hierarchical reduction of each chip's gradient shard over its d peers.
    out_bw, out_a = _tiers(sysm, cp, G, halls)
    grads = (n_sh / (t * p)) * cp.grad_bytes_per_param
    grads_e = (n_exp / (t * p * e)) * cp.grad_bytes_per_param
    dp_t = _dp_time(grads, d, t, g, G, sysm, cp, halls, out_bw, out_a)
    dp_t = dp_t + _dp_time(grads_e, d / e, t * e, g, G, sysm, cp, halls, out_bw, out_a)
    dp_x: npt.NDArray[np.float64] = np.maximum((1.0 - cp.dp_overlap) * dp_t, dp_t - comp_mb)
    return dp_x


def _widths(model: ModelSpec, L: float) -> tuple[float, float, float]:
    """The model's hidden width, its routed-expert parameters and the shared rest."""
    # Width: the model's, else from N_active ~ 12 L h^2 (DER: Kaplan et al. 2020, no embeddings).
    h = float(model.hidden) if model.hidden > 0 else math.sqrt(model.active_params / (12.0 * L))
    n_act, n_all = model.active_params, model.params
    # MoE: routed-expert parameters (all experts) and the shared rest (DER from total and active).
    if model.moe and model.experts > model.experts_active:
        n_exp = (n_all - n_act) * model.experts / (model.experts - model.experts_active)
    else:
        n_exp = 0.0
    return h, n_exp, n_all - n_exp


def _memory(
    model: ModelSpec,
    t: np.ndarray,
    p: np.ndarray,
    e: np.ndarray,
    d: np.ndarray,
    m: np.ndarray,
    h: float,
    n_exp: float,
    n_sh: float,
    ok: np.ndarray,
    training: bool,
    sysm: System,
    cp: TrainingParams,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per candidate: the recomputed share of the layers, whether it fits, memory per chip."""
    L, s = float(model.layers), float(cp.sequence_tokens)
    params_chip = n_sh / (t * p) + n_exp / (t * p * e)
    if training:
        static = params_chip * (cp.weight_bytes_per_param + cp.grad_bytes_per_param)
        static += model.params / (t * p) / np.maximum(d, 1.0) * cp.optimizer_bytes_per_param
        layer_sel = ACT_BYTES_SELECTIVE * cp.activation_bytes * s * h / t
        layer_full = ACT_BYTES_FULL * cp.activation_bytes * s * h / t
        inflight = np.minimum(p, m) * (L / p)  # layers of one micro-batch held on the first stage
        act_sel, act_full = inflight * layer_sel, inflight * layer_full
    else:
        static = params_chip * cp.weight_bytes_per_param
        act_sel = act_full = np.zeros_like(t)
    hbm = ACCELERATORS[sysm.accelerator].hbm_bytes * TRAIN_HBM_USABLE
    avail = hbm - static
    span = np.maximum(act_sel - act_full, 1e-9)
    rec = np.clip((act_sel - avail) / span, 0.0, 1.0)
    fits = ok & (avail >= act_full)
    mem = static + act_sel - rec * (act_sel - act_full)
    return rec, fits, mem


def _compute_mb(
    model: ModelSpec,
    kf: float,
    t: np.ndarray,
    p: np.ndarray,
    h: float,
    rec: np.ndarray,
    training: bool,
    peak: float,
    eff: float,
    sysm: System,
    cp: TrainingParams,
) -> np.ndarray:
    """Compute time of one micro-batch on one stage, per candidate."""
    # In BF16-equivalent FLOP at the chip's efficiency: the linear layers' FLOP (model +
    # recomputation of the share ``rec`` of the layers: one more forward pass, 2 N per token) run
    # at the job's precision except the non-GEMM share of the time, causal attention
    # (k L h s / 2 per token) at BF16.
    L, s = float(model.layers), float(cp.sequence_tokens)
    n_act = model.active_params
    acc = ACCELERATORS[sysm.accelerator]
    bf16 = acc.peak("bf16") if acc.supports("bf16") else peak
    speed = (1.0 - cp.nongemm_time_share) * bf16 / peak + cp.nongemm_time_share
    linear = (kf * n_act + (2.0 * n_act * rec if training else 0.0)) * speed
    flop_tok = linear + kf * L * h * s / 2.0
    comp_mb: np.ndarray = flop_tok * s / (t * p) / (bf16 * eff)
    return comp_mb


def _comm_mb(
    model: ModelSpec,
    t: np.ndarray,
    p: np.ndarray,
    v: np.ndarray,
    e: np.ndarray,
    g: int,
    G: float,
    h: float,
    training: bool,
    sysm: System,
    cp: TrainingParams,
    halls: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Per candidate: TP (+ EP) and PP communication time of one micro-batch on one stage."""
    L, s = float(model.layers), float(cp.sequence_tokens)
    # TP: two all-reduces of the micro-batch's activations per layer and pass, on the scale-up tier.
    passes = 2.0 if training else 1.0
    tp_mb = (
        2.0
        * passes
        * (L / p)
        * collectives.ring_allreduce_arr(
            np.full_like(t, s * h * cp.activation_bytes), t, sysm.scaleup_bw_bytes_s, sysm.scaleup_latency_s
        )
    )
    # EP: dispatch + combine per MoE layer and pass; on the scale-up tier when e t chips fit a domain.
    out_bw, out_a = _tiers(sysm, cp, G, halls)
    if model.moe:
        inside = e * t <= g
        bw = np.where(inside, sysm.scaleup_bw_bytes_s, out_bw[1])
        al = np.where(inside, sysm.scaleup_latency_s, out_a[1])
        vol = s / t * model.experts_active * h * cp.activation_bytes
        tp_mb = tp_mb + 2.0 * passes * (L / p) * collectives.all_to_all_arr(np.full_like(t, vol), e, bw, al)
    # PP: a micro-batch's activation shard to the next stage (and its gradient back), v times.
    # Stages are outermost: a gang beyond one pod (or hall) passes activations across it.
    pp_bw = out_bw[3] if halls > 1 else (out_bw[2] if G > cp.pod_chips else out_bw[1])
    pp_a = out_a[-1] if halls > 1 else out_a[1]
    pp_mb = np.where(p > 1, passes * v * (s * h * cp.activation_bytes / t / pp_bw + pp_a), 0.0)
    return tp_mb, pp_mb


def _tiers(
    sysm: System, cp: TrainingParams, chips: float, halls: int
) -> tuple[tuple[float, float, float, float], tuple[float, float, float, float]]:
    """Per-chip bandwidth and per-hop latency of (scale-up, scale-out in a pod, across pods,
    across halls)."""
    out = sysm.scaleout_bw_bytes_s
    bw = (sysm.scaleup_bw_bytes_s, out, out / cp.pod_oversubscription, out / cp.hall_link_oversubscription)
    a = sysm.scaleout_latency_s
    return bw, (sysm.scaleup_latency_s, a, a, a)


def _dp_time(
    size: npt.NDArray[np.float64],
    d: npt.NDArray[np.float64],
    inner: npt.NDArray[np.float64],
    g: int,
    G: float,
    sysm: System,
    cp: TrainingParams,
    halls: int,
    bw: tuple[float, float, float, float],
    alpha: tuple[float, float, float, float],
) -> npt.NDArray[np.float64]:
    """Hierarchical all-reduce of ``size`` bytes per chip over ``d`` peers spaced ``inner`` chips
    apart (TP innermost, then DP, PP outermost): peers inside a domain, inside a pod, inside a
    hall, then across halls, each level on the shard the level below left."""
    d = np.maximum(d, 1.0)
    n0 = np.clip(np.floor(g / inner), 1.0, d)
    hall = G / max(1, halls)  # the gang's chips in each hall
    pod = max(1.0, min(float(cp.pod_chips), hall))
    in_pod = np.clip(np.floor(pod / inner), 1.0, d)
    n1 = np.maximum(in_pod / n0, 1.0)
    in_hall = np.clip(np.floor(hall / inner), 1.0, d)
    n2 = np.maximum(in_hall / (n0 * n1), 1.0)
    n3 = np.maximum(d / (n0 * n1 * n2), 1.0)
    out = collectives.ring_allreduce_arr(size, n0, bw[0], alpha[0])
    out = out + collectives.ring_allreduce_arr(size / n0, n1, bw[1], alpha[1])
    out = out + collectives.ring_allreduce_arr(size / (n0 * n1), n2, bw[2], alpha[2])
    out = out + collectives.ring_allreduce_arr(size / (n0 * n1 * n2), n3, bw[3], alpha[3])
    return out


def job_mfu(
    model: ModelSpec | None,
    flop_per_param_token: float,
    chips: int,
    spanned: int,
    peak_flop_s: float,
    mfu: float,
    sysm: System,
    cp: TrainingParams,
    halls: int = 1,
) -> float:
    """MFU of a job on its placement from its plan (``mfu``: the chips' compute efficiency,
    returned unchanged for a model without an architecture in the catalog)."""
    if model is None or mfu <= 0:
        return mfu
    return plan(model, flop_per_param_token, chips, spanned, peak_flop_s, mfu, sysm, cp, halls).mfu
