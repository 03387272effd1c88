"""The lock a run holds on its output file, and the crash points tests use to kill a run.

``FILE.lock`` beside the telemetry file is locked (``flock``) for the whole life of the run that
writes ``FILE``: a second run with the same output (``--overwrite`` or not) is refused instead of
deleting a file in use. The lock file also reserves a little disk space, given back when a write
fails, so that the run's final status can still be recorded on a full disk. The kernel drops the
lock when the process ends however it ends; a lock file left by a killed run is simply reused.
"""

from __future__ import annotations

import errno
import fcntl
import os
import signal
import threading
from pathlib import Path

RESERVE_BYTES = 256 << 10  # room to record a run's end after the disk filled up


class LockedError(Exception):
    """Another live process holds the output file's lock."""


def lock_path(path: Path) -> Path:
    return path.with_name(path.name + ".lock")


_reached: dict[str, int] = {}  # crash point -> times this process reached it (when one is set)
_reached_lock = threading.Lock()


def _at(var: str, name: str, count: int) -> bool:
    """``var`` names this point (``POINT``: its first time; ``POINT#N``: its N-th time)."""
    want = os.environ.get(var)
    if want is None:
        return False
    point, _, nth = want.partition("#")
    return point == name and count == (int(nth) if nth else 1)


def crash_point(name: str) -> None:
    """Kill this process here if ``TWIN_CRASH_AT`` names this point (tests of crash safety), or
    stop it (``TWIN_STOP_AT``) so a test can act at exactly this moment and then continue it.
    ``POINT#N`` names the N-th time the process reaches the point (e.g. ``session:writer#3``: as
    a sweep's third run starts)."""
    if "TWIN_CRASH_AT" not in os.environ and "TWIN_STOP_AT" not in os.environ:
        return
    with _reached_lock:
        count = _reached[name] = _reached.get(name, 0) + 1
    if _at("TWIN_CRASH_AT", name, count):
        os.kill(os.getpid(), signal.SIGKILL)
    if _at("TWIN_STOP_AT", name, count):
        os.environ.pop("TWIN_STOP_AT", None)  # once
        os.kill(os.getpid(), signal.SIGSTOP)


class RunLock:
    """An exclusive lock on ``path`` (through ``path.lock``) until ``release``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock_file = lock_path(path)
        self._fd: int | None = None
        while True:
            fd = os.open(self.lock_file, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                holder = os.pread(fd, 32, 0).split(b"\n")[0].decode(errors="replace").strip()
                os.close(fd)
                if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise LockedError(holder or "?") from None
                raise
            # The file may have been unlinked by its previous holder between our open and flock.
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(self.lock_file))
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        self._fd = fd
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self.reserved = 0
        try:
            os.posix_fallocate(fd, 4096, RESERVE_BYTES)
            self.reserved = RESERVE_BYTES
        except OSError:
            pass  # no room even for the reserve: the run will find out on its first write

    def free_reserve(self) -> int:
        """Give the reserved disk space back (a write failed); returns the bytes freed."""
        freed, self.reserved = self.reserved, 0
        if self._fd is not None and freed:
            os.ftruncate(self._fd, 4096)
        return freed

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            os.unlink(self.lock_file)  # while still locked: see the samestat check above
        except OSError:
            pass
        os.close(self._fd)
        self._fd = None
