"""Real telemetry -> observed samples (time, entity, metric, value, unit, source, quality).

Every parser maps a format's fields to the twin's quantities through the mapping table
(``storage.interop.mapping``) and returns an Arrow table of ``OBSERVED``'s columns plus the count
of samples whose field the twin does not map (counted, never fatal) and of lines it could not
read. Parsing is vectorised: the Prometheus text and CSV with Arrow's compute kernels over all
lines at once, JSON documents by walking their structure (one Python step per entity, not per
sample where the format groups samples, as neuron-monitor's per-core maps do).

This module sniffs a file's format and hands it to that format's parser (``parse_prometheus``,
``parse_json`` for neuron-monitor, Redfish and Slurm, ``parse_bms``); ``parsed`` holds what they
share. ``normalise`` (``storage.interop.normalise``) then brings a batch to the recording's terms.
"""

from __future__ import annotations

import csv
import io
import json
import re
from typing import Any

from storage.interop.parse_bms import parse_bms_csv
from storage.interop.parse_json import parse_neuron_monitor, parse_redfish, parse_slurm
from storage.interop.parse_prometheus import parse_prometheus_text
from storage.interop.parsed import (
    MAX_DOCUMENT_BYTES,
    IngestError,
    Parsed,
)


# ---------------------------------------------------------------------- sniffing
def sniff(data: bytes) -> str:
    """The format of a file's content: neuron-monitor, redfish, slurm (JSON), prometheus-text,
    bms-csv. ``IngestError`` when it is none of them."""
    head = data[:4096].lstrip()
    if head.startswith(b"{") or head.startswith(b"["):
        if b'"neuron_runtime_data"' in data[: 1 << 20] or b'"neuron_hardware_info"' in data[: 1 << 20]:
            return "neuron-monitor"
        if b'"@odata.id"' in head:
            return "redfish"
        if b'"jobs"' in data[: 1 << 20]:
            return "slurm"
        raise IngestError("JSON of no known format (not neuron-monitor, Redfish or Slurm)")
    first = head.split(b"\n", 1)[0].strip()
    if first.lower().startswith(b"timestamp,point,value"):
        return "bms-csv"
    if (
        head.startswith(b"# HELP")
        or head.startswith(b"# TYPE")
        or re.match(rb"[a-zA-Z_:][a-zA-Z0-9_:]*(\{|[ \t])", head)
    ):
        return "prometheus-text"
    raise IngestError(
        "not a known telemetry format (neuron-monitor, Redfish, Slurm JSON, Prometheus text, BMS CSV)"
    )


def parse_bytes(data: bytes, source: str, now_us: int, fmt: str | None = None) -> Parsed:
    """Parse a file's content by its sniffed format (or ``fmt``: a later chunk of a text file
    whose format its start told); ``IngestError`` naming ``source`` otherwise."""
    if len(data) > MAX_DOCUMENT_BYTES:
        raise IngestError(
            f"{source}: {len(data):,} bytes, above the {MAX_DOCUMENT_BYTES:,}-byte limit of one document"
        )
    try:
        fmt = fmt or sniff(data)
    except IngestError as e:
        if data.lstrip()[:1] in (b"{", b"["):  # JSON of no known format, or no JSON at all
            _json_docs(data.decode("utf-8", "replace"), source)
        raise IngestError(f"{source}: {e}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise IngestError(f"{source}: not UTF-8 text (byte {e.start})") from None
    if fmt == "prometheus-text":
        return parse_prometheus_text(text, source, now_us)
    if fmt == "bms-csv":
        return parse_bms_csv(text, source)
    docs = _json_docs(text, source)
    if fmt == "neuron-monitor":
        return parse_neuron_monitor(docs, source, now_us)
    if fmt == "redfish":
        return parse_redfish(docs, source, now_us)
    if len(docs) != 1:
        raise IngestError(f"{source}: a Slurm document is one JSON object")
    return parse_slurm(docs[0], source, now_us)


def _json_docs(text: str, source: str) -> list[dict[str, Any]]:
    """One JSON document, a list of them, or one a line (neuron-monitor's stream)."""
    try:
        doc = json.loads(text, parse_constant=lambda c: None)
        docs = doc if isinstance(doc, list) else [doc]
    except json.JSONDecodeError as e:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        if len(lines) < 2:
            raise IngestError(
                f"{source}: malformed JSON (line {e.lineno}, column {e.colno}: {e.msg})"
            ) from None
        docs = []
        for i, ln in enumerate(lines, 1):
            try:
                docs.append(json.loads(ln, parse_constant=lambda c: None))
            except json.JSONDecodeError as e2:
                raise IngestError(f"{source}: malformed JSON on line {i} ({e2.msg})") from None
    except RecursionError:
        raise IngestError(f"{source}: JSON nested too deeply") from None
    bad = [d for d in docs if not isinstance(d, dict)]
    if bad:
        raise IngestError(f"{source}: a document is a JSON {type(bad[0]).__name__}, not an object")
    return docs


def csv_escape(s: str) -> str:
    buf = io.StringIO()
    csv.writer(buf).writerow([s])
    return buf.getvalue().strip()
