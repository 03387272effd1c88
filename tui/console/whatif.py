"""Operator what-ifs: what each one injects (``Simulation.inject`` kind, target, value, duration).

Targets come from the selection on the Floor and UltraServer screens (an UltraServer, a chip on
it, that chip's server, the UltraServer's row); values are asked in display units (MW, hours, a
factor) and converted here. Every what-if goes through ``Simulation.inject`` and is recorded as an
operator event, so ``twin rerun`` reproduces the session. No Textual imports.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Context:
    """What a what-if can target and size itself from."""

    us: int  # selected UltraServer
    chip: int  # selected chip within it (local index)
    chips_per_us: int
    chips_per_server: int
    us_row: tuple[int, ...]
    facility_w: float = math.nan  # facility power now
    row_it_w: float = math.nan  # IT power of the selected UltraServer's row now

    @property
    def chip_id(self) -> int:
        return self.us * self.chips_per_us + self.chip

    @property
    def server(self) -> int:
        return self.chip_id // max(1, self.chips_per_server)

    @property
    def row(self) -> int:
        return self.us_row[self.us] if self.us_row else 0


@dataclass(frozen=True)
class WhatIf:
    key: str  # hotkey in the what-if menu
    kind: str  # Simulation event kind
    title: str
    target: Callable[[Context], str]  # event target
    describe: Callable[[Context], str]  # the target in words
    value_label: str = ""  # "" = no value asked
    value_default: Callable[[Context], float] = lambda c: 0.0
    value_scale: float = 1.0  # event value = shown value x scale
    duration_label: str = "for [h] (0: until restored)"
    duration_h: float = 2.0


def _mw(w: float, share: float) -> float:
    return round(w * share / 1e6, 3) if math.isfinite(w) and w > 0 else 1.0


WHAT_IFS: tuple[WhatIf, ...] = (
    WhatIf(
        "c",
        "fail_chip",
        "Fail chip",
        lambda c: str(c.chip_id),
        lambda c: f"chip {c.chip_id} (UltraServer {c.us}, chip {c.chip})",
        duration_label="repair after [h] (0: until repaired)",
        duration_h=4.0,
    ),
    WhatIf(
        "v",
        "fail_server",
        "Fail server",
        lambda c: str(c.server),
        lambda c: f"server {c.server} (UltraServer {c.us})",
        duration_label="repair after [h] (0: until repaired)",
        duration_h=4.0,
    ),
    WhatIf(
        "u",
        "fail_ultraserver",
        "Fail UltraServer",
        lambda c: str(c.us),
        lambda c: f"UltraServer {c.us}",
        duration_label="repair after [h] (0: until repaired)",
        duration_h=4.0,
    ),
    WhatIf(
        "d",
        "drain_ultraserver",
        "Drain for maintenance",
        lambda c: str(c.us),
        lambda c: f"UltraServer {c.us}",
        value_label="grace before eviction [h]",
        value_default=lambda c: 0.5,
        duration_label="maintenance [h] (0: until undrained)",
        duration_h=4.0,
    ),
    WhatIf(
        "p",
        "cdu_pump_failure",
        "CDU pump failure",
        lambda c: str(c.row),
        lambda c: f"row {c.row} CDU",
        value_label="flow left [0-1]",
        value_default=lambda c: 0.3,
    ),
    WhatIf(
        "h",
        "chiller_trip",
        "Chiller trip",
        lambda c: "",
        lambda c: "cooling plant",
        value_label="chillers",
        value_default=lambda c: 1.0,
    ),
    WhatIf(
        "t",
        "cooling_tower_loss",
        "Cooling tower loss",
        lambda c: "",
        lambda c: "cooling plant",
        value_label="economizer units",
        value_default=lambda c: 1.0,
    ),
    WhatIf(
        "r",
        "cooling_restore",
        "Restore cooling",
        lambda c: "",
        lambda c: "cooling plant",
        duration_label="",
        duration_h=0.0,
    ),
    WhatIf(
        "a",
        "power_cap",
        "Facility power cap",
        lambda c: "facility",
        lambda c: "facility",
        value_label="cap [MW] (0: clear)",
        value_default=lambda c: _mw(c.facility_w, 0.9),
        value_scale=1e6,
    ),
    WhatIf(
        "b",
        "power_cap",
        "Row power cap",
        lambda c: f"row:{c.row}",
        lambda c: f"row {c.row} (IT power)",
        value_label="cap [MW] (0: clear)",
        value_default=lambda c: _mw(c.row_it_w, 0.8),
        value_scale=1e6,
    ),
    WhatIf(
        "s",
        "inference_surge",
        "Inference surge",
        lambda c: "",
        lambda c: "every service",
        value_label="request rate factor",
        value_default=lambda c: 2.0,
        duration_h=1.0,
    ),
)


def by_key(key: str) -> WhatIf:
    return next(w for w in WHAT_IFS if w.key == key)


def build(
    w: WhatIf, ctx: Context, value: float | None = None, duration_h: float | None = None
) -> tuple[str, str, float, int]:
    """(kind, target, value, duration_s) for ``Simulation.inject``; None = the default."""
    v = w.value_default(ctx) if value is None else value
    d = w.duration_h if duration_h is None else duration_h
    if not (math.isfinite(v) and math.isfinite(d)) or v < 0 or d < 0:
        raise ValueError("values must be non-negative numbers")
    return w.kind, w.target(ctx), float(v) * w.value_scale if w.value_label else 0.0, int(round(d * 3600))


def summary(w: WhatIf, ctx: Context, value: float | None = None, duration_h: float | None = None) -> str:
    """One line for the palette and the notification."""
    v = w.value_default(ctx) if value is None else value
    d = w.duration_h if duration_h is None else duration_h
    parts = [f"{w.title}: {w.describe(ctx)}"]
    if w.value_label:
        parts.append(f"{w.value_label.split(' [')[0].split(' (')[0]} {v:g}{_unit(w)}")
    if w.duration_label and d > 0:
        parts.append(f"{d:g} h")
    return ", ".join(parts)


def _unit(w: WhatIf) -> str:
    if "[MW]" in w.value_label:
        return " MW"
    if "[h]" in w.value_label:
        return " h"
    if "factor" in w.value_label:
        return "×"
    return ""


def context_from(
    meta: Any, us: int, chip: int, facility_w: float = math.nan, row_it_w: float = math.nan
) -> Context:
    return Context(us, chip, meta.chips_per_us, meta.chips_per_server, meta.us_row, facility_w, row_it_w)
