"""Where a running twin publishes its floor: the ``--emit`` sinks.

    prometheus:PORT      DCGM exporter + kube-state-metrics text at http://127.0.0.1:PORT/metrics
    redfish:PORT         a Redfish service at http://127.0.0.1:PORT/redfish/v1
    neuron:FILE          neuron-monitor reports, one JSON document a line, per UltraServer and step
    slurm:DIR            DIR/sacct.json and DIR/squeue.json, replaced at every commit
    bms-csv:FILE         the BMS points as a trend export (CSV), one row a point and step
    mqtt://HOST:PORT[/SITE]  the BMS points published to an MQTT broker (QoS 1)

``Emitters.update(frames)`` is the runner's ``on_chunk`` hook; it never raises: a failing sink is
logged (logger ``twin.emit``) and counted, and the run goes on. The HTTP services serve the latest
step; the files and the broker get every recorded step. PORT 0: any free port (printed).
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

from storage.interop import emit, emit_redfish
from storage.metrics_server import MetricsServer
from storage.schema import DEFAULT_START

log = logging.getLogger("twin.emit")

KINDS = ("prometheus", "redfish", "neuron", "slurm", "bms-csv", "mqtt")


class EmitSpecError(ValueError):
    pass


def parse(specs: list[str] | tuple[str, ...]) -> list[tuple[str, str]]:
    """``--emit`` values -> [(kind, target)]; ``EmitSpecError`` naming the bad one."""
    out: list[tuple[str, str]] = []
    for spec in specs:
        for part in (p.strip() for p in spec.split(",")):
            if not part:
                continue
            if part.startswith("mqtt://"):
                hostport = part[len("mqtt://") :].split("/", 1)[0]
                host, _, port = hostport.rpartition(":")
                if not host or not port.isdigit() or not 0 < int(port) <= 65535:
                    raise EmitSpecError(f"--emit {part}: want mqtt://HOST:PORT[/SITE]")
                out.append(("mqtt", part))
                continue
            kind, sep, target = part.partition(":")
            if kind == "dcgm":
                kind = "prometheus"
            if kind not in KINDS or not sep or not target:
                raise EmitSpecError(
                    f"--emit {part}: want one of {', '.join(k + ':…' for k in KINDS[:-1])}, mqtt://…"
                )
            if kind in ("prometheus", "redfish") and not (target.isdigit() and 0 <= int(target) <= 65535):
                raise EmitSpecError(f"--emit {part}: {target!r} is not a TCP port (0-65535)")
            out.append((kind, target))
    return out


def _mqtt_target(url: str) -> tuple[str, int, str]:
    rest = url[len("mqtt://") :]
    hostport, _, site = rest.partition("/")
    host, _, port = hostport.rpartition(":")
    return host, int(port), site or "site"


class Emitters:
    """The sinks of one run (``parse``'s list), fed by ``update``."""

    def __init__(
        self, sinks: list[tuple[str, str]], start: _dt.datetime = DEFAULT_START, system: str = "trainium3"
    ) -> None:
        self.state = emit.FloorState(start, system)
        self._lock = threading.Lock()
        self.errors = 0
        self.published = 0
        self.addresses: list[str] = []
        self._servers: list[MetricsServer] = []
        self._files: list[tuple[str, Any]] = []
        self._slurm: list[Path] = []
        self._mqtt: list[tuple[Any, str]] = []
        self._cache: dict[tuple[str, str], tuple[int, bytes]] = {}
        try:
            for kind, target in sinks:
                self._open(kind, target)
        except BaseException:
            self.close()
            raise

    def _open(self, kind: str, target: str) -> None:
        if kind == "prometheus":
            srv = MetricsServer(lambda a, e: (b"", []), int(target), route=self._route_metrics)
            self._servers.append(srv)
            self.addresses.append(
                f"prometheus (DCGM, kube-state-metrics) at http://127.0.0.1:{srv.port}/metrics"
            )
        elif kind == "redfish":
            srv = MetricsServer(lambda a, e: (b"", []), int(target), route=self._route_redfish)
            self._servers.append(srv)
            self.addresses.append(f"redfish at http://127.0.0.1:{srv.port}{emit_redfish.ROOT}")
        elif kind in ("neuron", "bms-csv"):
            f = open(target, "a", encoding="utf-8")
            if kind == "bms-csv" and f.tell() == 0:
                f.write(emit.BMS_CSV_HEADER + "\n")
            self._files.append((kind, f))
            self.addresses.append(f"{kind} to {target}")
        elif kind == "slurm":
            d = Path(target)
            d.mkdir(parents=True, exist_ok=True)
            self._slurm.append(d)
            self.addresses.append(f"slurm JSON in {d}/sacct.json, squeue.json")
        elif kind == "mqtt":
            import paho.mqtt.client as mqtt
            from paho.mqtt.enums import CallbackAPIVersion

            host, port, site = _mqtt_target(target)
            client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"twin-emit-{os.getpid()}")
            client.max_queued_messages_set(0)
            client.connect(host, port, keepalive=30)
            client.loop_start()
            self._mqtt.append((client, site))
            self.addresses.append(f"BMS points to {target} (topics bms/{site}/…)")

    @property
    def ports(self) -> list[int]:
        return [s.port for s in self._servers]

    # ------------------------------------------------------------------ feeding
    def update(self, frames: dict[str, dict[str, Any]]) -> None:
        try:
            with self._lock:
                history = bool(self._files or self._mqtt)
                if history:
                    for st in self.state.steps(frames):
                        self._publish_step(st)
                else:
                    self.state.update(frames)
                for d in self._slurm:
                    for name, doc in (
                        ("sacct.json", emit.slurm_sacct(self.state)),
                        ("squeue.json", emit.slurm_squeue(self.state)),
                    ):
                        tmp = d / f".{name}.tmp"
                        tmp.write_text(emit.dumps(doc))
                        os.replace(tmp, d / name)
                for _, f in self._files:
                    f.flush()
        except Exception:
            self.errors += 1
            if self.errors == 1 or self.errors % 1000 == 0:
                log.exception("emit: update %d failed; the run goes on", self.errors)

    def _publish_step(self, st: emit.FloorState) -> None:
        for kind, f in self._files:
            if kind == "neuron":
                for doc in emit.neuron_reports(st):
                    f.write(emit.dumps(doc) + "\n")
            else:
                lines = emit.bms_csv_lines(st)
                if lines:
                    f.write("\n".join(lines) + "\n")
        for client, site in self._mqtt:
            for topic, payload in emit.bms_points(st, site):
                info = client.publish(topic, json.dumps(payload, allow_nan=False), qos=1)
                info.wait_for_publish(timeout=10)
                self.published += 1

    # ------------------------------------------------------------------ serving
    def _cached(self, key: tuple[str, str], make: Any) -> bytes:
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None and hit[0] == self.state.version:
                return hit[1]
            body: bytes = make()
            if body:  # a missing resource is not kept: a client naming many paths costs nothing
                self._cache[key] = (self.state.version, body)
            return body

    def _route_metrics(
        self, target: str, headers: dict[str, str]
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        if target.split("?", 1)[0] not in ("/metrics", "/"):
            return 404, [], b"see /metrics\n"
        body = self._cached(("metrics", ""), lambda: emit.prometheus_text(self.state).encode())
        return 200, [("Content-Type", "text/plain; version=0.0.4; charset=utf-8")], body

    def _route_redfish(
        self, target: str, headers: dict[str, str]
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        path = target.split("?", 1)[0]
        doc_bytes = self._cached(
            ("redfish", path),
            lambda: b"" if (d := emit_redfish.redfish(self.state, path)) is None else emit.dumps(d).encode(),
        )
        if not doc_bytes:
            body = emit.dumps(
                {"error": {"code": "Base.1.0.ResourceMissingAtURI", "message": f"no resource {path[:200]}"}}
            )
            return 404, [("Content-Type", "application/json")], body.encode()
        return 200, [("Content-Type", "application/json"), ("OData-Version", "4.0")], doc_bytes

    def close(self) -> None:
        for s in self._servers:
            s.close()
        self._servers = []
        for _, f in self._files:
            f.close()
        self._files = []
        for client, _ in self._mqtt:
            client.loop_stop()
            client.disconnect()
        self._mqtt = []
