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


def count(n: float | None) -> str:
    return "–" if _bad(n) else f"{n:,.0f}"


def span_ms(s: float | None) -> str:
    """'85 ms', '1.24 s' — a latency; '–' when unknown."""
    if s is None or not math.isfinite(s):
        return "–"
    return f"{s * 1000:.0f} ms" if s < 1 else f"{s:.2f} s"


def span(s: float | None) -> str:
    """A length of time: '45 s', '12 min', '3.5 h', '2.0 d'."""
    if _bad(s):
        return "–"
    assert s is not None
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    if s < 2 * 86400:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} d"


def window(s: float) -> str:
    """A plot window: '1 h', '6 h', '24 h', '7 d'."""
    return f"{s / 86400:g} d" if s >= 2 * 86400 else f"{s / 3600:g} h"


def short_clock(t_s: int) -> str:
    """'d3 14:05' — compact simulated time for scales and logs."""
    d, r = divmod(int(t_s), 86400)
    return f"d{d + 1} {r // 3600:02d}:{r % 3600 // 60:02d}"


def sample_age(sample_t: int | None, shown_t: int | None) -> str:
    """'sample d1 12:45, 15 min before' — a sample (a tier recorded every few steps) older than the
    time shown; '' when it is of that time (or either is unknown)."""
    if sample_t is None or shown_t is None or sample_t >= shown_t:
        return ""
    return f"sample {short_clock(sample_t)}, {span(shown_t - sample_t)} before"


def parse_time(text: str) -> int | None:
    """'d3 14:05', 'd3', '14:05' (day 1), '38.5' or '38.5h' (hours), '2d' (days) -> seconds."""
    import re

    s = text.strip().lower()
    m = re.fullmatch(r"(?:day\s*|d)(\d+)(?:\s+(\d{1,2}):(\d{2})(?::(\d{2}))?)?", s)
    if m:
        d = int(m.group(1)) - 1
        h, mi, se = (int(m.group(i) or 0) for i in (2, 3, 4))
        return max(0, d) * 86400 + h * 3600 + mi * 60 + se
    m = re.fullmatch(r"(\d{1,2}):(\d{2})(?::(\d{2}))?", s)
    if m:
        return int(m.group(1)) * 3600 + int(m.group(2)) * 60 + int(m.group(3) or 0)
    m = re.fullmatch(r"(\d+(?:\.\d*)?)\s*([hd]?)", s)
    if m:
        v = float(m.group(1))
        return int(round(v * (86400 if m.group(2) == "d" else 3600)))
    return None
