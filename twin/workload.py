"""Workload: training-job generation and the inference roofline.

Training work is 6·N·D FLOP (Kaplan et al. 2020); a gang progresses at chips·peak·MFU. Online
inference throughput comes from a decode memory-bandwidth roofline: each decode step streams the
weights once plus every sequence's KV cache (facts §9.5).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from twin.catalog import Accelerator
from twin.models import MODELS
from twin.params import ServiceParams, TrainingParams

DAY_S = 86400
WEEK_S = 7 * DAY_S


def training_flop(params: float, tokens: float) -> float:
    """Training work 6·N·D [FLOP] (N active parameters for MoE)."""
    return 6.0 * params * tokens


def training_rate_flop_s(chips: int, peak_flop_s: float, mfu: float) -> float:
    """Model FLOP/s a gang delivers."""
    return chips * peak_flop_s * mfu


def placement_mfu(p: TrainingParams, ultraservers_spanned: int) -> float:
    """MFU of a placement: lower when the gang leaves the scale-up domain (ASM)."""
    return p.mfu * (p.cross_ultraserver_mfu_factor if ultraservers_spanned > 1 else 1.0)


@dataclass(frozen=True)
class JobDraw:
    chips: int
    model: str
    params: float
    tokens: float
    nominal_s: float


def draw_job(p: TrainingParams, peak_flop_s: float, rng: np.random.Generator, max_chips: int) -> JobDraw:
    """One training job: gang size from a heavy-tailed discrete distribution, model from the
    mix, and a log-normal nominal run length that fixes the token budget D so that
    6·N·D / (chips·peak·MFU) equals it on a single-UltraServer placement."""
    sizes = np.asarray(p.size_chips)
    weights = np.asarray(p.size_weights, dtype=float)
    weights = np.where(sizes <= max_chips, weights, 0.0)
    if weights.sum() <= 0:  # no configured size fits: the largest gang that does
        sizes, weights = np.array([max_chips]), np.array([1.0])
    chips = int(rng.choice(sizes, p=weights / weights.sum()))
    mix = np.asarray(p.model_weights, dtype=float)
    k = int(rng.choice(len(mix), p=mix / mix.sum()))
    model = MODELS[p.models[k]]
    nominal_s = min(
        p.duration_median_h * 3600.0 * math.exp(p.duration_sigma * float(rng.standard_normal())),
        p.duration_max_h * 3600.0,
    )
    nominal_s = max(nominal_s, 60.0)
    params = model.active_params
    tokens = nominal_s * training_rate_flop_s(chips, peak_flop_s, p.mfu) / (6.0 * params)
    return JobDraw(chips, model.key, params, tokens, nominal_s)


def diurnal_rate(s: ServiceParams, time_s: float, start_weekday: int = 0) -> float:
    """Request rate [1/s]: sinusoidal day with the given peak-to-trough ratio, mean preserved on
    weekdays, scaled on weekends (facts §9.3 shapes)."""
    r = s.diurnal_peak_to_trough
    amp = (r - 1.0) / (r + 1.0)
    hour = (time_s % DAY_S) / 3600.0
    rate = s.mean_requests_per_s * (1.0 + amp * math.cos(2 * math.pi * (hour - s.peak_hour) / 24.0))
    weekday = (start_weekday + int(time_s // DAY_S)) % 7
    if weekday >= 5:
        rate *= s.weekend_factor
    return rate


@dataclass(frozen=True)
class Roofline:
    """Per-replica serving capacity from the roofline."""

    batch: int  # concurrent sequences, limited by batch_max and KV-cache space
    decode_step_s: float  # time of one decode step at that batch
    decode_tokens_per_s: float  # batch / step
    prefill_s: float  # time to prefill one request (compute-bound)
    requests_per_s: float  # sustained request capacity
    kv_bytes_per_token: float
    weight_bytes: float
    prefill_share: float  # share of replica time spent in prefill at capacity


def kv_bytes_per_token(s: ServiceParams) -> float:
    """KV-cache bytes per token = 2 · layers · KV heads · head dim · bytes (facts §13)."""
    return 2.0 * s.layers * s.kv_heads * s.head_dim * s.kv_bytes_per_elem


def roofline(s: ServiceParams, acc: Accelerator) -> Roofline:
    chips = s.chips_per_replica
    weight_bytes = s.params * s.weight_bytes_per_param
    kv_tok = kv_bytes_per_token(s)
    seq_tokens = s.context_tokens + s.output_tokens / 2.0  # mean resident length while decoding
    hbm = chips * acc.hbm_bytes * 0.9  # 10 % reserved for activations/runtime (ASM)
    if weight_bytes >= hbm:
        raise ValueError(
            f"service {s.name!r}: weights ({weight_bytes / 1e9:.0f} GB) do not fit in "
            f"{chips} x {acc.name} HBM ({hbm / 1e9:.0f} GB usable)"
        )
    batch = int(min(s.batch_max, (hbm - weight_bytes) // (seq_tokens * kv_tok)))
    batch = max(batch, 1)
    bw = chips * acc.hbm_bw_bytes_s * s.bw_efficiency
    peak = chips * acc.peak(s.precision)
    mem_step = (weight_bytes + batch * seq_tokens * kv_tok) / bw
    compute_step = 2.0 * s.active_params * batch / (peak * s.prefill_mfu)
    step = max(mem_step, compute_step)
    prefill = 2.0 * s.active_params * s.context_tokens / (peak * s.prefill_mfu)
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
    )
