"""Publishing a recording while its run is still being written, for readers in other processes.

DuckDB lets one process hold a database file for writing and no other process open it, not even
read-only. So while a run writes ``FILE``, the writer also publishes every committed transaction as
Parquet parts in a sidecar directory ``FILE.live/``, removed when the run closes:

    FILE.live/manifest.json                    run row, committed time, the parts of every table
    FILE.live/table=<table>/part-<seq>-<level>.parquet

Each part is written under a temporary name and renamed, then the manifest is replaced the same
way, so a reader never sees half a part or a part the manifest does not vouch for. Parts are merged
in the background of the writer thread (16 parts of one level into one of the next), so a table
of small commits never has more than a few dozen files however long the run; a commit's part as
large as a merged part's row group is never merged (a large hall's: one file a commit, each at
least ``ROW_GROUP_BYTES``). Merged-away parts are deleted after a grace period so a reader that
just read the manifest can still scan them.

Readers in other processes open what is published with ``storage.liveread.open_for_reading``.
``storage.liveread.LiveUserSql`` runs the live console's queries over it.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from storage.errors import StorageError
from storage.manifest import FORMAT, MANIFEST, OWN_TMP, leftover_problem
from storage.parts import PART_TABLES, parts_dir, run_dir_name, scan
from storage.parts import SUFFIX as PARTS_SUFFIX
from storage.schema import (
    batch_keys,
    batch_schema,
)
from storage.upsert import latest_per_key
from twin.spec.telemetry import SCHEMA_VERSION, TABLES, UPSERT_KEYS

FANOUT = 16  # parts of one level merged into one part of the next
# A merged part's row groups: commits gathered up to this much data (at most this many rows).
ROW_GROUP_BYTES = 16 << 20
ROW_GROUP_ROWS = 1 << 20
GRACE_S = 300.0  # merged-away parts stay on disk this long for readers that listed them


# The parts' codec: they live only while the run does. LZ4 (``bench/bench_writepath.py``).
PART_COMPRESSION = "lz4"


def _parquet_options(schema: pa.Schema) -> dict[str, Any]:
    """Fast Parquet for short-lived parts: ``PART_COMPRESSION``, dictionaries only for text."""
    return {
        "compression": PART_COMPRESSION,
        "use_dictionary": [f.name for f in schema if pa.types.is_string(f.type)],
    }


def _latest_masks(paths: list[Path], keys: tuple[str, ...]) -> list[np.ndarray]:
    """For each part (in order), which of its rows is the last of its key over all the parts:
    a job is published again at every commit that writes it, and a merge keeps its newest row."""
    tables = [pq.read_table(p, columns=list(keys)) for p in paths]
    sizes = [t.num_rows for t in tables]
    both = pa.concat_tables(tables).append_column("_pos", pa.array(np.arange(sum(sizes))))
    last = latest_per_key(both, keys).column("_pos").to_numpy()
    mask = np.zeros(sum(sizes), dtype=bool)
    mask[last] = True
    return np.split(mask, np.cumsum(sizes)[:-1])


def live_dir(path: str | Path) -> Path:
    p = Path(path)
    return p.with_name(p.name + ".live")


def _replace_atomically(tmp: Path, dest: Path) -> None:
    os.replace(tmp, dest)


def _jsonable_run(run: dict[str, Any]) -> dict[str, Any]:
    return {k: (v.isoformat() if isinstance(v, _dt.datetime) else v) for k, v in run.items()}


@dataclass
class _Part:
    seq: int  # last commit sequence number the part holds
    level: int
    rows: int = 0
    # A commit's part of at least ROW_GROUP_BYTES (a large hall's chip or UltraServer rows): its
    # row groups are already as large as a merge would make them, so merging it would only copy
    # it into a file with others (at a million chips, most of the day's bytes read and written
    # again). It is never merged; the parts after it merge as usual.
    settled: bool = False

    @property
    def name(self) -> str:
        return f"part-{self.seq:09d}-{self.level}.parquet"


class LivePublisher:
    """Publishes a run's committed batches as Parquet parts next to its file (see module doc).
    The parts carry the batches' columns (``batch_schema``: not ``run_id``, which the manifest's
    run row holds once and the views add to every row).

    Called by the writer thread after every commit (``on_commit``). A failure to publish (disk
    full, directory removed) never fails the run: publishing stops and the sidecar is removed, so
    readers report the run as unreadable until it ends instead of showing stale data as current.
    """

    def __init__(self, path: str | Path, run_id: str | None = None, manifest: bool = True) -> None:
        # Nothing touches the disk before the first commit: by then the writer holds the file, so
        # a sidecar found here was left behind by a killed run, not published by a live one.
        self.dir = live_dir(path)
        self.recording = Path(path).name
        # ``run_id`` given: the parts are the recording's own (``storage.parts``: kept in
        # ``FILE.parts/run_id=<run>/`` when the run closes, stored by the writer through ``store``
        # and ``committed``, whose errors are the run's); the sidecar holds only the manifest
        # (``manifest``: published for live readers).
        self.durable = run_id is not None
        self.publish = manifest or not self.durable
        self.part_dir = parts_dir(path) / run_dir_name(run_id) if run_id is not None else self.dir
        self.part_dir_rel = f"{self.recording}{PARTS_SUFFIX}/{self.part_dir.name}" if self.durable else None
        self.created = False
        self.seq = 0
        self.parts: dict[str, list[_Part]] = {t: [] for t in TABLES if t != "runs"}
        self._doomed: list[tuple[float, Path]] = []
        # The parts and doomed count as of the last commit, while parts stored since then wait for
        # the transaction that lists them (``None``: nothing pending).
        self._pending: tuple[dict[str, list[_Part]], int] | None = None
        self.error: BaseException | None = None
        self.closed = False

    # ---------------------------------------------------------------- writer thread
    def store(self, tables: dict[str, pa.Table]) -> list[str]:
        """Write one commit's batches as parts (merging as they accumulate), before the transaction
        that lists them; the tables whose parts changed. Errors are the run's (a durable store)."""
        self.prepare()
        if self._pending is None:
            self._pending = ({t: list(ps) for t, ps in self.parts.items()}, len(self._doomed))
        self.seq += 1
        changed = []
        for table, tb in tables.items():
            if table in self.parts and tb.num_rows:
                # The batch's columns in their order (a table as stored, with run_id, too).
                tb = tb.select(batch_schema(table).names)
                # (The upsert tables' parts always merge: only a merge keeps one row per job.)
                settled = table not in UPSERT_KEYS and tb.nbytes >= ROW_GROUP_BYTES
                part = _Part(self.seq, 0, tb.num_rows, settled)
                self._write(table, part, tb)
                self.parts[table].append(part)
                self._merge(table)
                changed.append(table)
        return changed

    def prepare(self) -> None:
        """Create the parts' folder (a durable store's run folder, or the sidecar) if not yet there."""
        if not self.created:
            self._create_dirs()

    def listing(self, table: str) -> list[tuple[str, int]]:
        """``table``'s parts as ``(path relative to the run's folder, rows)``."""
        return [(f"table={table}/{p.name}", p.rows) for p in self.parts[table]]

    def settle(self) -> None:
        """The transaction that lists the parts stored so far has committed: they are the file's."""
        self._pending = None

    def abort(self) -> None:
        """The transaction that was to list the parts stored since the last commit failed: forget
        them and delete their files (and a part cut short), so that the folder holds what the file
        lists; a part the file lists stays, even one a merge in the failed store had doomed."""
        if self._pending is None:
            return
        parts, doomed = self._pending
        self._pending = None
        listed = {(t, p.name) for t, ps in parts.items() for p in ps}
        gone = [self.part_dir / f"table={t}" / p.name for t, ps in self.parts.items() for p in ps]
        gone += [p for _, p in self._doomed[doomed:]]
        self.parts, self._doomed = parts, self._doomed[:doomed]
        for t in self.parts:
            d = self.part_dir / f"table={t}"
            with contextlib.suppress(OSError):
                gone += [Path(e.path) for e in scan(d) if OWN_TMP.fullmatch(e.name)]
        for p in gone:
            if (p.parent.name.removeprefix("table="), p.name) not in listed:
                with contextlib.suppress(OSError):
                    p.unlink(missing_ok=True)

    def committed(self, run: dict[str, Any]) -> None:
        """After the transaction that lists the stored parts: publish the manifest (best effort:
        live readers only) and delete the parts merged away long enough ago."""
        self.settle()
        if self.publish and self.error is None:
            try:
                if not self.dir.is_dir():
                    self._create_sidecar()
                self._write_manifest(run)
            except Exception as e:
                self.error = e
                if self.dir.is_dir() and not self.dir.is_symlink():
                    shutil.rmtree(self.dir, ignore_errors=True)
        self._collect()

    def _create_sidecar(self) -> None:
        if os.path.lexists(self.dir):  # left behind by a run that was killed?
            why = leftover_problem(self.dir, self.recording)
            if why is not None:  # not provably ours: kept, and nothing is published
                raise StorageError(f"{self.dir}: {why}; not replaced")
            shutil.rmtree(self.dir)
        self.dir.mkdir(mode=0o700)

    def _create_dirs(self) -> None:
        if self.durable:
            self.part_dir.mkdir(parents=True, exist_ok=True)
        else:
            self._create_sidecar()
        self.created = True

    def on_commit(self, tables: dict[str, pa.Table], run: dict[str, Any]) -> None:
        """After a commit of a file that keeps its time series in DuckDB: publish its batches as
        parts for live readers (best effort)."""
        if self.error is not None or self.closed:
            return
        try:
            self.store(tables)
            self._write_manifest(run)
            self._collect()
        except Exception as e:  # publishing is best effort; the run goes on
            self.error = e
            if self.created and self.dir.is_dir() and not self.dir.is_symlink():
                shutil.rmtree(self.dir, ignore_errors=True)

    def close(self) -> None:
        """Remove the sidecar (the file itself is readable again once its writer has closed) and,
        of a durable store, the parts merged away."""
        self.closed = True
        if self.durable:
            for _, p in self._doomed:
                p.unlink(missing_ok=True)
            self._doomed = []
            # The parts of the tables the file keeps in DuckDB were for live readers only.
            for table in (t for t in self.parts if t not in PART_TABLES):
                for part in self.parts.get(table, []):
                    (self.part_dir / f"table={table}" / part.name).unlink(missing_ok=True)
                try:
                    (self.part_dir / f"table={table}").rmdir()
                except OSError:
                    pass
        if self.dir.is_dir() and not self.dir.is_symlink() and (self.created or self.durable):
            shutil.rmtree(self.dir, ignore_errors=True)

    # ---------------------------------------------------------------- internals
    def _table_dir(self, table: str) -> Path:
        d = self.part_dir / f"table={table}"
        d.mkdir(exist_ok=True)
        return d

    def _write(self, table: str, part: _Part, tb: pa.Table) -> None:
        d = self._table_dir(table)
        tmp = d / f".{part.name}.tmp"
        pq.write_table(tb, tmp, **_parquet_options(tb.schema))
        _replace_atomically(tmp, d / part.name)

    def _merge(self, table: str) -> None:
        parts = self.parts[table]
        while (
            len(parts) >= FANOUT
            and len({p.level for p in parts[-FANOUT:]}) == 1
            and not any(p.settled for p in parts[-FANOUT:])
        ):
            group = parts[-FANOUT:]
            merged = _Part(group[-1].seq, group[-1].level + 1, sum(p.rows for p in group))
            d = self._table_dir(table)
            tmp = d / f".{merged.name}.tmp"
            schema = batch_schema(table)
            # Upsert tables (jobs): only each key's last row survives the merge, as in the file.
            keep = (
                _latest_masks([d / p.name for p in group], batch_keys(table))
                if table in UPSERT_KEYS
                else None
            )
            with pq.ParquetWriter(tmp, schema, **_parquet_options(schema)) as w:
                # A row group at a time, gathered into row groups of up to ROW_GROUP_BYTES: memory
                # stays flat however large the parts, and so does the footer, which would
                # otherwise list every commit's row group (a reader and the next merge hold it all).
                buf: list[pa.Table] = []
                size = 0
                for k, p in enumerate(group):
                    f = pq.ParquetFile(d / p.name)
                    at = 0
                    try:
                        for i in range(f.num_row_groups):
                            tb = f.read_row_group(i).cast(schema)
                            if keep is not None:
                                n = tb.num_rows
                                tb = tb.filter(pa.array(keep[k][at : at + n]))
                                at += n
                                merged.rows -= n - tb.num_rows
                            buf.append(tb)
                            size += tb.nbytes
                            if size >= ROW_GROUP_BYTES:
                                w.write_table(pa.concat_tables(buf), row_group_size=ROW_GROUP_ROWS)
                                buf, size = [], 0
                    finally:
                        f.close()
                if buf:
                    w.write_table(pa.concat_tables(buf), row_group_size=ROW_GROUP_ROWS)
            _replace_atomically(tmp, d / merged.name)
            del parts[-FANOUT:]
            parts.append(merged)
            now = time.monotonic()
            self._doomed.extend((now, d / p.name) for p in group)

    def _write_manifest(self, run: dict[str, Any]) -> None:
        manifest = {
            "format": FORMAT,
            "schema_version": SCHEMA_VERSION,
            "file": self.recording,
            "seq": self.seq,
            "committed_s": run.get("sim_time_s"),
            "run": _jsonable_run(run),
            "tables": {t: [f"table={t}/{p.name}" for p in ps] for t, ps in self.parts.items()},
        }
        if self.part_dir_rel is not None:
            manifest["dir"] = self.part_dir_rel
        tmp = self.dir / f".{MANIFEST}.tmp"
        tmp.write_text(json.dumps(manifest))
        _replace_atomically(tmp, self.dir / MANIFEST)

    def _collect(self) -> None:
        now = time.monotonic()
        keep = []
        for t, p in self._doomed:
            if now - t >= GRACE_S:
                p.unlink(missing_ok=True)
            else:
                keep.append((t, p))
        self._doomed = keep
