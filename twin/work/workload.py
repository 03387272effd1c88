"""Workload formulas: batch-job generation, arrival shapes and token lengths (the inference
roofline and request latency are ``twin.work.inference``). Pure functions of their arguments
(NumPy only, no state, no I/O).

Training work is k·N·D FLOP (k = 6 for training, 2 for forward-only work; N active parameters;
Kaplan et al. 2020); a gang progresses at chips · peak(precision) · MFU. Online inference capacity
comes from a roofline per kernel (facts §9.5): a decode step streams the weights once (or is
compute-bound at large batch), then every resident sequence's KV cache, and pays the tensor-
parallel collectives of its layers; prefill is compute-bound. The batch is what the KV cache and
the TPOT SLO allow; a request takes its prefill plus its share of the decode steps (``Roofline``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from twin.spec.catalog import ACCELERATORS, SYSTEMS
from twin.spec.models import DENSE_MFU, ModelSpec
from twin.spec.params import JOB_CLASSES, JobClassParams, ServiceParams, TrainingParams

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


def mean_job_chip_s(tp: TrainingParams, max_chips: int) -> float:
    """Mean chip-time one arriving batch job asks for [chip-s], over the classes by their shares:
    the mean gang size ``draw_jobs`` draws (sizes above ``max_chips`` excluded) times the mean of
    its capped log-normal nominal run length (on the ideal placement of the reference hardware).
    E[min(X, M)] for X log-normal (median m, sigma s): m e^(s^2/2) Phi((ln(M/m) - s^2)/s)
    + M (1 - Phi(ln(M/m)/s))."""
    total = share_sum = 0.0
    for kind in JOB_CLASSES:
        cls = tp.job_class(kind)
        if cls.share <= 0:
            continue
        sizes = np.asarray(cls.size_chips, dtype=float)
        w = np.where(sizes <= max_chips, np.asarray(cls.size_weights, dtype=float), 0.0)
        chips = float((sizes * w).sum() / w.sum()) if w.sum() > 0 else float(max_chips)
        m, sg, cap = cls.duration_median_h * 3600.0, cls.duration_sigma, cls.duration_max_h * 3600.0
        if sg > 0:
            a = math.log(cap / m) / sg
            dur = m * math.exp(sg * sg / 2) * NormalDist().cdf(a - sg) + cap * (1.0 - NormalDist().cdf(a))
        else:
            dur = min(m, cap)
        total += cls.share * chips * dur
        share_sum += cls.share
    return total / share_sum if share_sum > 0 else 0.0


def week_mean_factor(weekend_factor: float) -> float:
    """Mean of ``diurnal_factor`` over a week (the cosine day averages 1; two weekend days)."""
    return (5.0 + 2.0 * weekend_factor) / 7.0


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
