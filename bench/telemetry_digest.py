"""Digest of the telemetry every built-in scenario produces, table by table.

A refactor that must not change results prints the same digests before and after:

    python bench/telemetry_digest.py --hours 6 > before.txt
    ... change ...
    python bench/telemetry_digest.py --hours 6 | diff before.txt -

Each scenario (and each of its variants) is built with the same checks as ``twin run``, stepped
in memory for ``--hours`` (or its own length, if shorter), and every frame column is hashed in
order (SHA-256 of the array bytes, dtype and shape). Nothing is written to disk.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from typing import Any

import numpy as np

from scenarios import spec
from twin.sim import steps_for


def _hash_value(h: Any, v: Any) -> None:
    if isinstance(v, np.ndarray):
        h.update(str(v.dtype).encode())
        h.update(str(v.shape).encode())
        if v.dtype == object:
            h.update(repr(v.tolist()).encode())
        else:
            h.update(np.ascontiguousarray(v).tobytes())
    else:
        h.update(repr(v).encode())


def digest(name: str, hours: float, chunk: int) -> dict[str, str]:
    scenario, _text, _origin = spec.load(name)
    out: dict[str, str] = {}
    runs = [(str(i), v) for i, v in enumerate(scenario.variants)] or [(None, scenario)]
    for label, sc in runs:
        p, sim = spec.build_simulation(sc)
        total = min(steps_for(hours * 3600, p.dt_s), steps_for(sc.duration_h * 3600, p.dt_s))
        hashes: dict[str, Any] = {}
        done = 0
        while done < total:
            n = min(chunk, total - done)
            frames = sim.advance(n)
            done += n
            for table in sorted(frames):
                cols = frames[table]
                for col in sorted(cols):
                    h = hashes.setdefault(f"{table}.{col}", hashlib.sha256())
                    _hash_value(h, cols[col])
        tag = name if label is None else f"{name}[{label}]"
        for key in sorted(hashes):
            out[f"{tag} {key}"] = hashes[key].hexdigest()[:16]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hours", type=float, default=6.0, help="simulated hours per scenario (default 6)")
    ap.add_argument("--chunk", type=int, default=60, help="steps per advance (default 60)")
    ap.add_argument("scenarios", nargs="*", help="built-in names (default: all)")
    a = ap.parse_args()
    for name in a.scenarios or spec.builtin_names():
        d = digest(name, a.hours, a.chunk)
        for k, v in d.items():
            print(k, v)
        sys.stdout.flush()


if __name__ == "__main__":
    main()
