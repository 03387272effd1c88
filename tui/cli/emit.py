"""``--emit``: publish the running floor in real telemetry formats (``storage.interop.sinks``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from tui.cli.errors import fail

EMIT_HELP = (
    # The sinks and their targets are storage.interop.sinks'; this is their one-line help.
    "Publish the running floor in real telemetry formats; comma-separated, repeatable: "
    "prometheus:PORT (DCGM exporter and kube-state-metrics text at /metrics), redfish:PORT "
    "(Redfish chassis power, rack PDUs, CDUs at /redfish/v1), neuron:FILE (neuron-monitor JSON "
    "lines), slurm:DIR (sacct.json, squeue.json), bms-csv:FILE, mqtt://HOST:PORT[/SITE] (BMS points "
    "on an MQTT broker). PORT 0 picks a free port. Field names: docs/interop.md."
)


def start_emit(specs: tuple[str, ...], spec: Any) -> Any:
    """The run's ``Emitters`` (None without ``--emit``). Exit 2 for a bad value or a sink that
    cannot be opened (a port in use, a broker not answering, a folder not writable)."""
    if not specs:
        return None
    from storage.interop.sinks import EmitSpecError, Emitters, parse

    try:
        sinks = parse(specs)
    except EmitSpecError as e:
        fail(str(e))
    try:
        em = Emitters(sinks, start=spec.start, system=str(spec.hall.system))
    except OSError as e:
        fail(f"--emit: cannot open a sink ({e.strerror or e})")
    for a in em.addresses:
        click.echo(f"emitting {a}", err=True)
    return em


def chunk_hook(*sinks: Any) -> Callable[[Any], None] | None:
    """One ``on_chunk`` calling ``update`` of every sink given (None: no sink)."""
    live = [s for s in sinks if s]
    if not live:
        return None

    def hook(frames: Any) -> None:
        for s in live:
            s.update(frames)

    return hook
