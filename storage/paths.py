"""The one check of every output a command writes, and the writing that leaves nothing half-made.

``check_output`` is called by every command with an output before anything is written: the output
is compared with each of the command's inputs (the same path once links are resolved, the same
file through a hard link: ``st_dev``/``st_ino``, or a sidecar of an input or inside one), the names
of a recording's sidecars are reserved (``SIDECARS``: an output never takes the name of a sidecar
of an existing recording, nor goes inside one), the root folder is refused, and an existing output needs ``overwrite``
(a folder also needs to hold only what the command itself would have written there).
``check_run_output`` adds what a run's own sidecars need: a sidecar already beside the output is
only ever reused or removed when it is provably this program's leftover.

``atomic_file`` and ``atomic_dir`` write under a temporary name in the target's folder and rename
into place at the end: a failure (a full disk, a read-only file system, no permission, a pseudo
file system such as ``/proc``) leaves nothing behind and becomes one ``OutputError`` line.

Every refusal is an ``OutputError`` (a ``StorageError``) naming the option, the path and the
problem.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO

from storage.errors import StorageError
from storage.parts import scan
from storage.recording import is_duckdb_file

# The files and folders a recording ``X`` may have beside it: its live view (``storage.live``),
# its run lock (``storage.runlock``), its time series' parts (``storage.parts``), DuckDB's
# temporary folder and its write-ahead log.
SIDECARS = (".live", ".lock", ".parts", ".tmp", ".wal")
# The temporary name a run creates its file under (``storage.database.create_file``).
_CREATING = re.compile(r"\.(?P<name>.+)\.creating-[0-9]+(\.wal)?")
# What DuckDB puts in its temporary folder.
_DUCKDB_TEMP = re.compile(r"duckdb_temp_(storage|block)[-_0-9a-zA-Z.]*")


class OutputError(StorageError):
    """An output was refused (it would replace an input, a sidecar or someone's file) or could
    not be written (full disk, read-only file system, no permission)."""

    def __init__(self, message: str, err_no: int | None = None) -> None:
        super().__init__(message)
        self.errno = err_no  # the file system's error number, if it was one


def sidecars(path: str | Path) -> list[Path]:
    """The sidecars of the recording ``path`` (``SIDECARS``), whether they exist or not."""
    p = Path(path)
    return [p.with_name(p.name + s) for s in SIDECARS]


def _entries(d: str | Path) -> bool:
    """Whether the folder ``d`` holds anything."""
    with os.scandir(d) as it:
        return any(True for _ in it)


def _stat(p: Path) -> os.stat_result | None:
    try:
        return os.stat(p)
    except OSError:
        return None


def _resolved(p: Path) -> Path:
    try:
        return p.resolve()
    except (OSError, RuntimeError):  # a symlink loop: compare the path as given
        return p.absolute()


def _same(a: Path, b: Path) -> bool:
    """The same file: one path once links are resolved, or one inode (a hard link)."""
    if _resolved(a) == _resolved(b):
        return True
    sa, sb = _stat(a), _stat(b)
    return sa is not None and sb is not None and (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def _inside(child: Path, folder: Path) -> bool:
    return _resolved(child).is_relative_to(_resolved(folder))


def reserved_by(path: str | Path) -> Path | None:
    """The existing recording whose sidecar name ``path`` has, or whose sidecar ``path`` is inside
    (``None``: no such recording)."""
    p = Path(path)
    for q in (p, *_resolved(p).parents):
        base = _sidecar_of(q)
        if base is not None:
            return base
    return None


def _sidecar_of(p: Path) -> Path | None:
    """The existing recording whose sidecar name ``p`` has."""
    for suffix in SIDECARS:
        if p.name.endswith(suffix) and len(p.name) > len(suffix):
            base = p.with_name(p.name[: -len(suffix)])
            if is_duckdb_file(base):
                return base
    m = _CREATING.fullmatch(p.name)
    if m and is_duckdb_file(p.with_name(m.group("name"))):
        return p.with_name(m.group("name"))
    return None


def check_output(
    out: str | Path,
    inputs: Iterable[str | Path] = (),
    *,
    overwrite: bool = False,
    what: str = "--out",
    kind: str = "file",
    replaceable: Callable[[Path], str | None] | None = None,
    resumable: Callable[[Path], str | None] | None = None,
    make_parent: bool = False,
) -> Path:
    """Refuse (``OutputError``, one line) an output that would replace or take the name of one
    of ``inputs``, of an input's sidecar or of an existing recording's sidecar, the root folder,
    an existing output without ``overwrite``, or (``kind="dir"``) an existing folder that
    ``replaceable`` does not vouch for (it returns why not, or ``None``). A folder output that is
    added to rather than replaced (a sweep's) passes ``resumable`` instead: an existing folder
    is then used if it vouches for it, ``overwrite`` or not. ``make_parent``: the output's folder
    may be missing (it is created). Returns the output's path."""
    p = Path(out)
    label = f"{what} {p}" if what else str(p)
    if kind not in ("file", "dir"):
        raise ValueError(f"kind {kind!r}")
    if _resolved(p) == Path(_resolved(p).anchor):
        raise OutputError(f"{label}: the root folder; give a folder of its own")
    _check_against_inputs(p, label, inputs, kind == "dir" and resumable is None)
    base = reserved_by(p)
    if base is not None:
        raise OutputError(
            f"{label}: the name of a sidecar of the recording {base}, or inside one (names ending in "
            f"{', '.join(SIDECARS)} are reserved for it); choose another name"
        )
    try:
        st = os.stat(p)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise OutputError(f"{label}: cannot check: {e.strerror or e}", e.errno) from None
    if st is None and os.path.islink(p):
        raise OutputError(f"{label}: a broken symbolic link; remove it or choose another name")
    if st is not None and kind == "file":
        _check_existing_file(st, label, overwrite)
    elif st is not None:
        _check_existing_dir(p, st, label, overwrite, replaceable, resumable)
    parent = p.parent
    if not make_parent and not parent.is_dir():
        raise OutputError(f"{label}: no such directory {parent}")
    return p


def _check_against_inputs(p: Path, label: str, inputs: Iterable[str | Path], replaced_dir: bool) -> None:
    """The output ``p`` is none of ``inputs``, nor inside an input's sidecar, nor (a folder it
    replaces: ``replaced_dir``) a folder holding an input."""
    for raw in inputs:
        i = Path(raw)
        if _same(p, i):
            how = "" if _resolved(p) == _resolved(i) else " (a link to it)"
            raise OutputError(f"{label}: is the input {i}{how}; choose another output")
        for side in sidecars(i):
            if _inside(p, side):
                where = "is" if _resolved(p) == _resolved(side) else "is inside"
                raise OutputError(
                    f"{label}: {where} the {side.name[len(i.name) :]} sidecar of the input {i}; choose another name"
                )
        if replaced_dir and os.path.lexists(p) and _inside(i, p):
            raise OutputError(f"{label}: holds the input {i}; choose another folder")


def _check_existing_file(st: os.stat_result, label: str, overwrite: bool) -> None:
    """An existing file output: a regular file, replaced only with ``overwrite``."""
    if stat.S_ISDIR(st.st_mode):
        raise OutputError(f"{label}: is a directory")
    if not stat.S_ISREG(st.st_mode):
        raise OutputError(f"{label}: exists and is not a regular file (a pipe or a device)")
    if not overwrite:
        raise OutputError(f"{label}: already exists (pass --overwrite to replace it)")


def _check_existing_dir(
    p: Path,
    st: os.stat_result,
    label: str,
    overwrite: bool,
    replaceable: Callable[[Path], str | None] | None,
    resumable: Callable[[Path], str | None] | None,
) -> None:
    """An existing folder output: added to if ``resumable`` vouches for it, else replaced only
    when empty or with ``overwrite`` and ``replaceable`` vouching for it."""
    if not stat.S_ISDIR(st.st_mode):
        raise OutputError(f"{label}: exists and is not a directory")
    if resumable is not None:
        why = resumable(p) if _entries(p) else None
        if why is not None:
            raise OutputError(f"{label}: {why}; give a new or empty folder")
    elif _entries(p):
        if not overwrite:
            raise OutputError(
                f"{label}: already exists and is not an empty directory (pass --overwrite to replace it)"
            )
        why = replaceable(p) if replaceable is not None else "not a folder this command wrote"
        if why is not None:
            raise OutputError(f"{label}: {why}; not replaced, even with --overwrite")


def _is_own_lock(p: Path) -> bool:
    """A run lock (``storage.runlock``): a process id on the first line, then only zeros."""
    try:
        st = os.lstat(p)
        if not stat.S_ISREG(st.st_mode) or st.st_size > (1 << 20):
            return False
        data = p.read_bytes()
    except OSError:
        return False
    first, _, rest = data.partition(b"\n")
    return (not data) or (first.strip().isdigit() and not rest.strip(b"\0"))


def _is_own_temp(p: Path) -> bool:
    """DuckDB's temporary folder: a plain folder of DuckDB's own temporary files."""
    try:
        st = os.lstat(p)
        if not stat.S_ISDIR(st.st_mode):
            return False
        return all(_DUCKDB_TEMP.fullmatch(e.name) and e.is_file(follow_symlinks=False) for e in scan(p))
    except OSError:
        return False


def check_run_output(
    out: str | Path, inputs: Iterable[str | Path] = (), *, overwrite: bool = False, what: str = "--out"
) -> Path:
    """``check_output`` for a run's file, and its sidecars: one already there is reused or removed
    by the run only when it is provably this program's leftover (a run lock, DuckDB's temporary
    folder, a live view whose manifest names this file, a parts folder of only run, table and part
    names, the write-ahead log of the file being replaced); anything else is refused."""
    from storage.manifest import leftover_problem

    p = check_output(out, inputs, overwrite=overwrite, what=what, kind="file", make_parent=True)
    label = f"{what} {p}" if what else str(p)
    from storage.parts import leftover_problem as parts_problem

    live, lock, parts, tmp, wal = sidecars(p)
    if os.path.lexists(live):
        why = leftover_problem(live, p.name)
        if why is not None:
            raise OutputError(f"{label}: {live} is in the way ({why}); move it away")
    why = parts_problem(p)
    if why is not None:
        raise OutputError(f"{label}: {parts} is in the way ({why}); move it away")
    if os.path.lexists(lock) and not _is_own_lock(lock):
        raise OutputError(f"{label}: {lock} is in the way (not a run lock); move it away")
    if os.path.lexists(wal) and not (os.path.isfile(p) and os.path.isfile(wal) and not os.path.islink(wal)):
        # The run removes a write-ahead log beside its output as the old file's (DuckDB would
        # replay it onto the new file): only when that file is there to own it.
        raise OutputError(f"{label}: {wal} is in the way (a write-ahead log without its file); move it away")
    if os.path.lexists(tmp) and not _is_own_temp(tmp):
        raise OutputError(f"{label}: {tmp} is in the way (not DuckDB's temporary folder); move it away")
    return p


def umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _write_error(dest: Path, e: OSError) -> OutputError:
    why = os.strerror(e.errno) if e.errno else (str(e).splitlines() or [type(e).__name__])[0]
    if e.errno == errno.ENOENT and dest.parent.is_dir():  # e.g. /proc: a folder that takes no new files
        why = f"{dest.parent} takes no new files ({why})"
    return OutputError(f"{dest}: cannot write: {why}", e.errno)


@contextlib.contextmanager
def atomic_file(dest: str | Path, mode: str = "wb") -> Iterator[IO[bytes]]:
    """A file object on a temporary file beside ``dest``, renamed to ``dest`` when the block ends
    (an ordinary new file's permissions); removed on any failure, which becomes an ``OutputError``
    when it is the file system's."""
    p = Path(dest)
    try:
        fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    except OSError as e:
        raise _write_error(p, e) from None
    try:
        with os.fdopen(fd, mode) as fh:
            yield fh
        os.chmod(tmp, 0o666 & ~umask())  # as an ordinary new file, not mkstemp's 0600
        os.replace(tmp, p)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise _write_error(p, e) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def atomic_dir(dest: str | Path) -> Iterator[Path]:
    """A temporary folder beside ``dest`` to fill, put in the place of ``dest`` when the block ends
    (an existing ``dest``, checked by ``check_output``, is replaced); removed on any failure, which
    becomes an ``OutputError`` when it is the file system's."""
    p = Path(dest)
    try:
        tmp = Path(tempfile.mkdtemp(dir=p.parent, prefix=f".{p.name}.partial-"))
    except OSError as e:
        raise _write_error(p, e) from None
    old: Path | None = None
    try:
        yield tmp
        os.chmod(tmp, 0o777 & ~umask())
        if p.is_dir() and not p.is_symlink():
            if _entries(p):
                old = Path(tempfile.mkdtemp(dir=p.parent, prefix=f".{p.name}.old-"))
                os.replace(p, old / p.name)
            else:
                p.rmdir()
        os.replace(tmp, p)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None:  # put the old one back (kept aside if even that fails)
            with contextlib.suppress(OSError):
                os.replace(old / p.name, p)
                old.rmdir()
        raise _write_error(p, e) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
