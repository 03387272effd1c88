"""The one rule of the upsert tables (jobs): a row is written again as it moves on, and its latest
row per key wins (the runner's held frames, the writer's flushes, the live parts' merges)."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc


def last_of_each(keys: Any) -> npt.NDArray[np.intp]:
    """Positions of each key's last row, ascending. The one rule of the upsert tables: a job is
    written again as it moves on, and its latest row wins (the runner's held frames, the writer's
    flushes, the live view's merges)."""
    k = np.asarray(keys)
    first_from_end = np.unique(k[::-1], return_index=True)[1]
    return np.sort(len(k) - 1 - first_from_end)


def latest_per_key(tb: pa.Table, keys: tuple[str, ...]) -> pa.Table:
    """The last row of each key, in the order those rows came (later rows of a key are newer)."""
    if tb.num_rows <= 1:
        return tb
    # One integer per key: each key column's codes (text dictionary-encoded), combined.
    codes = np.zeros(tb.num_rows, dtype=np.int64)
    for name in keys:
        col = tb.column(name).combine_chunks()
        if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
            inv = pc.dictionary_encode(col).indices.to_numpy(zero_copy_only=False).astype(np.int64)
        else:
            inv = np.unique(col.to_numpy(zero_copy_only=False), return_inverse=True)[1].astype(np.int64)
        codes = codes * (int(inv.max()) + 1) + inv
    idx = last_of_each(codes)
    return tb if len(idx) == tb.num_rows else tb.take(pa.array(idx))
