"""Errors of the ``twin`` commands, classified once: every error that leaves a command becomes one
line on stderr (``twin: error: ...``) and an exit code that says what happened.

Exit codes of every ``twin`` command (also in ``twin --help``):

====  =========================================================================================
0     done
1     done, and the answer is no (``twin plan`` found no value, ``twin rerun --check`` found
      the telemetry differs, a run of a plan failed)
2     bad input: an argument, option, scenario, query or file is wrong (the line names it);
      nothing was written
70    internal error (EX_SOFTWARE of sysexits.h): a bug in twin. One line names the error;
      ``TWIN_DEBUG=1`` prints the traceback as well
74    I/O or environment failure (EX_IOERR): a disk full or read-only, a file too large for the
      limits, no permission, too many open files, out of memory, a lost Ray cluster. The input
      was fine; run again when the environment is
130   interrupted (Ctrl-C)
141   stdout closed by the reader (``twin sql ... | head``): quietly
143   terminated (SIGTERM)
====  =========================================================================================

Click prints a usage block and a hint for a bad option value or a missing argument; here that is
one line and exit code 2 as well. The boundary is the group's ``main`` (every command runs under
it); ``guard`` applies the same classification to a command called on its own. ``fail`` ends a
command with one line and a chosen code.

What is bad input and what is the environment:

- the project's own input errors (``ScenarioError``, ``QueryError``, ``StorageError``, TOML that
  does not parse, a DuckDB parser, binder or catalog error in a user's query, a file that is not a
  DuckDB or Parquet file) are bad input, 2; a ``StorageIOError`` is an environment failure, 74,
  and so is a ``StorageError`` caused by one of the environment's ``OSError``s below;
- ``OSError``: a path that does not exist, is not a directory, is a directory, already exists, is
  too long or loops (ENOENT, ENOTDIR, EISDIR, EEXIST, ENAMETOOLONG, ELOOP, ENXIO, EINVAL) is bad
  input, 2; everything else (ENOSPC, EDQUOT, EFBIG, EROFS, EACCES, EPERM, EMFILE, ENFILE, EIO,
  ENOMEM, ...) is the environment, 74;
- DuckDB: ``IOException`` is 74 unless it says the file is missing or not a database (2);
  ``OutOfMemoryException`` and any error quoting the operating system's reason (a commit on a
  full disk) 74; ``InternalException`` and ``FatalException`` 70; the rest 2;
- Arrow: ``ArrowInvalid`` and the like (a file that is not what it claims) 2, out of memory 74;
- Ray: every Ray error that is not a run's own error is 74 (the cluster went away);
- ``MemoryError`` 74; anything else 70.
"""

from __future__ import annotations

import errno
import functools
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

import click

EXIT_NO = 1
EXIT_BAD_INPUT = 2
EXIT_SOFTWARE = 70  # sysexits.h EX_SOFTWARE
EXIT_IO = 74  # sysexits.h EX_IOERR
EXIT_INTERRUPTED = 130  # 128 + SIGINT
EXIT_PIPE = 141  # 128 + SIGPIPE
EXIT_TERMINATED = 143  # 128 + SIGTERM
EXIT_CODES = (
    0,
    EXIT_NO,
    EXIT_BAD_INPUT,
    EXIT_SOFTWARE,
    EXIT_IO,
    EXIT_INTERRUPTED,
    EXIT_PIPE,
    EXIT_TERMINATED,
)

EXIT_CODES_HELP = (
    "Exit codes: 0 done; 1 the answer is no (plan found none, rerun differs); 2 bad input (one line "
    "names it; nothing written); 70 internal error (a bug; TWIN_DEBUG=1 prints the traceback); "
    "74 I/O or environment failure (disk full or read-only, no permission, out of memory, Ray "
    "cluster lost); 130 Ctrl-C; 143 SIGTERM."
)
DEBUG_VAR = "TWIN_DEBUG"

# The path the user named is wrong; any other OSError is the environment's.
_BAD_PATH_ERRNOS = frozenset(
    {
        errno.ENOENT,
        errno.ENOTDIR,
        errno.EISDIR,
        errno.EEXIST,
        errno.ENAMETOOLONG,
        errno.ELOOP,
        errno.ENXIO,
        errno.EINVAL,
    }
)
_DUCKDB_BAD_FILE = (
    "No such file or directory",
    "Is a directory",
    "Not a directory",
    "not a valid DuckDB database file",
    "Could not read enough bytes",
    "Corrupt",
    "corrupt",
    "The file is not a valid",
    "magic bytes",
)


def _debug() -> bool:
    return os.environ.get(DEBUG_VAR, "") not in ("", "0")


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    if isinstance(e, OSError) and e.strerror:
        where = e.filename if e.filename is not None else ""
        text = f"{where}: {e.strerror}" if where != "" else e.strerror
    return " ".join((text.splitlines() or [type(e).__name__])[0].split())


def _chain(e: BaseException) -> Iterator[BaseException]:
    """``e``, then what caused it (``raise ... from``, or the error being handled unless
    ``from None`` hid it), without loops."""
    seen: set[int] = set()
    cur: BaseException | None = e
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        yield cur
        cur = cur.__cause__ or (None if cur.__suppress_context__ else cur.__context__)


def _os_code(e: OSError) -> int:
    return EXIT_BAD_INPUT if e.errno in _BAD_PATH_ERRNOS else EXIT_IO


def _duckdb_code(e: Exception) -> int | None:
    try:
        import duckdb
    except ImportError:  # pragma: no cover - a dependency
        return None
    if not isinstance(e, duckdb.Error):
        return None
    if isinstance(e, duckdb.IOException | duckdb.PermissionException):
        return EXIT_BAD_INPUT if any(s in str(e) for s in _DUCKDB_BAD_FILE) else EXIT_IO
    from storage.database import is_environment_error

    if is_environment_error(e):  # e.g. a commit or checkpoint that failed on a full disk
        return EXIT_IO
    if isinstance(e, duckdb.InternalException | duckdb.FatalException):
        return EXIT_SOFTWARE
    return EXIT_BAD_INPUT  # parser, binder, catalog, conversion, invalid input: the query or file


def _is_ray(e: BaseException) -> bool:
    """A Ray error: of a class of Ray's, or raised inside Ray's own code (Ray raises a bare
    ``Exception`` when a node does not start)."""
    if type(e).__module__.split(".")[0] == "ray":
        return True
    tb = traceback.extract_tb(e.__traceback__)
    return bool(tb) and f"{os.sep}ray{os.sep}" in tb[-1].filename


def classify(e: BaseException) -> tuple[int, str]:
    """(exit code, one-line message) for an exception that ended a command."""
    import tomllib

    from scenarios.spec import ScenarioError
    from storage.errors import QueryError, StorageError, StorageIOError

    msg = _first_line(e)
    if isinstance(e, StorageIOError):
        return EXIT_IO, msg
    if isinstance(e, StorageError):
        # A file the writer could not create or write for a reason of the environment: an output
        # that could not be written carries the file system's error number (``OutputError``).
        err_no = getattr(e, "errno", None)
        if isinstance(err_no, int) and err_no not in _BAD_PATH_ERRNOS:
            return EXIT_IO, msg
        for c in list(_chain(e))[1:]:
            if isinstance(c, OSError) and _os_code(c) == EXIT_IO:
                return EXIT_IO, msg
            if isinstance(c, Exception) and _duckdb_code(c) == EXIT_IO:
                return EXIT_IO, msg
        return EXIT_BAD_INPUT, msg
    if isinstance(e, ScenarioError | QueryError):
        return EXIT_BAD_INPUT, msg
    if isinstance(e, tomllib.TOMLDecodeError):
        return EXIT_BAD_INPUT, f"not valid TOML: {msg}"
    if _is_ray(e):
        cause = e.__cause__
        if cause is not None and not _is_ray(cause):
            return classify(cause)
        return EXIT_IO, f"Ray: {type(e).__name__}: {msg}"
    if isinstance(e, MemoryError):
        return EXIT_IO, f"out of memory{': ' + msg if msg and msg != 'MemoryError' else ''}"
    if isinstance(e, OSError):
        return _os_code(e), msg
    code = _duckdb_code(e) if isinstance(e, Exception) else None
    if code is not None and code != EXIT_SOFTWARE:
        return code, msg
    try:
        import pyarrow as pa

        if isinstance(e, pa.ArrowException):
            return EXIT_BAD_INPUT, msg
    except ImportError:  # pragma: no cover - a dependency
        pass
    where = ""
    tb = traceback.extract_tb(e.__traceback__)
    if tb:
        last = tb[-1]
        where = f" at {os.path.basename(last.filename)}:{last.lineno}"
    return (
        EXIT_SOFTWARE,
        f"internal error: {type(e).__name__}: {msg}{where} (a bug in twin; run with {DEBUG_VAR}=1 "
        "for the traceback and report it)",
    )


def exit_for(e: BaseException) -> NoReturn:
    """End the command for ``e``: one line on stderr (the traceback too under ``TWIN_DEBUG=1``)
    and its exit code."""
    if isinstance(e, BrokenPipeError):
        _quiet_pipe()
    code, msg = classify(e)
    if _debug():
        traceback.print_exception(e, file=sys.stderr)
    try:
        click.echo(f"twin: error: {msg}", err=True)
    except OSError:  # stderr itself is gone
        pass
    sys.exit(code)


def _quiet_pipe() -> NoReturn:
    """The reader of stdout went away: nothing more to say to it (and Python's own flush at exit
    must not print a second error)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    sys.exit(EXIT_PIPE)


def _interrupted(e: BaseException) -> NoReturn:
    from scenarios.runner import Terminated

    if isinstance(e, Terminated):
        click.echo("\ntwin: terminated (SIGTERM)", err=True)
        sys.exit(EXIT_TERMINATED)
    click.echo("\ntwin: interrupted", err=True)
    sys.exit(EXIT_INTERRUPTED)


class OneLineErrors(click.Group):
    def main(
        self,
        args: Any = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.ClickException as e:
            hint = " (see twin --help)" if isinstance(e, click.UsageError) else ""
            click.echo(f"twin: error: {' '.join(e.format_message().split())}{hint}", err=True)
            sys.exit(e.exit_code)
        except click.Abort as e:
            cause = e.__cause__ or e.__context__
            if isinstance(cause, KeyboardInterrupt):
                _interrupted(cause)
            click.echo("Aborted!", err=True)
            sys.exit(1)
        except KeyboardInterrupt as e:
            _interrupted(e)
        except Exception as e:
            exit_for(e)
        sys.exit(rv if isinstance(rv, int) else 0)


def fail(msg: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    """One line ``twin: error: ...`` on stderr, then exit ``code`` (2: bad input)."""
    click.echo(f"twin: error: {msg}", err=True)
    sys.exit(code)


def guard(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Classify whatever error ends the command (``exit_for``): the same boundary as the group's,
    for a command invoked on its own."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (click.ClickException, click.Abort, click.exceptions.Exit):  # Click's own
            raise
        except Exception as e:
            exit_for(e)

    return wrapper
