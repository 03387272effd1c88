"""Online inference services: demand, request queue, latency and the autoscaler, per service.

Each step a service receives whole requests (Poisson around its diurnal/weekly shape with bursts,
or counted from a replayed trace), serves what its warm replicas' roofline capacity allows, keeps
the rest queued and drops requests that would wait longer than ``max_queue_wait_s``. Counts are
integers and conserved: arrived = served + queued + dropped, cumulatively.

Latency comes from a fixed stratified sample of representative requests (token lengths from the
service's profile or trace, and independent quantiles for the waiting time and prefill
interference), evaluated every step at the current load: TTFT = backlog wait + queueing wait
(M/M/1 per replica) + prefill (+ the KV cache's hand-over when prefill is disaggregated) + one
decode step; TPOT = decode step at the current occupancy plus the prefills of other requests
interleaved with this one's decode (continuous batching; none on disaggregated decode replicas).
Capacity comes from the mix: a request takes its prefill plus its share of the decode steps at the
batch (``twin.work.inference.roofline``). Percentiles and SLO attainment are read off the sample. NumPy
only, no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from twin.physics import effects
from twin.spec.catalog import Accelerator, System
from twin.spec.params import ServiceParams
from twin.work import inference, workload

SAMPLE = 256  # representative requests per service
PCT = (0.5, 0.9, 0.99)
STARTING_ACTIVITY = 0.1  # chips of a replica loading weights (ASM)


@dataclass(slots=True)
class ServiceStep:
    arrived: int
    served: int
    dropped: int
    queued: int
    tokens_s: float  # output tokens per second
    input_tokens_s: float
    ttft_s: tuple[float, float, float]  # p50, p90, p99 (NaN when nothing was served)
    tpot_s: tuple[float, float, float]
    slo_met: float  # served requests meeting both SLOs (expected count)
    occupancy: float  # resident sequences per warm replica
    kv_fraction: float  # KV cache in use / KV capacity of a warm replica
    utilization: float  # served / capacity
    activity: float  # chip activity of the warm replicas
    prefill_share: float = 0.0  # share of the warm replicas' time spent prefilling


_NAN3 = (math.nan, math.nan, math.nan)


class ServiceModel:
    def __init__(
        self, sp: ServiceParams, acc: Accelerator, sysm: System, rng: np.random.Generator, dt_s: int
    ) -> None:
        tr = sp.trace
        if tr is not None and len(tr.time_s):
            sp = replace(
                sp,
                context_tokens=float(tr.input_tokens.mean()),
                output_tokens=max(float(tr.output_tokens.mean()), 1.0),
            )
        self.p = sp
        self.rng = rng
        self.dt_s = dt_s
        self.roof = inference.roofline(sp, acc, sysm)
        u_in, u_out, u_wait, u_z = (workload.stratified(SAMPLE, rng) for _ in range(4))
        if tr is not None and len(tr.time_s):
            inp = np.quantile(tr.input_tokens.astype(float), u_in)
            out = np.quantile(tr.output_tokens.astype(float), u_out)
        else:
            prof = workload.TOKEN_PROFILES[sp.token_profile]
            inp = workload.token_quantiles(prof.input_q, u_in)
            out = workload.token_quantiles(prof.output_q, u_out)
            inp *= sp.context_tokens / inp.mean()
            out *= sp.output_tokens / out.mean()
        self.inp_i = inp
        self.prefill_i = self.roof.prefill_time_s(inp)
        # Disaggregated: the prompt's KV cache moves from its prefill replica to a decode replica.
        self.handoff_i = inp * (self.roof.kv_transfer_s_per_token if sp.prefill_replica_share > 0 else 0.0)
        self.out_i = np.maximum(out, 1.0)
        self.u_wait = u_wait
        self.tail_wait = 1.0 - u_wait  # their tail probabilities (``inference.queue_wait_s``)
        self.z = workload.normal_quantiles(u_z)
        self.q_idx = [min(SAMPLE - 1, int(q * SAMPLE)) for q in PCT]
        self.capacity_per_replica = self.roof.requests_per_s
        # Bursts: a two-state chain per step; the base rate is scaled so the mean is preserved.
        self.burst_on = False
        self.p_on = self.p_off = 0.0
        norm = 1.0
        if sp.burst_rate_per_day > 0 and sp.burst_multiplier != 1.0:
            self.p_on = 1.0 - math.exp(-sp.burst_rate_per_day / 86400.0 * dt_s)
            self.p_off = 1.0 - math.exp(-dt_s / max(sp.burst_duration_s, 1e-9))
            pi = self.p_on / (self.p_on + self.p_off)
            norm = 1.0 + pi * (sp.burst_multiplier - 1.0)
        self.rate_norm = norm
        # Trace replay: arrival times on the replay clock, looped with a period of the span plus
        # one mean gap.
        self.trace_t: np.ndarray | None = None
        self.period_s = 0.0
        if tr is not None and len(tr.time_s):
            self.trace_t = tr.time_s / sp.trace_speedup
            n = len(tr.time_s)
            gap = tr.span_s / (n - 1) if n > 1 else 1.0
            self.period_s = (tr.span_s + gap) / sp.trace_speedup
        # State.
        self.queue = 0
        self.credit = 0.0
        self.surges: list[tuple[float, int, int]] = []  # (factor, start_s, end_s) intervals
        self.arrived_total = self.served_total = self.dropped_total = 0
        self.rate_est = self.mean_rate(0.0)
        self.below_since: int | None = None

    # ------------------------------------------------------------------ demand
    def mean_rate(self, t: float) -> float:
        """Expected arrival rate [1/s] without bursts or surges (trace: its mean rate)."""
        if self.trace_t is not None:
            return len(self.trace_t) / self.period_s if self.period_s > 0 else 0.0
        return workload.diurnal_rate(self.p, t)

    def _trace_count(self, x: float) -> int:
        assert self.trace_t is not None
        n = len(self.trace_t)
        if not self.p.trace_loop:
            return int(np.searchsorted(self.trace_t, x, side="left"))
        k = math.floor(x / self.period_s)
        return k * n + int(np.searchsorted(self.trace_t, x - k * self.period_s, side="left"))

    def add_surge(self, factor: float, start_s: int, end_s: int) -> None:
        """A surge of the request rate by ``factor`` over [start_s, end_s), independent of any
        other surge (``twin.physics.effects``: overlapping surges take the largest factor)."""
        self.surges.append((factor, start_s, end_s))

    def arrivals(self, t: int, dt: int) -> int:
        if self.surges:
            self.surges = [s for s in self.surges if s[2] > t]
        surge = effects.surge_factor(self.surges, t) if self.surges else 1.0
        if self.trace_t is not None:
            count = self._trace_count(t + dt) - self._trace_count(t)
            if surge != 1.0:
                count = int(self.rng.poisson(count * surge))
            return count
        mult = 1.0
        if self.p_on > 0:
            mult = self.p.burst_multiplier if self.burst_on else 1.0
            flip = self.rng.random()
            self.burst_on = (flip >= self.p_off) if self.burst_on else (flip < self.p_on)
        lam = workload.diurnal_rate(self.p, t) * surge * mult / self.rate_norm
        return int(self.rng.poisson(lam * dt)) if lam > 0 else 0

    # ------------------------------------------------------------------ autoscaler
    def desired_replicas(self, t: int, dt: int, arrived: int, active: int) -> int:
        """Replica count the autoscaler wants (``active`` when it keeps things as they are)."""
        sp = self.p
        alpha = 1.0 - math.exp(-dt / max(sp.scale_interval_s, 1e-9))
        self.rate_est += alpha * (arrived / dt - self.rate_est)
        if not sp.autoscale or t % max(int(sp.scale_interval_s), 1) >= dt:
            return active
        backlog_rate = self.queue / max(sp.max_queue_wait_s, dt)
        need = (self.rate_est + backlog_rate) / (self.capacity_per_replica * sp.target_utilization)
        hi = sp.replicas_max if sp.replicas_max > 0 else sp.replicas
        want = int(min(max(math.ceil(need - 1e-9), sp.replicas_min), hi))
        if want >= active:
            self.below_since = None
            return want
        if self.below_since is None:
            self.below_since = t
        if t - self.below_since >= sp.scale_down_delay_s:
            self.below_since = None
            return want
        return active

    # ------------------------------------------------------------------ serving
    def serve(self, arrived: int, warm: float, dt: int) -> ServiceStep:
        sp, roof = self.p, self.roof
        cap_rate = warm * self.capacity_per_replica
        q0 = self.queue
        served, dropped, q1 = self._admit(arrived, cap_rate, dt)
        if served == 0 or warm == 0:
            return ServiceStep(arrived, served, dropped, q1, 0.0, 0.0, _NAN3, _NAN3, 0.0, 0.0, 0.0, 0.0, 0.0)
        rate = served / dt / warm  # per replica
        util = min(served / (cap_rate * dt), 1.0)
        n, f_p = inference.decode_occupancy(roof, rate, sp.output_tokens)
        step = roof.step_s(max(n, 1.0))
        share = sp.prefill_replica_share
        ttft = self._ttft(q0, q1, cap_rate, util, step)
        tpot, act = self._tpot(rate, n, f_p, step)
        met = float(np.count_nonzero((ttft <= sp.ttft_slo_s) & (tpot <= sp.tpot_slo_s))) / SAMPLE
        ts = np.sort(ttft)
        ps = np.sort(tpot)
        i50, i90, i99 = self.q_idx
        return ServiceStep(
            arrived,
            served,
            dropped,
            q1,
            served * sp.output_tokens / dt,
            served * sp.context_tokens / dt,
            (float(ts[i50]), float(ts[i90]), float(ts[i99])),
            (float(ps[i50]), float(ps[i90]), float(ps[i99])),
            served * met,
            n,
            n * roof.seq_tokens / roof.kv_capacity_tokens,
            util,
            act,
            share if share > 0 else f_p,  # prefill replicas are held for prefill, busy or not
        )

    def _admit(self, arrived: int, cap_rate: float, dt: int) -> tuple[int, int, int]:
        """Serve what the warm capacity (and the carried fraction) allows, drop what would wait
        past the longest queue wait, keep the rest queued; returns served, dropped, queue."""
        sp = self.p
        qa = self.queue + arrived
        capacity = cap_rate * dt + self.credit
        whole = math.floor(capacity)
        served = min(qa, whole)
        self.credit = capacity - whole if served == whole and cap_rate > 0 else 0.0
        remaining = qa - served
        limit = math.floor(cap_rate * sp.max_queue_wait_s)
        dropped = max(0, remaining - limit)
        q1 = remaining - dropped
        self.queue = q1
        self.arrived_total += arrived
        self.served_total += served
        self.dropped_total += dropped
        return served, dropped, q1

    def _ttft(self, q0: int, q1: int, cap_rate: float, util: float, step: float) -> npt.NDArray[np.float64]:
        """The sampled requests' time to first token."""
        # Waiting: the backlog ahead (spread over the step), or M/M/1 queueing when none.
        if q0 > 0 or q1 > 0:
            wait = (q0 + self.u_wait * (q1 - q0)) / cap_rate
        else:
            wait = inference.queue_wait_s(self.tail_wait, min(util, 0.95), 1.0 / self.capacity_per_replica)
        # ttft = wait + prefill + hand-over + step, added in place in that order (``wait`` is this
        # step's own array); no hand-over to add where prefill is not disaggregated (x + 0 = x).
        ttft = wait
        ttft += self.prefill_i
        if self.p.prefill_replica_share > 0:
            ttft += self.handoff_i
        ttft += step
        return ttft

    def _tpot(self, rate: float, n: float, f_p: float, step: float) -> tuple[npt.NDArray[np.float64], float]:
        """The sampled requests' time per output token, and the replicas' mean activity."""
        sp, roof = self.p, self.roof
        share = sp.prefill_replica_share
        if share > 0:
            # Decode replicas decode only; prefill replicas are busy f_p / share of their time.
            tpot = np.full(SAMPLE, step)
            busy_p = min(f_p / share, 1.0)
            act = share * sp.prefill_activity * busy_p + (1.0 - share) * sp.decode_activity * min(n, 1.0)
        else:
            # Prefills of other requests landing on the replica while this one decodes.
            # m = rate out tpot_base; stalls = max(m + z sqrt(m), 0); tpot = step + stalls
            # prefill / out: the same operations in the same order, in place.
            tpot_base = step / (1.0 - f_p)
            m = rate * self.out_i
            m *= tpot_base
            tpot = np.sqrt(m)
            tpot *= self.z
            tpot += m
            np.maximum(tpot, 0.0, out=tpot)
            tpot *= roof.prefill_s
            tpot /= self.out_i
            tpot += step
            act = f_p * sp.prefill_activity + (1.0 - f_p) * sp.decode_activity * min(n, 1.0)
        return tpot, act
