"""The inference roofline and the request-latency model: one serving replica's weights, KV
cache, batch and step time (facts §9.5), the prefill and decode shares of a request, and the
queueing wait. Pure functions of their arguments (NumPy only, no state, no I/O).

A decode step streams the weights once (or is compute-bound at large batch), then every resident
sequence's KV cache, and pays the tensor-parallel collectives of its layers; prefill is
compute-bound. The batch is what the KV cache and the TPOT SLO allow; a request takes its prefill
plus its share of the decode steps (``Roofline``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from twin.spec.catalog import Accelerator, System
from twin.spec.params import ServiceParams
from twin.work import collectives

FloatArray = npt.NDArray[np.float64]

# Bytes per weight of each number format, block scales included. DER: FP8/BF16/FP32 carry one
# scale per tensor (negligible). MX formats (OCP Microscaling spec v1.0, 2023): one 8-bit E8M0
# scale per block of 32 elements, +1/32 B; NVFP4 (NVIDIA, Blackwell): one FP8 E4M3 scale per
# block of 16 elements, +1/16 B (plus one FP32 scale per tensor, negligible). "fp4" is taken as
# NVFP4 on every chip (Trainium3 stores MXFP4, 6 % smaller: give ``mxfp4``).
WEIGHT_BYTES: dict[str, float] = {
    "fp32": 4.0,
    "tf32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "fp8_e4m3": 1.0,
    "mxfp8": 1.0 + 1.0 / 32.0,
    "fp4": 0.5 + 1.0 / 16.0,
    "mxfp4": 0.5 + 1.0 / 32.0,
}

# Share of HBM the serving engine may fill with weights, activations and KV cache; the rest is
# the runtime's (3P: vLLM's default gpu_memory_utilization = 0.9; activations of the largest
# prefill chunk are profiled inside it and are small next to the KV cache, ASM).
HBM_USABLE = 0.9


def weight_bytes_per_param(s: ServiceParams) -> float:
    """Bytes per weight: the service's own, or the native size of its precision."""
    if s.weight_bytes_per_param > 0:
        return s.weight_bytes_per_param
    return WEIGHT_BYTES[s.precision.lower()]


def model_width(s: ServiceParams) -> float:
    """Hidden size d: the service's, or DER from a dense transformer's N ~ 12 L d^2."""
    if s.hidden > 0:
        return float(s.hidden)
    return math.sqrt(s.params / (12.0 * s.layers))


def tp_allreduce_s(size_b: float, p: int, bw_b_s: float, alpha_s: float) -> float:
    """All-reduce of ``size_b`` bytes over ``p`` chips of a switched scale-up fabric [s]: the
    cheaper of the ring (2 (p-1) alpha) and Rabenseifner's recursive halving/doubling
    (2 log2 p alpha), both moving 2 (p-1)/p S/B (Thakur, Rabenseifner & Gropp 2005; MPI
    libraries pick by message size). Decode's messages are small, so its all-reduces cost
    latency."""
    if p <= 1 or size_b <= 0:
        return 0.0
    hops = min(p - 1, math.ceil(math.log2(p)))
    return 2.0 * (p - 1) / p * size_b / bw_b_s + 2.0 * hops * alpha_s


@dataclass(frozen=True)
class Roofline:
    """Per-replica serving capacity from the roofline.

    A replica of C chips keeps its model tensor-parallel over the chips of one scale-up domain
    (TP = C, or C / D over D domains joined as pipeline stages over the scale-out tier); MoE
    experts are spread over the same chips (expert-parallel). A decode step of n resident
    sequences takes max(weights / bandwidth, compute) + KV cache / bandwidth + exposed
    communication (roofline per kernel: the weight matrices' products stream the weights or are
    compute-bound, attention streams the KV cache, one after the other):

    * bandwidth: C x HBM bandwidth x efficiency (KV heads fewer than TP are replicated: each
      chip reads the heads its query heads need);
    * compute: 2 N_active per token at peak(precision) x MFU;
    * communication (``comm_s``): per layer, two all-reduces of the step's activations
      (attention and MLP outputs; an MoE layer: one, plus the dispatch and combine
      all-to-alls), alpha-beta costs on the scale-up tier (``tp_allreduce_s``,
      ``twin.work.collectives.all_to_all_s``), plus the pipeline hops over the scale-out tier. Exposed:
      each collective sits between dependent matrix products (ASM: no overlap).

    Prefill of P tokens: max(2 N_active P / compute, weights / bandwidth) + the same collectives
    on P tokens (attention's own FLOP, < 5 % below 4 K tokens, not counted).

    The batch is the largest the KV cache and the TPOT SLO allow (and ``batch_max`` when set).
    With continuous batching (chunked prefill interleaved with decode), a token's time is the
    step plus the prefills of the n / output_tokens requests admitted per step:
    TPOT(n) = step(n) + n prefill / output_tokens; the SLO batch is the largest n with
    TPOT(n) <= ``tpot_slo_s`` (the mean; chunking spreads the prefills evenly, ASM).
    Per-request replica time = prefill + output_tokens x step(n) / n; capacity is its inverse.
    Disaggregated (``prefill_replica_share`` s > 0): prefill replicas prefill only, decode
    replicas decode only (TPOT = step); the pool serves min(s / prefill, (1 - s) / decode share).
    """

    batch: int  # concurrent sequences, limited by KV-cache space, the TPOT SLO and batch_max
    decode_step_s: float  # time of one decode step at that batch
    decode_tokens_per_s: float  # batch / step
    prefill_s: float  # time to prefill one mean request
    requests_per_s: float  # sustained request capacity (per replica of the service's pool)
    kv_bytes_per_token: float
    weight_bytes: float
    prefill_share: float  # share of replica time spent in prefill at capacity
    bw_bytes_s: float = 0.0  # effective HBM bandwidth of the replica
    compute_flop_s: float = 0.0  # peak x prefill MFU of the replica
    seq_tokens: float = 0.0  # mean resident tokens per sequence while decoding
    active_params: float = 0.0
    kv_capacity_tokens: float = 0.0  # HBM left for KV cache, in tokens (replicas counted once)
    batch_kv: int = 0  # largest batch the KV cache holds
    batch_slo: int = 0  # largest batch meeting the TPOT SLO
    kv_replication: float = 1.0  # copies of each KV head held (TP above the KV heads)
    # Communication per step: fixed (latency) and per resident sequence [s].
    comm_fixed_s: float = 0.0
    comm_per_seq_s: float = 0.0
    # Prefill communication: fixed and per prompt token [s].
    prefill_comm_fixed_s: float = 0.0
    prefill_comm_per_token_s: float = 0.0
    prefill_replica_share: float = 0.0  # disaggregated: share of replicas prefilling only
    kv_transfer_s_per_token: float = 0.0  # disaggregated: KV hand-over per prompt token [s]
    prompt_tokens: float = 0.0  # mean prompt
    output_tokens: float = 0.0  # mean output

    def comm_s(self, n: float | FloatArray) -> float | FloatArray:
        """Exposed communication of a decode step with ``n`` resident sequences [s]."""
        return self.comm_fixed_s + n * self.comm_per_seq_s

    def step_s(self, n: float) -> float:
        """Decode step time with ``n`` resident sequences: the weight matrices' products at the
        slower of streaming the weights and 2·N_active per token of compute, then attention
        streaming every sequence's KV cache (separate kernels: their times add), plus the
        exposed communication."""
        kv = n * self.seq_tokens * self.kv_bytes_per_token * self.kv_replication / self.bw_bytes_s
        gemm = max(self.weight_bytes / self.bw_bytes_s, 2.0 * self.active_params * n / self.compute_flop_s)
        return float(gemm + kv + self.comm_s(n))

    def requests_per_s_at(self, clock: FloatArray) -> FloatArray:
        """Capacity at core clocks ``clock`` (1 = full, e.g. under a power cap): the compute-
        bound work (prefill, and the decode step's matrix products where compute-bound) slows
        with the clock; HBM streaming and the collectives' latency do not (ASM: memory and
        fabric clocks are not scaled by the cores' DVFS)."""
        f = np.asarray(clock, dtype=np.float64)
        n = float(self.batch)
        per_token = 2.0 * self.active_params / (self.compute_flop_s * f)
        w = self.weight_bytes / self.bw_bytes_s
        kv = n * self.seq_tokens * self.kv_bytes_per_token * self.kv_replication / self.bw_bytes_s
        step = np.maximum(w, n * per_token) + kv + self.comm_s(n)
        prefill = (
            np.maximum(self.prompt_tokens * per_token, w)
            + self.prefill_comm_fixed_s
            + self.prompt_tokens * self.prefill_comm_per_token_s
        )
        decode = self.output_tokens * step / n
        s = self.prefill_replica_share
        if s > 0:
            return np.asarray(np.minimum(s / prefill, (1.0 - s) / decode), dtype=np.float64)
        return np.asarray(1.0 / (prefill + decode), dtype=np.float64)

    def prefill_time_s(self, tokens: FloatArray) -> FloatArray:
        """Prefill time of prompts of ``tokens`` tokens [s]."""
        t = np.asarray(tokens, dtype=np.float64)
        compute = 2.0 * self.active_params * t / self.compute_flop_s
        weights = self.weight_bytes / self.bw_bytes_s
        comm = self.prefill_comm_fixed_s + t * self.prefill_comm_per_token_s
        return np.asarray(np.maximum(compute, weights) + comm, dtype=np.float64)

    def lines(self) -> tuple[tuple[float, float], tuple[float, float]]:
        """The decode step as the larger of two lines in n, (intercept, slope) each: weight-
        streaming-bound and compute-bound matrix products, KV streaming and communication
        included in both."""
        kv = self.seq_tokens * self.kv_bytes_per_token * self.kv_replication / self.bw_bytes_s
        comp = 2.0 * self.active_params / self.compute_flop_s
        w = self.weight_bytes / self.bw_bytes_s
        return (
            (w + self.comm_fixed_s, kv + self.comm_per_seq_s),
            (self.comm_fixed_s, comp + kv + self.comm_per_seq_s),
        )


def kv_bytes_per_token(s: ServiceParams) -> float:
    """KV-cache bytes per token = 2 · layers · KV heads · head dim · bytes (facts §13)."""
    return 2.0 * s.layers * s.kv_heads * s.head_dim * s.kv_bytes_per_elem


def roofline(s: ServiceParams, acc: Accelerator, sysm: System) -> Roofline:
    """Serving capacity of one replica of service ``s`` on chips ``acc`` in systems ``sysm``."""
    chips = s.chips_per_replica
    weight_bytes = s.params * weight_bytes_per_param(s)
    kv_tok = kv_bytes_per_token(s)
    seq_tokens = s.context_tokens + s.output_tokens / 2.0  # mean resident length while decoding
    hbm = chips * acc.hbm_bytes * HBM_USABLE
    stages, tp, rep, batch_kv = _layout(s, acc, sysm, hbm, weight_bytes, kv_tok, seq_tokens)
    eff = s.bw_efficiency if s.bw_efficiency > 0 else acc.hbm_efficiency
    bw = chips * acc.hbm_bw_bytes_s * eff
    compute = chips * acc.peak(s.precision) * s.prefill_mfu
    c0, c1 = _comm_affine(s, sysm, tp, stages)
    share = s.prefill_replica_share
    base = Roofline(
        batch=1,
        decode_step_s=0.0,
        decode_tokens_per_s=0.0,
        prefill_s=0.0,
        requests_per_s=0.0,
        kv_bytes_per_token=kv_tok,
        weight_bytes=weight_bytes,
        prefill_share=0.0,
        bw_bytes_s=bw,
        compute_flop_s=compute,
        seq_tokens=seq_tokens,
        active_params=s.active_params,
        kv_capacity_tokens=(hbm - weight_bytes) / (kv_tok * rep),
        batch_kv=batch_kv,
        kv_replication=rep,
        comm_fixed_s=c0,
        comm_per_seq_s=c1,
        prefill_comm_fixed_s=c0,
        prefill_comm_per_token_s=c1,
        prefill_replica_share=share,
        kv_transfer_s_per_token=kv_tok / (chips * _kv_link_bw(sysm, chips)),
        prompt_tokens=s.context_tokens,
        output_tokens=s.output_tokens,
    )
    prefill = float(base.prefill_time_s(np.array([s.context_tokens]))[0])
    batch_slo, batch = _batch(s, base, batch_kv, share, prefill)
    step = base.step_s(batch)
    decode_share = s.output_tokens * step / batch  # replica-seconds of decode per request
    if share > 0:
        requests = min(share / prefill, (1.0 - share) / decode_share)
        f_p = share
    else:
        requests = 1.0 / (prefill + decode_share)
        f_p = prefill * requests
    return replace(
        base,
        batch=batch,
        decode_step_s=step,
        decode_tokens_per_s=batch / step,
        prefill_s=prefill,
        requests_per_s=requests,
        prefill_share=f_p,
        batch_slo=batch_slo,
    )


def _layout(
    s: ServiceParams,
    acc: Accelerator,
    sysm: System,
    hbm: float,
    weight_bytes: float,
    kv_tok: float,
    seq_tokens: float,
) -> tuple[int, int, float, int]:
    """Pipeline stages, TP width, KV replication and the sequences whose KV cache fits."""
    chips = s.chips_per_replica
    if weight_bytes >= hbm:
        raise ValueError(
            f"service {s.name!r}: weights ({weight_bytes / 1e9:.0f} GB) do not fit in "
            f"{chips} x {acc.name} HBM ({hbm / 1e9:.0f} GB usable)"
        )
    # Parallel layout: tensor-parallel inside a scale-up domain, pipeline stages across domains.
    stages = max(1, -(-chips // sysm.chips))
    tp = max(1, chips // stages)
    rep = tp / min(tp, s.kv_heads)  # each chip holds the KV heads its query heads read
    seq_bytes = seq_tokens * kv_tok * rep
    batch_kv = int((hbm - weight_bytes) // seq_bytes)
    if batch_kv < 1:
        raise ValueError(
            f"service {s.name!r}: the KV cache of one {seq_tokens:,.0f}-token sequence "
            f"({seq_bytes / 1e9:.0f} GB) does not fit beside the weights in {chips} x {acc.name} HBM "
            f"({(hbm - weight_bytes) / 1e9:.0f} GB left)"
        )
    return stages, tp, rep, batch_kv


def _kv_link_bw(sysm: System, chips: int) -> float:
    """Per-chip bandwidth that carries a prefilled KV cache to a decode replica: the scale-up
    tier when both replicas fit one domain, else scale-out."""
    return sysm.scaleup_bw_bytes_s if 2 * chips <= sysm.chips else sysm.scaleout_bw_bytes_s


def _comm_affine(s: ServiceParams, sysm: System, tp: int, stages: int) -> tuple[float, float]:
    """Communication time of a step as fixed part and slope per token."""
    # Communication per token of a step: activations of width d, all-reduced over TP twice per
    # dense layer; an MoE layer all-reduces once and sends each token to its top-k experts and
    # back (dispatch + combine, as ``twin.work.fabric``); pipeline hops carry the activations.
    d = model_width(s)
    act = d * s.activation_bytes  # bytes per token
    up_bw, up_a = sysm.scaleup_bw_bytes_s, sysm.scaleup_latency_s
    out_bw, out_a = sysm.scaleout_bw_bytes_s, sysm.scaleout_latency_s
    moe = s.experts > 0
    ar_per_layer = 1 if moe else 2

    def comm(tokens: float) -> float:
        t = ar_per_layer * s.layers * tp_allreduce_s(tokens * act, tp, up_bw, up_a)
        if moe:
            per_chip = tokens / tp * act * max(s.experts_active, 1)
            t += 2 * s.layers * collectives.all_to_all_s(per_chip, tp, up_bw, up_a)
        if stages > 1:
            t += (stages - 1) * (tokens * act / tp / out_bw + out_a)
        return t

    # Alpha-beta costs are affine in the message size (for any message): fixed part and slope.
    c1 = comm(2.0) - comm(1.0)
    c0 = comm(1.0) - c1
    return c0, c1


def _batch(s: ServiceParams, base: Roofline, batch_kv: int, share: float, prefill: float) -> tuple[int, int]:
    """The largest batch the TPOT SLO allows, and the batch a replica runs."""
    # TPOT SLO: step(n) + n x prefill / output <= SLO on each line of the step (colocated);
    # step(n) <= SLO when decode replicas do not prefill.
    stall = 0.0 if share > 0 else prefill / max(s.output_tokens, 1.0)
    batch_slo = min((s.tpot_slo_s - b) / (m + stall) if m + stall > 0 else math.inf for b, m in base.lines())
    batch_slo = int(min(batch_slo, 1e9)) if batch_slo > 0 else 0
    batch = min(batch_kv, batch_slo)
    if s.batch_max > 0:
        batch = min(batch, s.batch_max)
    return batch_slo, max(batch, 1)


def decode_occupancy(roof: Roofline, rate_per_replica: float, output_tokens: float) -> tuple[float, float]:
    """Resident sequences per decoding replica and the prefill time share at a served request
    rate (per replica of the pool).

    Little's law: n = tokens/s x step(n) / (1 - f_p), where a replica spends f_p = rate x
    prefill of its time prefilling (disaggregated: decode replicas do not prefill; they take the
    pool's rate / (1 - s)). The step is the larger of two lines in n (``Roofline.lines``), so
    the fixed point is the larger of the two lines' own, solved exactly; at or beyond capacity n
    is the roofline batch. Returns (n, f_p)."""
    if rate_per_replica <= 0:
        return 0.0, 0.0
    share = roof.prefill_replica_share
    f_p = min(rate_per_replica * roof.prefill_s, 0.999)  # of the pool's replica time
    # Sequences per second of decode time on a decoding replica.
    k = rate_per_replica * output_tokens / ((1.0 - share) if share > 0 else (1.0 - f_p))
    n = 0.0
    for b, m in roof.lines():
        if k * m >= 1.0:
            return float(roof.batch), f_p
        n = max(n, k * b / (1.0 - k * m))
    return min(n, float(roof.batch)), f_p


def queue_wait_s(tail: FloatArray, rho: float, service_s: float) -> FloatArray:
    """Waiting time at tail probabilities ``tail`` = P(W > t) (1 - u at probabilities u) for a
    replica as an M/M/1 queue at utilisation ``rho`` with mean service ``service_s``:
    P(W > t) = rho · exp(-(1 - rho) t / service_s)."""
    if rho <= 0:
        return np.zeros_like(tail)
    w: FloatArray = rho / tail
    np.maximum(w, 1.0, out=w)
    np.log(w, out=w)
    w *= service_s / (1.0 - rho)
    return w
