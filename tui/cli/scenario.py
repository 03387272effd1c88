"""`twin validate`, `twin schema`, `twin scenarios` and `twin hardware`: the scenario checks, the
JSON Schema for editors, the built-in scenarios and the hardware catalog.

Headless: imports neither Textual nor the TUI. Both read the scenario fact table
(``scenarios.facts``); `validate` runs exactly the checks `twin run` makes before it writes.
"""

from __future__ import annotations

import json
from typing import Any

import click

from tui.cli.errors import guard
from tui.cli.options import DAYS, HOURS, SET_HELP, duration_s


def validate_scenario(
    scenario: str, duration_s: int | None, seed: int | None, sets: tuple[str, ...] = ()
) -> None:
    """Load, then for the scenario (or each variant) run ``scenarios.spec.build_simulation``:
    the checks `twin run` makes, then the model's own, nothing written."""
    from scenarios.overrides import load
    from scenarios.spec import build_simulation

    spec, _, origin = load(scenario, sets)
    for s in spec.variants or [spec]:
        p, sim = build_simulation(s, seed, duration_s)
        warn_cut_events(s, duration_s)
        warn_caps(s, p)
        hours = duration_s / 3600 if duration_s is not None else s.duration_h
        halls = p.halls or (p.hall,)
        counts: dict[str, int] = {}  # UltraServers per system, over every hall of a campus
        for h in halls:
            for r in h.pools():
                counts[r.system.name] = counts.get(r.system.name, 0) + r.ultraservers
        click.echo(
            f"{origin}: ok — '{s.name}': "
            + (f"{len(halls)} halls, " if len(halls) > 1 else "")
            + " + ".join(f"{n:,} x {name}" for name, n in counts.items())
            + ", "
            f"{sim.topo.chips:,} chips, dt {p.dt_s} s, {hours:g} h"
            + (f" after a {s.warmup_h:g} h warm-up" if s.warmup_h > 0 else "")
            + f", {_events_within(s, duration_s)}, starts {s.start.isoformat()}"
        )
        del sim


def _events_within(s: Any, duration_s: int | None) -> str:
    from scenarios.spec import cut_events

    n, cut = len(s.events), len(cut_events(s, duration_s))
    return f"{n} scheduled events" + (f" ({n - cut} within the run)" if cut else "")


def warn_cut_events(s: Any, duration_s: int | None) -> None:
    """One line on stderr when ``--hours``/``--days`` ends the run before scheduled events."""
    from scenarios.spec import cut_events

    cut = cut_events(s, duration_s)
    if cut and duration_s is not None:  # (cut_events finds none in a run of the scenario's length)
        shown = "; ".join(cut[:3]) + (f"; and {len(cut) - 3} more" if len(cut) > 3 else "")
        click.echo(
            f"twin: warning: '{s.name}': the run ends at {duration_s / 3600:g} h, before {len(cut)} of its "
            f"{len(s.events)} scheduled events ({shown}); they will not happen",
            err=True,
        )


def warn_caps(s: Any, p: Any = None) -> None:
    """One line on stderr for each facility cap that cannot hold while the hall is busy
    (``scenarios.spec.cap_warnings``; ``p``: the scenario's model parameters when at hand)."""
    from scenarios.spec import cap_warnings

    for w in cap_warnings(p if p is not None else s.to_params()):
        click.echo(f"twin: warning: '{s.name}': {w}", err=True)


def warn_at_ready(s: Any, duration_s: int | None) -> None:
    """The warnings of a run whose model is built: the events it ends before, the caps that
    cannot hold."""
    warn_cut_events(s, duration_s)
    warn_caps(s)


def print_schema() -> None:
    from scenarios.facts import json_schema

    click.echo(json.dumps(json_schema(), indent=2, ensure_ascii=False))


@click.command("validate")
@click.argument("scenario")
@click.option(
    "--hours", type=HOURS, default=None, help="Check for a run of this many hours (as `twin run --hours`)."
)
@click.option("--days", type=DAYS, default=None, help="Check for a run of this many days.")
@click.option("--seed", type=int, default=None, help="Check with this seed (as `twin run --seed`).")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help=SET_HELP)
@guard
def validate_cmd(
    scenario: str, hours: float | None, days: float | None, seed: int | None, sets: tuple[str, ...]
) -> None:
    """Check a scenario file (or built-in name) without running it: the same checks as `twin run`
    (keys, hall size, event targets, files, run length), nothing written."""
    validate_scenario(scenario, duration_s(hours, days), seed, sets)


@click.command("schema")
def schema_cmd() -> None:
    """Print the JSON Schema of scenario files (for editors): twin schema > scenario.schema.json"""
    print_schema()


@click.command("scenarios")
def scenarios_cmd() -> None:
    """List the built-in scenarios."""
    from scenarios.spec import builtin_names, load

    names = builtin_names()
    width = max(16, *(len(n) for n in names))
    for name in names:
        spec, _, _ = load(name)
        click.echo(f"{name:<{width}} {spec.description}")


@click.command("hardware")
@click.option("--sources", is_flag=True, help="Also print where every number comes from.")
def hardware_cmd(sources: bool) -> None:
    """List the hardware catalog: per-chip and per-system figures with their sources.

    Tags: OFF vendor documentation, OFF-2 vendor claim via press, 3P third party, DER derived,
    ASM assumption (override it in a scenario's [hardware] section). * marks an assumed TDP."""
    from twin.spec import catalog

    def pf(x: float) -> str:
        return f"{x / 1e15:,.0f}" if x >= 1e18 else f"{x / 1e15:,.3g}"

    click.echo(click.style("Accelerators (dense peak per chip)", bold=True))
    click.echo(
        f"  {'key':<10} {'name':<41} {'BF16 PF':>8} {'FP8 PF':>7} {'FP4 PF':>7} {'HBM GiB':>8} {'TB/s':>5} {'TDP W':>7}"
    )
    for a in catalog.ACCELERATORS.values():
        bf16 = pf(a.peak("bf16")) if a.supports("bf16") else "–"
        fp4 = pf(a.peak_flops["fp4"]) if "fp4" in a.peak_flops else "(fp8)"
        tdp = f"{a.tdp_w:,.0f}{'*' if a.tdp_assumed else ' '}"
        click.echo(
            f"  {a.key:<10} {a.name:<41} {bf16:>8} {pf(a.peak('fp8')):>7} {fp4:>7} "
            f"{a.hbm_bytes / 2**30:>8,.0f} {a.hbm_bw_bytes_s / 1e12:>5.1f} {tdp:>7}"
        )
        if sources:
            for k, v in a.sources.items():
                click.echo(f"      {k}: {v}")
    if any(a.tdp_assumed for a in catalog.ACCELERATORS.values()):
        click.echo(
            "  * assumed TDP: no published figure (twin hardware --sources gives every number's source)"
        )
    click.echo()
    click.echo(click.style("Systems (scale-up domains)", bold=True))
    click.echo(
        f"  {'key':<12} {'name':<42} {'chips':>5} {'srv':>4} {'racks':>5} {'FP8 PF':>7} {'HBM TiB':>8} {'full kW':>8} {'liquid':>6}"
    )
    for s in catalog.SYSTEMS.values():
        a = catalog.accelerator_for(s)
        click.echo(
            f"  {s.key:<12} {s.name:<42} {s.chips:>5} {s.servers:>4} {s.racks:>5} "
            f"{pf(catalog.system_peak_flops(s, a, 'fp8')):>7} {s.chips * a.hbm_bytes / 2**40:>8,.1f} "
            f"{catalog.system_full_load_it_w(s, a) / 1e3:>8,.1f} {s.liquid_fraction:>6.0%}"
        )
        if sources:
            for k, v in s.sources.items():
                click.echo(f"      {k}: {v}")
