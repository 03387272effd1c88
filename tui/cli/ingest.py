"""`twin ingest`: real telemetry (files, HTTP services, MQTT brokers) into an observed table."""

from __future__ import annotations

import itertools
import math
import statistics
from typing import Any

import click

from tui.cli.errors import EXIT_IO, fail, guard
from tui.cli.options import nonempty_path


@click.command("ingest")
@click.argument("sources", nargs=-1, required=True)
@click.option(
    "--out",
    required=True,
    type=click.Path(dir_okay=False),
    callback=nonempty_path,
    help="Recording to write the observed table to.",
)
@click.option("--overwrite", is_flag=True, help="Replace --out if it exists.")
@click.option(
    "--duration",
    "duration_s",
    type=float,
    default=60.0,
    show_default=True,
    help="Seconds to listen to an MQTT broker.",
)
@click.option(
    "--max-messages",
    type=int,
    default=10_000_000,
    show_default=True,
    help="Stop listening to a broker after this many messages.",
)
@click.option(
    "--idle",
    "idle_s",
    type=float,
    default=10.0,
    show_default=True,
    help="A broker silent this long has stopped: it is flagged stale.",
)
@click.option(
    "--window",
    "window_s",
    type=float,
    default=3600.0,
    show_default=True,
    help="Seconds of history to read from a Prometheus server.",
)
@click.option(
    "--step",
    "step_s",
    type=float,
    default=5.0,
    show_default=True,
    help="Resolution (s) of a Prometheus range query.",
)
@guard
def ingest_cmd(
    sources: tuple[str, ...],
    out: str,
    overwrite: bool,
    duration_s: float,
    max_messages: int,
    idle_s: float,
    window_s: float,
    step_s: float,
) -> None:
    """Read a real floor's telemetry into OUT's `observed` table (time, entity, metric, value,
    unit, source, quality), readable with `twin sql OUT` while it is written.

    \b
    SOURCE is one of:
      FILE                     neuron-monitor JSON (lines), Redfish JSON, Slurm sacct/squeue
                               JSON, Prometheus/DCGM text, BMS CSV trend export (by content)
      http://HOST:PORT/metrics a Prometheus text endpoint, scraped once
      http://HOST:PORT/redfish/v1  a Redfish service (chassis power, rack PDUs, CDUs)
      http://HOST:PORT         a Prometheus server's query API (--window, --step)
      mqtt://HOST:PORT[/FILTER]  BMS points on an MQTT broker (default filter bms/#)
    Field names and units: docs/interop.md. Units are normalised, counters become rates,
    duplicates are dropped; each sample's quality says good, invalid, clock, gap, rate, reset.
    """
    from storage.errors import StorageError
    from storage.interop.observed import ObservedRecorder

    _check_options(sources, duration_s, max_messages, idle_s, window_s, step_s)
    parsed_files = _read_files(sources)  # files first: a bad one stops the ingest before anything is written
    try:
        rec = ObservedRecorder(out, overwrite)
    except StorageError as e:
        fail(str(e))
    report: list[dict[str, Any]] = []
    for s in sources:
        row = _ingest_source(s, parsed_files, rec, duration_s, max_messages, idle_s, window_s, step_s)
        report.append(row)
        click.echo(_source_line(row))
    rec.close(report)
    click.echo(f'observed: {rec.rows:,} samples in {out}  (twin sql {out} "SELECT * FROM observed")')
    if any("error" in row for row in report):
        fail("a source failed (its error is in observed_sources); what was read is recorded", code=EXIT_IO)


# The counts each source's report row keeps (beside its format, clock offset and error).
_COUNTS = ("unmapped", "malformed", "duplicates", "invalid", "clock", "gaps", "resets")


def _check_options(
    sources: tuple[str, ...],
    duration_s: float,
    max_messages: int,
    idle_s: float,
    window_s: float,
    step_s: float,
) -> None:
    """One line and exit code 2 for an option out of its range or a source of no known kind."""
    for name, v, lo, hi in (
        ("--duration", duration_s, 0, 86400 * 365),
        ("--idle", idle_s, 0, 86400),
        ("--window", window_s, 0, 86400 * 3650),
        ("--step", step_s, 0.001, 86400),
    ):
        if not (math.isfinite(v) and lo < v <= hi):
            fail(f"{name} {v!r}: must be in ({lo}, {hi}]")
    if max_messages < 1:
        fail(f"--max-messages {max_messages}: must be at least 1")
    bad = [s for s in sources if "://" in s and not s.startswith(("http://", "https://", "mqtt://"))]
    if bad:
        fail(f"{bad[0]}: a source is a file, http(s)://… or mqtt://…")


def _read_files(sources: tuple[str, ...]) -> dict[str, Any]:
    """Each file source's first batch and the rest to come (a file that does not parse fails)."""
    from storage.interop import sources as src
    from storage.interop.parsed import IngestError

    parsed: dict[str, Any] = {}
    for s in sources:
        if "://" not in s:
            try:
                it = src.read_file_batches(s)
                parsed[s] = (next(it, None), it)
            except IngestError as e:
                fail(str(e))
    return parsed


def _ingest_source(
    s: str,
    parsed_files: dict[str, Any],
    rec: Any,
    duration_s: float,
    max_messages: int,
    idle_s: float,
    window_s: float,
    step_s: float,
) -> dict[str, Any]:
    """Read one source into ``rec``; its report row (counts, format, clock offset, any error)."""
    from storage.interop import sources as src
    from storage.interop.normalise import Normaliser
    from storage.interop.parsed import IngestError

    row: dict[str, Any] = {"source": s, "samples": 0, **dict.fromkeys(_COUNTS, 0), "stale": False}
    offsets: list[float] = []
    try:
        if s in parsed_files:
            first, rest = parsed_files[s]
            batches: Any = itertools.chain([first] if first is not None else [], rest)
        elif s.startswith("mqtt://"):
            sub = src.Mqtt(s, duration_s, max_messages, idle_s)
            batches = sub.batches()
        else:
            batches = src.read_http(s, window_s, step_s)
        norm = Normaliser()
        for p in batches:
            n = norm(p.table, src.now_us())
            rec.append(n.table)
            row["format"] = p.fmt
            row["samples"] += len(n.table)
            row["unmapped"] += p.unmapped
            row["malformed"] += p.malformed
            for k in ("duplicates", "invalid", "clock", "gaps", "resets"):
                row[k] += getattr(n, k)
            offsets += p.offsets_s
        if s.startswith("mqtt://"):
            row["stale"] = sub.stale
            row["malformed"] += sub.dropped
            sub.close()
    except IngestError as e:
        row["error"] = str(e)
    row["clock_offset_s"] = statistics.median(offsets) if offsets else None
    return row


def _source_line(row: dict[str, Any]) -> str:
    """The line ``twin ingest`` prints for one source read."""
    off = "" if row["clock_offset_s"] is None else f", clock offset {row['clock_offset_s']:+.3f} s"
    flags = ", ".join(f"{row[k]:,} {k}" for k in _COUNTS if row[k])
    return (
        f"{row['source']}: {row.get('format', '?')}, {row['samples']:,} samples{', ' + flags if flags else ''}{off}"
        + (", stale (stopped sending)" if row["stale"] else "")
        + (f"; error: {row['error']}" if row.get("error") else "")
    )
