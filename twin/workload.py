"""Workload formulas: batch-job generation, arrival shapes, token lengths, the inference roofline
and the request-latency model. Pure functions of their arguments (NumPy only, no state, no I/O).

Training work is k·N·D FLOP (k = 6 for training, 2 for forward-only work; N active parameters;
Kaplan et al. 2020); a gang progresses at chips · peak(precision) · MFU. Online inference capacity
comes from a decode memory-bandwidth roofline: each decode step streams the weights once plus every
resident sequence's KV cache; prefill is compute-bound (facts §9.5).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from twin.catalog import ACCELERATORS, SYSTEMS, Accelerator
from twin.models import DENSE_MFU, ModelSpec
from twin.params import JobClassParams, ServiceParams

DAY_S = 86400
WEEK_S = 7 * DAY_S
FloatArray = npt.NDArray[np.float64]

# FLOP per parameter per token: forward + backward for training, forward only otherwise.
FLOP_PER_PARAM_TOKEN = {"pretrain": 6.0, "finetune": 6.0, "eval": 2.0, "batch_inference": 2.0}
TRAINING_KINDS = ("pretrain", "finetune")


def training_flop(params: float, tokens: float, flop_per_param_token: float = 6.0) -> float:
    """Training work 6·N·D [FLOP] (N active parameters for MoE)."""
    return flop_per_param_token * params * tokens


# Nominal run lengths of batch jobs are stated on this hardware: Trainium3 in Trn3 Gen2
# UltraServers (144-chip scale-up domain), so a scenario's work does not depend on the hall.
REFERENCE_ACCELERATOR = ACCELERATORS["trainium3"]
REFERENCE_SYSTEM = SYSTEMS["trn3-gen2"]
REFERENCE_DOMAIN_CHIPS = REFERENCE_SYSTEM.chips


def training_rate_flop_s(chips: int, peak_flop_s: float, mfu: float) -> float:
    """Model FLOP/s a gang delivers."""
    return chips * peak_flop_s * mfu


def model_mfu(model: ModelSpec | None, cls: JobClassParams | None) -> float:
    """Base MFU of a job: the model's training MFU times the class factor (dense default when the
    model is not catalogued)."""
    base = model.mfu if model is not None else DENSE_MFU
    return base * (cls.mfu_factor if cls is not None else 1.0)


def diurnal_factor(time_s: float, peak_to_trough: float, peak_hour: float, weekend_factor: float) -> float:
    """Rate multiplier by hour of day and day of week: a cosine day with the given peak-to-trough
    ratio and weekday mean 1, times ``weekend_factor`` on days 5 and 6 (t = 0 is Monday 00:00)."""
    r = max(peak_to_trough, 1.0)
    amp = (r - 1.0) / (r + 1.0)
    hour = (time_s % DAY_S) / 3600.0
    f = 1.0 + amp * math.cos(2 * math.pi * (hour - peak_hour) / 24.0)
    if int(time_s // DAY_S) % 7 >= 5:
        f *= weekend_factor
    return f


def diurnal_rate(s: ServiceParams, time_s: float) -> float:
    """Mean request rate of a service [1/s] before bursts (facts §9.3 shapes)."""
    return s.mean_requests_per_s * diurnal_factor(
        time_s, s.diurnal_peak_to_trough, s.peak_hour, s.weekend_factor
    )


# ---------------------------------------------------------------------- batch jobs
@dataclass(frozen=True)
class JobDraws:
    chips: npt.NDArray[np.int64]
    model: list[str]
    nominal_s: FloatArray  # run length on the ideal placement


def draw_jobs(cls: JobClassParams, n: int, rng: np.random.Generator, max_chips: int) -> JobDraws:
    """``n`` jobs of one class: gang size from its discrete heavy-tailed distribution (sizes above
    ``max_chips`` are excluded; if none fits, the largest gang that does), model from the mix, and
    a log-normal nominal run length capped at ``duration_max_h``."""
    sizes = np.asarray(cls.size_chips, dtype=np.int64)
    w = np.where(sizes <= max_chips, np.asarray(cls.size_weights, dtype=float), 0.0)
    if w.sum() <= 0:
        sizes, w = np.array([max_chips], dtype=np.int64), np.array([1.0])
    cw = np.cumsum(w / w.sum())
    chips = sizes[np.minimum(np.searchsorted(cw, rng.random(n), side="right"), len(sizes) - 1)]
    mw = np.cumsum(np.asarray(cls.model_weights, dtype=float))
    mw /= mw[-1]
    mi = np.minimum(np.searchsorted(mw, rng.random(n), side="right"), len(mw) - 1)
    z = rng.standard_normal(n)
    nominal = np.minimum(
        cls.duration_median_h * 3600.0 * np.exp(cls.duration_sigma * z), cls.duration_max_h * 3600.0
    )
    return JobDraws(chips, [cls.models[int(k)] for k in mi], np.maximum(nominal, 1.0))


def ideal_spanned(chips: int, chips_per_us: int) -> int:
    """UltraServers a gang spans on its best placement."""
    return max(1, -(-chips // chips_per_us))


# ---------------------------------------------------------------------- token lengths
QUANTILES = (0.0, 0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 0.999, 1.0)


@dataclass(frozen=True)
class TokenProfile:
    """Shape of a service's request mix, fitted to a public trace: token-length quantiles at
    ``QUANTILES`` (sampled by log-linear interpolation, then scaled to the service's means), and
    the demand shape defaults."""

    input_q: tuple[int, ...]
    output_q: tuple[int, ...]
    input_mean: float
    output_mean: float
    diurnal_peak_to_trough: float
    weekend_factor: float
    burst_rate_per_day: float
    burst_multiplier: float
    burst_duration_s: float


TOKEN_PROFILES: dict[str, TokenProfile] = {
    # Fitted to Azure LLM inference 2023, conversation (AzureLLMInferenceTrace_conv.csv, 19,366
    # requests, 2023-11-16 18:15-19:14 UTC): token quantiles; inter-arrival CV 1.09 (Poisson, no
    # bursts). Day shape from the 2024 week (facts §9.3): peak/trough 2-2.5x; weekend ASM.
    "conversation": TokenProfile(
        input_q=(2, 29, 181, 207, 387, 403, 703, 1020, 1071, 1130, 1315, 2735, 4083, 4142, 6212, 14050),
        output_q=(7, 16, 41, 54, 77, 91, 103, 129, 177, 384, 400, 424, 451, 601, 954, 1000),
        input_mean=1155.0,
        output_mean=211.0,
        diurnal_peak_to_trough=2.5,
        weekend_factor=0.6,
        burst_rate_per_day=0.0,
        burst_multiplier=1.0,
        burst_duration_s=90.0,
    ),
    # Fitted to Azure LLM inference 2023, code (AzureLLMInferenceTrace_code.csv, 8,819 requests):
    # token quantiles; bursts: 9 per hour with the per-minute count above 2.5x the median, 1.44
    # minutes long, 3.5x the median rate while on, carrying 42 % of the requests (inter-arrival
    # CV 13). Day shape from the 2024 week (facts §9.3): peak/trough 8-10x, weekend peaks
    # 1,000-1,400 vs weekday 4,000-5,800 req/min (~0.25, DER).
    "code": TokenProfile(
        input_q=(3, 17, 75, 147, 385, 770, 1075, 1469, 1909, 2433, 3193, 5194, 7315, 7436, 7437, 7437),
        output_q=(6, 6, 6, 7, 8, 9, 11, 13, 16, 20, 29, 55, 90, 252, 831, 1899),
        input_mean=2048.0,
        output_mean=28.0,
        diurnal_peak_to_trough=9.0,
        weekend_factor=0.25,
        burst_rate_per_day=216.0,
        burst_multiplier=3.5,
        burst_duration_s=90.0,
    ),
}


def token_quantiles(table: tuple[int, ...] | FloatArray, u: FloatArray) -> FloatArray:
    """Token counts at probabilities ``u`` from a quantile table at ``QUANTILES``."""
    logs = np.log(np.maximum(np.asarray(table, dtype=float), 1.0))
    return np.asarray(np.exp(np.interp(u, QUANTILES, logs)), dtype=np.float64)


def stratified(m: int, rng: np.random.Generator) -> FloatArray:
    """``m`` stratified probabilities (i + 0.5) / m in a random order."""
    return np.asarray(rng.permutation((np.arange(m) + 0.5) / m), dtype=np.float64)


def normal_quantiles(u: FloatArray) -> FloatArray:
    nd = NormalDist()
    return np.array([nd.inv_cdf(float(x)) for x in u])


# ---------------------------------------------------------------------- inference roofline
@dataclass(frozen=True)
class Roofline:
    """Per-replica serving capacity from the roofline."""

    batch: int  # concurrent sequences, limited by batch_max and KV-cache space
    decode_step_s: float  # time of one decode step at that batch
    decode_tokens_per_s: float  # batch / step
    prefill_s: float  # time to prefill one mean request (compute-bound)
    requests_per_s: float  # sustained request capacity
    kv_bytes_per_token: float
    weight_bytes: float
    prefill_share: float  # share of replica time spent in prefill at capacity
    bw_bytes_s: float = 0.0  # effective HBM bandwidth of the replica
    compute_flop_s: float = 0.0  # peak x prefill MFU of the replica
    seq_tokens: float = 0.0  # mean resident tokens per sequence while decoding
    active_params: float = 0.0
    kv_capacity_tokens: float = 0.0  # HBM left for KV cache, in tokens

    def step_s(self, n: float) -> float:
        """Decode step time with ``n`` resident sequences: memory-bound (weights + KV streamed)
        or compute-bound (2·N_active per token), whichever is slower."""
        mem = (self.weight_bytes + n * self.seq_tokens * self.kv_bytes_per_token) / self.bw_bytes_s
        return max(mem, 2.0 * self.active_params * n / self.compute_flop_s)


def kv_bytes_per_token(s: ServiceParams) -> float:
    """KV-cache bytes per token = 2 · layers · KV heads · head dim · bytes (facts §13)."""
    return 2.0 * s.layers * s.kv_heads * s.head_dim * s.kv_bytes_per_elem


HBM_USABLE = 0.9  # 10 % of HBM reserved for activations and runtime (ASM)


def roofline(s: ServiceParams, acc: Accelerator) -> Roofline:
    chips = s.chips_per_replica
    weight_bytes = s.params * s.weight_bytes_per_param
    kv_tok = kv_bytes_per_token(s)
    seq_tokens = s.context_tokens + s.output_tokens / 2.0  # mean resident length while decoding
    hbm = chips * acc.hbm_bytes * HBM_USABLE
    if weight_bytes >= hbm:
        raise ValueError(
            f"service {s.name!r}: weights ({weight_bytes / 1e9:.0f} GB) do not fit in "
            f"{chips} x {acc.name} HBM ({hbm / 1e9:.0f} GB usable)"
        )
    batch = int(min(s.batch_max, (hbm - weight_bytes) // (seq_tokens * kv_tok)))
    batch = max(batch, 1)
    bw = chips * acc.hbm_bw_bytes_s * s.bw_efficiency
    compute = chips * acc.peak(s.precision) * s.prefill_mfu
    mem_step = (weight_bytes + batch * seq_tokens * kv_tok) / bw
    compute_step = 2.0 * s.active_params * batch / compute
    step = max(mem_step, compute_step)
    prefill = 2.0 * s.active_params * s.context_tokens / compute
    decode_share = s.output_tokens * step / batch  # replica-seconds of decode per request
    per_request = decode_share + prefill
    return Roofline(
        batch=batch,
        decode_step_s=step,
        decode_tokens_per_s=batch / step,
        prefill_s=prefill,
        requests_per_s=1.0 / per_request,
        kv_bytes_per_token=kv_tok,
        weight_bytes=weight_bytes,
        prefill_share=prefill / per_request,
        bw_bytes_s=bw,
        compute_flop_s=compute,
        seq_tokens=seq_tokens,
        active_params=s.active_params,
        kv_capacity_tokens=(hbm - weight_bytes) / kv_tok,
    )


def decode_occupancy(roof: Roofline, rate_per_replica: float, output_tokens: float) -> tuple[float, float]:
    """Resident sequences per replica and the prefill time share at a served request rate.

    Little's law per replica: n = tokens/s x step(n) / (1 - f_p), where the replica spends
    f_p = rate x prefill of its time prefilling and the rest decoding ``n`` sequences per step.
    With a memory-bound step (W + n·S·kv)/BW this is linear in n and solved exactly; at or beyond
    capacity n is the roofline batch. Returns (n, f_p)."""
    f_p = min(rate_per_replica * roof.prefill_s, 0.999)
    if rate_per_replica <= 0:
        return 0.0, 0.0
    k = rate_per_replica * output_tokens / (1.0 - f_p)  # sequences per second of decode time
    c = roof.seq_tokens * roof.kv_bytes_per_token / roof.bw_bytes_s
    denom = 1.0 - k * c
    if denom <= 0 or k * 2.0 * roof.active_params / roof.compute_flop_s >= 1.0:
        return float(roof.batch), f_p
    n = k * roof.weight_bytes / roof.bw_bytes_s / denom
    return min(n, float(roof.batch)), f_p


def queue_wait_s(u: FloatArray, rho: float, service_s: float) -> FloatArray:
    """Waiting time at probabilities ``u`` for a replica as an M/M/1 queue at utilisation ``rho``
    with mean service ``service_s``: P(W > t) = rho · exp(-(1 - rho) t / service_s)."""
    if rho <= 0:
        return np.zeros_like(u)
    tail = 1.0 - u
    w = service_s / (1.0 - rho) * np.log(np.maximum(rho / tail, 1.0))
    return np.asarray(w, dtype=np.float64)
