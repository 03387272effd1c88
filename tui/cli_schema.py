"""`twin validate` and `twin schema`: the scenario checks and the JSON Schema for editors.

Headless: imports neither Textual nor the TUI. Both read the scenario fact table
(``scenarios.facts``); `validate` runs exactly the checks `twin run` makes before it writes.
"""

from __future__ import annotations

import json

import click


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
            f"{sim.topo.chips:,} chips, dt {p.dt_s} s, {hours:g} h, {len(s.events)} scheduled events, "
            f"starts {s.start.isoformat()}"
        )
        del sim


def print_schema() -> None:
    from scenarios.facts import json_schema

    click.echo(json.dumps(json_schema(), indent=2, ensure_ascii=False))
