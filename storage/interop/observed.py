"""The ``observed`` table: what ``twin ingest`` read, in the recording format.

    FILE                              a twin recording (its schema, no run) with two more objects:
                                      view ``observed`` and table ``observed_sources``
    FILE.parts/observed/part-<seq>-0.parquet   the samples, one part a batch

Each batch is written under a temporary name and renamed into place; the view reads the parts by
the writer's part-name glob, so it names every batch as soon as it is renamed and the DuckDB file
is not held between batches: ``twin sql FILE`` reads it while the ingest goes on. A batch already
written is never rewritten, so a source that fails later loses nothing that was recorded.
``observed_sources`` (one row a source: format, samples, unmapped, malformed, duplicates, flags,
clock offset, stale) is written when the ingest ends.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from storage.database import init_schema, open_database
from storage.errors import StorageError
from storage.interop.parsed import OBSERVED
from storage.live import PART_COMPRESSION
from storage.parts import PART_GLOB, base_of, parts_dir
from storage.sandbox import Limits

TABLE = "observed"
SOURCES_DDL = (
    "CREATE TABLE IF NOT EXISTS observed_sources (source VARCHAR, format VARCHAR, samples BIGINT, "
    "unmapped BIGINT, malformed BIGINT, duplicates BIGINT, invalid BIGINT, clock BIGINT, gaps BIGINT, "
    "resets BIGINT, clock_offset_s DOUBLE, stale BOOLEAN, error VARCHAR)"
)
SOURCE_COLUMNS = (
    "source",
    "format",
    "samples",
    "unmapped",
    "malformed",
    "duplicates",
    "invalid",
    "clock",
    "gaps",
    "resets",
    "clock_offset_s",
    "stale",
    "error",
)


def _sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


class ObservedRecorder:
    def __init__(self, path: str | Path, overwrite: bool = False) -> None:
        self.path = Path(path)
        if self.path.exists() or os.path.lexists(parts_dir(self.path)):
            if not overwrite:
                raise StorageError(f"{self.path}: exists (use --overwrite to replace it)")
            self.path.unlink(missing_ok=True)
            import shutil

            shutil.rmtree(parts_dir(self.path), ignore_errors=True)
        self.dir = parts_dir(self.path) / TABLE
        self.dir.mkdir(parents=True)
        self.seq = 0
        self.rows = 0
        self._write_part(OBSERVED.empty_table())  # the view's glob always matches a part
        con, _ = open_database(self.path, Limits())
        try:
            init_schema(con)
            glob = f"{base_of(self.path)}/{TABLE}/{PART_GLOB}"
            con.execute(
                f"CREATE OR REPLACE VIEW {TABLE} AS SELECT * FROM read_parquet({_sql_str(glob)}, "
                "hive_partitioning = false)"
            )
            con.execute(SOURCES_DDL)
            con.execute("INSERT OR REPLACE INTO twin_meta VALUES ('observed', 'true')")
        finally:
            con.close()

    def _write_part(self, tab: pa.Table) -> None:
        name = f"part-{self.seq:09d}-0.parquet"
        tmp = self.dir / f".{name}.tmp"
        pq.write_table(tab.cast(OBSERVED), tmp, compression=PART_COMPRESSION)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, self.dir / name)
        self.seq += 1

    def append(self, tab: pa.Table) -> None:
        if len(tab):
            self._write_part(tab)
            self.rows += len(tab)

    def close(self, sources: list[dict[str, Any]]) -> None:
        con, _ = open_database(self.path, Limits())
        try:
            rows = pa.Table.from_pylist([{k: s.get(k) for k in SOURCE_COLUMNS} for s in sources])
            if len(rows):
                con.register("_src", rows)
                con.execute(f"INSERT INTO observed_sources SELECT {', '.join(SOURCE_COLUMNS)} FROM _src")
                con.unregister("_src")
            con.execute("CHECKPOINT")
        finally:
            con.close()
