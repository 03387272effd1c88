"""The facts of the run on screen (``Meta``: its size, layout, plant and limits, read from a
live session or a recorded file) and the parameters its panels' queries take (``params_for``, the
plot windows). No Textual imports here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from twin.physics.design import Design, derive

HOUR_S = 3600
DAY_S = 86400
WINDOWS_S = (HOUR_S, 6 * HOUR_S, DAY_S, 7 * DAY_S)  # plot windows, ``w`` cycles
DEFAULT_WINDOW_S = DAY_S
DEFAULT_THROTTLE_C = 90.0

Array = npt.NDArray[Any]
Cols = dict[str, Array]


def sample_time(cols: Cols | None) -> int | None:
    """Time of the ultraserver_ts sample a floor or rows query's columns are of (None: no rows)."""
    t = cols.get("time_s") if cols else None
    return int(t[0]) if t is not None and len(t) else None


@dataclass(frozen=True)
class Meta:
    """Fixed facts about the run on screen."""

    mode: str  # "live" | "replay"
    scenario: str
    path: str
    run_id: str
    dt_s: int
    ultraservers: int
    chips_total: int
    chips_per_us: int
    servers_per_us: int
    us_row: tuple[int, ...]  # row (CDU) of each UltraServer
    throttle_c: float = DEFAULT_THROTTLE_C
    us_power_w: float = 0.0  # full-load IT power of one UltraServer (colour scale), 0 unknown
    slos: tuple[tuple[str, float, float], ...] = ()  # per service: (name, TTFT SLO s, TPOT SLO s)
    chillers: int = 0  # the plant's chiller units (0 unknown)
    economizers: int = 0  # its cooling towers or dry coolers
    plant: str = "tower"  # "tower" | "dry" | "hybrid"
    us_hall: tuple[int, ...] = ()  # hall of each UltraServer on a campus (empty: one hall)
    ramp_limit_mw_per_min: float = 0.0  # the grid connection's ramp limit (0: none)
    battery_power_w: float = 0.0  # the site battery's ratings at the connection (0: none)
    battery_energy_j: float = 0.0
    battery_efficiency: float = 0.0

    @property
    def rows(self) -> int:
        return max(self.us_row) + 1 if self.us_row else 1

    @property
    def halls(self) -> int:
        return max(self.us_hall) + 1 if self.us_hall else 1

    def hall_span(self, hall: int) -> tuple[int, int]:
        """First and last UltraServer of ``hall`` (ids are campus-wide, hall by hall)."""
        if not self.us_hall:
            return 0, self.ultraservers - 1
        lo = self.us_hall.index(hall)
        return lo, lo + self.us_hall.count(hall) - 1

    def hall_of(self, us: int) -> int:
        return self.us_hall[us] if self.us_hall else 0

    @property
    def chips_per_server(self) -> int:
        return max(1, self.chips_per_us // max(1, self.servers_per_us))


def params_for(meta: Meta, t: int | None, **extra: Any) -> dict[str, Any]:
    """Parameters of the panel queries at time ``t``."""
    p: dict[str, Any] = {
        "run_id": meta.run_id,
        "t": int(t or 0),
        "chips_per_us": meta.chips_per_us,
        "servers_per_us": meta.servers_per_us,
        "window_s": DEFAULT_WINDOW_S,
        "dt_s": meta.dt_s,
        "ramp_limit_mw_per_min": meta.ramp_limit_mw_per_min,
    }
    p.update(extra)
    if "us" in p:
        p["row"] = meta.us_row[int(p["us"])] if meta.us_row else 0
    if "hall" in p:
        p["us_lo"], p["us_hi"] = meta.hall_span(int(p["hall"]))
    return p


def us_halls(params: Any, ultraservers: int) -> tuple[int, ...]:
    """The hall of each UltraServer of a campus from its scenario's ``[[halls]]`` (UltraServers are
    numbered hall by hall); empty for one hall, or when the halls do not add up to ``ultraservers``."""
    try:
        counts = [sum(int(r.ultraservers) for r in h.pools()) for h in params.halls]
    except (AttributeError, TypeError, ValueError):
        return ()
    if len(counts) < 2 or sum(counts) != ultraservers:
        return ()
    return tuple(int(h) for h in np.repeat(np.arange(len(counts)), counts))


def _nominal_us_power(design: Design | None) -> float:
    """Full-load IT power of one UltraServer (chips at TDP, hosts, switches, rectifier losses)
    from the run's Design; 0 unknown."""
    return float(design.us_full_load_it_w) if design is not None else 0.0


def _throttle_c(design: Design | None) -> float:
    return float(design.throttle_temp_c) if design is not None else DEFAULT_THROTTLE_C


def run_design(run: dict[str, Any]) -> Design | None:
    """The Design recorded with the run; for a file written before Designs were recorded, the
    one its scenario text gives."""
    text = run.get("design_json")
    if text:
        try:
            return Design.from_json(str(text))
        except (ValueError, TypeError):
            pass
    params = params_from_toml(run.get("scenario_toml"))
    try:
        return derive(params) if params is not None else None
    except Exception:  # parameters of an unexpected shape
        return None


def _service_slos(params: Any) -> tuple[tuple[str, float, float], ...]:
    """Each inference service's latency SLO (p99 TTFT and TPOT) from the scenario."""
    try:
        return tuple((str(sp.name), float(sp.ttft_slo_s), float(sp.tpot_slo_s)) for sp in params.services)
    except (AttributeError, TypeError):
        return ()


def _plant_units(params: Any) -> dict[str, Any]:
    """The plant's unit counts and kind from the scenario (none known: empty)."""
    try:
        cp = params.cooling
        return {
            "chillers": int(cp.chiller_units),
            "economizers": int(cp.economizer_units),
            "plant": str(cp.plant),
        }
    except (AttributeError, TypeError, ValueError):
        return {}


def _grid_facts(params: Any) -> dict[str, Any]:
    """The grid connection's ramp limit and site battery ratings from the scenario (none: empty)."""
    try:
        gp = params.grid
        return {
            "ramp_limit_mw_per_min": float(gp.ramp_limit_mw_per_min),
            "battery_power_w": float(gp.battery_power_w),
            "battery_energy_j": float(gp.battery_energy_j),
            "battery_efficiency": float(gp.battery_efficiency),
        }
    except (AttributeError, TypeError, ValueError):
        return {}


def params_from_toml(text: str | None) -> Any:
    try:
        from scenarios.spec import parse

        return parse(text or "", "run").to_params()
    except Exception:  # an old or foreign scenario text: the defaults will do
        return None


def model_facts(design: Design | None, params: Any) -> dict[str, Any]:
    """The ``Meta`` fields read from the run's Design and model parameters (either may be None:
    the defaults)."""
    return {
        "throttle_c": _throttle_c(design),
        "us_power_w": _nominal_us_power(design),
        "slos": _service_slos(params),
        **_plant_units(params),
        **_grid_facts(params),
    }


def scenario_label(name: str, scenario_toml: str | None, width: int = 60) -> str:
    """The scenario's name for the status line, with the ``--set`` overrides its recorded text
    names (``default (modified: site.climate=hot)``), shortened to about ``width`` characters."""
    from storage.kpis import recorded_overrides

    sets = recorded_overrides(scenario_toml)
    if not sets:
        return name
    shown: list[str] = []
    for i, o in enumerate(sets):
        rest = len(sets) - i
        if shown and len(name) + sum(len(x) + 2 for x in shown) + len(o) > width:
            shown.append(f"+{rest} more")
            break
        shown.append(o if len(o) <= width else o[: width - 1] + "…")
    return f"{name} (modified: {', '.join(shown)})"
