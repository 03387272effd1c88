"""The twin command as a user meets it: runs, bad input, read-only SQL, import hygiene."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.conftest import SMALL_TOML
from tui.cli import main


def invoke(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


def test_version_and_help() -> None:
    code, out, _ = invoke("--version")
    assert code == 0 and "0.1.0" in out
    code, out, _ = invoke("--help")
    assert code == 0
    for cmd in ("run", "validate", "scenarios", "sql", "replay"):
        assert cmd in out


def test_scenarios_lists_the_default() -> None:
    code, out, _ = invoke("scenarios")
    assert code == 0 and "default" in out


def test_validate_builtin_and_file(tmp_path: Path) -> None:
    code, out, _ = invoke("validate", "default")
    assert code == 0 and "2,304 chips" in out
    f = tmp_path / "small.toml"
    f.write_text(SMALL_TOML)
    code, out, _ = invoke("validate", str(f))
    assert code == 0 and "288 chips" in out


def test_run_writes_a_file_and_prints_a_summary(tmp_path: Path) -> None:
    f = tmp_path / "small.toml"
    f.write_text(SMALL_TOML)
    out = tmp_path / "run.duckdb"
    code, stdout, _ = invoke("run", str(f), "--hours", "3", "--out", str(out))
    assert code == 0, stdout
    assert out.exists() and "PUE" in stdout and "complete" in stdout
    code, stdout, _ = invoke("sql", str(out), "SELECT count(*) AS n FROM factory_ts", "--format", "json")
    assert code == 0 and json.loads(stdout) == [{"n": 180}]
    code, stdout, _ = invoke(
        "sql", str(out), "SELECT time_s, pue FROM factory_ts ORDER BY time_s LIMIT 2", "--format", "csv"
    )
    assert code == 0 and stdout.splitlines()[0].replace('"', "") == "time_s,pue"
    assert stdout.splitlines()[1].startswith("0,")
    code, stdout, _ = invoke("sql", str(out), "SELECT status FROM runs")
    assert code == 0 and "complete" in stdout
    # An existing file is not overwritten silently.
    code, _, err = invoke("run", str(f), "--hours", "1", "--out", str(out))
    assert code == 2 and "already exists" in err


def test_run_json_summary(tmp_path: Path) -> None:
    f = tmp_path / "small.toml"
    f.write_text(SMALL_TOML)
    code, stdout, _ = invoke("run", str(f), "--hours", "2", "--out", str(tmp_path / "j.duckdb"), "--json")
    assert code == 0
    s = json.loads(stdout)
    assert s["status"] == "complete" and s["steps"] == 120 and s["pue"] > 1


def test_sql_refuses_writes_with_exit_2(small_run: Path) -> None:
    code, _, err = invoke("sql", str(small_run), "DELETE FROM factory_ts")
    assert code == 2 and "read-only" in err
    code, _, err = invoke("sql", str(small_run), "SELECT * FROM read_csv('/etc/passwd')")
    assert code == 2 and "disabled" in err


BAD_CASES = [
    ("unknown key", SMALL_TOML.replace("[hall]", "[hall]\ncolour = 'red'"), "hall.colour: unknown key"),
    ("wrong type", SMALL_TOML.replace("ultraservers = 2", "ultraservers = 'two'"), "hall.ultraservers:"),
    ("negative power", SMALL_TOML + "\n[hardware]\ntdp_w = -5\n", "hardware.tdp_w:"),
    (
        "negative rate",
        SMALL_TOML.replace("mean_requests_per_s = 20.0", "mean_requests_per_s = -1.0"),
        "services[0].mean_requests_per_s:",
    ),
    ("invalid toml", SMALL_TOML + "\n[hall\n", "invalid TOML"),
    (
        "unknown system",
        SMALL_TOML.replace('system = "trn3-gen2"', 'system = "tpu9"'),
        "hall.system: unknown system",
    ),
    (
        "bad event",
        SMALL_TOML + '\n[[events]]\nat_h = 1\nkind = "meteor"\n',
        "events[0].kind: unknown event kind",
    ),
    ("missing name", SMALL_TOML.replace('name = "small"', ""), "name: required key is missing"),
    (
        "weights do not fit",
        SMALL_TOML.replace('model = "llama-3.1-70b"', 'model = "llama-3.1-405b"\nchips_per_replica = 1'),
        "do not fit",
    ),
    # Workload: scheduler, job classes, failures, services.
    ("unknown policy", SMALL_TOML + '\n[scheduler]\npolicy = "lottery"\n', "scheduler.policy:"),
    (
        "unknown class key",
        SMALL_TOML.replace("[training.pretrain]", "[training.pretrain]\ncolour = 1"),
        "training.pretrain.colour: unknown key",
    ),
    (
        "class weights mismatch",
        SMALL_TOML.replace("size_weights = [0.4, 0.3, 0.2, 0.1]", "size_weights = [0.4, 0.6]"),
        "training.pretrain: size_chips and size_weights must have the same length",
    ),
    (
        "unknown training model",
        SMALL_TOML + '\n[training.eval]\nmodels = ["gpt-9"]\nmodel_weights = [1.0]\n',
        "training.eval.models: unknown model 'gpt-9'",
    ),
    ("bad blast radius", SMALL_TOML + '\n[failures.hbm]\nblast = "rack"\n', "failures.hbm.blast:"),
    ("negative hazard", SMALL_TOML + "\n[failures]\nchip_hazard_per_h = -1\n", "failures.chip_hazard_per_h:"),
    (
        "bad target utilization",
        SMALL_TOML.replace("mean_requests_per_s = 20.0", "target_utilization = 0.0"),
        "services[0].target_utilization: out of range: must lie in 0 < x ≤ 1",
    ),
    (
        "autoscale bounds",
        SMALL_TOML.replace("mean_requests_per_s = 20.0", "autoscale = true\nreplicas_max = 1"),
        "autoscale needs replicas_min <= replicas <= replicas_max",
    ),
    (
        "unknown token profile",
        SMALL_TOML.replace("mean_requests_per_s = 20.0", 'token_profile = "poetry"'),
        "services[0].token_profile: unknown token profile 'poetry'",
    ),
    (
        "unknown service model",
        SMALL_TOML.replace('model = "llama-3.1-70b"', 'model = "gpt-9"'),
        "services[0].model: unknown model 'gpt-9'",
    ),
    (
        "missing trace file",
        SMALL_TOML.replace("mean_requests_per_s = 20.0", 'trace = "nope.csv"'),
        "services[0].trace: ",
    ),
]


@pytest.mark.parametrize(("label", "text", "needle"), BAD_CASES, ids=[c[0] for c in BAD_CASES])
def test_bad_scenarios_exit_2_with_one_clear_line_and_write_nothing(
    tmp_path: Path, label: str, text: str, needle: str
) -> None:
    f = tmp_path / "bad.toml"
    f.write_text(text)
    out = tmp_path / "out.duckdb"
    for args in (["run", str(f), "--out", str(out)], ["validate", str(f)]):
        code, stdout, err = invoke(*args)
        assert code == 2, (label, stdout, err)
        assert needle in err, err
        assert "bad.toml" in err or "small" in err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not out.exists() and not Path(str(out) + ".wal").exists()
    assert list(tmp_path.iterdir()) == [f]


def test_missing_scenario_file_and_unknown_name(tmp_path: Path) -> None:
    code, _, err = invoke("run", str(tmp_path / "nope.toml"), "--out", str(tmp_path / "o.duckdb"))
    assert code == 2 and "nope.toml: no such scenario file" in err
    code, _, err = invoke("run", "no-such-scenario")
    assert code == 2 and "no built-in scenario" in err
    assert not (tmp_path / "o.duckdb").exists()


def test_sql_and_replay_on_a_non_twin_file(tmp_path: Path) -> None:
    f = tmp_path / "x.duckdb"
    f.write_text("hello")
    for args in (["sql", str(f), "SELECT 1"], ["replay", str(f)]):
        code, _, err = invoke(*args)
        assert code == 2 and "not a DuckDB" in err


def _modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys; print(' '.join(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return set(out.split())


def test_the_model_imports_no_storage_ui_or_validation_library() -> None:
    mods = _modules_after(
        "import twin.compose.sim, twin.spec.catalog, twin.spec.telemetry, twin.spec.params, twin.spec.models"
    )
    for banned in ("duckdb", "pyarrow", "textual", "rich", "pydantic", "storage", "scenarios", "tui"):
        assert banned not in mods, banned


def test_import_direction_between_packages() -> None:
    mods = _modules_after("import storage.writer, storage.reader, storage.schema")
    assert not {"scenarios", "tui", "textual", "pydantic"} & mods
    mods = _modules_after("import scenarios.spec, scenarios.runner")
    assert not {"tui", "textual"} & mods


def test_headless_commands_never_import_textual(tmp_path: Path) -> None:
    f = tmp_path / "small.toml"
    f.write_text(SMALL_TOML)
    out = tmp_path / "h.duckdb"
    code = (
        "import sys\n"
        "from tui.cli import main\n"
        f"for args in (['run', {str(f)!r}, '--hours', '1', '--out', {str(out)!r}], ['validate', 'default'],"
        f" ['sql', {str(out)!r}, 'SELECT 1'], ['scenarios']):\n"
        "    try:\n"
        "        main(args, standalone_mode=False)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "assert 'textual' not in sys.modules, 'textual imported'\n"
    )
    mods = _modules_after(code)
    assert "textual" not in mods and "duckdb" in mods


def test_summary_speed_keeps_its_digits_at_every_scale() -> None:
    """Simulated time per wall second, in a unit that shows it: 2 days in 62.1 s is 0.77 sim-h/s
    (2 x 24 / 62.1), not "0.0 sim-days/s"; a month in 20 s is 1.5 sim-days/s."""
    from tui.cli.summary import _speed

    assert _speed(2.0, 62.1) == f"{2 * 24 / 62.1:.2f} sim-h/s" == "0.77 sim-h/s"
    assert _speed(30.0, 20.0) == "1.5 sim-days/s"
    assert _speed(0.01, 30.0) == f"{0.01 * 1440 / 30:.2f} sim-min/s" == "0.48 sim-min/s"


# ---------------------------------------------------------------------- one line for what used to be a traceback
def _one_line(r: tuple[int, str, str], code: int, needle: str) -> None:
    got, _, err = r
    assert got == code, err
    assert err.count("\n") == 1 and err.startswith("twin: error: ") and needle in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("description=a\rb", "control character U+000D"),
        ("description=a\x01b", "control character U+0001"),
        ('description="""a\nb"""', "control character U+000A"),
        ("hall.ultraservers=2\n[x]", "control character U+000A"),
        ("description=a\u2028b", "control character U+2028"),
        ("hall.ultraservers=" + "[" * 600 + "]" * 600, "nested deeper than 16"),
        ("hall.ultraservers=" + "{ a = " * 17 + "1" + " }" * 17, "nested deeper than 16"),
    ],
)
def test_set_values_that_would_break_the_recorded_scenario_are_refused(
    tmp_path: Path, value: str, needle: str
) -> None:
    out = tmp_path / "o.duckdb"
    _one_line(invoke("run", "default", "--hours", "0.1", "--out", str(out), "--set", value), 2, needle)
    assert not out.exists()


def test_a_set_value_with_a_tab_or_unicode_is_recorded_and_reruns(tmp_path: Path) -> None:
    """A description with a tab and non-ASCII text is one line: accepted, recorded in the run's
    scenario (whose comment names the override) and read back as given."""
    f = tmp_path / "small.toml"
    f.write_text(SMALL_TOML)
    out = tmp_path / "o.duckdb"
    code, _, err = invoke("run", str(f), "--hours", "0.1", "--out", str(out), "--set", "description=Ω\tok 😀")
    assert code == 0, err
    code, stdout, _ = invoke("sql", str(out), "SELECT scenario_toml FROM runs", "--format", "json")
    import tomllib

    text = json.loads(stdout)[0]["scenario_toml"]
    assert tomllib.loads(text)["description"] == "Ω\tok 😀"
    assert "# --set description=Ω\tok 😀\n" in text


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--hours", "nan"], "--hours: must be a positive finite number (got nan)"),
        (["--hours", "-1"], "--hours: must be a positive finite number"),
        (["--minimize", "seed"], "--minimize seed: the random seed is not a quantity to plan"),
        (["--minimize", "dt_s"], "--minimize dt_s: the time step is not a quantity to plan"),
        (["--minimize", "site.climate"], "--minimize site.climate: not a whole-number key (enum)"),
        (["--minimize", "hall.colour"], "--minimize hall.colour: unknown key"),
    ],
)
def test_plan_refuses_bad_hours_and_keys_that_are_no_quantity(args: list[str], needle: str) -> None:
    _one_line(invoke("plan", "default", "--subject-to", "pue <= 2", *args), 2, needle)


def test_sql_edge_cases_are_one_line_or_sound_output(small_run: Path, tmp_path: Path) -> None:
    f = str(small_run)
    _one_line(invoke("sql", f, "UPDATE EXTENSIONS"), 2, "refused: statements of this kind are not allowed")
    _one_line(
        invoke("sql", f, "SELECT 1", "--max-rows", "-5"), 2, "'--max-rows': -5 is not in the range x>=0"
    )
    code, stdout, _ = invoke("sql", f, "SELECT 1 AS a", "--max-rows", "0")
    assert code == 0 and stdout.splitlines()[0].strip() == "a" and "1 not shown" in stdout
    # CSV has no nested values: lists, structs and maps as JSON text, intervals as ISO 8601.
    q = "SELECT [1, 2] AS l, {'a': 1, 'b': [NULL, 'x']} AS s, MAP {'k': 1} AS m, INTERVAL '1 day 90 seconds' AS i"
    code, stdout, err = invoke("sql", f, q, "--format", "csv")
    assert code == 0, err
    import csv
    import io

    rows = list(csv.reader(io.StringIO(stdout)))
    assert rows[0] == ["l", "s", "m", "i"]
    assert json.loads(rows[1][0]) == [1, 2] and json.loads(rows[1][1]) == {"a": 1, "b": [None, "x"]}
    assert json.loads(rows[1][2]) == {"k": 1} and rows[1][3] == "P0M1DT90S"


def test_output_that_cannot_be_written_is_one_line_with_its_exit_code(small_run: Path) -> None:
    f = str(small_run)
    # /proc takes no new files: the path is wrong (2). /dev/full has no space (74).
    _one_line(invoke("sql", f, "SELECT 1", "--format", "csv", "--out", "/proc/x.csv"), 2, "/proc/")
    _one_line(invoke("report", f, "--out", "/proc/x.html"), 2, "/proc/")


def test_summary_shows_input_tokens_and_the_inference_cost_split(tmp_path: Path) -> None:
    """The run summary gives output and input tokens and the all-in inference cost split into
    prefill and decode: the printed parts add up to the printed total (to the cent), and each
    part over its tokens is the $/M figure printed next to it."""
    import re

    f = tmp_path / "small.toml"
    f.write_text(SMALL_TOML)
    code, stdout, _ = invoke("run", str(f), "--hours", "2", "--out", str(tmp_path / "s.duckdb"))
    assert code == 0, stdout
    line = next(x for x in stdout.splitlines() if x.strip().startswith("inference TCO"))
    m = re.search(
        r"\$([\d,.]+) = prefill \$([\d,.]+) \(\$([\d.]+)/M input tokens\) \+ decode \$([\d,.]+) "
        r"\(\$([\d.]+)/M output tokens\)",
        line,
    )
    assert m, line
    total, pre, per_in, dec, per_out = (float(g.replace(",", "")) for g in m.groups())
    assert pre > 0 and dec > 0 and abs(pre + dec - total) <= 0.011
    tok = next(x for x in stdout.splitlines() if x.strip().startswith("tokens served"))
    assert "output" in tok and "input (prompt)" in tok
    import duckdb

    from storage.kpis import run_kpis

    con = duckdb.connect(str(tmp_path / "s.duckdb"), read_only=True)
    (rid,) = con.sql("SELECT run_id FROM runs").fetchall()[0]
    k = run_kpis(con, rid)
    con.close()
    assert per_in == pytest.approx(pre / (k["input_tokens"] / 1e6), abs=6e-4, rel=0.01)
    assert per_out == pytest.approx(dec / (k["tokens"] / 1e6), abs=6e-4, rel=0.01)
