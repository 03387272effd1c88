"""How fast `twin ingest` turns DCGM exporter text into the observed table, on one core.

    python bench/bench_ingest.py [--chips 144000] [--batch-chips 14400] [--intervals 2]

One interval is what a factory of ``--chips`` chips reports in one scrape: ten DCGM series per
chip (the six the mapping table maps, four it does not: counted, not recorded), the text of
``--batch-chips`` chips parsed at a time (many exporters' scrapes concatenated, as a Prometheus
federation or a saved scrape gives them). Each batch goes the whole way: parse (Arrow's regex
kernels over every line), normalise (sort, duplicates, flags, the energy counter to a rate) and
write (a Parquet part of the observed table). Arrow's thread pools are set to one thread.

Prints the samples read and recorded per second of CPU time. The target (docs/interop.md): a
144,000-chip factory reporting ten metrics a chip every 5 s, twice over: >= 600,000 samples/s.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MAPPED = (
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_SM_CLOCK",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    "DCGM_FI_DEV_XID_ERRORS",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
)
UNMAPPED = (
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_MEM_CLOCK",
    "DCGM_FI_DEV_MEM_COPY_UTIL",
    "DCGM_FI_DEV_PCIE_TX_BYTES",
)
PER_HOST = 16


def scrape(first_chip: int, chips: int, t_ms: int) -> str:
    lines = []
    for name in MAPPED + UNMAPPED:
        lines.append(f"# TYPE {name} gauge")
        for c in range(first_chip, first_chip + chips):
            lab = f'gpu="{c % PER_HOST}",UUID="GPU-{c:08d}",device="nvidia{c % PER_HOST}",modelName="trainium3",Hostname="node{c // PER_HOST}"'
            v = (c * 7919 + t_ms // 1000) % 1000 + 0.25
            lines.append(f"{name}{{{lab}}} {v} {t_ms}")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chips", type=int, default=144_000)
    ap.add_argument("--batch-chips", type=int, default=14_400)
    ap.add_argument("--intervals", type=int, default=2)
    a = ap.parse_args()
    import pyarrow as pa

    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    from storage.interop.normalise import Normaliser
    from storage.interop.observed import ObservedRecorder
    from storage.interop.parse_prometheus import parse_prometheus_text

    now_ms = int(time.time() * 1000)
    read = recorded = 0
    cpu = wall = 0.0
    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as d:
        rec = ObservedRecorder(Path(d) / "o.duckdb")
        norm = Normaliser()
        for i in range(a.intervals):
            for first in range(0, a.chips, a.batch_chips):
                # Made outside the timing, one batch at a time (memory: one batch's text).
                text = scrape(first, min(a.batch_chips, a.chips - first), now_ms + 5000 * i)
                cpu0, wall0 = time.process_time(), time.perf_counter()
                p = parse_prometheus_text(text, "bench", now_ms * 1000)
                n = norm(p.table, now_ms * 1000)
                rec.append(n.table)
                cpu += time.process_time() - cpu0
                wall += time.perf_counter() - wall0
                read += len(p.table) + p.unmapped
                recorded += len(n.table)
        rec.close([])
    print(f"{a.chips:,} chips x 10 series x {a.intervals} intervals, {a.batch_chips:,} chips a batch")
    print(f"samples read     {read:>12,}  {read / cpu:>12,.0f} /CPU-s")
    print(f"samples recorded {recorded:>12,}  {recorded / cpu:>12,.0f} /CPU-s")
    print(f"CPU {cpu:.2f} s, wall {wall:.2f} s; target >= 600,000 samples read /CPU-s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
