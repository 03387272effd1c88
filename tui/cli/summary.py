"""The text ``twin run`` prints when a run ends: what was simulated, how fast, and its KPIs
(energy, work, the facility's caps and the keys the run overrode)."""

from __future__ import annotations

from typing import Any


def _speed(days: float, wall_s: float) -> str:
    """Simulated time per wall second, in the unit that keeps it readable (a campus runs about
    an hour of site time a second, a small hall days)."""
    r = days / max(wall_s, 1e-9)
    if r >= 1:
        return f"{r:,.1f} sim-days/s"
    return f"{r * 24:,.2f} sim-h/s" if r * 24 >= 0.1 else f"{r * 1440:,.2f} sim-min/s"


def _eflop(flop: float | None) -> str:
    """FLOP in EFLOP, the unit of ``twin compare``, at every size (not 180 EFLOP in one run and
    6.48e+22 FLOP in a longer one)."""
    if flop is None:
        return "–"
    e = flop / 1e18
    return f"{e:,.0f} EFLOP" if e >= 100 else f"{e:.3g} EFLOP"


def _inference_split(s: dict[str, Any]) -> list[str]:
    """Inference's all-in cost split between input and output tokens by the replica time each
    phase takes (``storage.kpis``): the two parts add up to the all-in figure per M output tokens
    times the output tokens."""
    from tui.console import fmt

    total, inp, out = (
        s.get(k) for k in ("inference_total_usd", "inference_input_usd", "inference_output_usd")
    )
    if total is None or inp is None or out is None or not s.get("tokens"):
        return []
    per_in, per_out = s.get("usd_per_m_input_tokens"), s.get("usd_per_m_output_tokens")
    return [
        f"  inference TCO     {fmt.money(total)} = prefill {fmt.money(inp)}"
        + (f" (${per_in:.3f}/M input tokens)" if per_in is not None else "")
        + f" + decode {fmt.money(out)}"
        + (f" (${per_out:.3f}/M output tokens)" if per_out is not None else "")
    ]


def _overrides_lines(s: dict[str, Any]) -> list[str]:
    """The ``--set`` overrides the run was started with, from its recorded scenario."""
    sets = s.get("overrides") or []
    return [f"  overrides         {'  '.join(f'--set {o}' for o in sets)}"] if sets else []


def _cap_line(s: dict[str, Any]) -> str:
    """The facility cap, the hours it was in force and bound, any hours it did not hold, and the
    hours with chips slowed by a cap or heat."""
    from tui.console import fmt

    throttled = f"throttled {s.get('throttled_hours') or 0.0:,.2f} h (cap or heat)"
    cap = s.get("cap_min_w")
    if cap is None:
        return f"  facility cap      none   {throttled}"
    over = s.get("cap_exceeded_hours") or 0.0
    return (
        f"  facility cap      {fmt.power(cap)}"
        + f" in force {s.get('cap_hours') or 0.0:,.2f} h, bound {s.get('cap_bound_hours') or 0.0:,.2f} h   "
        + throttled
        + (f"   NOT HELD for {over:,.2f} h: the hall drew more than the cap" if over > 0 else "")
    )


def summary_text(result: Any, s: dict[str, Any]) -> str:
    from tui.console import fmt

    days = result.sim_s / 86400
    tokens = s["tokens"] or 0.0
    lines = [
        f"Run {result.run_id}  ({result.status})",
        f"  file              {result.path}",
        *_overrides_lines(s),
        f"  simulated         {f'{days:,.2f} days' if days >= 1 else f'{days * 24:,.2f} h'} in {result.wall_s:,.1f} s wall"
        f" ({_speed(days, result.wall_s)})",
        f"  facility energy   {fmt.energy_mwh(s['facility_mwh'])}   IT {fmt.energy_mwh(s['it_mwh'])}"
        f"   cooling {fmt.energy_mwh(s['cooling_mwh'])}   losses {fmt.energy_mwh(s['loss_mwh'])}",
        (f"  PUE               {s['pue']:.3f}" if s["pue"] else "  PUE               –")
        + (f"   WUE {s['wue_l_per_kwh']:.2f} L/kWh IT" if s.get("wue_l_per_kwh") is not None else ""),
        f"  peak facility     {fmt.power(s['peak_facility_w'])}",
        f"  busy chips        {fmt.pct(s['busy_fraction'])}",
        f"  tokens served     {fmt.si(tokens)} output ({fmt.si(s.get('tokens_per_day'))}/day)"
        f" + {fmt.si(s.get('input_tokens'))} input (prompt)"
        f"   dropped requests {fmt.si(s['requests_dropped'])}   SLO met {fmt.pct(s.get('slo_attainment'))}",
        f"  per output token  {fmt.si(s.get('j_per_token'), 'J')}"
        f"   ${s['usd_per_mtok']:.3f} per M output tokens (electricity)"
        if s.get("usd_per_mtok") is not None
        else "  per output token  –",
        *_inference_split(s),
        f"  training delivered {_eflop(s['training_flop'])}   jobs done {s['jobs_done'] or 0:,}"
        f" of {s.get('jobs_submitted') or 0:,}"
        + (
            f" (+{s['jobs_rejected']:,} rejected, never queued: the first {s.get('jobs_rejected_reason')})"
            if s.get("jobs_rejected")
            else ""
        )
        + f"   goodput {fmt.pct(s.get('goodput'))}",
        f"  queue wait        p50 {fmt.duration(s['wait_p50_s'])}   p90 {fmt.duration(s.get('wait_p90_s'))}"
        f"   p99 {fmt.duration(s.get('wait_p99_s'))} (started jobs)   still queued {s.get('jobs_queued_at_end') or 0}"
        + (
            f" (longest {s['oldest_queued_wait_h']:,.1f} h)"
            if s.get("oldest_queued_wait_h") is not None
            else ""
        ),
        f"  failures          {s.get('failures') or 0} (+{s.get('failures_injected') or 0} injected)"
        f"   preemptions {s.get('preemptions') or 0}   work lost {fmt.pct(s.get('lost_fraction'))}",
        f"  electricity cost  {fmt.money(s['cost_usd'])}   CO2 {s['co2_t']:,.1f} t",
        f"  total cost (TCO)  {fmt.money(s.get('total_cost_usd'))}: capital {fmt.money(s.get('capex_usd'))}"
        f"   energy {fmt.money(s.get('energy_cost_usd'))}   cooling {fmt.money(s.get('cooling_cost_usd'))}"
        f"   other {fmt.money(s.get('other_cost_usd'))}",
        f"  TCO per unit      {fmt.money(s.get('usd_per_chip_hour'))}/chip-h   {fmt.money(s.get('usd_per_mtok_all_in'))}"
        f"/M output tokens (all-in)   {fmt.money(s.get('usd_per_eflop'))}/EFLOP of batch work"
        f"   {fmt.money(s.get('usd_per_pretrain_job'))}/pre-training job's work",
        _cap_line(s),
        f"  thermal trips     {s.get('thermal_trips') or 0} UltraServers powered off"
        f"   {s.get('tripped_ultraserver_h') or 0.0:,.2f} tripped UltraServer-hours",
        f"  hottest chip      {fmt.temp(s['max_chip_temp_c'])}",
        f"Explore: twin sql {result.path}   |   twin replay {result.path}",
    ]
    return "\n".join(lines)
