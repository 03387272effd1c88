"""Throw a large generated set of hostile inputs at `twin`; print figures.

    python bench/fuzz_inputs.py [--inputs 800] [--timeout 120] [--memory-gib 3]
    python bench/fuzz_inputs.py --surfaces 100 [--seed 0] [-j 2] [--timeout 60]

``--surfaces N``: N generated cases on each surface of the command line beyond the scenario file
(``--set`` values, sweep files and tampered finished points, ``twin plan``'s options, output
targets with a full disk simulated by a file-size limit, corrupt and foreign recordings, tampered
live manifests; generators in ``tests/test_inputs_fuzz.py``). Each case runs `twin` in a
subprocess of its own under a timeout and an address-space limit and is classified: clean (an
exit code of the documented set, one error line, no traceback), traceback (or exit 70, a bug),
hang, crash (a signal), data lost (an input file changed or vanished), left behind (stray files or
processes), other. Prints a table per surface and the problem cases.

Without ``--surfaces``:

The inputs come from the generator in ``tests/test_inputs_fuzz.py`` (the scenario fact table and
valid extremes of it, mutated built-in scenarios, broken weather/price/carbon/trace files, hostile
arguments and scenario files, scenarios of the wrong shape, and the inputs that met an internal
error after two rounds: a ``~user`` of no user, a looped request trace at one time, a weather
file past the year 9999). Each input runs in a worker subprocess under an address-space limit; an input
that takes longer than ``--timeout`` counts as a hang (the worker is killed and replaced), one that
exhausts the limit as out of memory. Prints: inputs tried / clean refusals / accepted and ran /
traceback / hang / OOM / file left / disagreement between validate and run / other.
"""

from __future__ import annotations

import argparse
import base64
import collections
import json
import os
import pickle
import resource
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _worker(memory_gib: float) -> None:
    """Read pickled cases line by line; answer each with its outcome as a JSON line."""
    limit = int(memory_gib * (1 << 30))
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    from tests.test_inputs_fuzz import check_case

    for line in sys.stdin:
        case = pickle.loads(base64.b64decode(line))
        with tempfile.TemporaryDirectory(prefix="fuzz-") as d:
            try:
                o = check_case(case, Path(d))
                kind, detail = o.kind, o.detail
            except MemoryError:
                kind, detail = "oom", "MemoryError in the harness"
            except Exception as e:  # the harness itself broke: report, go on
                kind, detail = "other", f"harness: {type(e).__name__}: {e}"[:300]
        if kind == "traceback" and "MemoryError" in detail:
            kind = "oom"
        print(json.dumps({"kind": kind, "detail": detail}), flush=True)


class Worker:
    def __init__(self, memory_gib: float) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--worker", "--memory-gib", str(memory_gib)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            cwd=ROOT,
        )

    def ask(self, case: object, timeout_s: float) -> dict[str, str]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(base64.b64encode(pickle.dumps(case)).decode() + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout_s)
        if not ready:
            self.kill()
            return {"kind": "hang", "detail": f"no answer in {timeout_s:g} s"}
        line = self.proc.stdout.readline()
        if not line:
            code = self.proc.wait()
            kind = "oom" if code in (-signal.SIGKILL, -signal.SIGSEGV, -signal.SIGABRT) else "other"
            return {"kind": kind, "detail": f"worker died with {code}"}
        answer: dict[str, str] = json.loads(line)
        return answer

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def generate(n: int) -> list[object]:
    """About ``n`` inputs, an equal share from each family of the generator."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import strategies as st

    from tests.test_inputs_fuzz import (
        args_case,
        builtin_case,
        fact_case,
        file_case,
        internal_case,
        special_case,
        structure_case,
    )

    families = [
        fact_case(),
        fact_case(good_only=True, label="extremes"),
        builtin_case(),
        file_case(),
        st.one_of(args_case(), special_case()),
        structure_case(),
        internal_case(),
    ]
    cases: list[object] = []
    for strategy in families:

        @settings(
            max_examples=-(-n // len(families)),
            deadline=None,
            database=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(strategy)
        def collect(case: object) -> None:
            cases.append(case)

        collect()
    return cases


def surfaces(
    per_surface: int, seed: int, jobs: int, timeout_s: float, show: int, code_root: Path | None = None
) -> int:
    """Run the surface cases, print the table per surface and the problems; 1 if any."""
    import concurrent.futures as cf

    from tests.test_inputs_fuzz import KINDS, SURFACES, build_cache, run_surface_case, surface_cases

    t0 = time.perf_counter()
    cases = surface_cases(per_surface, seed)
    with tempfile.TemporaryDirectory(prefix="fuzz-surfaces-") as top:
        cache = build_cache(Path(top) / "cache")

        def one(i: int) -> tuple[int, str, str]:
            d = Path(top) / f"c{i}"
            d.mkdir()
            try:
                o = run_surface_case(cases[i], d, cache, timeout_s, code_root=code_root)
                return i, o.kind, o.detail
            except Exception as e:  # the harness itself broke: report, go on
                return i, "other", f"harness: {type(e).__name__}: {e}"[:300]
            finally:
                _rmtree(d)

        results: dict[int, tuple[str, str]] = {}
        with cf.ThreadPoolExecutor(jobs) as pool:
            for n, (i, kind, detail) in enumerate(pool.map(one, range(len(cases))), 1):
                results[i] = (kind, detail)
                if n % 50 == 0:
                    print(f"  {n:,} cases, {time.perf_counter() - t0:,.0f} s", file=sys.stderr)
    table: dict[str, collections.Counter[str]] = {s: collections.Counter() for s in SURFACES}
    for i, case in enumerate(cases):
        table[case.surface][results[i][0]] += 1
    head = f"{'surface':<10} {'tried':>6} " + " ".join(f"{k:>11}" for k in KINDS)
    print(head)
    print("-" * len(head))
    total: collections.Counter[str] = collections.Counter()
    for s in SURFACES:
        c = table[s]
        total.update(c)
        print(f"{s:<10} {sum(c.values()):>6} " + " ".join(f"{c[k]:>11}" for k in KINDS))
    print(f"{'all':<10} {sum(total.values()):>6} " + " ".join(f"{total[k]:>11}" for k in KINDS))
    print(f"wall {time.perf_counter() - t0:,.0f} s, timeout {timeout_s:g} s per case")
    problems = [(cases[i], results[i]) for i in range(len(cases)) if results[i][0] != "clean"]
    for case, (kind, detail) in problems[:show]:
        print(f"- [{case.surface}] {case.label}: {kind}: {' '.join(detail.split())[:240]}")
    return 1 if problems else 0


def _rmtree(d: Path) -> None:
    import shutil
    import stat

    for root, dirs, _ in os.walk(d):
        for name in dirs:
            try:
                os.chmod(Path(root) / name, stat.S_IRWXU)
            except OSError:
                pass
    shutil.rmtree(d, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--surfaces", type=int, default=0, metavar="N", help="N cases per CLI surface")
    ap.add_argument("--seed", type=int, default=0, help="seed of the surface cases")
    ap.add_argument("-j", "--jobs", type=int, default=2, help="surface cases run in parallel")
    ap.add_argument("--code", type=Path, default=None, help="source tree of the `twin` under test")
    ap.add_argument("--inputs", type=int, default=800)
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds before an input counts as a hang")
    ap.add_argument("--memory-gib", type=float, default=3.0, help="address-space limit of the worker")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--show", type=int, default=10, help="print this many problem inputs")
    a = ap.parse_args()
    if a.surfaces:
        return surfaces(a.surfaces, a.seed, a.jobs, min(a.timeout, 600.0), a.show, a.code)
    if a.worker:
        _worker(a.memory_gib)
        return 0
    t0 = time.perf_counter()
    cases = generate(a.inputs)
    counts: collections.Counter[str] = collections.Counter()
    families: collections.Counter[str] = collections.Counter()
    problems: list[tuple[str, dict[str, str]]] = []
    worker = Worker(a.memory_gib)
    try:
        for i, case in enumerate(cases, 1):
            answer = worker.ask(case, a.timeout)
            if answer["kind"] in ("hang", "oom") or worker.proc.poll() is not None:
                worker.kill()
                worker = Worker(a.memory_gib)
            counts[answer["kind"]] += 1
            families[getattr(case, "label", "?").split(" ")[0]] += 1
            if answer["kind"] not in ("refused", "ran"):
                problems.append((getattr(case, "label", "?"), answer))
            if i % 50 == 0:
                print(f"  {i:,} inputs, {time.perf_counter() - t0:,.0f} s", file=sys.stderr)
    finally:
        worker.kill()
    wall = time.perf_counter() - t0
    print(
        f"inputs tried        {len(cases):>6,}   ({', '.join(f'{k} {v}' for k, v in sorted(families.items()))})"
    )
    print(f"clean refusals      {counts['refused']:>6,}")
    print(f"accepted and ran    {counts['ran']:>6,}")
    print(f"traceback           {counts['traceback'] + counts['bad message']:>6,}")
    print(f"hang                {counts['hang']:>6,}   (> {a.timeout:g} s)")
    print(f"OOM                 {counts['oom']:>6,}   (address space {a.memory_gib:g} GiB)")
    print(f"file left           {counts['file left']:>6,}")
    print(f"validate/run differ {counts['disagree']:>6,}")
    print(f"meaningless run     {counts['meaningless run'] + counts['run failed']:>6,}")
    print(f"other               {counts['other']:>6,}")
    print(f"wall                {wall:>6,.0f} s")
    for label, answer in problems[: a.show]:
        print(f"- {label}: {answer['kind']}: {answer['detail'][:240]}")
    return 0 if len(problems) == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
