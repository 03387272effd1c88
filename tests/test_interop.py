"""Recordings other tools can read: DuckDB 1.x, strict JSON, NULL for no value, calendar time."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

# DuckDB 1.5.x (the newest 1.x) refuses a file "with version number 69 ... can only read versions
# between 64 and 68"; DuckDB 1.2.0 reads up to 65.
DUCKDB1_READABLE = range(64, 66)


def storage_version(path: Path) -> int:
    """The storage version number in a DuckDB file's main header (checksum u64, b'DUCK', u64)."""
    with open(path, "rb") as f:
        head = f.read(20)
    assert head[8:12] == b"DUCK", "not a DuckDB file"
    return int(struct.unpack("<Q", head[12:20])[0])


def test_recording_uses_a_storage_version_duckdb_1x_reads(small_run: Path) -> None:
    assert storage_version(small_run) in DUCKDB1_READABLE


@pytest.mark.skipif(
    not os.environ.get("TWIN_DUCKDB1_PYTHON"),
    reason="set TWIN_DUCKDB1_PYTHON to a Python with duckdb<2 installed to check a real 1.x reader",
)
def test_a_duckdb_1x_reader_opens_the_recording(small_run: Path) -> None:
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run(
        [sys.executable, str(root / "bench" / "check_duckdb1.py"), str(small_run),
         "--python", os.environ["TWIN_DUCKDB1_PYTHON"]],
        capture_output=True, text=True, cwd=root, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "-> ok" in proc.stdout
