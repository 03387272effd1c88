"""``--metrics-port``: serve the running twin's latest step as OpenMetrics on 127.0.0.1."""

from __future__ import annotations

from typing import Any

import click

from tui.cli.errors import fail

METRICS_HELP = (
    "Serve live metrics (OpenMetrics / Prometheus text) at http://127.0.0.1:PORT/metrics "
    "while the simulation runs (0: any free port)."
)


def start_metrics(port: int | None) -> Any:
    """A serving ``MetricsExporter``, or None without a port. Exit 2 if the port cannot be used."""
    if port is None:
        return None
    from storage.metrics import MetricsExporter

    if not 0 <= port <= 65535:
        fail(f"--metrics-port {port}: not a TCP port (0-65535)")
    exporter = MetricsExporter()
    try:
        actual = exporter.serve(port)
    except OSError as e:
        fail(f"--metrics-port {port}: cannot listen on 127.0.0.1:{port} ({e.strerror or e})")
    click.echo(f"metrics at http://127.0.0.1:{actual}/metrics", err=True)
    return exporter
