"""Reading the sources of ``twin ingest``: files, HTTP services and MQTT brokers.

    FILE                    format known by its content (``ingest.sniff``)
    http(s)://…/metrics     a Prometheus text endpoint, scraped once
    http(s)://…/redfish/v1  a Redfish service: every mapped resource under its collections
    http(s)://HOST:PORT     a Prometheus server's HTTP query API (``/api/v1/query_range`` over
                            the last ``window_s`` at ``step_s``), for every mapped series
    mqtt://HOST:PORT[/FILTER]  BMS points on a broker (topic filter default ``bms/#``), until
                            ``duration_s`` passes, ``max_messages`` arrive or the source stops
                            (no message for ``idle_s``: flagged stale)

Each yields ``Parsed`` batches (``storage.interop.ingest``); a broker's messages are parsed and
handed on every ``BATCH_MESSAGES`` so memory stays bounded whatever the flood.
"""

from __future__ import annotations

import email.utils
import json
import queue
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

import numpy as np

from storage.interop import ingest
from storage.interop.mapping import FIELDS
from storage.interop.parse_bms import parse_bms_messages
from storage.interop.parse_json import parse_redfish
from storage.interop.parse_prometheus import parse_prometheus_text
from storage.interop.parsed import MAX_DOCUMENT_BYTES, MAX_LABEL_CHARS, IngestError, Parsed

BATCH_MESSAGES = 50_000
QUEUE_MESSAGES = 200_000  # messages held between the broker's thread and the parser at most
QUEUE_BYTES = 64 << 20  # and their payloads' bytes at most
MAX_PAYLOAD_BYTES = 64 << 10  # a BMS point is ~100 bytes; a larger payload is cut (then malformed)
MAX_HTTP_BYTES = MAX_DOCUMENT_BYTES
MAX_REDFISH_RESOURCES = 100_000


def now_us() -> int:
    return int(time.time() * 1e6)


def _get(url: str, timeout: float = 10.0) -> tuple[bytes, float | None]:
    """The body and the clock offset (our receipt - the server's ``Date``) of a GET."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            body = r.read(MAX_HTTP_BYTES + 1)
            date = r.headers.get("Date")
    except OSError as e:
        raise IngestError(f"{url}: {getattr(e, 'reason', None) or e}") from None
    if len(body) > MAX_HTTP_BYTES:
        raise IngestError(f"{url}: answer above {MAX_HTTP_BYTES:,} bytes")
    off = None
    if date:
        try:
            off = time.time() - email.utils.parsedate_to_datetime(date).timestamp()
        except (TypeError, ValueError):
            off = None
    return body, off


TEXT_CHUNK_BYTES = 8 << 20  # a text file is parsed this much at a time (at a line's end)


def read_file(path: str) -> Parsed:
    """A whole file parsed as one batch (documents of up to ``MAX_DOCUMENT_BYTES``)."""
    batches = list(read_file_batches(path))
    if len(batches) == 1:
        return batches[0]
    import pyarrow as pa

    first = batches[0]
    first.table = pa.concat_tables([b.table for b in batches])
    first.unmapped = sum(b.unmapped for b in batches)
    first.malformed = sum(b.malformed for b in batches)
    return first


def read_file_batches(path: str) -> Iterator[Parsed]:
    """A file's batches: a JSON document at once (up to ``MAX_DOCUMENT_BYTES``), Prometheus text
    and CSV ``TEXT_CHUNK_BYTES`` at a time, so memory does not grow with the file. The format is
    checked (and a JSON document read) before the first batch is handed on."""
    try:
        f = open(path, "rb")
    except OSError as e:
        raise IngestError(f"{path}: {e.strerror or e}") from None
    try:
        try:
            head = f.read(TEXT_CHUNK_BYTES)
        except OSError as e:
            raise IngestError(f"{path}: {e.strerror or e}") from None
        try:
            fmt = ingest.sniff(head)
        except IngestError:
            fmt = "json"
        if fmt not in ("prometheus-text", "bms-csv"):
            rest = f.read(MAX_DOCUMENT_BYTES + 1 - len(head))
            yield ingest.parse_bytes(head + rest, path, now_us())
            return
        header = head.split(b"\n", 1)[0] + b"\n" if fmt == "bms-csv" else b""
        carry = b""
        first = True
        while head:
            data = carry + head
            cut = data.rfind(b"\n") + 1
            if cut == 0 and len(head) == TEXT_CHUNK_BYTES and len(data) < 4 * TEXT_CHUNK_BYTES:
                carry = data  # a line longer than a chunk: wait for its end (bounded)
            else:
                cut = cut or len(data)
                body, carry = data[:cut], data[cut:]
                yield ingest.parse_bytes(body if first else header + body, path, now_us(), fmt)
                first = False
            head = f.read(TEXT_CHUNK_BYTES)
        if carry:
            yield ingest.parse_bytes(carry if first else header + carry, path, now_us(), fmt)
    finally:
        f.close()


def read_http(url: str, window_s: float, step_s: float) -> Iterator[Parsed]:
    path = urllib.parse.urlparse(url).path
    if "/redfish" in path:
        yield _redfish(url)
    elif path.rstrip("/").endswith("/metrics"):
        body, off = _get(url)
        p = ingest.parse_bytes(body, url, now_us())
        if off is not None:
            p.offsets_s.append(off)
        yield p
    else:
        yield _prometheus_api(url, window_s, step_s)


def _redfish(url: str) -> Parsed:
    """Every resource under the service root's collections (breadth first, bounded)."""
    u = urllib.parse.urlparse(url)
    base = f"{u.scheme}://{u.netloc}"
    todo = [u.path.rstrip("/") or "/redfish/v1"]
    seen: set[str] = set()
    docs: list[dict[str, Any]] = []
    offs: list[float] = []
    while todo and len(seen) < MAX_REDFISH_RESOURCES:
        p = todo.pop(0)
        if p in seen or not p.startswith("/redfish/v1"):
            continue
        seen.add(p)
        body, off = _get(base + p)
        if off is not None:
            offs.append(off)
        try:
            doc = json.loads(body)
        except (ValueError, RecursionError):
            raise IngestError(f"{base + p}: not a Redfish JSON resource") from None
        if not isinstance(doc, dict):
            continue
        docs.append(doc)
        for k, v in doc.items():
            if k == "Members" and isinstance(v, list):
                todo += [m.get("@odata.id", "") for m in v if isinstance(m, dict)]
            elif isinstance(v, dict) and isinstance(v.get("@odata.id"), str) and not k.startswith("@"):
                todo.append(v["@odata.id"].split("#")[0])
    parsed = parse_redfish(docs, url, now_us())
    parsed.offsets_s = offs
    return parsed


def _prometheus_api(url: str, window_s: float, step_s: float) -> Parsed:
    """Every mapped series of a Prometheus server over the last ``window_s`` (query_range)."""
    names = sorted({f.field for f in FIELDS if f.fmt in ("dcgm", "kube-state-metrics")})
    end = time.time()
    q = urllib.parse.urlencode(
        {
            "query": '{__name__=~"' + "|".join(names) + '"}',
            "start": f"{end - window_s:.3f}",
            "end": f"{end:.3f}",
            "step": f"{step_s:g}",
        }
    )
    body, off = _get(url.rstrip("/") + "/api/v1/query_range?" + q)
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        raise IngestError(f"{url}: not a Prometheus query API answer (not JSON)") from None
    if not isinstance(doc, dict) or doc.get("status") != "success":
        raise IngestError(
            f"{url}: Prometheus answered {str(doc.get('error') if isinstance(doc, dict) else doc)[:160]}"
        )
    # The matrix as exposition lines with timestamps, then the one vectorised text parser.
    lines = []
    for s in (doc.get("data") or {}).get("result") or []:
        m = dict(s.get("metric") or {})
        name = str(m.pop("__name__", ""))
        lab = ",".join(f'{k}="{v}"' for k, v in m.items() if k not in ("instance", "job"))
        vals = np.asarray(s.get("values") or [], dtype=object)
        if not len(vals):
            continue
        ts_ms = (vals[:, 0].astype(np.float64) * 1000).astype(np.int64)
        lines += [
            f"{name}{{{lab}}} {v} {t}" for t, v in zip(ts_ms.tolist(), vals[:, 1].tolist(), strict=True)
        ]
    p = parse_prometheus_text("\n".join(lines), url, now_us())
    if off is not None:
        p.offsets_s.append(off)
    p.fmt = "prometheus-api"
    return p


class Mqtt:
    """A subscription to a broker; ``batches()`` yields parsed batches until it ends."""

    def __init__(self, url: str, duration_s: float, max_messages: int, idle_s: float) -> None:
        """Subscribe (``IngestError`` if the broker cannot be reached or does not confirm).
        Memory: at most ``QUEUE_MESSAGES`` messages and ``QUEUE_BYTES`` of payload wait to be
        parsed; what does not fit is counted in ``dropped``."""
        u = urllib.parse.urlparse(url)
        if not u.hostname or not u.port:
            raise IngestError(f"{url}: want mqtt://HOST:PORT[/TOPIC-FILTER]")
        self.url = url
        self.filter = u.path.lstrip("/") or "bms/#"
        self.duration_s, self.max_messages, self.idle_s = duration_s, max_messages, idle_s
        self.q: queue.Queue[tuple[str, bytes, int]] = queue.Queue(QUEUE_MESSAGES)
        self.dropped = 0
        self.received = 0  # messages the broker delivered (queued or dropped)
        self.queued_bytes = 0
        self.stale = False
        import paho.mqtt.client as mqtt
        from paho.mqtt.enums import CallbackAPIVersion

        self.client = mqtt.Client(CallbackAPIVersion.VERSION2)
        self.client.on_message = self._on_message
        subscribed = []
        self.client.on_subscribe = lambda *a: subscribed.append(1)
        try:
            self.client.connect(u.hostname, u.port, keepalive=30)
        except OSError as e:
            raise IngestError(f"{url}: cannot connect ({e.strerror or e})") from None
        self.client.subscribe(self.filter, qos=1)
        self.client.loop_start()
        deadline = time.monotonic() + 10
        while not subscribed and time.monotonic() < deadline:
            time.sleep(0.01)
        if not subscribed:
            self.close()
            raise IngestError(f"{url}: the broker did not confirm the subscription to {self.filter}")

    def _on_message(self, client: Any, userdata: Any, msg: Any) -> None:
        self.received += 1
        payload = bytes(msg.payload[:MAX_PAYLOAD_BYTES])
        if self.queued_bytes + len(payload) > QUEUE_BYTES:
            self.dropped += 1
            return
        try:
            self.q.put_nowait((str(msg.topic)[:MAX_LABEL_CHARS], payload, now_us()))
            self.queued_bytes += len(payload)
        except queue.Full:  # the parser is behind: counted, and the broker's flow goes on
            self.dropped += 1

    def batches(self) -> Iterator[Parsed]:
        start = time.monotonic()
        got = 0
        last = time.monotonic()
        buf: list[tuple[str, bytes, int]] = []
        while got < self.max_messages and time.monotonic() - start < self.duration_s:
            try:
                item = self.q.get(timeout=0.05)
                self.queued_bytes -= len(item[1])
                buf.append(item)
                got += 1
                last = time.monotonic()
            except queue.Empty:
                if time.monotonic() - last > self.idle_s:
                    self.stale = True
                    break
            if len(buf) >= BATCH_MESSAGES:
                yield parse_bms_messages(buf, self.url)
                buf = []
        if buf:
            yield parse_bms_messages(buf, self.url)

    def close(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()
