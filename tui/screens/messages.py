"""What screens ask of the app: messages posted up (the app handles them; screens never import it)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from textual.message import Message


class OpenSql(Message):
    """Open ``sql`` in the SQL editor (and run it); ``source`` says where it came from."""

    def __init__(self, sql: str, run: bool = True, source: str = "") -> None:
        super().__init__()
        self.sql = sql
        self.run = run
        self.source = source


class OpenJob(Message):
    """Show a job's timeline."""

    def __init__(self, job: int) -> None:
        super().__init__()
        self.job = job


class ExportTable(Message):
    """Write a result table to ``path`` (CSV, or Parquet for .parquet / .pq)."""

    def __init__(self, table: pa.Table, path: Path) -> None:
        super().__init__()
        self.table = table
        self.path = path
