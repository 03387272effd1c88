"""What the simulation hands the writer thread: one advance's frames as Arrow batches, and the
backlog bounded in bytes they wait in (back-pressure on the simulation when the writer is behind).
"""

from __future__ import annotations

import datetime as _dt
import functools
import queue
import threading
from collections import deque
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from storage.schema import DEFAULT_START, arrow_schema, batch_schema, timestamps


def batch_arrow(table: str, cols: Mapping[str, Any], start: _dt.datetime = DEFAULT_START) -> pa.Table:
    """One advance's frame of ``table`` as Arrow with the columns of ``batch_schema``: the model's
    arrays and ``ts`` computed from ``time_s``; ``run_id``, one value for the whole run, is left to
    where the batch is stored."""
    schema, fields = _batch_fields(table)
    arrays: list[Any] = []
    for name, typ, floating, np_dtype in fields:
        if name == "ts" and "ts" not in cols:
            arrays.append(timestamps(start, cols["time_s"]))
            continue
        v = cols[name]
        # NaN is the model's "no value" (no cap, nothing served); the file stores NULL so that
        # max(), avg() and every reader treat it as missing, not as a number. An array already of
        # the column's type is taken as it is (naming the type is a large part of the conversion
        # of a wide table of few rows).
        if isinstance(v, np.ndarray) and v.dtype == np_dtype:
            if floating and v.ndim == 1:
                # NaN -> NULL as ``from_pandas`` does, without its scan of every value (most of an
                # UltraServer batch's conversion): any NaN makes the sum NaN, so
                # a sum that is not NaN means there is none and the array is taken as it is (no
                # copy); otherwise (a NaN, or +inf and -inf) a mask says which values are NULL.
                with np.errstate(invalid="ignore", over="ignore"):
                    has_nan = bool(np.isnan(np.add.reduce(v)))
                arrays.append(pa.array(v, mask=np.isnan(v)) if has_nan else pa.array(v, from_pandas=False))
            else:
                arrays.append(pa.array(v, from_pandas=floating))
        else:
            arrays.append(pa.array(v, type=typ, from_pandas=floating))
    return pa.Table.from_arrays(arrays, schema=schema)


@functools.cache
def _batch_fields(table: str) -> tuple[pa.Schema, tuple[tuple[str, pa.DataType, bool, Any], ...]]:
    """``batch_schema(table)`` and, per field, its name, type, whether it is a float and the NumPy
    dtype of that type (``None`` where there is none: text, timestamps)."""
    schema = batch_schema(table)
    fields = []
    for f in schema:
        try:
            np_dtype = np.dtype(f.type.to_pandas_dtype()) if not pa.types.is_timestamp(f.type) else None
        except NotImplementedError:
            np_dtype = None
        if pa.types.is_string(f.type):
            np_dtype = None
        fields.append((f.name, f.type, pa.types.is_floating(f.type), np_dtype))
    return schema, tuple(fields)


def to_arrow(table: str, run_id: str, cols: dict[str, Any], start: _dt.datetime = DEFAULT_START) -> pa.Table:
    """``table``'s rows as stored (``arrow_schema``): ``batch_arrow`` with ``run_id`` on every row."""
    tb = batch_arrow(table, cols, start)
    at = arrow_schema(table).get_field_index("run_id")
    field = arrow_schema(table).field(at)
    return tb.add_column(at, field, pa.repeat(pa.scalar(run_id, pa.string()), tb.num_rows))


def frames_nbytes(frames: Mapping[str, Mapping[str, Any]]) -> int:
    """Memory held by one advance's frames [bytes]: arrays exactly, lists of text as one pointer and
    one string object per value (an upper estimate: equal strings are often shared)."""
    n = 0
    for cols in frames.values():
        for v in cols.values():
            if isinstance(v, np.ndarray):
                n += v.nbytes
            elif isinstance(v, (list, tuple)):
                try:
                    chars = sum(map(len, v))
                except TypeError:
                    chars = 0
                n += 64 * len(v) + chars
            else:
                n += 64
    return n


class Backlog:
    """Items handed to the writer thread and not yet taken, bounded in bytes (back-pressure).

    ``put`` blocks while the items queued plus the new one would exceed ``max_bytes``, so a writer
    that falls behind holds the producer back instead of letting memory grow. One item larger than
    the bound on its own is let in when nothing else is queued (it could never fit otherwise): the
    bytes queued never exceed ``max(max_bytes, largest item)``. ``high_water`` is the most ever
    queued; ``waiting`` is set while a producer waits for room; ``abandon`` wakes and releases
    every waiting producer (the writer failed; nothing more is taken)."""

    def __init__(self, max_bytes: int) -> None:
        if max_bytes <= 0:
            raise ValueError(f"backlog bound {max_bytes!r} bytes must be positive")
        self.max_bytes = max_bytes
        self._items: deque[tuple[Any, int]] = deque()
        self._bytes = 0
        self._cond = threading.Condition()
        self._abandoned = False
        self.high_water = 0
        self.waits = 0  # puts that had to wait for room
        self.waiting = threading.Event()

    @property
    def nbytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)

    def put(self, item: Any, nbytes: int) -> bool:
        """Queue ``item`` of ``nbytes`` once there is room; ``False`` if the backlog was abandoned."""
        with self._cond:
            if self._items and self._bytes + nbytes > self.max_bytes and not self._abandoned:
                self.waits += 1
                self.waiting.set()
                try:
                    while self._items and self._bytes + nbytes > self.max_bytes and not self._abandoned:
                        self._cond.wait()
                finally:
                    self.waiting.clear()
            if self._abandoned:
                return False
            self._items.append((item, nbytes))
            self._bytes += nbytes
            self.high_water = max(self.high_water, self._bytes)
            self._cond.notify_all()
            return True

    def get(self, timeout: float) -> Any:
        """The oldest item; ``queue.Empty`` if none arrives within ``timeout`` seconds."""
        with self._cond:
            if not self._items and not self._cond.wait_for(lambda: bool(self._items), timeout):
                raise queue.Empty
            item, nbytes = self._items.popleft()
            self._bytes -= nbytes
            self._cond.notify_all()
            return item

    def abandon(self) -> list[Any]:
        """Take nothing more: release waiting producers and return what was queued."""
        with self._cond:
            self._abandoned = True
            items = [it for it, _ in self._items]
            self._items.clear()
            self._bytes = 0
            self._cond.notify_all()
            return items
