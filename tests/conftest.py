"""Shared fixtures: small factories the tests build themselves (no dependency on ../shared)."""

from __future__ import annotations

import dataclasses
import signal
from pathlib import Path

import pytest

from scenarios.spec import Scenario, parse
from twin.spec import catalog
from twin.spec.params import FactoryParams, HallParams, ServiceParams

# The tests that press Ctrl-C on a child (SIGINT to `twin sql`, a live session, a sweep) need the
# child to take it. A suite started as a background job of a non-interactive shell (`pytest &` in
# a script) inherits SIGINT ignored, and an ignored signal stays ignored in every child across
# exec, so those children never saw the key. A handler of this process's own is reset to the
# default in each child.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

SMALL_TOML = """
name = "small"
seed = 7
dt_s = 60
duration_h = 6

[hall]
system = "trn3-gen2"
ultraservers = 2
ultraservers_per_row = 2

[training]
arrivals_per_day = 40

[training.pretrain]
size_chips = [4, 16, 36, 144]
size_weights = [0.4, 0.3, 0.2, 0.1]

[[services]]
name = "chat"
model = "llama-3.1-70b"
replicas = 2
mean_requests_per_s = 20.0
"""


def small_params(ultraservers: int = 2, seed: int = 7, dt_s: int = 60, **changes: object) -> FactoryParams:
    hall = HallParams(
        system=catalog.system("trn3-gen2"),
        accelerator=catalog.accelerator("trainium3"),
        ultraservers=ultraservers,
        ultraservers_per_row=2,
    )
    p = FactoryParams(
        hall=hall, dt_s=dt_s, seed=seed, services=(ServiceParams(replicas=2, mean_requests_per_s=20.0),)
    )
    return dataclasses.replace(p, **changes) if changes else p


@pytest.fixture(autouse=True)
def _config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test keeps the console's saved queries and history in a folder of its own, never
    the user's (``tui.app`` reads ``TWIN_CONFIG_DIR``)."""
    monkeypatch.setenv("TWIN_CONFIG_DIR", str(tmp_path / "config"))


@pytest.fixture
def small_scenario() -> tuple[Scenario, str]:
    return parse(SMALL_TOML, "small.toml"), SMALL_TOML


@pytest.fixture
def small_run(tmp_path: Path, small_scenario: tuple[Scenario, str]) -> Path:
    from scenarios.runner import run

    spec, text = small_scenario
    out = tmp_path / "small.duckdb"
    run(spec, text, out, duration_s=6 * 3600)
    return out


def job_history(frames: list[dict[str, dict[str, object]]]) -> dict[str, object]:
    """Every job's latest row from the ``jobs`` frames of successive ``advance`` calls (what
    the run file's ``jobs`` table holds): finished jobs leave the model's memory once recorded."""
    import numpy as np

    latest: dict[int, int] = {}
    rows = [f["jobs"] for f in frames]
    for k, r in enumerate(rows):
        for i, jid in enumerate(np.asarray(r["job_id"]).tolist()):
            latest[jid] = (k, i)  # type: ignore[assignment]
    order = sorted(latest)
    out: dict[str, object] = {}
    for col in rows[0]:
        vals = [rows[k][col][i] for k, i in (latest[j] for j in order)]  # type: ignore[misc, index]
        out[col] = np.asarray(vals)
    return out
