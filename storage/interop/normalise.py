"""``normalise`` then brings a batch to the recording's terms: units to the quantity's canonical
unit, counters to rates (a drop is a reset: the rate restarts from the new value), exact
duplicates dropped, series sorted by time, and a quality per sample:

    good         as read
    invalid      NaN or infinite (value NULL)
    clock        time more than ``FAR_S`` from the ingest's clock (far past or future)
    gap          more than ``GAP_FACTOR`` sampling intervals after the series' previous sample
    rate         a counter's rate over the interval before it
    reset        a counter's rate right after a reset
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from storage.interop.mapping import BY_NAME
from storage.interop.parsed import (
    FAR_S,
    GAP_FACTOR,
)

Arr = np.ndarray[Any, Any]


# ---------------------------------------------------------------------- normalising
@dataclass
class Normalised:
    table: pa.Table
    duplicates: int = 0
    invalid: int = 0
    clock: int = 0
    gaps: int = 0
    resets: int = 0


def _codes(col: pa.ChunkedArray | pa.Array) -> np.ndarray[Any, Any]:
    """Integer codes of a string column's values (equal values, equal codes), without copying
    the strings of a column of several chunks."""
    if isinstance(col, pa.Array):
        return np.asarray(pc.dictionary_encode(col).indices.to_numpy(zero_copy_only=False))
    if col.num_chunks == 1:
        return np.asarray(pc.dictionary_encode(col.chunk(0)).indices.to_numpy(zero_copy_only=False))
    enc = pc.dictionary_encode(col).unify_dictionaries()
    return np.concatenate([c.indices.to_numpy(zero_copy_only=False) for c in enc.chunks])


def normalise(tab: pa.Table, now_us: int) -> Normalised:
    """Sort each series by time, drop exact duplicates, flag the samples (module doc) and turn
    counters (metric ``*.counter``) into rates. Vectorised over the whole batch."""
    if not len(tab):
        return Normalised(tab)
    tab, t, v, same_series, dup = _sorted_unique(tab)
    invalid = ~np.isfinite(v)
    far = np.abs(t - now_us) > FAR_S * 1_000_000
    dt = np.r_[0, np.diff(t)].astype(np.float64)
    dt[~same_series] = np.nan
    gap = _gaps(dt, same_series)
    metric = tab.column("metric").combine_chunks()
    is_counter = pc.ends_with(metric, ".counter").to_numpy(zero_copy_only=False)
    reset = np.zeros(len(v), dtype=bool)
    keep2 = np.ones(len(v), dtype=bool)
    if is_counter.any():
        v, reset, keep2 = _rates(v, dt, is_counter, same_series)
        metric = pc.replace_substring(metric, ".counter", "")
    quality = _quality(tab, is_counter, gap, reset, far, ~np.isfinite(v) | invalid)
    unit = tab.column("unit").combine_chunks()
    if is_counter.any():
        unit = _counter_units(metric, is_counter, unit)
    fin = np.isfinite(v)
    val = pa.array(np.where(fin, v, 0.0), mask=~fin)
    tab = tab.set_column(tab.schema.get_field_index("value"), "value", val)
    tab = tab.set_column(tab.schema.get_field_index("metric"), "metric", metric)
    tab = tab.set_column(tab.schema.get_field_index("unit"), "unit", unit)
    tab = tab.set_column(tab.schema.get_field_index("quality"), "quality", quality)
    if not keep2.all():
        tab = tab.filter(pa.array(keep2))
    k = keep2
    return Normalised(
        tab,
        int(dup.sum()),
        int((~fin & k).sum()),
        int((far & fin & k).sum()),
        int((gap & k).sum()),
        int(reset.sum()),
    )


def _sorted_unique(tab: pa.Table) -> tuple[pa.Table, Arr, Arr, Arr, Arr]:
    """``tab`` with its series together, each in time order, exact duplicates dropped: the table,
    its times (us), values, whether each sample continues the previous one's series, and the
    duplicate mask (over the sorted rows before the drop)."""
    # A sort by the codes of entity and metric (their order of appearance: grouping needs no
    # alphabet) and time.
    key_e, key_m = _codes(tab.column("entity")), _codes(tab.column("metric"))
    t = tab.column("time").cast(pa.int64()).to_numpy()
    order = np.lexsort((t, key_m, key_e))
    if not (order[1:] > order[:-1]).all():
        tab, key_e, key_m, t = tab.take(pa.array(order)), key_e[order], key_m[order], t[order]
    v = tab.column("value").to_numpy(zero_copy_only=False).astype(np.float64)
    same_series = np.r_[False, (key_e[1:] == key_e[:-1]) & (key_m[1:] == key_m[:-1])]
    dup = same_series & np.r_[False, t[1:] == t[:-1]]
    if dup.any():
        keep = ~dup
        tab, t, v, same_series = tab.filter(pa.array(keep)), t[keep], v[keep], same_series[keep]
    return tab, t, v, same_series, dup


def _gaps(dt: Arr, same_series: Arr) -> Arr:
    """A gap: longer than GAP_FACTOR x the series' median interval."""
    sid = np.cumsum(~same_series) - 1
    med = np.full(int(sid.max()) + 1 if sid.size else 0, np.nan)
    finite_dt = np.isfinite(dt)
    if finite_dt.any():
        order = np.lexsort((dt[finite_dt], sid[finite_dt]))
        s_sid = sid[finite_dt][order]
        s_dt = dt[finite_dt][order]
        starts = np.r_[0, np.flatnonzero(np.diff(s_sid)) + 1]
        counts = np.diff(np.r_[starts, s_sid.size])
        med[s_sid[starts]] = s_dt[starts + counts // 2]
    with np.errstate(invalid="ignore"):
        return finite_dt & (dt > GAP_FACTOR * np.where(np.isnan(med[sid]), np.inf, med[sid]))


def _rates(v: Arr, dt: Arr, is_counter: Arr, same_series: Arr) -> tuple[Arr, Arr, Arr]:
    """Counters' values turned into rates (a drop is a reset: the rate restarts from the new
    value); the reset mask and the samples to keep (a counter's first sample has no rate)."""
    dv = np.r_[np.nan, np.diff(v)]
    reset = is_counter & same_series & (dv < 0)
    inc = np.where(reset, v, dv)
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = inc / (dt / 1e6)
    return np.where(is_counter, rate, v), reset, ~(is_counter & ~same_series)


def _quality(tab: pa.Table, is_counter: Arr, gap: Arr, reset: Arr, far: Arr, invalid: Arr) -> Any:
    """Each sample's quality word (module doc); a later word wins over an earlier one."""
    quality = tab.column("quality").combine_chunks()
    good = pc.equal(quality, "good").to_numpy(zero_copy_only=False)
    for mask, word in (
        (good & is_counter, "rate"),
        (good & gap, "gap"),
        (reset, "reset"),
        (far, "clock"),
        (invalid, "invalid"),
    ):
        if mask.any():
            quality = pc.if_else(pa.array(mask), pa.scalar(word), quality)
    return quality


def _counter_units(metric: Any, is_counter: Arr, unit: Any) -> Any:
    """A counter's rate in its quantity's canonical unit."""
    names = pc.unique(metric).to_pylist()
    canon = pa.array([BY_NAME[n].unit if n in BY_NAME else "" for n in names], pa.string())
    idx = pc.index_in(metric, pa.array(names, pa.string()))
    return pc.if_else(pa.array(is_counter), pc.take(canon, idx), unit)


_CARRY = "\x00carry"  # the source of a counter's previous sample carried into the next batch


class Normaliser:
    """``normalise`` over a stream of batches: a counter's last sample is carried into the next
    batch, so its rate over the boundary is not lost (the first sample of a series is the only
    one without a rate)."""

    def __init__(self) -> None:
        self._last: pa.Table | None = None

    def __call__(self, tab: pa.Table, now_us: int) -> Normalised:
        carried = self._last is not None and len(self._last) > 0
        if carried:
            tab = pa.concat_tables([self._last, tab])
        raw = tab
        n = normalise(tab, now_us)
        # A carried sample is the first of its series (dropped as such) unless the batch went
        # back in time: then it is taken out here.
        if carried and pc.any(pc.equal(n.table.column("source"), _CARRY)).as_py():
            n.table = n.table.filter(pc.not_equal(n.table.column("source"), _CARRY))
        self._last = _last_counters(raw)
        return n


def _last_counters(tab: pa.Table) -> pa.Table | None:
    """The latest raw sample of every counter series of ``tab`` (source marked carried)."""
    if not len(tab):
        return None
    is_c = pc.ends_with(tab.column("metric"), ".counter")
    c = tab.filter(is_c)
    if not len(c):
        return None
    e, m = _codes(c.column("entity")), _codes(c.column("metric"))
    t = c.column("time").cast(pa.int64()).to_numpy()
    order = np.lexsort((t, m, e))
    e, m = e[order], m[order]
    last = np.r_[(e[1:] != e[:-1]) | (m[1:] != m[:-1]), True]
    out = c.take(pa.array(order[last]))
    return out.set_column(
        out.schema.get_field_index("source"), "source", pa.repeat(pa.scalar(_CARRY), len(out))
    )
