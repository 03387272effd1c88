"""Human units for display (MW, °C, %, $). Display units live only in the front end."""

from __future__ import annotations

import math


def _bad(x: float | None) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def power(w: float | None) -> str:
    if _bad(w):
        return "–"
    assert w is not None
    a = abs(w)
    if a >= 1e9:
        return f"{w / 1e9:.2f} GW"
    if a >= 1e6:
        return f"{w / 1e6:.2f} MW"
    if a >= 1e3:
        return f"{w / 1e3:.1f} kW"
    return f"{w:.0f} W"


def energy_mwh(mwh: float | None) -> str:
    if _bad(mwh):
        return "–"
    assert mwh is not None
    return f"{mwh / 1000:.2f} GWh" if abs(mwh) >= 1000 else f"{mwh:,.1f} MWh"


def si(x: float | None, unit: str = "", digits: int = 3) -> str:
    """Engineering notation with k/M/G/T/P/E prefixes."""
    if _bad(x):
        return "–"
    assert x is not None
    if x == 0:
        return f"0 {unit}".strip()
    if abs(x) >= 1e21:
        return f"{x:.{digits}g} {unit}".strip()
    prefixes = [(1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")]
    for f, p in prefixes:
        if abs(x) >= f:
            return f"{x / f:.{digits}g} {p}{unit}".strip()
    return f"{x:.{digits}g} {unit}".strip()


def pct(frac: float | None, digits: int = 1) -> str:
    return "–" if _bad(frac) else f"{100 * frac:.{digits}f} %"  # type: ignore[operator]


def temp(c: float | None) -> str:
    return "–" if _bad(c) else f"{c:.1f} °C"


def money(usd: float | None) -> str:
    if _bad(usd):
        return "–"
    assert usd is not None
    if abs(usd) >= 1e6:
        return f"${usd / 1e6:,.2f} M"
    if abs(usd) >= 1e4:
        return f"${usd / 1e3:,.1f} k"
    return f"${usd:,.2f}"


def duration(s: float | None) -> str:
    if _bad(s):
        return "–"
    assert s is not None
    s = int(s)
    d, r = divmod(s, 86400)
    h, r = divmod(r, 3600)
    m, sec = divmod(r, 60)
    if d:
        return f"{d}d {h:02d}:{m:02d}"
    return f"{h:02d}:{m:02d}:{sec:02d}"


def sim_clock(t_s: int) -> str:
    d, r = divmod(int(t_s), 86400)
    h, r = divmod(r, 3600)
    m, s = divmod(r, 60)
    return f"day {d + 1:>3} {h:02d}:{m:02d}:{s:02d}"
