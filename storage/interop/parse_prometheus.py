"""Prometheus text exposition (DCGM, kube-state-metrics) -> observed samples, vectorised with
Arrow's compute kernels over all lines at once."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from storage.interop.mapping import BY_NAME
from storage.interop.parsed import (
    MAX_LABEL_CHARS,
    Parsed,
    by_field,
    empty,
    observed_table,
    to_canonical,
)

# ---------------------------------------------------------------------- Prometheus text
_LABEL = r'(?:^|,)\s*{0}="(?P<v>(?:[^"\\]|\\.)*)"'
# A sample line: name{labels} value [timestamp], single blanks (as exporters write it); a label
# value holding "}" or a line of other blanks does not match and is counted malformed.
_LINE = r"^(?P<name>[^{ ]+)(?:\{(?P<labels>[^}]*)\})? (?P<value>[^ ]+)(?: (?P<ts>[^ ]+))?$"
_NAME = r"^[a-zA-Z_:][a-zA-Z0-9_:]*$"
_VALUE = r"^[-+]?(?:[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?|NaN|Inf|inf)$"
_TS = r"^(?:-?[0-9]{1,16})?$"


def _label(labels: pa.Array, name: str) -> pa.Array:
    """The value of label ``name`` in each labels text (null where absent), by Arrow's regex."""
    s = pc.extract_regex(labels, _LABEL.format(re.escape(name)))
    return pc.struct_field(s, [0])


def parse_prometheus_text(text: str, source: str, now_us: int) -> Parsed:
    """Prometheus / OpenMetrics text exposition (a DCGM exporter's, kube-state-metrics', a
    scrape saved to a file). Samples without a timestamp get ``now_us``.

    One regular-expression kernel over every line gives the samples' columns; everything after
    it is Arrow and NumPy over those columns: the names and label sets are each worked out once
    per distinct value (a handful of names; a label set per chip) and taken back to the rows."""
    names, labels, values, ts, ok, n_ok, malformed = _sample_columns(text)
    if not n_ok:
        return Parsed(empty(), "prometheus-text", 0, malformed)
    # The label sets as codes before filtering: only the codes (not the long texts) are copied.
    lcode = labels.dictionary_encode()
    lidx = lcode.indices
    if n_ok < len(ok):
        names, values, ts, lidx = (a.filter(ok) for a in (names, values, ts, lidx))
    byf = {**by_field("dcgm"), **by_field("kube-state-metrics")}
    ncode = names.dictionary_encode()
    dnames = ncode.dictionary.to_pylist()
    nidx = ncode.indices.to_numpy(zero_copy_only=False)
    fields = [byf.get(n) for n in dnames]
    known = np.array([f is not None for f in fields], dtype=bool)
    counts = np.bincount(nidx, minlength=len(dnames))
    unmapped_names = {
        n: int(c) for n, c, k in zip(dnames, counts.tolist(), known.tolist(), strict=True) if not k
    }
    keep = known[nidx]
    sel = pa.array(keep)
    nidx = nidx[keep]
    lidx, values, ts = lidx.filter(sel), values.filter(sel), ts.filter(sel)
    # Per name: how its values become the quantity's (linear: / scale; flag: > 0; counter: x
    # the unit's factor, a rate later), its metric and unit, and where its entity comes from.
    per = [
        (
            (to_canonical(f, np.array([1.0]))[0][0], f.codec, f.fmt == "dcgm")
            if f is not None
            else (1.0, "linear", True)
        )
        for f in fields
    ]
    factor = np.array([p[0] for p in per])[nidx]
    flag = np.array([p[1] == "flag" for p in per])[nidx]
    is_dcgm = np.array([p[2] for p in per])[nidx]
    metric_of = pa.array(
        [BY_NAME[f.quantity].name + (".counter" if f.codec == "counter" else "") if f else "" for f in fields]
    )
    unit_of = pa.array([to_canonical(f, np.array([1.0]))[1] if f else "" for f in fields])
    take = pa.array(nidx)
    entity = _entities(lcode.dictionary, lidx, is_dcgm)
    has_ts = pc.not_equal(ts, "")
    t_ms = pc.if_else(
        has_ts, pc.cast(pc.if_else(has_ts, ts, "0"), pa.int64()), pa.scalar(now_us // 1000, pa.int64())
    )
    time_us = pc.multiply(t_ms, 1000).to_numpy(zero_copy_only=False)
    raw = pc.cast(pc.replace_substring(values, "Inf", "inf"), pa.float64()).to_numpy(zero_copy_only=False)
    with np.errstate(invalid="ignore", over="ignore"):
        v = np.where(flag, (raw > 0).astype(np.float64), raw * factor)
        # kube-state-metrics' times are the samples' times.
        time_us = np.where(~is_dcgm & np.isfinite(v), v * 1e6, time_us).astype(np.int64)
    table = observed_table(time_us, entity, pc.take(metric_of, take), v, pc.take(unit_of, take), source)
    return Parsed(table, "prometheus-text", sum(unmapped_names.values()), int(malformed), unmapped_names)


def _sample_columns(text: str) -> tuple[Any, Any, Any, Any, Any, int, int]:
    """Every line's name, label set, value and timestamp texts, whether it is a well-formed
    sample, the number that are, and the number of malformed lines (not blank, not comments)."""
    # The lines without a Python string each: Arrow splits the text.
    lines = pc.split_pattern(pa.array([text], pa.large_string()), "\n").flatten().cast(pa.string())
    skip = pc.or_(pc.equal(lines, ""), pc.starts_with(lines, "#"))
    # The line's shape (a regular expression without alternatives: the fast path of the regex
    # engine), then its parts checked on their own, short, strings.
    m = pc.extract_regex(lines, _LINE)
    names, labels, values, ts = (pc.fill_null(pc.struct_field(m, [k]), "") for k in range(4))
    ok = pc.and_kleene(
        pc.and_kleene(pc.is_valid(m), pc.match_substring_regex(names, _NAME)),
        pc.and_kleene(pc.match_substring_regex(values, _VALUE), pc.match_substring_regex(ts, _TS)),
    )
    ok = pc.fill_null(ok, False)
    n_ok = int(pc.sum(ok.cast(pa.int64())).as_py() or 0)
    malformed = len(lines) - n_ok - int(pc.sum(pc.and_not(skip, ok).cast(pa.int64())).as_py() or 0)
    return names, labels, values, ts, ok, n_ok, malformed


def _entities(uniq: pa.Array, lidx: Any, is_dcgm: Any) -> Any:
    """Each sample's entity, worked out once per distinct label set: a DCGM chip's host/chipN,
    a kube-state-metrics job's name."""
    host = pc.fill_null(_label(uniq, "Hostname"), "host")
    gpu = pc.fill_null(_label(uniq, "gpu"), "0")
    ent_dcgm = pc.binary_join_element_wise(host, pc.binary_join_element_wise("chip", gpu, ""), "/")
    ent_ksm = pc.fill_null(_label(uniq, "job_name"), "job")
    entity = pc.if_else(pa.array(is_dcgm), pc.take(ent_dcgm, lidx), pc.take(ent_ksm, lidx))
    return pc.utf8_slice_codeunits(entity, 0, MAX_LABEL_CHARS)
