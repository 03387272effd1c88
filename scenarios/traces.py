"""Trace files: inference request traces and batch-job traces, read into NumPy arrays.

Reading files is I/O, so it lives here; the model receives ``twin.spec.params.RequestTrace`` and
``twin.spec.params.JobTrace``. Every problem raises ``TraceError`` whose text names the file and, where
there is one, the line: ``jobs.csv:7: chips: not a positive integer (got '0')``.

Formats
-------
Request trace, the Azure LLM inference format (Azure/AzurePublicDataset, ``AzureLLMInferenceTrace_
{code,conv}.csv`` 2023 and the 2024 week, CC-BY-4.0): a header ``TIMESTAMP,ContextTokens,
GeneratedTokens``, then one row per request: the arrival time (``YYYY-MM-DD HH:MM:SS[.fffffff]``, or
seconds as a number), prompt tokens and generated tokens (non-negative integers). Rows may come in
any order; times are taken relative to the first request.

Job trace: a header, then one row per job. Columns (names case-insensitive, aliases in brackets):
``submit_time_s`` [submit_s, submit_time, submit] seconds after the start of the run, or a
timestamp (then relative to the first submit); ``chips`` [gpu_num, gpus] a positive integer;
``kind`` [type] pretrain | finetune | eval | batch_inference (also training, pretraining, sft,
fine-tuning, evaluation, debug, inference, batch-inference); ``duration_s`` [duration] the run
length on the job's ideal placement, or ``work_flop`` the work; a row needs exactly one of them.
Optional: ``model`` (a model name; empty = the class's first model), ``priority`` (integer).
Other columns are ignored (an AcmeTrace ``trace_seren.csv`` is read as it is).
"""

from __future__ import annotations

import contextlib
import csv
import math
from array import array
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from scenarios import sitefiles
from scenarios.facts import MAX_CHIPS, MAX_FIELD_BYTES, MAX_RUN_H, MAX_TRACE_BYTES, MAX_TRACE_ROWS
from twin.spec.params import KIND_NAMES, JobTrace, RequestTrace

MAX_TOKENS = 10_000_000  # prompt or generated tokens of one request
MAX_PRIORITY = 1_000_000
MAX_SPAN_S = MAX_RUN_H * 3600  # submit or arrival times after the first
MAX_WORK_FLOP = 1e30


class TraceError(Exception):
    """A trace file could not be read; ``str()`` names the file, the line and the problem."""


AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")

KIND_ALIASES = {
    "pretrain": "pretrain",
    "pretraining": "pretrain",
    "pre-training": "pretrain",
    "training": "pretrain",
    "finetune": "finetune",
    "fine-tuning": "finetune",
    "finetuning": "finetune",
    "sft": "finetune",
    "eval": "eval",
    "evaluation": "eval",
    "debug": "eval",
    "batch_inference": "batch_inference",
    "batch-inference": "batch_inference",
    "inference": "batch_inference",
}
JOB_COLUMNS: dict[str, tuple[str, ...]] = {
    "submit": ("submit_time_s", "submit_s", "submit_time", "submit"),
    "chips": ("chips", "gpu_num", "gpus"),
    "kind": ("kind", "type"),
    "duration": ("duration_s", "duration"),
    "work": ("work_flop",),
    "model": ("model",),
    "priority": ("priority",),
}


class _Rows:
    """The rows of a trace CSV, streamed: ``header``, then (line number, stripped fields) of every
    non-empty row. The file must be a regular file within ``MAX_TRACE_BYTES``; more than
    ``MAX_TRACE_ROWS`` rows or a field over ``MAX_FIELD_BYTES`` is refused with the line."""

    def __init__(self, path: Path) -> None:
        problem = sitefiles.file_problem(path, MAX_TRACE_BYTES, "trace file")
        if problem:
            raise TraceError(problem)
        self.path = path
        try:
            self._file = open(path, encoding="utf-8-sig", newline="")
        except OSError as e:
            raise TraceError(f"{path}: cannot read: {e.strerror or e}") from None
        self._reader = csv.reader(self._file)
        self.count = 0
        try:
            head = next(self._iter(), None)
        except BaseException:  # an unreadable header line: the file is closed before the error
            self.close()
            raise
        if head is None:
            self.close()
            raise TraceError(f"{path}: empty file (expected a header line)")
        self.header = head[1]

    def _iter(self) -> Iterator[tuple[int, list[str]]]:
        try:
            for fields in self._reader:
                if not fields or all(not f.strip() for f in fields):
                    continue
                yield self._reader.line_num, [f.strip() for f in fields]
        except csv.Error as e:
            line = self._reader.line_num
            raise TraceError(
                f"{self.path}:{line}: not a readable CSV row: {e} (at most {MAX_FIELD_BYTES:,} bytes a field)"
            ) from None
        except UnicodeDecodeError as e:
            raise TraceError(f"{self.path}: not UTF-8 text: {e.reason} at byte {e.start:,}") from None
        except OSError as e:
            raise TraceError(f"{self.path}: cannot read: {e.strerror or e}") from None

    def __iter__(self) -> Iterator[tuple[int, list[str]]]:
        try:
            for row in self._iter():
                self.count += 1
                if self.count > MAX_TRACE_ROWS:
                    raise TraceError(
                        f"{self.path}:{row[0]}: more than {MAX_TRACE_ROWS:,} rows; a trace may have at most {MAX_TRACE_ROWS:,}"
                    )
                yield row
        finally:
            self.close()
        if self.count == 0:
            raise TraceError(f"{self.path}: no rows after the header")

    def close(self) -> None:
        self._file.close()


def _time_s(value: str) -> float:
    """Seconds from a number or an ISO timestamp (nanosecond precision, since the epoch)."""
    try:
        return float(value)
    except ValueError:
        pass
    t = np.datetime64(value.replace(" ", "T"), "ns")
    if np.isnat(t):
        raise ValueError(value)
    return float(t.astype(np.int64)) / 1e9


def _parse(path: Path, line: int, column: str, value: str, conv: Callable[[str], Any], what: str) -> Any:
    try:
        return conv(value)
    except (ValueError, OverflowError) as e:
        # A converter may say what is wrong itself ("!" + text), e.g. a count beyond its limit.
        text = str(e)
        what = text[1:] if text.startswith("!") else what
        raise TraceError(f"{path}:{line}: {column}: {what} (got {_clip(value)!r})") from None


def _clip(text: str) -> str:
    return text if len(text) <= 200 else text[:200] + "…"


def _int_in(value: str, lo: int, hi: int) -> int:
    v = int(value)
    if v < lo:
        raise ValueError(value)
    if v > hi:
        raise ValueError(f"!more than {hi:,}")
    return v


def _tokens(value: str) -> int:
    return _int_in(value, 0, MAX_TOKENS)


def _priority(value: str) -> int:
    return _int_in(value, 0, MAX_PRIORITY)


def read_request_trace(path: str | Path) -> RequestTrace:
    """An inference request trace in the Azure LLM inference format."""
    path = Path(path)
    rows = _Rows(path)
    header = rows.header
    if [h.lower() for h in header[:3]] != [c.lower() for c in AZURE_COLUMNS]:
        rows.close()
        raise TraceError(
            f"{path}:1: expected the header {','.join(AZURE_COLUMNS)} (Azure LLM inference format), "
            f"got {_clip(','.join(header))}"
        )
    t = array("d")
    inp = array("q")
    out = array("q")
    lines = array("q")
    with contextlib.closing(rows):  # closed on an error in a row too, not by the garbage collector
        for line, f in rows:
            if len(f) < 3:
                raise TraceError(
                    f"{path}:{line}: expected 3 fields (TIMESTAMP,ContextTokens,GeneratedTokens), got {len(f)}"
                )
            t.append(_parse(path, line, "TIMESTAMP", f[0], _time_s, "not a timestamp or a number of seconds"))
            inp.append(_parse(path, line, "ContextTokens", f[1], _tokens, "not a non-negative integer"))
            out.append(_parse(path, line, "GeneratedTokens", f[2], _tokens, "not a non-negative integer"))
            lines.append(line)
    ta = np.frombuffer(t, dtype=np.float64).copy()
    if not np.isfinite(ta).all():
        line = lines[int(np.flatnonzero(~np.isfinite(ta))[0])]
        raise TraceError(f"{path}:{line}: TIMESTAMP: not a finite time")
    order = np.argsort(ta, kind="stable")
    ta = ta[order] - ta[order[0]]
    if ta[-1] > MAX_SPAN_S:
        raise TraceError(
            f"{path}: the requests span {ta[-1] / 3600:,.0f} h; at most {MAX_RUN_H:,.0f} h (ten years)"
        )
    ia = np.frombuffer(inp, dtype=np.int64)[order]
    oa = np.frombuffer(out, dtype=np.int64)[order]
    return RequestTrace(ta, ia, oa, str(path))


def _column(path: Path, header: list[str], key: str, required: bool = True) -> int:
    names = [h.lower() for h in header]
    for alias in JOB_COLUMNS[key]:
        if alias in names:
            return names.index(alias)
    if required:
        raise TraceError(
            f"{path}:1: no {JOB_COLUMNS[key][0]} column (or {', '.join(JOB_COLUMNS[key][1:]) or 'alias'})"
        )
    return -1


def _chips(value: str) -> int:
    v = float(value)
    if not v >= 1 or v != int(v):
        raise ValueError(value)
    if v > MAX_CHIPS:
        raise ValueError(f"!more than {MAX_CHIPS:,} chips")
    return int(v)


def _at_most(limit: float, unit: str) -> Callable[[str], float]:
    def conv(value: str) -> float:
        v = float(value)
        if not v >= 0:
            raise ValueError(value)
        if not v <= limit:
            raise ValueError(f"!more than {limit:g} {unit}")
        return v

    return conv


_seconds = _at_most(MAX_SPAN_S, "s (ten years)")
_flop = _at_most(MAX_WORK_FLOP, "FLOP")


class _JobColumns(NamedTuple):
    """Where a job trace's columns are in its header (-1: an optional column that is absent)."""

    submit: int
    chips: int
    kind: int
    duration: int
    work: int
    model: int
    priority: int


def _job_columns(path: Path, rows: _Rows) -> _JobColumns:
    """Find the job columns in the header; on a problem the file is closed before the error."""
    header = rows.header
    try:
        c_sub = _column(path, header, "submit")
        c_chips = _column(path, header, "chips")
        c_kind = _column(path, header, "kind")
        c_dur = _column(path, header, "duration", required=False)
        c_work = _column(path, header, "work", required=False)
        if c_dur < 0 and c_work < 0:
            raise TraceError(f"{path}:1: needs a duration_s or a work_flop column")
        c_model = _column(path, header, "model", required=False)
        c_prio = _column(path, header, "priority", required=False)
    except TraceError:
        rows.close()
        raise
    return _JobColumns(c_sub, c_chips, c_kind, c_dur, c_work, c_model, c_prio)


def _field(f: list[str], c: int) -> str:
    return f[c] if 0 <= c < len(f) else ""


def _job_row(
    path: Path, line: int, f: list[str], header: list[str], c: _JobColumns, known_models: set[str] | None
) -> tuple[float, int, int, float, float, str, int]:
    """One job row: submit time, chips, kind index, duration and work (one of them NaN), model,
    priority (-1: none)."""
    sub = _parse(
        path, line, header[c.submit], _field(f, c.submit), _time_s, "not a time (seconds or a timestamp)"
    )
    chips = _parse(path, line, header[c.chips], _field(f, c.chips), _chips, "not a positive integer")
    k = _field(f, c.kind).lower()
    if k not in KIND_ALIASES:
        raise TraceError(
            f"{path}:{line}: {header[c.kind]}: unknown kind {_clip(_field(f, c.kind))!r}; "
            "use pretrain, finetune, eval or batch_inference"
        )
    kind = KIND_NAMES.index(KIND_ALIASES[k])
    d, w = _field(f, c.duration), _field(f, c.work)
    if bool(d) == bool(w):
        raise TraceError(f"{path}:{line}: give exactly one of duration_s and work_flop")
    if d:
        dur = _parse(path, line, header[c.duration], d, _seconds, "not a non-negative number of seconds")
        work = math.nan
    else:
        dur = math.nan
        work = _parse(path, line, header[c.work], w, _flop, "not a non-negative number of FLOP")
    m = _field(f, c.model)
    if m and known_models is not None and m not in known_models:
        raise TraceError(
            f"{path}:{line}: model: unknown model {_clip(m)!r}; known: {', '.join(sorted(known_models))}"
        )
    p = _field(f, c.priority) if c.priority >= 0 else ""
    prio = _parse(path, line, header[c.priority], p, _priority, "not a non-negative integer") if p else -1
    return sub, chips, kind, dur, work, m, prio


def _submit_order(
    path: Path, column: str, sub: array[float], lines: array[int], first_numeric: bool
) -> tuple[np.ndarray, np.ndarray]:
    """The jobs' order by submit time and their submit seconds after the start, in that order
    (relative to the first submit when the times are timestamps); checks each is finite and in range."""
    suba = np.frombuffer(sub, dtype=np.float64)
    if not np.isfinite(suba).all():
        line = lines[int(np.flatnonzero(~np.isfinite(suba))[0])]
        raise TraceError(f"{path}:{line}: {column}: not a finite time")
    order = np.argsort(suba, kind="stable")
    rel = suba[order] - (0.0 if first_numeric else suba[order[0]])
    bad = np.flatnonzero((rel < -1e-9) | (rel > MAX_SPAN_S))
    if len(bad):
        i = int(bad[0])
        line = lines[int(order[i])]
        what = "negative submit time" if rel[i] < 0 else f"submit time beyond {MAX_RUN_H:,.0f} h (ten years)"
        raise TraceError(f"{path}:{line}: {column}: {what}")
    return order, np.ceil(rel).astype(np.int64)


def read_job_trace(path: str | Path, known_models: set[str] | None = None) -> JobTrace:
    """A batch-job trace (see the module docstring for the columns)."""
    path = Path(path)
    rows = _Rows(path)
    header = rows.header
    cols = _job_columns(path, rows)
    sub = array("d")
    chips = array("q")
    dur = array("d")
    work = array("d")
    kind = array("b")
    prio = array("q")
    lines = array("q")
    models: list[str] = []
    first_numeric = True
    with contextlib.closing(rows):  # closed on an error in a row too, not by the garbage collector
        for line, f in rows:
            if not lines:
                first_numeric = _is_number(_field(f, cols.submit))
            s, c, k, d, w, m, p = _job_row(path, line, f, header, cols, known_models)
            sub.append(s)
            chips.append(c)
            kind.append(k)
            dur.append(d)
            work.append(w)
            models.append(m)
            prio.append(p)
            lines.append(line)
    order, submit = _submit_order(path, header[cols.submit], sub, lines, first_numeric)
    return JobTrace(
        submit_s=submit,
        chips=np.frombuffer(chips, dtype=np.int64)[order],
        duration_s=np.frombuffer(dur, dtype=np.float64)[order],
        work_flop=np.frombuffer(work, dtype=np.float64)[order],
        kind=np.frombuffer(kind, dtype=np.int8)[order],
        priority=np.frombuffer(prio, dtype=np.int64)[order],
        model=tuple(models[int(i)] for i in order),
        source=str(path),
    )


def _is_number(value: str) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return True
