"""Real servers for the interop tests: mosquitto and Prometheus, each on a free loopback port with
a temporary configuration, ready when a condition holds (polled, never a fixed sleep), stopped at
the end. ``.ci/run`` installs both (Debian packages ``mosquitto`` and ``prometheus``); a machine
without them skips these tests, except under CI, where a missing server fails them."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

READY_TIMEOUT_S = 60.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def binary(name: str) -> str:
    for cand in (shutil.which(name), f"/usr/sbin/{name}", f"/usr/bin/{name}"):
        if cand and os.access(cand, os.X_OK):
            return cand
    if os.environ.get("CI"):
        pytest.fail(f"{name} is not installed (.ci/run installs it)")
    pytest.skip(f"{name} is not installed (apt-get install {name})")


def wait_for(cond: Callable[[], bool], what: str, proc: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"{what}: the server exited with {proc.returncode}")
        if cond():
            return
        time.sleep(0.02)
    raise AssertionError(f"{what}: not ready within {READY_TIMEOUT_S} s")


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def http_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


@contextlib.contextmanager
def _running(cmd: list[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def mosquitto(tmp: Path, extra: str = "") -> Iterator[int]:
    """A mosquitto broker on a free port (anonymous, no persistence); yields its port."""
    exe = binary("mosquitto")
    port = free_port()
    conf = tmp / "mosquitto.conf"
    conf.write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n{extra}")
    with _running([exe, "-c", str(conf)], tmp / "mosquitto.log") as proc:
        wait_for(lambda: _accepts(port), "mosquitto", proc)
        yield port


@contextlib.contextmanager
def prometheus(tmp: Path, targets: list[int], interval: str = "250ms") -> Iterator[int]:
    """A Prometheus server on a free port scraping ``127.0.0.1:PORT/metrics`` of each target every
    ``interval``; yields its port once it answers ready."""
    exe = binary("prometheus")
    port = free_port()
    conf = tmp / "prometheus.yml"
    lines = [
        "global:",
        f"  scrape_interval: {interval}",
        f"  scrape_timeout: {interval}",
        "scrape_configs:",
        "  - job_name: twin",
        "    static_configs:",
        "      - targets: [" + ", ".join(f"'127.0.0.1:{p}'" for p in targets) + "]",
    ]
    conf.write_text("\n".join(lines) + "\n")
    cmd = [
        exe,
        f"--config.file={conf}",
        f"--storage.tsdb.path={tmp / 'tsdb'}",
        f"--web.listen-address=127.0.0.1:{port}",
        f"--web.console.templates={tmp}",
        f"--web.console.libraries={tmp}",
    ]

    def ready() -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=1) as r:
                return r.status == 200
        except OSError:
            return False

    with _running(cmd, tmp / "prometheus.log") as proc:
        wait_for(ready, "prometheus", proc)
        yield port


def sampled_after(prom: int, metric: str, t: float) -> bool:
    """Has Prometheus stored a sample of every ``metric`` series timestamped after ``t`` (Unix s)?"""
    q = urllib.parse.quote(f"min(timestamp({metric}))")
    res = http_json(f"http://127.0.0.1:{prom}/api/v1/query?query={q}")["data"]["result"]
    return bool(res) and float(res[0]["value"][1]) > t
