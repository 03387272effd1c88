"""The cases ``bench/bench_scale.py`` measures (and ``bench/bench_writepath.py`` records from):
each case's size and scenario, and the worktree of another revision to measure side by side."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

# name -> (UltraServers, dt_s, hours, label)
CASES: dict[str, tuple[int, int, float, str]] = {
    "us1000": (1000, 15, 24.0, "1,000 UltraServers (144,000 chips), 24 h, dt 15 s"),
    "million": (
        6944,
        60,
        24.0,
        "6,944 UltraServers (999,936 chips: a hall holds at most 1,000,000), 24 h, dt 60 s",
    ),
    "ref30d": (64, 60, 720.0, "reference factory (9,216 chips), 30 days, dt 60 s"),
    "dt1": (64, 1, 24.0, "9,216 chips, 24 h, dt 1 s"),
    "campus": (
        6945,
        60,
        24.0,
        "the built-in ultracluster campus: 16 halls, 6,945 UltraServers (1,000,080 chips), 24 h, dt 60 s",
    ),
    "campus-grid": (
        6945,
        60,
        24.0,
        "the ultracluster campus with 1 s grid recording (grid_ts), 24 h, dt 60 s",
    ),
}


# ---------------------------------------------------------------------------------------- cases
def scenario(case: str, scale: float) -> tuple[Any, str, int]:
    """The reference scenario resized for ``case``: arrivals and service replicas grow with the
    number of UltraServers so the hall stays as busy as the reference factory."""
    import tomllib

    from scenarios.facts import MAX_ARRIVALS_PER_DAY
    from scenarios.spec import load, validate

    nus, dt, hours, _ = CASES[case]
    if case in ("campus", "campus-grid"):  # the built-in scenario as it ships (its own intervals)
        _, text, _ = load("ultracluster")
        data = tomllib.loads(text)
        data.pop("warmup_h", None)  # the recorded run only, as every revision measures it
        if case == "campus-grid":  # and the grid connection's view at 1 s (twin.compose.grid)
            data.setdefault("telemetry", {})["grid_interval_s"] = 1
        duration_s = max(dt, int(round(hours * 3600 * scale / dt)) * dt)
        data["duration_h"] = duration_s / 3600
        return validate(data, f"bench case {case}"), text, duration_s
    _, text, _ = load("reference")
    data = tomllib.loads(text)
    data.pop("warmup_h", None)  # the recorded run only, as every revision measures it
    k = nus / data["hall"]["ultraservers"]
    data["name"] = f"scale-{case}"
    data["hall"]["ultraservers"] = nus
    data["dt_s"] = dt
    # At most the scenario limit (the million-chip case asks ~130,000 a day; it gets the limit).
    data["training"]["arrivals_per_day"] = min(data["training"]["arrivals_per_day"] * k, MAX_ARRIVALS_PER_DAY)
    for s in data.get("services", []):
        s["replicas"] = max(1, int(round(s["replicas"] * k)))
        s["mean_requests_per_s"] = s["mean_requests_per_s"] * k
    duration_s = max(dt, int(round(hours * 3600 * scale / dt)) * dt)
    data["duration_h"] = duration_s / 3600
    return validate(data, f"bench case {case}"), text, duration_s


def worktree(rev: str) -> Path:
    d = Path(tempfile.gettempdir()) / f"twin-bench-{rev}"
    if not d.exists():
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(d), rev],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    return d
