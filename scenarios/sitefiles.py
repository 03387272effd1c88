"""Site input files: hourly weather (EPW or CSV), electricity price and grid carbon (CSV).

Reading files is I/O, so it lives here; the model (``twin.physics.site``) receives one year of hourly
NumPy arrays, index 0 = 1 January 00:00, 8,760 values (8,784 for a leap year), and interpolates
and wraps them itself. Every problem raises ``SiteFileError`` whose text names the file and, where
there is one, the line: ``weather.csv:17: drybulb_c: not a number (got 'abc')``.

Formats
-------
EPW (EnergyPlus weather; EnergyPlus "Auxiliary Programs", Weather Converter Program, "EnergyPlus
Weather File (EPW) Data Dictionary"): 8 header lines (LOCATION ... DATA PERIODS), then one
comma-separated row per hour: 1 year, 2 month, 3 day, 4 hour (1-24; row "hour h" covers
h-1..h), 5 minute, 6 data source flags, 7 dry-bulb [°C], 8 dew point [°C], 9 relative humidity
[%], 10 station pressure [Pa], ... (35 fields). Missing values: dry-bulb and dew point >= 99.9,
relative humidity >= 999. Only hourly files (one record per hour) are read. A missing relative
humidity is computed from the dew point (Magnus formula). Row k is the value at the end of its
hour, i.e. at k + 1 hours after 1 January 00:00.

CSV: a header line, then one row per hour. Time column ``hour`` (0, 1, 2, ... hours since
1 January 00:00) or ``timestamp`` (ISO 8601, hourly, first row 1 January 00:00). Weather files:
``drybulb_c`` and either ``rel_humidity`` (fraction 0-1) or ``wetbulb_c``; price files
``price_usd_per_mwh``; carbon files ``carbon_g_per_kwh``. Other columns are ignored.
"""

from __future__ import annotations

import csv
import datetime as _dt
import io
import math
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from scenarios.facts import MAX_SITE_FILE_BYTES
from twin.physics import site as sitephys

FloatArray = npt.NDArray[np.float64]

YEAR_HOURS = (8760, 8784)
EPW_HEADER_LINES = 8
# 1-based EPW field numbers (EPW data dictionary: N1 year ... A1 flags, N6 dry-bulb, N7 dew
# point, N8 relative humidity).
EPW_HOUR, EPW_DRYBULB, EPW_DEWPOINT, EPW_RH = 4, 7, 8, 9
EPW_MISSING_TEMP = 99.9
EPW_MISSING_RH = 999.0


class SiteFileError(Exception):
    """A site input file cannot be used; ``str()`` names the file, the line and the problem."""


@dataclass(frozen=True)
class Weather:
    """One year of hourly outdoor conditions (index 0 = 1 January 00:00)."""

    drybulb_c: FloatArray
    rel_humidity: FloatArray  # [-]
    wetbulb_c: FloatArray | None  # given by the file; None: the model computes it (Stull 2011)


# ---------------------------------------------------------------------- helpers
def file_problem(path: Path, limit: int, what: str) -> str | None:
    """Why ``path`` cannot be read as a ``what`` (None if it can): it must be a regular file of
    at most ``limit`` bytes. Checked before reading a byte, so ``/dev/zero``, a FIFO or a huge
    file is refused instead of read until memory runs out."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return f"{path}: no such file"
    except (OSError, ValueError) as e:
        return f"{path}: cannot read: {getattr(e, 'strerror', None) or e}"
    if stat.S_ISDIR(st.st_mode):
        return f"{path}: is a directory, not a {what}"
    if not stat.S_ISREG(st.st_mode):
        return f"{path}: not a regular file (a device, pipe or socket cannot be a {what})"
    if st.st_size > limit:
        return f"{path}: {st.st_size:,} bytes; a {what} may be at most {limit:,} bytes ({limit >> 20} MiB)"
    return None


def _read_text(path: Path) -> str:
    problem = file_problem(path, MAX_SITE_FILE_BYTES, "site file")
    if problem:
        raise SiteFileError(problem)
    try:
        return path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:
        raise SiteFileError(f"{path}: cannot read: {e}") from None


def _number(text: str, where: str, name: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise SiteFileError(f"{where}: {name}: not a number (got {text.strip()!r})") from None
    if not math.isfinite(v):
        raise SiteFileError(f"{where}: {name}: not a finite number (got {text.strip()!r})")
    return v


def _row_count(path: Path, n: int, line: int) -> None:
    if n not in YEAR_HOURS:
        raise SiteFileError(
            f"{path}:{line}: {n:,} hourly rows; a file holds one year of hours: "
            f"{YEAR_HOURS[0]:,} rows ({YEAR_HOURS[1]:,} in a leap year)"
        )


Check = Callable[[float], str | None]


def _range(lo: float, hi: float, unit: str = "") -> Check:
    def check(v: float) -> str | None:
        return None if lo <= v <= hi else f"out of range {lo:g}..{hi:g}{unit} (got {v:g})"

    return check


def _nonnegative(v: float) -> str | None:
    return None if v >= 0 else f"must not be negative (got {v:g})"


def _fraction(v: float) -> str | None:
    if 0.0 <= v <= 1.0:
        return None
    hint = "; give a fraction 0-1, not percent" if 1.0 < v <= 110.0 else ""
    return f"relative humidity must lie in 0..1 (got {v:g}){hint}"


def _any(v: float) -> str | None:
    return None


_DRYBULB = _range(-70.0, 70.0, " °C")  # EPW data dictionary limits for dry-bulb and dew point


def read_csv_columns(
    path: Path, groups: tuple[tuple[str, ...], ...], checks: dict[str, Check]
) -> tuple[dict[str, FloatArray], list[int]]:
    """Read an hourly CSV: a ``hour`` or ``timestamp`` column plus, for each group of
    alternative column names, exactly one of them. Returns the values by column name and the file
    line of every row."""
    try:
        return _read_csv_columns(path, groups, checks)
    except csv.Error as e:
        raise SiteFileError(f"{path}: not a readable CSV: {e}") from None


def _csv_header(path: Path, reader: Any) -> tuple[list[str], int]:
    """The first non-blank record, lower-cased, and its line number."""
    for rec in reader:
        if any(f.strip() for f in rec):
            return [f.strip().lower() for f in rec], reader.line_num
    raise SiteFileError(f"{path}: empty file; expected a header line, then one row per hour")


def _choose_columns(
    path: Path, header: list[str], header_line: int, groups: tuple[tuple[str, ...], ...]
) -> tuple[str, list[str]]:
    """The time column ("hour" or "timestamp") and the one column present of each group."""
    have = ", ".join(header)
    dupes = sorted({h for h in header if header.count(h) > 1})
    if dupes:
        raise SiteFileError(f"{path}:{header_line}: column {dupes[0]!r} appears twice")
    times = [c for c in ("hour", "timestamp") if c in header]
    if len(times) != 1:
        why = "needs" if not times else "must have only one of"
        raise SiteFileError(f"{path}:{header_line}: {why} an 'hour' or 'timestamp' column (has: {have})")
    chosen: list[str] = []
    for group in groups:
        present = [c for c in group if c in header]
        if not present:
            names = " or ".join(repr(c) for c in group)
            raise SiteFileError(f"{path}:{header_line}: needs a {names} column (has: {have})")
        if len(present) > 1:
            raise SiteFileError(f"{path}:{header_line}: give {' or '.join(map(repr, present))}, not both")
        chosen.append(present[0])
    return times[0], chosen


def _check_hour(where: str, raw: str, k: int) -> None:
    """Row k's hour column must be k."""
    try:
        hour = int(raw)
    except ValueError:
        raise SiteFileError(f"{where}: hour: not a whole number (got {raw!r})") from None
    if hour != k:
        raise SiteFileError(
            f"{where}: hour {hour}, expected {k}: rows must be consecutive hours from 0 (1 January 00:00)"
        )


def _check_timestamp(where: str, raw: str, k: int, first_ts: _dt.datetime | None) -> _dt.datetime:
    """Row k's timestamp must be 1 January 00:00 (the first row) or k hours after the first row's;
    returns the first row's timestamp."""
    try:
        ts = _dt.datetime.fromisoformat(raw)
    except ValueError:
        raise SiteFileError(f"{where}: timestamp: not an ISO 8601 date-time (got {raw!r})") from None
    if first_ts is None:
        if (ts.month, ts.day, ts.hour, ts.minute, ts.second) != (1, 1, 0, 0, 0):
            raise SiteFileError(f"{where}: timestamp: the first row must be 1 January 00:00 (got {raw!r})")
        return ts
    try:
        ok = ts - first_ts == _dt.timedelta(hours=k)
    except TypeError:
        ok = False
    if not ok:
        try:
            want = (first_ts + _dt.timedelta(hours=k)).isoformat()
        except OverflowError:  # past the year 9999 the calendar can name
            want = f"{k:,} hours after {first_ts.isoformat()}"
        raise SiteFileError(f"{where}: timestamp {raw!r}: expected {want} (rows must be consecutive hours)")
    return first_ts


def _append_values(
    where: str,
    rec: list[str],
    chosen: list[str],
    cols: list[int],
    checks: dict[str, Check],
    values: list[list[float]],
) -> None:
    """Parse and check one row's value of each chosen column, appending it to that column's list."""
    for j, (name, c) in enumerate(zip(chosen, cols, strict=True)):
        v = _number(rec[c], where, name)
        problem = checks.get(name, _any)(v)
        if problem:
            raise SiteFileError(f"{where}: {name}: {problem}")
        values[j].append(v)


def _check_year(path: Path, lines: list[int], header_line: int, first_ts: _dt.datetime | None) -> None:
    """One year of rows: 8,760 or 8,784, and with timestamps exactly the hours of that year."""
    last = lines[-1] if lines else header_line
    _row_count(path, len(lines), last)
    if first_ts is not None:
        leap = first_ts.year % 4 == 0 and (first_ts.year % 100 != 0 or first_ts.year % 400 == 0)
        want = YEAR_HOURS[1] if leap else YEAR_HOURS[0]
        if len(lines) != want:
            raise SiteFileError(
                f"{path}:{last}: {len(lines):,} hourly rows, but {first_ts.year} has {want:,} hours"
            )


def _read_csv_columns(
    path: Path, groups: tuple[tuple[str, ...], ...], checks: dict[str, Check]
) -> tuple[dict[str, FloatArray], list[int]]:
    text = _read_text(path)
    reader = csv.reader(io.StringIO(text, newline=""))
    header, header_line = _csv_header(path, reader)
    time_kind, chosen = _choose_columns(path, header, header_line, groups)
    time_col = header.index(time_kind)
    cols = [header.index(c) for c in chosen]
    values: list[list[float]] = [[] for _ in chosen]
    lines: list[int] = []
    first_ts: _dt.datetime | None = None
    for rec in reader:
        if not any(f.strip() for f in rec):
            continue
        line = reader.line_num
        where = f"{path}:{line}"
        k = len(lines)
        if k >= YEAR_HOURS[-1]:
            raise SiteFileError(f"{where}: more than {YEAR_HOURS[-1]:,} hourly rows; a file holds one year")
        if len(rec) != len(header):
            raise SiteFileError(f"{where}: {len(rec)} fields, the header has {len(header)}")
        raw = rec[time_col].strip()
        if time_kind == "hour":
            _check_hour(where, raw, k)
        else:
            first_ts = _check_timestamp(where, raw, k, first_ts)
        _append_values(where, rec, chosen, cols, checks, values)
        lines.append(line)
    _check_year(path, lines, header_line, first_ts)
    return {name: np.asarray(v, dtype=np.float64) for name, v in zip(chosen, values, strict=True)}, lines


# ---------------------------------------------------------------------- weather
def read_weather_csv(path: Path) -> Weather:
    cols, lines = read_csv_columns(
        path,
        (("drybulb_c",), ("rel_humidity", "wetbulb_c")),
        {"drybulb_c": _DRYBULB, "wetbulb_c": _DRYBULB, "rel_humidity": _fraction},
    )
    dry = cols["drybulb_c"]
    if "wetbulb_c" in cols:
        wet = cols["wetbulb_c"]
        bad = np.flatnonzero(wet > dry + 0.05)
        if len(bad):
            i = int(bad[0])
            raise SiteFileError(
                f"{path}:{lines[i]}: wetbulb_c {wet[i]:g} is above drybulb_c {dry[i]:g} (impossible)"
            )
        wet = np.minimum(wet, dry)
        return Weather(dry, np.asarray(sitephys.rel_humidity_from_wetbulb(dry, wet)), wet)
    return Weather(dry, cols["rel_humidity"], None)


def _epw_rows(path: Path, text: str) -> list[str]:
    """The hourly data rows of an EPW file, after checking its header lines."""
    lines = text.splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines or not lines[0].upper().startswith("LOCATION"):
        raise SiteFileError(f"{path}:1: not an EPW file (the first line must start with LOCATION)")
    if len(lines) <= EPW_HEADER_LINES:
        raise SiteFileError(
            f"{path}: only {len(lines)} lines; an EPW file has 8 header lines, then hourly rows"
        )
    periods = lines[EPW_HEADER_LINES - 1].split(",")
    if periods[0].strip().upper() != "DATA PERIODS":
        raise SiteFileError(
            f"{path}:{EPW_HEADER_LINES}: expected the DATA PERIODS header (an EPW file has 8 header lines)"
        )
    if len(periods) > 2:
        per_hour = _number(periods[2], f"{path}:{EPW_HEADER_LINES}", "records per hour")
        if per_hour != 1:
            raise SiteFileError(
                f"{path}:{EPW_HEADER_LINES}: {per_hour:g} records per hour; only hourly EPW files are supported"
            )
    return lines[EPW_HEADER_LINES:]


def _epw_row(where: str, row: str, k: int) -> tuple[float, float]:
    """Data row k: dry-bulb [°C] and relative humidity [%] (from the dew point if missing)."""
    f = row.split(",")
    if len(f) < EPW_RH:
        raise SiteFileError(
            f"{where}: {len(f)} fields; an EPW data row has 35 (dry-bulb is field {EPW_DRYBULB}, "
            f"dew point {EPW_DEWPOINT}, relative humidity {EPW_RH})"
        )
    hour = _number(f[EPW_HOUR - 1], where, "hour (field 4)")
    if hour != k % 24 + 1:
        raise SiteFileError(
            f"{where}: hour (field 4) is {hour:g}, expected {k % 24 + 1}: rows must be consecutive hours"
        )
    t = _number(f[EPW_DRYBULB - 1], where, "dry-bulb (field 7)")
    if t >= EPW_MISSING_TEMP:
        raise SiteFileError(f"{where}: dry-bulb (field 7) is missing ({f[EPW_DRYBULB - 1].strip()})")
    problem = _DRYBULB(t)
    if problem:
        raise SiteFileError(f"{where}: dry-bulb (field 7): {problem}")
    r = _number(f[EPW_RH - 1], where, "relative humidity (field 9)")
    if r >= EPW_MISSING_RH:
        td = _number(f[EPW_DEWPOINT - 1], where, "dew point (field 8)")
        if td >= EPW_MISSING_TEMP:
            raise SiteFileError(
                f"{where}: relative humidity (field 9) and dew point (field 8) are both missing"
            )
        r = 100.0 * sitephys.rel_humidity_from_dewpoint(t, td)
    elif not 0.0 <= r <= 110.0:
        raise SiteFileError(f"{where}: relative humidity (field 9): out of range 0..110 % (got {r:g})")
    return t, r


def read_epw(path: Path) -> Weather:
    rows = _epw_rows(path, _read_text(path))
    n = len(rows)
    if n > YEAR_HOURS[-1]:
        _row_count(path, n, EPW_HEADER_LINES + n)
    dry = np.empty(n)
    rh = np.empty(n)
    for k, row in enumerate(rows):
        t, r = _epw_row(f"{path}:{EPW_HEADER_LINES + 1 + k}", row, k)
        dry[k] = t
        rh[k] = min(r, 100.0) / 100.0
    _row_count(path, n, EPW_HEADER_LINES + n)
    # Row k holds the value at the end of its hour (k + 1 h); shift so index i is hour i.
    return Weather(np.roll(dry, 1), np.roll(rh, 1), None)


def read_weather(path: Path) -> Weather:
    """Weather from an ``.epw`` file or a CSV (any other suffix)."""
    return read_epw(path) if path.suffix.lower() == ".epw" else read_weather_csv(path)


# ---------------------------------------------------------------------- grid
def read_price_csv(path: Path) -> FloatArray:
    """Hourly electricity price [USD/MWh] (wholesale prices may be negative)."""
    cols, _ = read_csv_columns(path, (("price_usd_per_mwh",),), {})
    return cols["price_usd_per_mwh"]


def read_carbon_csv(path: Path) -> FloatArray:
    """Hourly grid carbon intensity [g CO2/kWh]."""
    cols, _ = read_csv_columns(path, (("carbon_g_per_kwh",),), {"carbon_g_per_kwh": _nonnegative})
    return cols["carbon_g_per_kwh"]
