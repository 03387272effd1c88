"""The live manifest (``FILE.live/manifest.json``): what a running writer vouches for, checked
before any path in it is touched (``check_manifest``), and whether a sidecar left behind is one
this program wrote (``leftover_problem``).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import stat
import time
from pathlib import Path
from typing import Any

from storage.errors import StorageError
from storage.parts import PART_NAME, folder_problem, run_dir_name, scan
from storage.parts import SUFFIX as PARTS_SUFFIX
from storage.schema import columns
from twin.spec.telemetry import SCHEMA_VERSION, TABLES

MANIFEST = "manifest.json"
FORMAT = "ai-factory-twin-live"
MANIFEST_MAX_BYTES = 64 << 20  # far above any run's (a few hundred parts per table at most)
# The manifest's keys and their types (``None``: may be null); the first four are required.
MANIFEST_KEYS: dict[str, tuple[type, ...]] = {
    "format": (str,),
    "schema_version": (int,),
    "run": (dict,),
    "tables": (dict,),
    "file": (str,),
    "seq": (int,),
    "committed_s": (int, type(None)),
    "dir": (str,),
}
_REQUIRED = ("format", "schema_version", "run", "tables")
_TYPE_WORDS = {str: "text", int: "an integer", dict: "an object", type(None): "null"}
# A run-row value of each column type (``_jsonable_run``: instants as ISO text).
_RUN_TYPES: dict[str, tuple[type, ...]] = {
    "int8": (int,),
    "int32": (int,),
    "int64": (int,),
    "float32": (int, float),
    "float64": (int, float),
    "string": (str,),
    "bool": (bool,),
    "timestamptz": (str,),
}


_INT_BITS = {"int8": 8, "int32": 32, "int64": 64}


def _type_ok(v: Any, types: tuple[type, ...]) -> bool:
    """``isinstance`` where a JSON boolean is not a number."""
    if isinstance(v, bool) and bool not in types:
        return False
    return isinstance(v, types)


def check_manifest(d: Path, m: Any, recording: str | None = None) -> dict[str, Any]:
    """The live manifest of the sidecar ``d`` checked before any path in it is touched: the
    allowed keys with their types, this version's format and schema, a run row of the runs
    table's columns and types, parts named as the writer names them (``table=<table>/part-…``:
    plain names inside ``d``, no absolute path, no ``..``) that are regular files, not symbolic
    links; with ``recording``, the file it names. ``StorageError`` naming the key otherwise."""
    where = d / MANIFEST
    checked = _check_keys(where, m, recording)
    _check_run(where, checked["run"])
    _check_part_names(where, checked["tables"])
    _check_paths(where, parts_base(d, checked), checked["tables"], d)
    return checked


def _check_keys(where: Path, m: Any, recording: str | None) -> dict[str, Any]:
    """The manifest's keys, their types and values (format, schema, counters, recording); the
    manifest, known to be an object."""
    if not isinstance(m, dict):
        raise StorageError(f"{where}: not a live manifest (a JSON {type(m).__name__}, not an object)")
    unknown = sorted(set(m) - set(MANIFEST_KEYS))
    if unknown:
        raise StorageError(f"{where}: unknown key {unknown[0]!r}")
    for key in _REQUIRED:
        if key not in m:
            raise StorageError(f"{where}: no {key!r}")
    for key, types in MANIFEST_KEYS.items():
        if key in m and not _type_ok(m[key], types):
            want = " or ".join(_TYPE_WORDS[t] for t in types)
            raise StorageError(f"{where}: {key} {m[key]!r:.60} is not {want}")
    if m["format"] != FORMAT:
        raise StorageError(f"{where}: not an AI Factory Twin live view (format {m['format']!r:.60})")
    if m["schema_version"] != SCHEMA_VERSION:
        raise StorageError(
            f"{where}: run in progress with telemetry schema v{m['schema_version']}, this version of "
            f"twin reads v{SCHEMA_VERSION}"
        )
    for key in ("seq", "committed_s"):
        if isinstance(m.get(key), int) and m[key] < 0:
            raise StorageError(f"{where}: {key} {m[key]} is negative")
    if recording is not None and m.get("file") != recording:
        raise StorageError(f"{where}: names the recording {m.get('file')!r}, not {recording!r}")
    return m


def _check_run(where: Path, run: dict[str, Any]) -> None:
    """The run row: the runs table's columns, each value of its column's type and range."""
    kinds = {c.name: c.dtype for c in columns("runs")}
    for k, v in run.items():
        if k not in kinds:
            raise StorageError(f"{where}: run: unknown column {k!r:.60}")
        if v is not None and not _type_ok(v, _RUN_TYPES[kinds[k]]):
            raise StorageError(f"{where}: run.{k} {v!r:.60} is not of type {kinds[k]}")
        bits = _INT_BITS.get(kinds[k])
        if bits is not None and v is not None and not -(2 ** (bits - 1)) <= v < 2 ** (bits - 1):
            raise StorageError(f"{where}: run.{k} {v!r:.60} is out of the range of {kinds[k]}")
        if v is not None and kinds[k] == "timestamptz":
            try:
                t = _dt.datetime.fromisoformat(v)
            except ValueError:
                raise StorageError(f"{where}: run.{k} {v!r:.60} is not an ISO 8601 date-time") from None
            if t.tzinfo is None:
                raise StorageError(f"{where}: run.{k} {v!r:.60} has no time zone")


def _check_part_names(where: Path, tables: dict[str, Any]) -> None:
    """Every table known and each of its parts named as the writer names them."""
    for table, parts in tables.items():
        if table not in TABLES or table == "runs":
            raise StorageError(f"{where}: tables: unknown table {table!r:.60}")
        if not isinstance(parts, list):
            raise StorageError(f"{where}: tables.{table} is not a list of parts")
        for part in parts:
            prefix = f"table={table}/"
            if (
                not isinstance(part, str)
                or not part.startswith(prefix)
                or not PART_NAME.fullmatch(part[len(prefix) :])
            ):
                raise StorageError(
                    f"{where}: tables.{table}: {part!r:.80} is not a part name ({prefix}part-<seq>-<level>.parquet)"
                )


def _check_paths(where: Path, base: Path, tables: dict[str, Any], d: Path) -> None:
    """Only now is anything named in the manifest touched: the folders and parts under ``base``
    must be what they seem (plain folders and files, not symbolic links)."""
    if base != d:
        for q in (base.parent, base):
            try:
                st = os.lstat(q)
            except OSError as e:
                raise StorageError(f"{where}: its parts' folder {q}: {e.strerror or e}") from None
            if not stat.S_ISDIR(st.st_mode):
                raise StorageError(f"{q}: not a plain folder")
    for table, parts in tables.items():
        for part in parts:
            for q in (base / f"table={table}", base / part):
                try:
                    st = os.lstat(q)
                except FileNotFoundError:
                    raise StorageError(f"{where}: lists {part}, which is missing") from None
                except OSError as e:
                    raise StorageError(f"{q}: cannot read: {e.strerror or e}") from None
                folder = q.name.startswith("table=")
                # A symbolic link (to anywhere) is neither a plain folder nor a plain file.
                if not (stat.S_ISDIR(st.st_mode) if folder else stat.S_ISREG(st.st_mode)):
                    raise StorageError(f"{q}: not a plain {'folder' if folder else 'file'}")


def parts_base(d: Path, m: dict[str, Any]) -> Path:
    """The folder the manifest's parts are named in: the sidecar ``d`` itself, or (``dir``) the
    run's folder of the recording's parts (``storage.parts``), which must be exactly that."""
    if "dir" not in m:
        return d
    recording = d.name.removesuffix(".live")
    try:
        want = f"{recording}{PARTS_SUFFIX}/{run_dir_name(str(m['run'].get('run_id')))}"
    except StorageError as e:
        raise StorageError(f"{d / MANIFEST}: {e}") from None
    if m["dir"] != want:
        raise StorageError(f"{d / MANIFEST}: dir {m['dir']!r:.80} is not {want!r}")
    return d.parent / want


def read_manifest(d: Path) -> dict[str, Any]:
    for _ in range(5):  # the manifest is replaced atomically; retry only a vanishing sidecar
        where = d / MANIFEST
        try:
            st = os.lstat(where)
            if not stat.S_ISREG(st.st_mode):  # a pipe would block, a link could lead anywhere
                raise StorageError(f"{where}: not a plain file")
            if st.st_size > MANIFEST_MAX_BYTES:
                raise StorageError(f"{where}: {st.st_size:,} bytes, not a live manifest")
            with open(where, "rb") as f:
                m: Any = json.loads(f.read(MANIFEST_MAX_BYTES + 1))
            return check_manifest(d, m)
        except FileNotFoundError:
            time.sleep(0.05)
        except (OSError, ValueError, RecursionError) as e:
            raise StorageError(f"{where}: unreadable live manifest ({str(e)[:120]})") from e
    raise StorageError(f"{d}: the run closed while opening its live view; open the file again")


# What a run's sidecar may hold (``LivePublisher``): its manifest, its tables' folders with parts,
# and the temporary names of both.
OWN_TMP = re.compile(r"\.(manifest\.json|part-[0-9]{9}-[0-9]{1,3}\.parquet)\.tmp")


def leftover_problem(d: Path, recording: str) -> str | None:
    """Why the sidecar ``d`` is not provably a live view this program left for ``recording``
    (``None``: it is, and may be removed): a plain folder whose manifest is valid and names
    ``recording``, holding nothing but what a run writes there. (Its run is over: the caller
    holds the recording's lock.)"""
    why = folder_problem(d)
    if why is not None or not os.path.lexists(d):
        return why
    try:
        m = json.loads((d / MANIFEST).read_text()) if (d / MANIFEST).is_file() else None
        if m is not None:
            check_manifest(d, m, recording)
        for entry in scan(d):
            if entry.name == MANIFEST and entry.is_file(follow_symlinks=False):
                continue
            if OWN_TMP.fullmatch(entry.name) and entry.is_file(follow_symlinks=False):
                continue
            table = entry.name.removeprefix("table=")
            if entry.name.startswith("table=") and table in TABLES and entry.is_dir(follow_symlinks=False):
                for part in scan(entry.path):
                    if not (
                        part.is_file(follow_symlinks=False)
                        and (PART_NAME.fullmatch(part.name) or OWN_TMP.fullmatch(part.name))
                    ):
                        return f"holds {entry.name}/{part.name}, which a run does not write"
                continue
            return f"holds {entry.name}, which a run does not write"
    except (OSError, ValueError, RecursionError) as e:
        return f"unreadable ({str(e)[:120]})"
    except StorageError as e:
        return str(e).removeprefix(f"{d / MANIFEST}: ")
    if m is None and scan(d):
        return "no manifest naming its recording"
    return None
