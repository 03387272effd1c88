"""Errors classified once: every error that ends a `twin` command is one line and an exit code that
says what happened (2 bad input, 74 I/O or environment, 70 a bug), and a run that dies of an I/O
error is recorded ``failed`` with its reason, everything committed before it kept."""

from __future__ import annotations

import errno
import json
import tomllib
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from click.testing import CliRunner

from scenarios.spec import ScenarioError
from storage.errors import QueryError, StorageError, StorageIOError
from tui.cli import main
from tui.cli.errors import EXIT_BAD_INPUT, EXIT_IO, EXIT_SOFTWARE, classify


def _caused(outer: BaseException, cause: BaseException) -> BaseException:
    outer.__cause__ = cause
    return outer


def _hidden(outer: BaseException, context: BaseException) -> BaseException:
    """``outer`` raised ``from None`` while handling ``context``."""
    outer.__context__ = context
    outer.__suppress_context__ = True
    return outer


def _ray_error() -> Exception:
    cls = type("RaySystemError", (Exception,), {"__module__": "ray.exceptions"})
    return cls("the cluster went away")


def _raised_in_ray() -> Exception:
    """A bare ``Exception`` raised by code in a ``ray`` package (as Ray's node startup does)."""
    code = compile(
        "raise Exception('The current node timed out during startup')", "/x/ray/_private/node.py", "exec"
    )
    try:
        exec(code)
    except Exception as e:
        return e
    raise AssertionError("not raised")


def _toml_error() -> Exception:
    try:
        tomllib.loads("a = ")
    except tomllib.TOMLDecodeError as e:
        return e
    raise AssertionError("tomllib accepted 'a = '")


CASES: list[tuple[str, BaseException, int]] = [
    ("ENOSPC", OSError(errno.ENOSPC, "No space left on device", "out.csv"), EXIT_IO),
    ("EROFS", OSError(errno.EROFS, "Read-only file system", "/ro/out.csv"), EXIT_IO),
    ("EACCES", PermissionError(errno.EACCES, "Permission denied", "/root/x"), EXIT_IO),
    ("EMFILE", OSError(errno.EMFILE, "Too many open files"), EXIT_IO),
    ("EFBIG", OSError(errno.EFBIG, "File too large", "big.duckdb"), EXIT_IO),
    ("ENOENT", FileNotFoundError(errno.ENOENT, "No such file or directory", "nope/x"), EXIT_BAD_INPUT),
    ("EISDIR", IsADirectoryError(errno.EISDIR, "Is a directory", "d"), EXIT_BAD_INPUT),
    (
        "duckdb parser",
        duckdb.ParserException("Parser Error: syntax error at or near 'SELEC'"),
        EXIT_BAD_INPUT,
    ),
    ("duckdb binder", duckdb.BinderException('Binder Error: column "x" not found'), EXIT_BAD_INPUT),
    (
        "duckdb full disk",
        duckdb.IOException("IO Error: Could not write file: No space left on device"),
        EXIT_IO,
    ),
    (
        "duckdb commit on a full disk",
        duckdb.TransactionException('Failed to commit: Could not write file "r.duckdb.wal": File too large'),
        EXIT_IO,
    ),
    ("duckdb foreign file", duckdb.IOException("IO Error: The file is not a valid DuckDB database file!"), 2),
    ("duckdb out of memory", duckdb.OutOfMemoryException("Out of Memory Error: could not allocate"), EXIT_IO),
    ("duckdb internal", duckdb.InternalException("INTERNAL Error: assertion"), EXIT_SOFTWARE),
    ("arrow invalid", pa.ArrowInvalid("Parquet magic bytes not found in footer"), EXIT_BAD_INPUT),
    ("TOML", _toml_error(), EXIT_BAD_INPUT),
    ("ray", _ray_error(), EXIT_IO),
    ("ray node that did not start", _raised_in_ray(), EXIT_IO),
    ("memory", MemoryError(), EXIT_IO),
    ("scenario", ScenarioError("s.toml: hall.ultraservers: out of range"), EXIT_BAD_INPUT),
    ("query", QueryError("refused: UPDATE statements are not allowed"), EXIT_BAD_INPUT),
    ("storage", StorageError("x.duckdb: already exists"), EXIT_BAD_INPUT),
    ("storage io", StorageIOError("x.duckdb: telemetry write failed: No space left on device"), EXIT_IO),
    (
        "storage error of a full disk",
        _caused(StorageError("x.duckdb: cannot create"), OSError(errno.ENOSPC, "No space left on device")),
        EXIT_IO,
    ),
    (
        "another run holds the file (its lock's EAGAIN hidden)",
        _hidden(
            StorageError("x.duckdb: another run is writing this file"), BlockingIOError(errno.EAGAIN, "")
        ),
        EXIT_BAD_INPUT,
    ),
    ("a bug", ValueError("cannot convert float NaN to integer"), EXIT_SOFTWARE),
    ("a bug too", KeyError("pue"), EXIT_SOFTWARE),
]


@pytest.mark.parametrize(("label", "error", "code"), CASES, ids=[c[0] for c in CASES])
def test_each_kind_of_error_has_its_exit_code_and_one_line(
    label: str, error: BaseException, code: int
) -> None:
    got, msg = classify(error)
    assert got == code, (label, msg)
    assert msg and "\n" not in msg
    if isinstance(error, OSError) and error.filename:
        assert str(error.filename) in msg  # the line names the file
    if code == EXIT_SOFTWARE:
        assert type(error).__name__ in msg and "TWIN_DEBUG=1" in msg


def _boom(*args: Any, **kwargs: Any) -> Any:
    raise ValueError("a bug, deep down")


def test_an_internal_error_is_one_line_and_70_and_the_traceback_only_under_twin_debug(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("scenarios.overrides.load", _boom)
    r = CliRunner().invoke(main, ["run", "default", "--hours", "1"])
    assert r.exit_code == EXIT_SOFTWARE
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "internal error: ValueError: a bug, deep down" in lines[0]
    assert "Traceback" not in r.stderr
    r = CliRunner().invoke(main, ["run", "default", "--hours", "1"], env={"TWIN_DEBUG": "1"})
    assert r.exit_code == EXIT_SOFTWARE
    assert "Traceback (most recent call last)" in r.stderr and "_boom" in r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith("twin: error: internal error: ValueError")


def test_an_os_error_of_a_command_is_74_and_names_the_file(monkeypatch: pytest.MonkeyPatch) -> None:
    def full(*args: Any, **kwargs: Any) -> Any:
        raise OSError(errno.ENOSPC, "No space left on device", "week.duckdb")

    monkeypatch.setattr("scenarios.overrides.load", full)
    r = CliRunner().invoke(main, ["run", "default", "--hours", "1"])
    assert r.exit_code == EXIT_IO
    assert r.stderr == "twin: error: week.duckdb: No space left on device\n"


def test_help_lists_the_exit_codes() -> None:
    r = CliRunner().invoke(main, ["--help"])
    text = " ".join(r.output.split())
    for needle in ("2 bad input", "70 internal error", "TWIN_DEBUG=1", "74 I/O or environment failure"):
        assert needle in text


def test_ctrl_c_outside_a_run_is_130(monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr("scenarios.overrides.load", interrupted)
    r = CliRunner().invoke(main, ["validate", "default"])
    assert r.exit_code == 130 and "interrupted" in r.stderr and "Traceback" not in r.stderr


# ---------------------------------------------------------------------- a run that dies of a full disk
TINY = """
name = "tiny"
dt_s = 300
duration_h = 2.0
warmup_h = 0
[hall]
system = "trn3-gen2"
ultraservers = 1
ultraservers_per_row = 1
[training]
arrivals_per_day = 50.0
"""


def test_a_run_that_fills_the_disk_is_recorded_failed_with_its_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer commits two steps per flush (forced below); the fourth flush meets a full disk.
    Expected: exit 74 with one line, and a readable file holding the first three flushes (six
    steps of five minutes: sim_time_s = 6 x 300 s), status 'failed' and the disk's reason."""
    from scenarios.runner import Session
    from storage import database
    from storage import writer as W

    flushes = [0]
    real_flush, real_init = W.TelemetryWriter._flush_once, W.TelemetryWriter.__init__

    def flush_once(self: W.TelemetryWriter) -> None:
        if flushes[0] == 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_flush(self)
        flushes[0] += 1

    def init(self: W.TelemetryWriter, *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **{**kwargs, "flush_rows": 1})  # every hand-over is one flush

    monkeypatch.setattr(W.TelemetryWriter, "_flush_once", flush_once)
    monkeypatch.setattr(W.TelemetryWriter, "__init__", init)
    monkeypatch.setattr(Session, "chunk_steps", property(lambda self: 2))
    (tmp_path / "s.toml").write_text(TINY, encoding="utf-8")
    out = tmp_path / "r.duckdb"
    r = CliRunner().invoke(main, ["run", str(tmp_path / "s.toml"), "--out", str(out), "--json"])
    assert r.exit_code == EXIT_IO, r.stderr
    assert r.stderr.strip().splitlines() == [
        f"twin: error: {out}: telemetry write failed: No space left on device"
    ]
    monkeypatch.undo()
    con = duckdb.connect(str(out), read_only=True)
    try:
        status, sim_time_s, run_id = con.sql("SELECT status, sim_time_s, run_id FROM runs").fetchall()[0]
        steps = con.sql("SELECT count(*) FROM factory_ts").fetchall()[0][0]
        reason = database.failure_reason(con, run_id)
    finally:
        con.close()
    assert (status, steps, sim_time_s) == ("failed", 6, 6 * 300)
    assert reason == "No space left on device"
    q = CliRunner().invoke(
        main, ["sql", str(out), "SELECT count(*) AS n FROM factory_ts", "--format", "json"]
    )
    assert q.exit_code == 0 and json.loads(q.stdout) == [{"n": 6}]


def test_an_empty_out_is_refused_not_the_default() -> None:
    """`--out ''` would fall back to the default file without a word: refused in one line."""
    from click.testing import CliRunner

    from tui.cli import main

    for args in (["run", "default", "--hours", "1", "--out", ""], ["rerun", "x.duckdb", "--out", " "]):
        r = CliRunner().invoke(main, args)
        assert r.exit_code == 2 and "an empty path" in r.output, r.output
