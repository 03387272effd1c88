"""Reading a recording, whether its run has finished or is still being written."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb

from storage.reader import open_run_file


@dataclass
class Reading:
    """A read-only, sandboxed connection on a recording and whether its run is still in progress."""

    con: duckdb.DuckDBPyConnection
    path: Path
    in_progress: bool = False
    committed_s: int | None = None

    @property
    def note(self) -> str:
        if not self.in_progress:
            return ""
        t = f" up to t={self.committed_s:,} s" if self.committed_s is not None else ""
        return f"{self.path}: run in progress; showing what is committed{t}"

    def close(self) -> None:
        self.con.close()


def open_for_reading(path: str | Path) -> Reading:
    """Open a recording for reading (see ``storage.reader.open_run_file``)."""
    return Reading(open_run_file(path), Path(path))
