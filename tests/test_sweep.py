"""Sweeps as a user meets them: --set overrides, grid and Latin-hypercube points, validation before
any run, results as data, resume after a kill, a failing point, local vs Ray."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tomllib
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from scenarios import execution, overrides, sweep
from scenarios.spec import ScenarioError
from storage.kpi_table import COMPARE_ROWS
from tests.conftest import SMALL_TOML
from tui.cli import main

# Trn3 Gen2 UltraServer: 144 Trainium3 chips (AWS, re:Invent 2025; facts §1).
CHIPS_PER_ULTRASERVER = 144
KPIS = [k for k, _, _ in COMPARE_ROWS]


def invoke(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


@pytest.fixture
def small(tmp_path: Path) -> Path:
    f = tmp_path / "small.toml"
    f.write_text("# the small test hall\n" + SMALL_TOML)
    return f


def write_sweep(tmp_path: Path, body: str, name: str = "sweep.toml") -> Path:
    f = tmp_path / name
    head = "" if body.startswith("scenario =") else 'scenario = "small.toml"\n'
    f.write_text("[sweep]\n" + head + body)
    return f


# ---------------------------------------------------------------------- --set
def test_set_values_are_toml_values() -> None:
    assert overrides.parse_set("hall.ultraservers=32").value == 32
    assert overrides.parse_set("hardware.tdp_w=1100.5").value == 1100.5
    assert overrides.parse_set("grid.price.weekend_peak=true").value is True
    assert overrides.parse_set("site.climate=hot").value == "hot"
    assert overrides.parse_set('site.climate="8"').value == "8"
    assert overrides.parse_set("training.pretrain.size_chips=[4, 16]").value == [4, 16]
    assert overrides.parse_set("services[0].replicas=3").path == ("services", 0, "replicas")
    for bad in ("hall.ultraservers", "=3", "a..b=1", 'site.climate="hot', "x=[1,"):
        with pytest.raises(ScenarioError, match="--set"):
            overrides.parse_set(bad)


def test_run_with_set_records_the_effective_scenario_and_reruns(tmp_path: Path, small: Path) -> None:
    out = tmp_path / "set.duckdb"
    code, stdout, err = invoke(
        "run",
        str(small),
        "--hours",
        "1",
        "--out",
        str(out),
        "--set",
        "hall.ultraservers=1",
        "--set",
        "site.climate=hot",
        "--set",
        "services[0].replicas=1",
    )
    assert code == 0, err
    code, stdout, _ = invoke(
        "sql", str(out), "SELECT ultraservers, chips_total, scenario_toml FROM runs", "--format", "json"
    )
    (row,) = json.loads(stdout)
    assert row["ultraservers"] == 1 and row["chips_total"] == CHIPS_PER_ULTRASERVER
    recorded = row["scenario_toml"]
    data = tomllib.loads(recorded)
    assert data["hall"]["ultraservers"] == 1 and data["site"]["climate"] == "hot"
    assert data["services"][0]["replicas"] == 1
    # Everything else as in the file, its comment kept, the overrides named.
    base = tomllib.loads(SMALL_TOML)
    assert data["training"] == base["training"] and data["seed"] == base["seed"]
    assert "# the small test hall" in recorded and "# --set site.climate=hot" in recorded
    code, stdout, err = invoke("rerun", str(out))
    assert code == 0, err
    assert "telemetry identical" in stdout


def test_set_refuses_unknown_keys_and_bad_values(small: Path) -> None:
    for args, words in (
        (("--set", "hall.ultrasrvers=1"), ("--set hall.ultrasrvers=1", "hall.ultrasrvers", "unknown key")),
        (("--set", "hall.ultraservers=0"), ("--set hall.ultraservers=0", "out of range", "1 ≤ x")),
        (("--set", "hall.ultraservers=two"), ("--set hall.ultraservers=two", "whole number")),
        (("--set", "hall.ultraservers.x=1"), ("--set hall.ultraservers.x=1", "not a table")),
        (("--set", "services[5].replicas=1"), ("--set services[5].replicas=1", "no element [5]")),
    ):
        code, _, err = invoke("validate", str(small), *args)
        assert code == 2, args
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
        for w in words:
            assert w in err, (w, err)
    code, out, _ = invoke("validate", str(small), "--set", "hall.ultraservers=3")
    assert code == 0 and f"{3 * CHIPS_PER_ULTRASERVER:,} chips" in out


@pytest.mark.parametrize(
    "layout",
    [
        SMALL_TOML,
        # The same scenario written with an inline table and top-level dotted keys.
        SMALL_TOML.replace(
            '[hall]\nsystem = "trn3-gen2"\nultraservers = 2\nultraservers_per_row = 2\n',
            'hall = { system = "trn3-gen2", ultraservers = 2, ultraservers_per_row = 2 }\n',
        )
        .replace("[training]\n", "training.arrivals_per_day = 40\n[training.x]\n", 1)
        .replace("[training.x]\narrivals_per_day = 40\n\n", ""),
    ],
)
def test_effective_text_reparses_to_the_overridden_data(layout: str) -> None:
    sets = [
        "hall.ultraservers=1",
        "site.climate=hot",
        "training.pretrain.share=0.5",
        "services[0].replicas=1",
    ]
    ovs = [overrides.parse_set(a) for a in sets]
    text = overrides.effective_text(layout, ovs, "small.toml")
    want = overrides.apply(tomllib.loads(layout), ovs)
    assert tomllib.loads(text) == want
    assert want["hall"]["ultraservers"] == 1 and want["training"]["pretrain"]["share"] == 0.5
    assert want["training"]["pretrain"]["size_chips"] == [4, 16, 36, 144]  # the rest of the table kept


def test_set_applies_to_every_variant(tmp_path: Path) -> None:
    f = tmp_path / "cmp.toml"
    f.write_text(
        SMALL_TOML + '\n[[variants]]\nname = "a"\nhall = { ultraservers = 3 }\n'
        '\n[[variants]]\nname = "b"\nsite = { climate = "cold" }\n'
    )
    spec, text, _ = overrides.load(str(f), ["hall.ultraservers=1"])
    assert [v.hall.ultraservers for v in spec.variants] == [1, 1]
    assert [v.site.climate for v in spec.variants] == [None, "cold"]
    # The recorded text re-parses to the same variants (what twin rerun reads).
    from scenarios.spec import parse

    again = parse(text, "recorded")
    assert [(v.name, v.hall.ultraservers) for v in again.variants] == [("a", 1), ("b", 1)]


# ---------------------------------------------------------------------- points
def test_grid_is_the_full_factorial_in_order(tmp_path: Path, small: Path) -> None:
    f = write_sweep(
        tmp_path, '[sweep.grid]\n"hall.ultraservers" = [1, 2, 3]\nsite = { climate = ["temperate", "hot"] }\n'
    )
    sw = sweep.load_sweep(f)
    pts = sweep.points(sw)
    assert [p.params for p in pts] == [
        {"hall.ultraservers": u, "site.climate": c} for u in (1, 2, 3) for c in ("temperate", "hot")
    ]
    assert [p.index for p in pts] == list(range(1, 7))
    assert len({p.id for p in pts}) == 6
    # Ids depend on what defines a point, not on its position.
    f2 = write_sweep(
        tmp_path, '[sweep.grid]\n"hall.ultraservers" = [3, 2]\n"site.climate" = ["hot"]\n', "other.toml"
    )
    again = {tuple(p.params.items()): p.id for p in sweep.points(sweep.load_sweep(f2))}
    for p in pts:
        if tuple(p.params.items()) in again:
            assert again[tuple(p.params.items())] == p.id


def test_random_is_a_latin_hypercube(tmp_path: Path, small: Path) -> None:
    n = 16
    f = write_sweep(
        tmp_path,
        f"[sweep.random]\nn = {n}\nseed = 3\n"
        '"training.arrivals_per_day" = {{ min = 10.0, max = 90.0 }}\n'
        '"hall.ultraservers" = {{ min = 1, max = 4 }}\n'
        '"scheduler.policy" = {{ choices = ["fifo", "backfill"] }}\n'.replace("{{", "{").replace("}}", "}"),
    )
    pts = sweep.points(sweep.load_sweep(f))
    assert len(pts) == n
    x = [p.params["training.arrivals_per_day"] for p in pts]
    # One sample in each of the n equal strata of the range.
    assert sorted(int((v - 10.0) / 80.0 * n) for v in x) == list(range(n))
    u = [p.params["hall.ultraservers"] for p in pts]
    assert all(isinstance(v, int) for v in u) and sorted(set(u)) == [1, 2, 3, 4]
    assert all(u.count(v) == n // 4 for v in (1, 2, 3, 4))  # 16 strata over 4 integers: 4 each
    pol = [p.params["scheduler.policy"] for p in pts]
    assert pol.count("fifo") == pol.count("backfill") == n // 2
    # Seeded: the same file gives the same points, another seed others.
    assert [p.params for p in sweep.points(sweep.load_sweep(f))] == [p.params for p in pts]
    f.write_text(f.read_text().replace("seed = 3", "seed = 4"))
    assert [p.params for p in sweep.points(sweep.load_sweep(f))] != [p.params for p in pts]


def test_grid_crossed_with_random_and_seeds(tmp_path: Path, small: Path) -> None:
    f = write_sweep(
        tmp_path,
        'seeds = [1, 2, 5]\n[sweep.grid]\n"hall.ultraservers" = [1, 2]\n'
        '[sweep.random]\nn = 3\n"training.arrivals_per_day" = { min = 1, max = 9 }\n',
    )
    sw = sweep.load_sweep(f)
    pts = sweep.points(sw)
    assert len(pts) == 2 * 3
    ts = sweep.tasks(sw, pts, None)
    assert len(ts) == 2 * 3 * 3 and {t.seed for t in ts} == {1, 2, 5}


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ('[sweep.grid]\n"hall.ultraservers" = []\n', ("sweep.grid.hall.ultraservers", "non-empty list")),
        ("seeds = [1, 1]\n", ("sweep.seeds", "twice")),
        ("hours = -1\n", ("sweep.hours",)),
        ('[sweep.random]\nn = 0\n"a.b" = { min = 1, max = 2 }\n', ("sweep.random.n",)),
        ('[sweep.random]\nn = 2\n"a.b" = { min = 3, max = 2 }\n', ("sweep.random.a.b", "above max")),
        ("colour = 1\n", ("sweep.colour", "unknown key")),
        ('scenario = "nope.toml"\n', ("sweep.scenario", "nope.toml", "no such scenario file")),
        ("[sweep.grid]\nseed = [1, 2]\n", ("seed", "sweep.seeds")),
        (
            '[sweep.grid]\n"hall.ultraservers" = ' + str(list(range(1, 400))) + "\n"
            '"hardware.tdp_w" = ' + str(list(range(1, 400))) + "\n",
            ("at most 100,000",),
        ),
    ],
)
def test_bad_sweep_files_are_refused(tmp_path: Path, small: Path, body: str, words: tuple[str, ...]) -> None:
    f = write_sweep(tmp_path, body)
    code, _, err = invoke("sweep", str(f), "--out", str(tmp_path / "out"))
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert str(f) in err
    for w in words:
        assert w in err, (w, err)
    assert not (tmp_path / "out").exists()


def test_every_point_is_validated_before_any_run(tmp_path: Path, small: Path) -> None:
    f = write_sweep(tmp_path, 'hours = 1\n[sweep.grid]\n"hall.ultraservers" = [1, 2, 0, 3]\n')
    out = tmp_path / "out"
    code, _, err = invoke("sweep", str(f), "--out", str(out), "-j", "1")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "point 3" in err and "hall.ultraservers=0" in err and "out of range" in err
    assert not out.exists()  # nothing ran, nothing written
    # An unknown key is refused the same way.
    f = write_sweep(tmp_path, 'hours = 1\n[sweep.grid]\n"hall.ultrasrvers" = [1]\n')
    code, _, err = invoke("sweep", str(f), "--out", str(out))
    assert code == 2 and "point 1" in err and "hall.ultrasrvers: unknown key" in err
    assert not out.exists()


# ---------------------------------------------------------------------- running
def test_sweep_results_are_data(tmp_path: Path, small: Path) -> None:
    f = write_sweep(tmp_path, 'hours = 1\nseeds = [1, 2]\n[sweep.grid]\n"hall.ultraservers" = [1, 2]\n')
    out = tmp_path / "out"
    code, stdout, err = invoke("sweep", str(f), "--out", str(out), "-j", "2", "--report")
    assert code == 0, err
    # Each run: its file and the Parquet parts of its time series beside it (``storage.parts``).
    assert sorted(p.name for p in (out / "runs").iterdir()) == sorted(
        f"{t.key}.duckdb{ext}"
        for t in sweep.tasks(sweep.load_sweep(f), sweep.points(sweep.load_sweep(f)), None)
        for ext in ("", ".parts")
    )
    table = pq.read_table(out / "results.parquet")
    rows = table.to_pylist()
    assert len(rows) == 4
    for k in [
        *KPIS,
        "point",
        "point_id",
        "seed",
        "hall.ultraservers",
        "status",
        "error",
        "wall_s",
        "cpu_s",
        "run_file",
    ]:
        assert k in table.column_names, k
    for r in rows:
        assert r["status"] == "complete" and r["error"] is None and r["wall_s"] > 0 and r["cpu_s"] > 0
        assert r["chips"] == CHIPS_PER_ULTRASERVER * r["hall.ultraservers"]
        assert r["days"] == pytest.approx(1 / 24)
        run = Path(r["run_file"])
        assert run.parent == (out / "runs").resolve() and run.name == f"{r['point_id']}-s{r['seed']}.duckdb"
        # The row carries the KPIs twin compare shows for that run file.
        code, js, _ = invoke("compare", str(run), str(run), "--json")
        shown = next(iter(json.loads(js).values()))
        for k in KPIS:
            assert r[k] == pytest.approx(shown[k], nan_ok=True) if shown[k] is not None else r[k] is None, k
    assert {(r["hall.ultraservers"], r["seed"]) for r in rows} == {(1, 1), (1, 2), (2, 1), (2, 2)}
    # Seeds are replicas: the same point with another seed is another run.
    assert len({r["run_id"] for r in rows}) == 4
    assert "Pareto front" in stdout
    # twin sql reads it as the view `results`, read-only and sandboxed.
    code, js, err = invoke(
        "sql",
        str(out / "results.parquet"),
        'SELECT "hall.ultraservers" AS n, count(*) AS runs, max(chips) AS chips FROM results '
        "GROUP BY 1 ORDER BY 1",
        "--format",
        "json",
    )
    assert code == 0, err
    assert json.loads(js) == [{"n": 1, "runs": 2, "chips": 144.0}, {"n": 2, "runs": 2, "chips": 288.0}]
    code, _, err = invoke("sql", str(out / "results.parquet"), "DROP VIEW results")
    assert code == 2 and "read-only" in err
    code, _, err = invoke("sql", str(out / "results.parquet"), f"SELECT * FROM read_text('{f}')")
    assert code == 2 and "disabled" in err
    # --report on the directory alone.
    code, stdout, _ = invoke("sweep", "--report", str(out), "--sort", "peak_facility_mw:max")
    assert code == 0
    table_lines = stdout.split("Sorted by peak_facility_mw")[1].splitlines()[2:4]
    assert [line.split()[1] for line in table_lines] == ["2", "1"]  # largest fleet first


def test_a_failing_point_is_recorded_and_the_rest_go_on(tmp_path: Path, small: Path) -> None:
    f = write_sweep(tmp_path, 'hours = 1\nseeds = [1]\n[sweep.grid]\n"hall.ultraservers" = [1, 2, 3]\n')
    out, runs = tmp_path / "out", tmp_path / "runs"
    sw = sweep.load_sweep(f)
    ts = sweep.tasks(sw, sweep.points(sw), runs)
    # The second point's run file cannot be written: a directory stands in its place.
    blocker = Path(ts[1].run_file or "")
    (blocker / "x").mkdir(parents=True)
    code, _, err = invoke("sweep", str(f), "--out", str(out), "--runs-dir", str(runs), "-j", "1")
    assert code == 1 and "1 run(s) failed" in err
    rows = {r["point"]: r for r in pq.read_table(out / "results.parquet").to_pylist()}
    assert rows[2]["status"] == "failed" and "Error" in rows[2]["error"] and rows[2]["pue"] is None
    assert rows[1]["status"] == rows[3]["status"] == "complete"
    # A failed point stays failed on a plain re-invocation, and runs again with --retry-failed.
    code, _, err = invoke("sweep", str(f), "--out", str(out), "--runs-dir", str(runs), "-j", "1")
    assert code == 1 and "3 run(s) already done" in err
    (blocker / "x").rmdir()
    blocker.rmdir()
    code, _, err = invoke(
        "sweep", str(f), "--out", str(out), "--runs-dir", str(runs), "-j", "1", "--retry-failed"
    )
    assert code == 0, err
    rows = {r["point"]: r for r in pq.read_table(out / "results.parquet").to_pylist()}
    assert [rows[i]["status"] for i in (1, 2, 3)] == ["complete"] * 3


def test_resume_after_a_kill_does_not_rerun_finished_points(tmp_path: Path, small: Path) -> None:
    f = write_sweep(tmp_path, 'hours = 3\nseeds = [1, 2, 3]\n[sweep.grid]\n"hall.ultraservers" = [1, 2]\n')
    out = tmp_path / "out"
    cmd = [
        str(Path(sys.executable).parent / "twin"),
        "sweep",
        str(f),
        "--out",
        str(out),
        "-j",
        "1",
        "--no-files",
    ]
    # The sweep kills itself hard as its third run starts (one run at a time: two points are
    # recorded by then); the test waits for that exit, never on a clock.
    scratch = tmp_path / "scratch"  # the killed run's temporary folder is left here
    scratch.mkdir()
    env = dict(os.environ, TWIN_CRASH_AT="session:writer#3", TMPDIR=str(scratch))
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    try:
        _, err = proc.communicate(timeout=600)  # a guard against a hang only
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == -signal.SIGKILL, err
    points_dir = out / "points"
    first = {
        p.name: (p.stat().st_mtime_ns, json.loads(p.read_text())["run_id"]) for p in points_dir.glob("*.json")
    }
    assert len(first) == 2, sorted(first)
    code, _, err = invoke("sweep", str(f), "--out", str(out), "-j", "1", "--no-files")
    assert code == 0, err
    assert f"{len(first)} run(s) already done; {6 - len(first)} to go" in err
    after = {
        p.name: (p.stat().st_mtime_ns, json.loads(p.read_text())["run_id"]) for p in points_dir.glob("*.json")
    }
    assert len(after) == 6
    for name, stamp in first.items():
        assert after[name] == stamp  # not re-run
    rows = pq.read_table(out / "results.parquet").to_pylist()
    assert len(rows) == 6 and all(r["status"] == "complete" for r in rows)
    assert not list(points_dir.glob(".*.tmp"))


def test_pareto_front_matches_brute_force() -> None:
    import random

    rng = random.Random(5)
    rows = [{"a": rng.randint(0, 20), "b": rng.randint(0, 20)} for _ in range(200)]
    front = sweep.pareto_front(rows, ("a", "min"), ("b", "max"))

    def dominated(r: dict[str, int]) -> bool:
        return any(
            q["a"] <= r["a"] and q["b"] >= r["b"] and (q["a"] < r["a"] or q["b"] > r["b"]) for q in rows
        )

    want = {(r["a"], r["b"]) for r in rows if not dominated(r)}
    assert {(r["a"], r["b"]) for r in front} == want
    assert len(front) == len(want)


def test_report_objectives_are_checked() -> None:
    code, _, err = invoke("sweep", "--report", ".", "--pareto", "usd_per_mtok,bogus")
    assert code == 2 and "unknown KPI 'bogus'" in err
    code, _, err = invoke("sweep", "--report", ".", "--sort", "pue:up")
    assert code == 2 and "min or max" in err


# ---------------------------------------------------------------------- Ray
def test_local_and_ray_give_identical_rows(tmp_path: Path, small: Path) -> None:
    if execution.ray_missing():
        pytest.skip("ray is not installed (pip install -e '.[ray]')")
    f = write_sweep(
        tmp_path,
        'hours = 2\nseeds = [4]\n[sweep.grid]\n"hall.ultraservers" = [1, 2]\n'
        '"site.climate" = ["temperate", "hot"]\n',
    )
    res = {}
    for backend in ("local", "ray"):
        out = tmp_path / backend
        code, _, err = invoke(
            "sweep", str(f), "--out", str(out), "-j", "2", "--backend", backend, "--no-files"
        )
        assert code == 0, err
        rows = pq.read_table(out / "results.parquet").to_pylist()
        assert all(r["status"] == "complete" for r in rows)
        res[backend] = [
            {k: r[k] for k in ["point_id", "seed", "hall.ultraservers", "site.climate", *KPIS]} for r in rows
        ]
    assert res["local"] == res["ray"]
    assert len({r["pue"] for r in res["local"]}) == 4  # four different points, not one row repeated


def test_sweep_and_plan_never_import_textual(tmp_path: Path, small: Path) -> None:
    f = write_sweep(tmp_path, 'hours = 1\n[sweep.grid]\n"hall.ultraservers" = [1]\n')
    code = (
        "import sys\n"
        "from tui.cli import main\n"
        f"for args in (['sweep', {str(f)!r}, '--out', {str(tmp_path / 'o')!r}, '-j', '1', '--report'],"
        f" ['plan', {str(small)!r}, '--subject-to', 'chips >= 200', '--range', '1:3', '--hours', '1', '-j', '1'],"
        f" ['sql', {str(tmp_path / 'o' / 'results.parquet')!r}, 'SELECT count(*) FROM results']):\n"
        "    try:\n"
        "        main(args, standalone_mode=False)\n"
        "    except SystemExit as e:\n"
        "        assert not e.code, (args, e.code)\n"
        "assert 'textual' not in sys.modules, 'textual imported'\n"
        "print('ok')\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1]
    )
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr


def test_bad_backend_arguments_write_nothing(tmp_path: Path, small: Path) -> None:
    f = write_sweep(tmp_path, 'hours = 1\n[sweep.grid]\n"hall.ultraservers" = [1]\n')
    code, _, err = invoke("sweep", str(f), "--out", str(tmp_path / "o"), "-j", "0")
    assert code == 2 and "-j" in err and not (tmp_path / "o").exists()


def test_sigterm_stops_a_sweep_politely(tmp_path: Path, small: Path) -> None:
    f = write_sweep(tmp_path, 'hours = 3\nseeds = [1, 2, 3]\n[sweep.grid]\n"hall.ultraservers" = [1, 2]\n')
    out = tmp_path / "out"
    cmd = [str(Path(sys.executable).parent / "twin"), "sweep", str(f), "--out", str(out), "-j", "1"]
    # The sweep stops itself as its second run starts (one point recorded); SIGTERM arrives there.
    env = dict(os.environ, TWIN_STOP_AT="session:writer#2")
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    _, st = os.waitpid(proc.pid, os.WUNTRACED)
    assert os.WIFSTOPPED(st), "the sweep did not reach its second run"
    points_dir = out / "points"
    assert len(list(points_dir.glob("*.json"))) == 1
    proc.send_signal(signal.SIGTERM)
    proc.send_signal(signal.SIGCONT)
    _, err = proc.communicate(timeout=600)  # a guard against a hang only
    assert proc.returncode == 143 and "terminated (SIGTERM)" in err and "run the same command again" in err
    assert "1 run(s) finished" in err and "1 stopped in flight" in err
    rows = pq.read_table(out / "results.parquet").to_pylist()  # rebuilt on the way out
    # The first run finished, the second (in flight, in this process) was stopped, none other began.
    assert [r["status"] for r in rows] == ["complete", "stopped"] + ["pending"] * 4
    # It was stopped as it was about to create its run file: there is none (test_sweep_signals
    # stops runs further in, whose files are closed ``stopped``).
    # One run recorded (its file and its parts' folder), the stopped point's none.
    assert rows[1]["run_file"] is None
    assert sorted(p.suffix for p in (out / "runs").iterdir()) == [".duckdb", ".parts"]
    # Resumed: the stopped point runs again, the finished one does not.
    code, _, err = invoke("sweep", str(f), "--out", str(out), "-j", "1", "--no-files")
    assert code == 0 and "1 run(s) already done; 5 to go" in err, err


def test_runs_dir_puts_run_files_elsewhere(tmp_path: Path, small: Path) -> None:
    f = write_sweep(tmp_path, 'hours = 1\nseeds = [3]\n[sweep.grid]\n"hall.ultraservers" = [1]\n')
    out, shared = tmp_path / "out", tmp_path / "shared" / "runs"
    code, _, err = invoke("sweep", str(f), "--out", str(out), "--runs-dir", str(shared), "-j", "1")
    assert code == 0, err
    (row,) = pq.read_table(out / "results.parquet").to_pylist()
    assert Path(row["run_file"]) == (shared / f"{row['point_id']}-s3.duckdb").resolve()
    assert Path(row["run_file"]).exists() and not (out / "runs").exists()
    code, _, err = invoke("sweep", str(f), "--out", str(out), "--runs-dir", str(shared), "--no-files")
    assert code == 2 and "not both" in err


# ---------------------------------------------------------------------- the sweep folder
def test_a_second_sweep_into_a_locked_folder_is_refused(tmp_path: Path, small: Path) -> None:
    from storage.runlock import RunLock

    f = write_sweep(tmp_path, 'hours = 1\nseeds = [1]\n[sweep.grid]\n"hall.ultraservers" = [1]\n')
    out = tmp_path / "out"
    code, _, err = invoke("sweep", str(f), "--out", str(out), "-j", "1", "--no-files")
    assert code == 0, err
    before = (out / "results.parquet").stat().st_mtime_ns
    # This process holds the folder's lock, as a running sweep does.
    lock = RunLock(out / sweep.LOCK)
    try:
        code, _, err = invoke("sweep", str(f), "--out", str(out), "-j", "1", "--no-files", "--retry-failed")
    finally:
        lock.release()
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert f"another sweep (process {os.getpid()})" in err and str(out) in err
    assert (out / "results.parquet").stat().st_mtime_ns == before  # nothing written
    code, _, err = invoke("sweep", str(f), "--out", str(out), "-j", "1", "--no-files")
    assert code == 0 and "1 run(s) already done; 0 to go" in err, err


def test_a_folder_a_sweep_did_not_make_is_refused(tmp_path: Path, small: Path) -> None:
    f = write_sweep(tmp_path, 'hours = 1\nseeds = [1]\n[sweep.grid]\n"hall.ultraservers" = [1]\n')
    out = tmp_path / "theirs"
    out.mkdir()
    (out / "results.parquet").write_bytes(b"someone else's results")
    code, _, err = invoke("sweep", str(f), "--out", str(out), "-j", "1", "--no-files")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "not a sweep folder" in err and "results.parquet" in err and "--overwrite" in err
    assert sorted(p.name for p in out.iterdir()) == ["results.parquet"]
    assert (out / "results.parquet").read_bytes() == b"someone else's results"
    # With --overwrite the sweep goes in (its results replace the file) and marks the folder.
    code, _, err = invoke("sweep", str(f), "--out", str(out), "-j", "1", "--no-files", "--overwrite")
    assert code == 0, err
    assert len(pq.read_table(out / "results.parquet").to_pylist()) == 1
    assert sweep.is_sweep_folder(out)
    # An empty folder is fine without it.
    (tmp_path / "empty").mkdir()
    code, _, err = invoke("sweep", str(f), "--out", str(tmp_path / "empty"), "-j", "1", "--no-files")
    assert code == 0, err


@pytest.mark.parametrize("where", ["/", "/tmp", "/usr/share/twin-sweep", "~"])
def test_system_folders_are_never_written(tmp_path: Path, small: Path, where: str) -> None:
    f = write_sweep(tmp_path, 'hours = 1\nseeds = [1]\n[sweep.grid]\n"hall.ultraservers" = [1]\n')
    target = Path(where).expanduser()
    existed = target.exists()
    for extra in ((), ("--overwrite",)):
        code, _, err = invoke("sweep", str(f), "--out", where, "-j", "1", "--no-files", *extra)
        assert code == 2 and "system folder" in err and len(err.strip().splitlines()) == 1, err
    assert target.exists() == existed
    assert not (target / "points").exists() or (existed and (target / "points").is_dir())


def test_a_tampered_point_file_is_reported_and_run_again(tmp_path: Path, small: Path) -> None:
    f = write_sweep(tmp_path, 'hours = 1\nseeds = [1]\n[sweep.grid]\n"hall.ultraservers" = [1, 2]\n')
    out = tmp_path / "out"
    code, _, err = invoke("sweep", str(f), "--out", str(out), "-j", "1", "--no-files")
    assert code == 0, err
    files = sorted((out / "points").glob("*.json"))
    first = {p.name: json.loads(p.read_text()) for p in files}
    bad = dict(first[files[0].name], pue="1.1")  # a KPI that is not a number
    files[0].write_text(json.dumps(bad))
    files[1].write_text("[1, 2")  # not JSON at all
    code, _, err = invoke("sweep", str(f), "--out", str(out), "-j", "1", "--no-files")
    assert code == 0 and "Traceback" not in err, err
    warnings = [line for line in err.splitlines() if line.startswith("twin: warning:")]
    assert len(warnings) == 2
    assert str(files[0]) in warnings[0] and "pue" in warnings[0] and "runs again" in warnings[0]
    assert str(files[1]) in warnings[1] and "unreadable" in warnings[1]
    assert "2 runs (0 already done, 2 ran, 0 failed)" in err
    for p in files:  # each point ran again: a new run, a valid file
        row = json.loads(p.read_text())
        assert row["status"] == "complete" and row["run_id"] != first[p.name]["run_id"]
        assert isinstance(row["pue"], float)


def test_check_row_refuses_rows_of_another_point(tmp_path: Path, small: Path) -> None:
    f = write_sweep(tmp_path, 'hours = 1\nseeds = [1]\n[sweep.grid]\n"hall.ultraservers" = [1, 2]\n')
    sw = sweep.load_sweep(f)
    t1, t2 = sweep.tasks(sw, sweep.points(sw), None)
    row = {**execution.empty_row(t1), "status": "complete", "run_id": "r"}
    assert sweep.check_row(row, t1) is None
    assert "is not this point's" in (sweep.check_row(row, t2) or "")  # another point's row
    assert "hall.ultraservers" in (sweep.check_row({**row, "hall.ultraservers": 2}, t1) or "")
    assert "status" in (sweep.check_row({**row, "status": "pending"}, t1) or "")
    assert "run_id" in (sweep.check_row({**row, "run_id": None}, t1) or "")
    assert "seed" in (sweep.check_row({**row, "seed": 2}, t1) or "")
    assert "missing" in (sweep.check_row({k: v for k, v in row.items() if k != "pue"}, t1) or "")


def test_a_point_file_that_is_a_pipe_or_too_deep_is_unreadable_not_a_hang(
    tmp_path: Path, small: Path
) -> None:
    """A point file replaced by a FIFO would block its read, one nested thousands deep would blow
    the JSON decoder's recursion: both are reported as unreadable (and the point runs again)."""
    f = write_sweep(tmp_path, 'hours = 1\nseeds = [1]\n[sweep.grid]\n"hall.ultraservers" = [1, 2]\n')
    sw = sweep.load_sweep(f)
    t1, t2 = sweep.tasks(sw, sweep.points(sw), None)
    out = tmp_path / "out"
    sweep.point_file(out, t1).parent.mkdir(parents=True)
    os.mkfifo(sweep.point_file(out, t1))
    sweep.point_file(out, t2).write_text("[" * 100_000 + "]" * 100_000)
    row, why = sweep.load_row(out, t1)
    assert row is None and "not a regular file" in (why or "")
    row, why = sweep.load_row(out, t2)
    assert row is None and "unreadable" in (why or "")


# ---------------------------------------------------------------------- validation
def test_a_run_too_short_for_one_second_is_refused(tmp_path: Path, small: Path) -> None:
    f = write_sweep(tmp_path, 'hours = 1e-9\n[sweep.grid]\n"hall.ultraservers" = [1]\n')
    code, _, err = invoke("sweep", str(f), "--out", str(tmp_path / "out"))
    assert code == 2 and len(err.strip().splitlines()) == 1
    # One rule for every command: a run lasts at least one step (the default hall's 60 s).
    assert "sweep.hours" in err and "shorter than one step" in err
    assert not (tmp_path / "out").exists()


def test_validation_reports_progress_and_checks_every_point(tmp_path: Path, small: Path) -> None:
    f = write_sweep(
        tmp_path,
        'hours = 1\n[sweep.grid]\n"site.climate" = ["temperate", "hot"]\n'
        '[sweep.random]\nn = 30\n"hall.ultraservers" = { min = 1, max = 3 }\n',
    )
    sw = sweep.load_sweep(f)
    pts = sweep.points(sw)
    seen: list[tuple[int, int]] = []
    sweep.validate(sw, pts, lambda d, n: seen.append((d, n)))
    # 60 points, the base scenario, and each value alone: 2 climates and the range's two ends.
    total = 60 + 1 + 2 + 2
    assert seen[-1] == (total, total) and all(n == total for _, n in seen)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    # A point that breaks a check across keys (hall size x run length: 87,000 h x 60 steps/h x
    # 200 UltraServers = 1.04e9 > 1e9 system-steps) is named.
    f = write_sweep(tmp_path, 'hours = 87000\n[sweep.grid]\n"hall.ultraservers" = [1, 200]\n', "big.toml")
    sw = sweep.load_sweep(f)
    with pytest.raises(ScenarioError, match=r"point 2 .*system-steps"):
        sweep.validate(sw, sweep.points(sw))


# ---------------------------------------------------------------------- Ray address
def test_an_unreachable_ray_address_fails_at_once_naming_it(tmp_path: Path, small: Path) -> None:
    import socket

    if execution.ray_missing():
        pytest.skip("ray is not installed (pip install -e '.[ray]')")
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    f = write_sweep(tmp_path, 'hours = 1\n[sweep.grid]\n"hall.ultraservers" = [1]\n')
    addr = f"127.0.0.1:{port}"
    code, _, err = invoke(
        "sweep", str(f), "--out", str(tmp_path / "o"), "--backend", "ray", "--ray-address", addr
    )
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert f"--ray-address {addr}: cannot reach 127.0.0.1:{port}" in err
    assert not (tmp_path / "o").exists()
    with pytest.raises(ScenarioError, match="HOST:PORT"):
        execution.check_ray_address("nohost")
