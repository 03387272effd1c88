"""Colour scales and the metrics the Floor and UltraServer maps colour by (no Textual).

Values map to one of eight colour levels, vectorised (``levels``); NaN maps to ``MISSING``. Two
scales: a perceptual one (viridis) for quantities that are neither good nor bad, and a
green-to-red one for quantities where high is bad (temperature, throttling, failures). The text
on a cell is black or white, whichever reads better on its background.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from tui.console import fmt

VIRIDIS = ("#440154", "#46327e", "#365c8d", "#277f8e", "#1fa187", "#4ac16d", "#a0da39", "#fde725")
HEAT = ("#1a9850", "#66bd63", "#a6d96a", "#d9ef8b", "#fee08b", "#fdae61", "#f46d43", "#d73027")
MISSING = "#5a5a5a"
# UltraServer states drawn over any metric's colours: powered off by thermal protection, and down
# (every chip failed: the UltraServer itself failed or is in maintenance).
TRIPPED = "#8700d7"
DOWN = "#000000"
US_OK, US_SOME_FAILED, US_DOWN, US_TRIPPED = 0, 1, 2, 3


def us_states(
    chips_failed: npt.ArrayLike, tripped: npt.ArrayLike | None, chips_per_us: int
) -> npt.NDArray[np.int8]:
    """State of each UltraServer: ``US_TRIPPED`` (thermal protection powered it off; its chips are
    off, not failed), ``US_DOWN`` (all its chips failed), ``US_SOME_FAILED`` or ``US_OK``."""
    failed = np.asarray(chips_failed, dtype=np.float64)
    out = np.where(failed >= max(1, chips_per_us), US_DOWN, np.where(failed > 0, US_SOME_FAILED, US_OK))
    if tripped is not None:
        out = np.where(np.asarray(tripped, dtype=bool), US_TRIPPED, out)
    return out.astype(np.int8)


US_STATE_TEXT = {
    US_OK: "running",
    US_SOME_FAILED: "running, chips failed",
    US_DOWN: "DOWN: every chip failed",
    US_TRIPPED: "TRIPPED: powered off by thermal protection",
}
US_STATE_SHORT = {
    US_OK: "running",
    US_SOME_FAILED: "chips failed",
    US_DOWN: "DOWN (all chips)",
    US_TRIPPED: "TRIPPED (thermal)",
}
SCALES = {"viridis": VIRIDIS, "heat": HEAT}


def levels(values: npt.ArrayLike, lo: float, hi: float, n: int = 8) -> npt.NDArray[np.int64]:
    """Level 0..n-1 of each value on [lo, hi] (clipped); -1 for NaN."""
    v = np.asarray(values, dtype=np.float64)
    span = hi - lo if hi > lo else 1.0
    out = np.floor((v - lo) / span * n).astype(np.float64)
    out = np.clip(out, 0, n - 1)
    return np.where(np.isfinite(v), out, -1).astype(np.int64)


def text_colour(bg: str) -> str:
    """Black or white, whichever contrasts more with the hex colour ``bg``."""
    r, g, b = (int(bg[i : i + 2], 16) / 255 for i in (1, 3, 5))
    lum = 0.2126 * r + 0.7152 * g + 0.0722 * b
    return "#000000" if lum > 0.45 else "#ffffff"


@dataclass(frozen=True)
class Metric:
    key: str
    label: str
    floor_col: str  # column of the floor query (one row per UltraServer)
    chip_col: str  # column of the chips query (one row per chip); "" if not recorded per chip
    scale: str
    fmt: Callable[[float], str]
    floor_range: Callable[[Any], tuple[float, float]]  # meta -> (lo, hi)
    chip_range: Callable[[Any], tuple[float, float]]
    reverse: bool = False  # low values are the bad end (clock)
    help: str = ""

    def colours(self) -> tuple[str, ...]:
        c = SCALES[self.scale]
        return c[::-1] if self.reverse else c


def _temp_range(meta: Any) -> tuple[float, float]:
    return (30.0, float(meta.throttle_c) + 10.0)


def _count(v: float) -> str:
    return "–" if not np.isfinite(v) else f"{v:,.0f}"


METRICS: tuple[Metric, ...] = (
    Metric(
        "activity",
        "Activity",
        "activity",
        "neuroncore_utilization",
        "viridis",
        lambda v: fmt.pct(v, 0),
        lambda m: (0.0, 1.0),
        lambda m: (0.0, 1.0),
        help="Mean chip activity (neuroncore utilisation)",
    ),
    Metric(
        "power",
        "Power",
        "power_w",
        "chip_power_w",
        "viridis",
        fmt.power,
        lambda m: (0.0, float(m.us_power_w) or 1.0),
        lambda m: (0.0, float(m.us_power_w) / max(1, m.chips_per_us) or 1.0),
        help="IT power of the UltraServer / power of the chip (scale: full load)",
    ),
    Metric(
        "temp",
        "Max chip temp",
        "max_chip_temp_c",
        "t_junction_c",
        "heat",
        fmt.temp,
        _temp_range,
        _temp_range,
        help="Hottest junction temperature (scale to 10 K above the throttle point)",
    ),
    Metric(
        "clock",
        "Clock",
        "clock",
        "clock",
        "heat",
        lambda v: fmt.pct(v, 0),
        lambda m: (0.5, 1.0),
        lambda m: (0.5, 1.0),
        reverse=True,
        help="Mean chip clock: below 100 % the chips are throttled (power cap or heat)",
    ),
    Metric(
        "failed",
        "Failed chips",
        "chips_failed",
        "failed",
        "heat",
        _count,
        lambda m: (0.0, float(max(1, m.chips_per_us // 8))),
        lambda m: (0.0, 1.0),
        help="Chips failed and awaiting repair",
    ),
)
METRIC_KEYS = tuple(m.key for m in METRICS)


def metric(key: str) -> Metric:
    return next(m for m in METRICS if m.key == key)
