"""Digest of the telemetry every built-in scenario produces, table by table, and how far two
revisions' telemetry are apart.

A refactor that must not change results prints the same digests before and after:

    python bench/telemetry_digest.py --hours 6 > before.txt
    ... change ...
    python bench/telemetry_digest.py --hours 6 | diff before.txt -

A change that may move the last bits (a floating-point sum in another order) saves the columns
before and compares after:

    python bench/telemetry_digest.py --scenarios reference,default --hours 2 --save before.npz
    ... change ...
    python bench/telemetry_digest.py --scenarios reference,default --against before.npz

``--against`` reports every table/column that is not bit-identical (its largest relative
difference, |a - b| / max(|a|, |b|), or a shape, dtype or value mismatch) and one verdict per
scenario (identical; within a relative difference; or different). The file remembers its
``--hours`` and ``--chunk``; the comparison uses them. Exit code 0 when every column is
bit-identical, 1 otherwise.

Each scenario (and each of its variants) is built with the same checks as ``twin run``, stepped
in memory for ``--hours`` (or its own length, if shorter), and every frame column is hashed in
order (SHA-256 of the array bytes, dtype and shape). ``--save`` stores every column of every
scenario concatenated over the advances, one scenario at a time (the built-in ``ultracluster``
holds a million chips: pick a subset with ``--scenarios`` and keep ``--hours`` short).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from scenarios import spec
from twin.compose.sim import steps_for

Frames = dict[str, dict[str, Any]]
META = "__meta__"


def _hash_value(h: Any, v: Any) -> None:
    if isinstance(v, np.ndarray):
        h.update(str(v.dtype).encode())
        h.update(str(v.shape).encode())
        if v.dtype == object:
            h.update(repr(v.tolist()).encode())
        else:
            h.update(np.ascontiguousarray(v).tobytes())
    else:
        h.update(repr(v).encode())


def runs(name: str, hours: float, chunk: int) -> Iterator[tuple[str, Iterator[Frames]]]:
    """Each run of built-in ``name`` (its variants, or itself): its tag and its advances' frames."""
    scenario, _text, _origin = spec.load(name)
    variants = [(f"{name}[{i}]", v) for i, v in enumerate(scenario.variants)] or [(name, scenario)]
    for tag, sc in variants:
        yield tag, _advances(sc, hours, chunk)


def _advances(sc: Any, hours: float, chunk: int) -> Iterator[Frames]:
    p, sim = spec.build_simulation(sc)
    total = min(steps_for(hours * 3600, p.dt_s), steps_for(sc.duration_h * 3600, p.dt_s))
    done = 0
    while done < total:
        n = min(chunk, total - done)
        yield sim.advance(n)
        done += n


def digest(name: str, hours: float, chunk: int) -> dict[str, str]:
    out: dict[str, str] = {}
    for tag, advances in runs(name, hours, chunk):
        hashes: dict[str, Any] = {}
        for frames in advances:
            for table in sorted(frames):
                cols = frames[table]
                for col in sorted(cols):
                    h = hashes.setdefault(f"{table}.{col}", hashlib.sha256())
                    _hash_value(h, cols[col])
        for key in sorted(hashes):
            out[f"{tag} {key}"] = hashes[key].hexdigest()[:16]
    return out


# ---------------------------------------------------------------------------------- columns
def _as_array(v: Any) -> np.ndarray:
    """A frame column as a NumPy array that ``np.save`` stores without pickling: numbers as
    they are, text (lists of strings, object arrays) as fixed-width unicode."""
    if isinstance(v, np.ndarray) and v.dtype != object:
        return v
    items = v.tolist() if isinstance(v, np.ndarray) else list(v)
    if items and all(isinstance(x, (bool, int, float)) for x in items):
        return np.asarray(items)
    return np.array(["" if x is None else str(x) for x in items], dtype=str)


def columns(advances: Iterator[Frames]) -> dict[str, np.ndarray]:
    """Every column of one run, concatenated over its advances: ``table.column -> array``."""
    parts: dict[str, list[np.ndarray]] = {}
    for frames in advances:
        for table, cols in frames.items():
            for col, v in cols.items():
                parts.setdefault(f"{table}.{col}", []).append(_as_array(v))
    out = {}
    for key, arrs in sorted(parts.items()):
        full = [a for a in arrs if a.size] or arrs[:1]  # an empty list of text has no type
        if len({a.dtype.kind == "U" for a in full}) > 1:
            full = [a.astype(str) for a in full]
        out[key] = np.concatenate(full)
    return out


def save(path: Path, names: list[str], hours: float, chunk: int) -> None:
    """Every run's columns into one ``.npz`` (keys ``tag|table.column``), a run at a time."""
    tmp = path.with_name(path.name + ".tmp")
    n = 0
    try:
        with zipfile.ZipFile(tmp, "w", allowZip64=True) as zf:
            meta = np.array(json.dumps({"hours": hours, "chunk": chunk, "scenarios": names}))
            with zf.open(f"{META}.npy", "w", force_zip64=True) as f:
                np.lib.format.write_array(f, meta)
            for name in names:
                for tag, advances in runs(name, hours, chunk):
                    for key, arr in columns(advances).items():
                        with zf.open(f"{tag}|{key}.npy", "w", force_zip64=True) as f:
                            np.lib.format.write_array(f, arr, allow_pickle=False)
                        n += 1
                    print(f"{tag}: saved", file=sys.stderr, flush=True)
    except BaseException:
        tmp.unlink(missing_ok=True)  # nothing half-written
        raise
    tmp.replace(path)
    print(f"{path}: {n} columns of {len(names)} scenario(s), {hours:g} h each at advances of {chunk} steps")


def compare(a: np.ndarray, b: np.ndarray) -> tuple[str, float]:
    """(verdict, largest relative difference) of this run's column ``a`` against the saved ``b``.
    Verdicts: "identical", "differs" (numbers: the relative difference; NaN in one only counts
    as infinite), "mismatch: ..." (shape, dtype or text)."""
    if a.dtype != b.dtype:
        return f"mismatch: dtype {a.dtype} against {b.dtype} saved", float("inf")
    if a.shape != b.shape:
        return f"mismatch: shape {a.shape} against {b.shape} saved", float("inf")
    if a.dtype.kind in "USb":
        same = np.array_equal(a, b)
        return (
            ("identical", 0.0) if same else (f"mismatch: {int((a != b).sum())} values differ", float("inf"))
        )
    if a.dtype.kind == "f":
        if np.array_equal(a.view(np.uint8), b.view(np.uint8)):
            return "identical", 0.0
        both_nan = np.isnan(a) & np.isnan(b)
        one_nan = np.isnan(a) ^ np.isnan(b)
        if one_nan.any():
            return f"differs: NaN in one only at {int(one_nan.sum())} values", float("inf")
        x, y = np.where(both_nan, 0.0, a), np.where(both_nan, 0.0, b)
    else:
        if np.array_equal(a, b):
            return "identical", 0.0
        x, y = a.astype(np.float64), b.astype(np.float64)
    diff = np.abs(x - y)
    n = int((diff > 0).sum())
    if n == 0:
        return "differs: in the bits only (signed zeros or NaN payloads)", 0.0
    scale = np.maximum(np.abs(x), np.abs(y))
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = np.where(diff == 0, 0.0, diff / scale)
    worst = float(np.nanmax(rel))
    return f"differs: max relative difference {worst:.3g} ({n} of {a.size} values)", worst


def _bad(msg: str) -> NoReturn:
    print(f"telemetry_digest: {msg}", file=sys.stderr)
    raise SystemExit(2)


def against(path: Path, names: list[str], hours: float | None, chunk: int | None) -> int:
    """Compare every run of ``names`` with the columns saved in ``path``: the exit code, 0 when
    every column is bit-identical, 1 otherwise."""
    try:
        saved = np.load(path, allow_pickle=False)
    except (OSError, ValueError, zipfile.BadZipFile) as e:
        _bad(f"{path}: not a file of telemetry_digest --save ({e})")
    with saved:
        if META not in saved.files:
            _bad(f"{path}: not a file of telemetry_digest --save (no {META})")
        meta = json.loads(str(saved[META]))
        if hours is not None and hours != meta["hours"]:
            _bad(f"{path}: saved with --hours {meta['hours']:g}, asked {hours:g}; drop --hours")
        if chunk is not None and chunk != meta["chunk"]:
            _bad(f"{path}: saved with --chunk {meta['chunk']}, asked {chunk}; drop --chunk")
        hours, chunk = float(meta["hours"]), int(meta["chunk"])
        keys = set(saved.files) - {META}
        worst_all = 0
        for name in names:
            for tag, advances in runs(name, hours, chunk):
                mine = columns(advances)
                theirs = {k.split("|", 1)[1] for k in keys if k.split("|", 1)[0] == tag}
                if not theirs:
                    print(f"{tag}: not in {path} (saved: {', '.join(meta['scenarios'])})")
                    worst_all = 1
                    continue
                bad, worst, worst_key = 0, 0.0, ""
                for key in sorted(set(mine) | theirs):
                    if key not in theirs:
                        verdict, rel = "mismatch: not in the saved file", float("inf")
                    elif key not in mine:
                        verdict, rel = "mismatch: saved, not produced now", float("inf")
                    else:
                        verdict, rel = compare(mine[key], saved[f"{tag}|{key}"])
                    if verdict != "identical":
                        bad += 1
                        print(f"  {tag} {key}: {verdict}")
                        if rel >= worst:
                            worst, worst_key = rel, key
                n = len(set(mine) | theirs)
                if bad == 0:
                    print(f"{tag}: identical ({n} columns, {hours:g} h)")
                elif worst < float("inf"):
                    print(
                        f"{tag}: within a relative difference of {worst:.3g} ({bad} of {n} columns not "
                        f"bit-identical; largest in {worst_key})"
                    )
                    worst_all = 1
                else:
                    print(
                        f"{tag}: different ({bad} of {n} columns; shape, dtype, text or NaN in {worst_key})"
                    )
                    worst_all = 1
                sys.stdout.flush()
        return worst_all


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hours", type=float, default=None, help="simulated hours per scenario (default 6)")
    ap.add_argument("--chunk", type=int, default=None, help="steps per advance (default 60)")
    ap.add_argument("--scenarios", default="", help="comma-separated built-in names (default: all)")
    ap.add_argument("--save", default="", metavar="FILE.npz", help="store every frame column")
    ap.add_argument("--against", default="", metavar="FILE.npz", help="compare with a --save file")
    ap.add_argument("names", nargs="*", help="built-in names (as --scenarios)")
    a = ap.parse_args()
    if a.save and a.against:
        ap.error("--save and --against: one at a time")
    known = spec.builtin_names()
    names = [n.strip() for n in a.scenarios.split(",") if n.strip()] + a.names
    bad = [n for n in names if n not in known]
    if bad:
        ap.error(f"--scenarios: unknown built-in {bad[0]!r}; expected some of {', '.join(known)}")
    names = names or known
    if a.hours is not None and not a.hours > 0:
        ap.error(f"--hours: expected a positive number, got {a.hours:g}")
    if a.chunk is not None and a.chunk < 1:
        ap.error(f"--chunk: expected a positive number of steps, got {a.chunk}")
    if a.against:
        path = Path(a.against)
        if not path.is_file():
            ap.error(f"--against: {path}: no such file")
        raise SystemExit(against(path, names, a.hours, a.chunk))
    hours = 6.0 if a.hours is None else a.hours
    chunk = 60 if a.chunk is None else a.chunk
    if a.save:
        if not Path(a.save).resolve().parent.is_dir():
            ap.error(f"--save: {a.save}: its folder does not exist")
        save(Path(a.save), names, hours, chunk)
        return
    for name in names:
        d = digest(name, hours, chunk)
        for k, v in d.items():
            print(k, v)
        sys.stdout.flush()


if __name__ == "__main__":
    main()
