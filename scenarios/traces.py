"""Trace files: inference request traces and batch-job traces, read into NumPy arrays.

Reading files is I/O, so it lives here; the model receives ``twin.params.RequestTrace`` and
``twin.params.JobTrace``. Every problem raises ``TraceError`` whose text names the file and, where
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

import csv
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from twin.params import KIND_NAMES, JobTrace, RequestTrace


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


def _rows(path: Path) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """Header and (line number, fields) of every non-empty row."""
    if not path.exists():
        raise TraceError(f"{path}: no such file")
    if path.is_dir():
        raise TraceError(f"{path}: is a directory, not a trace file")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:
        raise TraceError(f"{path}: cannot read: {e}") from None
    reader = csv.reader(text.splitlines())
    rows: list[tuple[int, list[str]]] = []
    header: list[str] | None = None
    for line, fields in enumerate(reader, start=1):
        if not fields or all(not f.strip() for f in fields):
            continue
        if header is None:
            header = [f.strip() for f in fields]
            continue
        rows.append((line, [f.strip() for f in fields]))
    if header is None:
        raise TraceError(f"{path}: empty file (expected a header line)")
    if not rows:
        raise TraceError(f"{path}: no rows after the header")
    return header, rows


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
    except (ValueError, OverflowError):
        raise TraceError(f"{path}:{line}: {column}: {what} (got {value!r})") from None


def _count(value: str) -> int:
    v = int(value)
    if v < 0:
        raise ValueError(value)
    return v


def read_request_trace(path: str | Path) -> RequestTrace:
    """An inference request trace in the Azure LLM inference format."""
    path = Path(path)
    header, rows = _rows(path)
    if [h.lower() for h in header[:3]] != [c.lower() for c in AZURE_COLUMNS]:
        raise TraceError(
            f"{path}:1: expected the header {','.join(AZURE_COLUMNS)} (Azure LLM inference format), "
            f"got {','.join(header)}"
        )
    t = np.empty(len(rows))
    inp = np.empty(len(rows), dtype=np.int64)
    out = np.empty(len(rows), dtype=np.int64)
    for i, (line, f) in enumerate(rows):
        if len(f) < 3:
            raise TraceError(
                f"{path}:{line}: expected 3 fields (TIMESTAMP,ContextTokens,GeneratedTokens), got {len(f)}"
            )
        t[i] = _parse(path, line, "TIMESTAMP", f[0], _time_s, "not a timestamp or a number of seconds")
        inp[i] = _parse(path, line, "ContextTokens", f[1], _count, "not a non-negative integer")
        out[i] = _parse(path, line, "GeneratedTokens", f[2], _count, "not a non-negative integer")
    if not np.isfinite(t).all():
        line = rows[int(np.flatnonzero(~np.isfinite(t))[0])][0]
        raise TraceError(f"{path}:{line}: TIMESTAMP: not a finite time")
    order = np.argsort(t, kind="stable")
    t = t[order] - t[order[0]]
    return RequestTrace(t, inp[order], out[order], str(path))


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


def _positive_int(value: str) -> int:
    v = float(value)
    if v <= 0 or v != int(v):
        raise ValueError(value)
    return int(v)


def _nonneg(value: str) -> float:
    v = float(value)
    if not v >= 0 or math.isinf(v):
        raise ValueError(value)
    return v


def read_job_trace(path: str | Path, known_models: set[str] | None = None) -> JobTrace:
    """A batch-job trace (see the module docstring for the columns)."""
    path = Path(path)
    header, rows = _rows(path)
    c_sub = _column(path, header, "submit")
    c_chips = _column(path, header, "chips")
    c_kind = _column(path, header, "kind")
    c_dur = _column(path, header, "duration", required=False)
    c_work = _column(path, header, "work", required=False)
    if c_dur < 0 and c_work < 0:
        raise TraceError(f"{path}:1: needs a duration_s or a work_flop column")
    c_model = _column(path, header, "model", required=False)
    c_prio = _column(path, header, "priority", required=False)
    n = len(rows)
    sub = np.empty(n)
    chips = np.empty(n, dtype=np.int64)
    dur = np.full(n, math.nan)
    work = np.full(n, math.nan)
    kind = np.empty(n, dtype=np.int8)
    prio = np.full(n, -1, dtype=np.int64)
    models: list[str] = []

    def field(f: list[str], c: int) -> str:
        return f[c] if 0 <= c < len(f) else ""

    for i, (line, f) in enumerate(rows):
        sub[i] = _parse(
            path, line, header[c_sub], field(f, c_sub), _time_s, "not a time (seconds or a timestamp)"
        )
        chips[i] = _parse(
            path, line, header[c_chips], field(f, c_chips), _positive_int, "not a positive integer"
        )
        k = field(f, c_kind).lower()
        if k not in KIND_ALIASES:
            raise TraceError(
                f"{path}:{line}: {header[c_kind]}: unknown kind {field(f, c_kind)!r}; "
                "use pretrain, finetune, eval or batch_inference"
            )
        kind[i] = KIND_NAMES.index(KIND_ALIASES[k])
        d, w = field(f, c_dur), field(f, c_work)
        if bool(d) == bool(w):
            raise TraceError(f"{path}:{line}: give exactly one of duration_s and work_flop")
        if d:
            dur[i] = _parse(path, line, header[c_dur], d, _nonneg, "not a non-negative number of seconds")
        else:
            work[i] = _parse(path, line, header[c_work], w, _nonneg, "not a non-negative number of FLOP")
        m = field(f, c_model)
        if m and known_models is not None and m not in known_models:
            raise TraceError(
                f"{path}:{line}: model: unknown model {m!r}; known: {', '.join(sorted(known_models))}"
            )
        models.append(m)
        if c_prio >= 0 and field(f, c_prio):
            prio[i] = _parse(
                path, line, header[c_prio], field(f, c_prio), _count, "not a non-negative integer"
            )
    if not np.isfinite(sub).all():
        line = rows[int(np.flatnonzero(~np.isfinite(sub))[0])][0]
        raise TraceError(f"{path}:{line}: {header[c_sub]}: not a finite time")
    numeric = all(_is_number(field(f, c_sub)) for _, f in rows[:1])
    order = np.argsort(sub, kind="stable")
    base = 0.0 if numeric else sub[order[0]]
    submit = np.ceil(sub[order] - base).astype(np.int64)
    if (submit < 0).any():
        line = rows[int(order[np.flatnonzero(submit < 0)[0]])][0]
        raise TraceError(f"{path}:{line}: {header[c_sub]}: negative submit time")
    return JobTrace(
        submit_s=submit,
        chips=chips[order],
        duration_s=dur[order],
        work_flop=work[order],
        kind=kind[order],
        priority=prio[order],
        model=tuple(models[int(i)] for i in order),
        source=str(path),
    )


def _is_number(value: str) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return True
