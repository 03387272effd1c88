"""Hostile inputs, generated: `twin validate` and `twin run` agree on every one.

The generator draws from the scenario fact table (out-of-range values, wrong types, NaN and
infinity, booleans, huge integers and strings, unknown keys and enumeration values), mutates every
built-in scenario, breaks weather, price, carbon and trace files and the command-line arguments.
Property: for every input, `twin validate` and `twin run --hours <small>` either both refuse it
(exit 2, one line, no traceback, no file left behind) or both accept it and the run completes.
A few inputs that used to hang or exhaust memory run in subprocesses under a timeout and an
address-space limit. ``bench/fuzz_inputs.py`` runs a larger generated set and prints the figures.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import re
import resource
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scenarios import facts as F
from scenarios.spec import builtin_names
from tui.cli import main

# ---------------------------------------------------------------------- TOML writing
_BARE = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def _key(k: str) -> str:
    return k if k and set(k) <= _BARE else json.dumps(k)


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, dt.datetime):
        return v.isoformat()
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(type(v))


def to_toml(data: dict[str, Any], prefix: str = "") -> str:
    """A TOML document for ``data`` (tables, arrays of tables, inline values; nan, inf and huge
    integers written as they are, which tomllib reads back)."""
    lines: list[str] = []
    tables: list[tuple[str, Any]] = []
    for k, v in data.items():
        if (
            isinstance(v, dict)
            and v
            and all(not isinstance(x, list | dict) or isinstance(x, dict) for x in v.values())
        ):
            tables.append((k, v))
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            tables.append((k, v))
        else:
            lines.append(f"{_key(k)} = {_value(v)}")
    out = "\n".join(lines) + ("\n" if lines else "")
    for k, v in tables:
        name = f"{prefix}{_key(k)}"
        if isinstance(v, dict):
            out += f"\n[{name}]\n" + to_toml(v, name + ".")
        else:
            for item in v:
                flat = {a: b for a, b in item.items()}
                out += (
                    f"\n[[{name}]]\n" + "\n".join(f"{_key(a)} = {_value(b)}" for a, b in flat.items()) + "\n"
                )
    return out


# ---------------------------------------------------------------------- inputs
TINY: dict[str, Any] = {
    "name": "tiny",
    "dt_s": 300,
    "duration_h": 1.0,
    "hall": {"system": "trn3-gen2", "ultraservers": 1, "ultraservers_per_row": 1},
    "training": {"arrivals_per_day": 50.0},
    "services": [
        {
            "name": "chat",
            "model": "llama-3.1-8b",
            "chips_per_replica": 1,
            "replicas": 2,
            "mean_requests_per_s": 5.0,
        }
    ],
}
SPECIAL = ("DEVZERO", "FIFO", "DIR", "SPARSE")  # file contents that are not contents


@dataclass
class Case:
    """One generated input: a scenario (TOML text, a built-in name or a special path), the files
    it names, and the command-line arguments."""

    label: str
    scenario: str | None = None  # TOML text written to s.toml
    target: str | None = None  # instead: a built-in name or a special file ("DEVZERO", "FIFO")
    files: dict[str, str | bytes] = field(default_factory=dict)
    args: list[str] = field(default_factory=lambda: ["--hours", "0.5"])

    def write(self, d: Path) -> str:
        for name, content in self.files.items():
            p = d / name
            if content == "DEVZERO":
                p.symlink_to("/dev/zero")
            elif content == "FIFO":
                os.mkfifo(p)
            elif content == "DIR":
                p.mkdir()
            elif content == "SPARSE":
                with open(p, "wb") as f:
                    f.truncate(F.MAX_TRACE_BYTES + 1)
            elif isinstance(content, bytes):
                p.write_bytes(content)
            else:
                p.write_text(content, encoding="utf-8")
        if self.target is not None:
            if self.target in SPECIAL:
                return str(d / "scen.toml") if self.target != "DEVZERO" else "/dev/zero"
            return self.target
        (d / "s.toml").write_text(self.scenario or "", encoding="utf-8")
        return str(d / "s.toml")


def _deep_set(data: dict[str, Any], path: list[str | int], value: Any) -> None:
    node: Any = data
    for part in path[:-1]:
        if isinstance(part, int):
            while len(node) <= part:
                node.append({})
            node = node[part]
        else:
            nxt = node.get(part)
            if not isinstance(nxt, dict | list):
                nxt = [] if isinstance(path[path.index(part) + 1], int) else {}
                node[part] = nxt
            node = nxt
    node[path[-1]] = value


def _path_of(f: F.Fact, n_services: int, n_events: int) -> list[str | int]:
    section = f.section.replace("<class>", "eval").replace("<cause>", "hbm")
    parts: list[str | int] = [p for p in section.split(".") if p]
    if f.section == "services":
        parts.append(max(0, n_services - 1))
    elif f.section == "models":
        parts.append(0)
    elif f.section == "events":
        parts.append(max(0, n_events - 1))
    return [*parts, f.key]


def _bad_number(f: F.Fact) -> st.SearchStrategy[Any]:
    lo = f.lo if f.lo is not None else 0.0
    hi = f.hi if f.hi is not None else 1e6
    return st.sampled_from(
        [
            lo - 1,
            hi + 1,
            hi * 10 + 1,
            -1,
            0,
            math.nan,
            math.inf,
            -math.inf,
            True,
            False,
            2**63,
            2**64 + 1,
            -(2**63) - 1,
            10**30,
            1e308,
            "1",
            "",
            "x" * 200_000,
            [1],
            {"a": 1},
        ]
    )


def _good_number(f: F.Fact) -> st.SearchStrategy[Any]:
    lo = f.lo if f.lo is not None else 0.0
    hi = f.hi if f.hi is not None else 1e6
    if f.type == "int":
        a = int(lo) + (1 if f.lo_open else 0)
        b = int(hi) - (1 if f.hi_open else 0)
        return st.one_of(st.sampled_from([a, b, (a + b) // 2]), st.integers(a, min(b, a + 50)))
    a = lo + (abs(hi - lo) * 1e-3 if f.lo_open else 0)
    b = hi - (abs(hi - lo) * 1e-3 if f.hi_open else 0)
    return st.one_of(
        st.sampled_from([a, b, (a + b) / 2]), st.floats(a, b, allow_nan=False, allow_infinity=False)
    )


def values_for(f: F.Fact) -> st.SearchStrategy[Any]:
    """Values of one fact: valid ones and every kind of hostile one."""
    hostile = st.sampled_from(
        [
            True,
            math.nan,
            math.inf,
            2**64,
            "x" * 200_000,
            "",
            None.__class__.__name__,
            [],
            {},
            "../../etc",
            "volcano",
            -1,
            1e308,
        ]
    )
    if f.type in ("int", "float"):
        return st.one_of(_good_number(f), _bad_number(f))
    if f.type == "enum":
        return st.one_of(st.sampled_from(f.choices), hostile, st.text(max_size=12))
    if f.type == "bool":
        return st.one_of(st.booleans(), hostile, st.integers(0, 1))
    if f.type == "name":
        return st.one_of(
            st.from_regex(F.NAME_PATTERN, fullmatch=True).map(lambda s: s[:64]),
            hostile,
            st.sampled_from(["../x", "a/b", ".x", "a\\b", "a b", "x" * 65, "é"]),
        )
    if f.type == "datetime":
        return st.one_of(
            st.sampled_from(
                [
                    "2026-01-05T00:00:00Z",
                    "2026-01-05T00:00:00",
                    "2026-13-01T00:00:00Z",
                    "9999-01-01T00:00:00Z",
                    "yesterday",
                ]
            ),
            st.datetimes(timezones=st.just(dt.UTC)),
            hostile,
        )
    if f.type.startswith("list["):
        inner = f.type[5:-1]
        item = (
            st.sampled_from(["llama-3.1-8b", "gpt-oss-20b", "nope"])
            if inner == "str"
            else (_good_number(f) if inner != "str" else st.text())
        )
        return st.one_of(
            st.lists(item, min_size=0, max_size=6), st.lists(_bad_number(f), min_size=1, max_size=3), hostile
        )
    if f.type == "table[float]":
        return st.one_of(
            st.dictionaries(
                st.sampled_from([*f.choices, "fp2"]), _bad_number(f) | _good_number(f), max_size=2
            ),
            hostile,
        )
    if f.type == "target":
        return st.one_of(
            st.integers(0, 300),
            st.sampled_from(["facility", "row:0", "row:9", "chat", "nope", "1.5", "-1", "plant", ""]),
            hostile,
        )
    # str, path
    return st.one_of(st.text(max_size=20), hostile, st.sampled_from(["missing.csv", "/dev/zero", "/", "."]))


def good_values_for(f: F.Fact) -> st.SearchStrategy[Any]:
    """Values inside a fact's bounds, extremes first."""
    if f.type in ("int", "float"):
        return _good_number(f)
    if f.type == "enum":
        return st.sampled_from(f.choices)
    if f.type == "bool":
        return st.booleans()
    return values_for(f)


@st.composite
def fact_case(
    draw: st.DrawFn, base: dict[str, Any] | None = None, label: str = "table", good_only: bool = False
) -> Case:
    """A tiny scenario with some keys of the fact table set to generated values: 1-3 keys to
    any value, or (``good_only``) 2-8 numeric or enumerated keys to values inside their bounds,
    extremes first, to find combinations that pass validation and then break the run."""
    data = json.loads(json.dumps(base or TINY))
    pool = [f for f in F.FACTS if f.type in ("int", "float", "enum", "bool")] if good_only else list(F.FACTS)
    for _ in range(draw(st.integers(2, 8) if good_only else st.integers(1, 3))):
        f = draw(st.sampled_from(pool))
        if good_only and f.path in ("hall.ultraservers", "hall.it_envelope_w", "dt_s"):
            continue  # keep the hall tiny and the step coarse: the run must stay short
        v = draw(good_values_for(f) if good_only else values_for(f))
        if f.section == "models" and "models" not in data:
            data["models"] = [{"name": "m", "params": 1e9, "layers": 4, "kv_heads": 2, "head_dim": 64}]
        if f.section == "events" and not data.get("events"):
            data["events"] = [{"at_h": 0.1, "kind": draw(st.sampled_from(F.EVENT_KINDS))}]
        path = _path_of(f, len(data.get("services", [])), len(data.get("events", [])))
        _deep_set(data, path, v)
    if not good_only and draw(st.integers(0, 9)) == 0:
        data[draw(st.sampled_from(["colour", "hall", "x.y"]))] = {"unknown": 1}
    return Case(f"{label}", scenario=to_toml(data))


def _builtin(name: str) -> dict[str, Any]:
    text = resources.files("scenarios.builtin").joinpath(f"{name}.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


@st.composite
def builtin_case(draw: st.DrawFn) -> Case:
    """A built-in scenario with keys mutated (or, one time in four, as it is, on a short run)."""
    name = draw(st.sampled_from(builtin_names()))
    if draw(st.integers(0, 3)) == 0:
        return Case(f"builtin {name}", target=name, args=["--hours", "0.25"])
    case = draw(fact_case(base=_builtin(name), label=f"mutated {name}"))
    case.args = ["--hours", "0.25"]
    return case


WEATHER_HEADER = "hour,drybulb_c,rel_humidity"


def _weather_csv(rows: int = 8760) -> list[str]:
    return [WEATHER_HEADER] + [f"{h},{10 + 5 * math.sin(h / 24 * 2 * math.pi):.2f},0.6" for h in range(rows)]


def _hourly_csv(column: str, value: float, rows: int = 8760) -> list[str]:
    return [f"hour,{column}"] + [f"{h},{value}" for h in range(rows)]


def _epw(rows: int = 8760) -> list[str]:
    head = (
        ["LOCATION,Test,,,,,0,0,0,0"]
        + [f"HEADER{i}" for i in range(6)]
        + ["DATA PERIODS,1,1,Data,Sunday,1/1,12/31"]
    )
    body = []
    for k in range(rows):
        f = ["2023", "1", "1", str(k % 24 + 1), "60", "x", "12.0", "8.0", "70"] + ["0"] * 26
        body.append(",".join(f))
    return head + body


def _request_trace(rows: int = 50) -> list[str]:
    return ["TIMESTAMP,ContextTokens,GeneratedTokens"] + [
        f"{i * 2.0},{100 + i},{20 + i}" for i in range(rows)
    ]


def _job_trace(rows: int = 20) -> list[str]:
    return ["submit_time_s,chips,kind,duration_s"] + [
        f"{i * 60},{1 + i % 4},eval,{300 + i}" for i in range(rows)
    ]


FILE_KINDS: dict[str, tuple[str, Any, dict[str, Any]]] = {
    # kind: (file name, good content, scenario keys naming it)
    "weather_csv": ("w.csv", _weather_csv, {"site": {"weather_file": "w.csv"}}),
    "weather_epw": ("w.epw", _epw, {"site": {"weather_file": "w.epw"}}),
    "price": (
        "p.csv",
        lambda: _hourly_csv("price_usd_per_mwh", 80.0),
        {"grid": {"price": {"kind": "file", "file": "p.csv"}}},
    ),
    "carbon": (
        "c.csv",
        lambda: _hourly_csv("carbon_g_per_kwh", 300.0),
        {"grid": {"carbon": {"kind": "file", "file": "c.csv"}}},
    ),
    "request_trace": ("r.csv", _request_trace, {"services": [{**TINY["services"][0], "trace": "r.csv"}]}),
    "job_trace": ("j.csv", _job_trace, {"training": {"arrivals_per_day": 0.0, "trace": "j.csv"}}),
}
BAD_FIELDS = [
    "nan",
    "inf",
    "-inf",
    "1e400",
    str(2**63),
    str(2**64 + 7),
    "-5",
    "",
    "abc",
    "x" * 140_000,
    "1e30",
    "0",
    "999",
    "0.5",
    "2023-01-01 00:00:00",
    "\x00",
    '"unterminated',
]


@st.composite
def file_case(draw: st.DrawFn) -> Case:
    """A tiny scenario naming a site or trace file that is broken in one generated way."""
    kind = draw(st.sampled_from(sorted(FILE_KINDS)))
    name, good, keys = FILE_KINDS[kind]
    lines: list[str] = list(good())
    how = draw(
        st.sampled_from(
            [
                "field",
                "field",
                "field",
                "drop_rows",
                "extra_rows",
                "header",
                "empty",
                "binary",
                "bom",
                "special",
                "good",
                "huge_line",
            ]
        )
    )
    content: str | bytes
    if how == "field":
        i = draw(st.integers(1, len(lines) - 1))
        cells = lines[i].split(",")
        j = draw(st.integers(0, len(cells) - 1))
        cells[j] = draw(st.sampled_from(BAD_FIELDS))
        lines[i] = ",".join(cells)
        content = "\n".join(lines) + "\n"
    elif how == "drop_rows":
        content = "\n".join(lines[: draw(st.integers(0, len(lines) - 1))]) + "\n"
    elif how == "extra_rows":
        content = "\n".join(lines + lines[-draw(st.integers(1, 30)) :]) + "\n"
    elif how == "header":
        lines[0] = draw(
            st.sampled_from(["", "a,b,c", lines[0].upper(), lines[0] + "," + lines[0].split(",")[-1]])
        )
        content = "\n".join(lines) + "\n"
    elif how == "empty":
        content = ""
    elif how == "binary":
        content = bytes(draw(st.lists(st.integers(0, 255), min_size=1, max_size=200)))
    elif how == "bom":
        content = "\ufeff" + "\n".join(lines) + "\n"
    elif how == "huge_line":
        content = lines[0] + "\n" + "9" * (F.MAX_FIELD_BYTES + 10) + "\n"
    elif how == "special":
        content = draw(st.sampled_from(["DEVZERO", "FIFO", "DIR"] + (["SPARSE"] if "trace" in kind else [])))
    else:
        content = "\n".join(lines) + "\n"
    data = json.loads(json.dumps(TINY))
    for k, v in keys.items():
        data[k] = {**data.get(k, {}), **v} if isinstance(v, dict) else v
    return Case(f"file {kind} {how}", scenario=to_toml(data), files={name: content})


@st.composite
def args_case(draw: st.DrawFn) -> Case:
    """Hostile command-line arguments on the tiny scenario."""
    flag = draw(st.sampled_from(["--hours", "--days", "--seed"]))
    value = draw(
        st.sampled_from(["nan", "inf", "-inf", "-1", "0", "1e-12", "1e9", "abc", "", "0.1", str(2**64), "-0"])
    )
    args = [flag, value] + (["--hours", "0.5"] if flag == "--seed" else [])
    return Case(f"args {flag} {value}", scenario=to_toml(TINY), args=args)


@st.composite
def special_case(draw: st.DrawFn) -> Case:
    """Scenario text that is not a scenario: BOM, bad TOML, deep nesting, non-files."""
    kind = draw(st.sampled_from(["bom", "bad_toml", "deep", "devzero", "fifo", "huge", "binary", "name"]))
    if kind == "bom":
        return Case("scenario with a BOM", scenario="\ufeff" + to_toml(TINY))
    if kind == "bad_toml":
        return Case(
            "bad TOML", scenario=draw(st.sampled_from(['name = "x', "[[[", "name = 1\nname = 2", "= 1"]))
        )
    if kind == "deep":
        return Case("deep nesting", scenario="a = " + "[" * 5000 + "]" * 5000)
    if kind == "devzero":
        return Case("scenario /dev/zero", target="DEVZERO")
    if kind == "fifo":
        return Case("scenario FIFO", target="FIFO", files={"scen.toml": "FIFO"})
    if kind == "huge":
        return Case("huge scenario", scenario=to_toml(TINY) + "#" + "x" * (F.MAX_SCENARIO_BYTES + 1))
    if kind == "binary":
        return Case("binary scenario", scenario=None, target="DIR", files={"scen.toml": b"\xff\xfe\x00name"})
    data = json.loads(json.dumps(TINY))
    data["name"] = draw(st.sampled_from(["../escape", "a/b", "..", "x" * 80, "ok-name"]))
    return Case(f"name {data['name'][:20]}", scenario=to_toml(data), args=["--hours", "0.5", "--default-out"])


SECTION_KEYS = (
    "hall",
    "hardware",
    "site",
    "grid",
    "power",
    "cooling",
    "training",
    "scheduler",
    "services",
    "models",
    "failures",
    "telemetry",
    "events",
    "variants",
)
SHAPES: list[Any] = [5, "x", [], [1, 2], {}, [{}], {"a": {"b": {"c": 1}}}, True, 1.5, [[1]], [{"name": "v"}]]


@st.composite
def structure_case(draw: st.DrawFn) -> Case:
    """A scenario whose shape is wrong: a section that is a number or a list, a list of
    tables that is a table, a missing name, unknown keys deep inside, odd variants."""
    data = json.loads(
        json.dumps(draw(st.sampled_from([TINY, *(_builtin(n) for n in ("default", "trn2-vs-trn3"))])))
    )
    for _ in range(draw(st.integers(1, 3))):
        how = draw(st.sampled_from(["shape", "drop", "deep_unknown", "variant", "duplicate_service"]))
        if how == "shape":
            data[draw(st.sampled_from(SECTION_KEYS))] = draw(st.sampled_from(SHAPES))
        elif how == "drop":
            data.pop(draw(st.sampled_from(["name", *SECTION_KEYS])), None)
        elif how == "deep_unknown":
            section = draw(st.sampled_from(["hall", "site", "cooling", "training", "failures"]))
            sub = data.setdefault(section, {})
            if isinstance(sub, dict):
                sub[draw(st.sampled_from(["colour", "eval", "hbm", "pretrain"]))] = {"nope": 1}
        elif how == "variant":
            data["variants"] = draw(
                st.sampled_from(
                    [
                        [{"name": "a"}, {"name": "b", "hall": {"ultraservers": 2}}],
                        [{"name": "a", "variants": []}],
                        [{"hall": {"ultraservers": 2}}],
                        [{"name": "a", "hall": 3}],
                        [{"name": "a", "dt_s": True}],
                        [{"name": "a", "events": [{"at_h": 0.1, "kind": "fail_chip", "target": 10_000}]}],
                    ]
                )
            )
        else:
            svcs = data.get("services")
            if isinstance(svcs, list) and svcs and isinstance(svcs[0], dict):
                svcs.append(dict(svcs[0]))
    return Case("structure", scenario=to_toml(data) if isinstance(data, dict) else "")


def any_case() -> st.SearchStrategy[Case]:
    return st.one_of(
        fact_case(),
        fact_case(good_only=True, label="extremes"),
        builtin_case(),
        file_case(),
        args_case(),
        special_case(),
        structure_case(),
    )


# ---------------------------------------------------------------------- the property
@dataclass
class Outcome:
    kind: str  # "refused", "ran", "traceback", "disagree", "file left", "bad message", "run failed"
    detail: str = ""


def _listing(d: Path) -> set[str]:
    return {str(p.relative_to(d)) for p in d.rglob("*")}


def check_case(case: Case, d: Path) -> Outcome:
    """Run `twin validate` and `twin run` on one input in ``d`` (the working directory too), in
    process; classify what happened."""
    scenario = case.write(d)
    args = [a for a in case.args if a != "--default-out"]
    out = d / "out.duckdb"
    before = _listing(d)
    runner = CliRunner()
    cwd = os.getcwd()
    os.chdir(d)
    try:
        v = runner.invoke(main, ["validate", scenario, *args])
        run_args = ["run", scenario, *args, "--json"]
        if "--default-out" not in case.args:
            run_args += ["--out", str(out)]
        r = runner.invoke(main, run_args)
    finally:
        os.chdir(cwd)
    for res, what in ((v, "validate"), (r, "run")):
        if res.exception is not None and not isinstance(res.exception, SystemExit):
            return Outcome("traceback", f"{what}: {type(res.exception).__name__}: {res.exception}"[:300])
        if "Traceback" in res.stderr or res.exit_code not in (0, 2):
            return Outcome("traceback", f"{what}: exit {res.exit_code}: {res.stderr[-300:]}")
    if v.exit_code != r.exit_code:
        return Outcome(
            "disagree",
            f"validate {v.exit_code} ({v.stderr.strip()[:200]}), "
            f"run {r.exit_code} ({r.stderr.strip()[:200]})",
        )
    if v.exit_code == 2:
        for res in (v, r):
            lines = res.stderr.strip().splitlines()
            if len(lines) != 1 or not lines[0].startswith("twin: error: "):
                return Outcome("bad message", res.stderr[:300])
        left = _listing(d) - before
        if left:
            return Outcome("file left", f"{sorted(left)[:3]} after: {r.stderr.strip()[:200]}")
        return Outcome("refused", r.stderr.strip())
    try:  # --json: one line of JSON per run (per variant of a comparison scenario)
        runs = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
    except ValueError:
        return Outcome("run failed", f"not JSON lines: {r.stdout[-300:]}")
    if not runs:
        return Outcome("run failed", "no summary")
    for summary in runs:
        if summary.get("status") != "complete":
            return Outcome("run failed", str(summary.get("status")))
        pue = summary.get("pue")
        # Facility power includes the IT power: a run that stepped has a finite PUE of at least 1.
        if not isinstance(pue, int | float) or not math.isfinite(pue) or pue < 1 - 1e-9:
            return Outcome("meaningless run", f"PUE {pue!r}")
        nan = sorted(k for k, x in summary.items() if isinstance(x, float) and not math.isfinite(x))
        if nan:
            return Outcome("meaningless run", f"{', '.join(nan[:5])} not finite")
    left = _listing(d) - before
    # The run's own files: out.duckdb, out-<variant>.duckdb, or under twin-runs/ (the default).
    outside = {
        p for p in left if not (re.fullmatch(r"out(-[\w.-]+)?\.duckdb", p) or p.startswith("twin-runs"))
    }
    if outside:
        return Outcome("file left", f"written outside the output: {sorted(outside)[:3]}")
    return Outcome("ran", summary.get("file", ""))


def _assert_clean(case: Case, outcome: Outcome) -> None:
    assert outcome.kind in ("refused", "ran"), (
        case.label,
        case.scenario and case.scenario[:400],
        case.args,
        outcome,
    )


SETTINGS = settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)


@SETTINGS
@given(st.one_of(fact_case(), fact_case(good_only=True, label="extremes")))
def test_fact_table_values_are_refused_or_run_the_same_way(
    tmp_path_factory: pytest.TempPathFactory, case: Case
) -> None:
    _assert_clean(case, check_case(case, tmp_path_factory.mktemp("f")))


@pytest.mark.parametrize("name", builtin_names())
def test_every_builtin_scenario_validates_and_runs(tmp_path: Path, name: str) -> None:
    outcome = check_case(Case(f"builtin {name}", target=name, args=["--hours", "0.25"]), tmp_path)
    assert outcome.kind == "ran", outcome


@pytest.mark.parametrize("name", builtin_names())
@settings(SETTINGS, max_examples=3)
@given(data=st.data())
def test_mutated_builtin_scenarios_are_refused_or_run(
    tmp_path_factory: pytest.TempPathFactory, name: str, data: st.DataObject
) -> None:
    case = data.draw(fact_case(base=_builtin(name), label=f"mutated {name}"))
    case.args = ["--hours", "0.25"]
    _assert_clean(case, check_case(case, tmp_path_factory.mktemp("b")))


@settings(SETTINGS, max_examples=30)
@given(file_case())
def test_broken_site_and_trace_files_are_refused_cleanly(
    tmp_path_factory: pytest.TempPathFactory, case: Case
) -> None:
    _assert_clean(case, check_case(case, tmp_path_factory.mktemp("w")))


@settings(SETTINGS, max_examples=30)
@given(st.one_of(args_case(), special_case(), structure_case()))
def test_hostile_arguments_and_scenario_files_are_refused_cleanly(
    tmp_path_factory: pytest.TempPathFactory, case: Case
) -> None:
    _assert_clean(case, check_case(case, tmp_path_factory.mktemp("a")))


# ---------------------------------------------------------------------- known failures, one by one
KNOWN = [
    ("dt_s = true", {"dt_s": True}, "dt_s: expected a whole number"),
    ("mean_temp_c = nan", {"site": {"mean_temp_c": math.nan}}, "site.mean_temp_c: must be a finite number"),
    (
        "event beyond the hall",
        {"events": [{"at_h": 0.1, "kind": "fail_chip", "target": 144}]},
        "events[0].target: chip 144 is beyond the hall (chips 0..143)",
    ),
    (
        "row beyond the hall",
        {"events": [{"at_h": 0.1, "kind": "power_cap", "target": "row:3", "value": 1e5}]},
        "events[0].target: row 3 is beyond the hall",
    ),
    (
        "surge of no service",
        {"events": [{"at_h": 0.1, "kind": "inference_surge", "target": "nope"}]},
        "no service named 'nope'",
    ),
    (
        "replicas = 1e9",
        {"services": [{**TINY["services"][0], "replicas": 1e9}]},
        "replicas: expected a whole number",
    ),
    (
        "replicas = 10**9",
        {"services": [{**TINY["services"][0], "replicas": 10**9}]},
        "services[0].replicas: out of range: must lie in 0 ≤ x ≤ 100,000",
    ),
    (
        "replicas beyond the hall",
        {"services": [{**TINY["services"][0], "replicas": 200}]},
        "services[0].replicas: 200 replicas x 1 chips = 200 chips; the hall has 144",
    ),
    (
        "arrivals_per_day = 1e9",
        {"training": {"arrivals_per_day": 1e9}},
        "training.arrivals_per_day: out of range: must lie in 0 ≤ x ≤ 100,000",
    ),
    (
        "it_envelope_w = 1e12",
        {"hall": {"system": "hgx-h100", "it_envelope_w": 1e12}},
        "hall.it_envelope_w: out of range",
    ),
    (
        "a GW of H100 nodes",
        {"hall": {"system": "hgx-h100", "it_envelope_w": 1e9}},
        "hall: 119,047 systems; a hall may hold at most 20,000",
    ),
    ("name with ../", {"name": "../../escape"}, "name: not a safe name"),
    (
        "chips beyond the limit",
        {"hall": {"ultraservers": 10_000}},
        "hall: 10,000 x 144 = 1,440,000 chips; a hall may hold at most 1,000,000 chips",
    ),
]


@pytest.mark.parametrize(("label", "change", "needle"), KNOWN, ids=[k[0] for k in KNOWN])
def test_known_bad_inputs_are_refused_by_both_commands(
    tmp_path: Path, label: str, change: dict[str, Any], needle: str
) -> None:
    data = {**json.loads(json.dumps(TINY)), **change}
    if "hall" in change:
        data["hall"] = {**TINY["hall"], **change["hall"]}
        if "it_envelope_w" in change["hall"]:
            del data["hall"]["ultraservers"]
    case = Case(label, scenario=to_toml(data))
    outcome = check_case(case, tmp_path)
    assert outcome.kind == "refused" and needle in outcome.detail, outcome
    assert list(tmp_path.iterdir()) == [tmp_path / "s.toml"]


def test_run_length_times_hall_size_is_limited_before_allocating(tmp_path: Path) -> None:
    data = {**TINY, "dt_s": 1, "hall": {"system": "hgx-h100", "ultraservers": 20_000}}
    outcome = check_case(Case("long and big", scenario=to_toml(data), args=["--days", "1"]), tmp_path)
    assert outcome.kind == "refused", outcome
    assert (
        "86,400 steps x 20,000 systems = 1,728,000,000 system-steps; a run may have at most 1,000,000,000"
        in outcome.detail
    )


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0", "1e9"])
def test_hours_that_are_not_a_run_length_are_refused(tmp_path: Path, value: str) -> None:
    outcome = check_case(Case("hours", scenario=to_toml(TINY), args=["--hours", value]), tmp_path)
    assert outcome.kind == "refused" and "--hours: " in outcome.detail, outcome


@pytest.mark.parametrize(
    ("kind", "content", "needle"),
    [
        ("weather_csv", "DEVZERO", "not a regular file"),
        ("weather_epw", "FIFO", "not a regular file"),
        ("price", "DIR", "is a directory"),
        ("request_trace", "SPARSE", "a trace file may be at most 268,435,456 bytes (256 MiB)"),
        ("job_trace", "DEVZERO", "not a regular file"),
    ],
)
def test_non_files_and_huge_files_are_refused_before_reading(
    tmp_path: Path, kind: str, content: str, needle: str
) -> None:
    name, _, keys = FILE_KINDS[kind]
    data = json.loads(json.dumps(TINY))
    for k, v in keys.items():
        data[k] = {**data.get(k, {}), **v} if isinstance(v, dict) else v
    outcome = check_case(Case(kind, scenario=to_toml(data), files={name: content}), tmp_path)
    assert outcome.kind == "refused" and needle in outcome.detail, outcome


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        (f"0,{2**63},5", f"ContextTokens: more than 10,000,000 (got '{2**63}')"),
        (f"0,5,{2**64}", "GeneratedTokens: more than 10,000,000"),
        ("0,5," + "7" * 140_000, "field larger than field limit"),
        ("1e300,5,5", "the requests span"),
    ],
)
def test_trace_values_beyond_their_limits_are_refused(tmp_path: Path, line: str, needle: str) -> None:
    lines = _request_trace()
    lines[3] = line
    data = {**json.loads(json.dumps(TINY)), "services": [{**TINY["services"][0], "trace": "r.csv"}]}
    outcome = check_case(
        Case("trace", scenario=to_toml(data), files={"r.csv": "\n".join(lines) + "\n"}), tmp_path
    )
    assert outcome.kind == "refused" and needle in outcome.detail, outcome


def test_a_scenario_name_never_writes_outside_twin_runs(tmp_path: Path) -> None:
    ok = Case(
        "safe name",
        scenario=to_toml({**TINY, "name": "safe-name"}),
        args=["--hours", "0.25", "--default-out"],
    )
    outcome = check_case(ok, tmp_path)
    assert outcome.kind == "ran", outcome
    assert [p.parent.name for p in tmp_path.rglob("*.duckdb")] == ["twin-runs"]


# ---------------------------------------------------------------------- in a subprocess: no hang, no OOM
_LIMIT_AS = 3 << 30  # 3 GiB of address space: a runaway read or allocation dies instead of swapping


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (_LIMIT_AS, _LIMIT_AS))


def run_twin(args: list[str], cwd: Path, timeout_s: float = 120.0) -> subprocess.CompletedProcess[str]:
    """`twin ARGS` in a subprocess with an address-space limit; a hang fails the test by timeout."""
    code = "import sys; from tui.cli import main; sys.argv = ['twin', *sys.argv[1:]]; main()"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        preexec_fn=_limited,
        env=env,
    )


SUBPROCESS_CASES = [
    ("weather /dev/zero", {"site": {"weather_file": "/dev/zero"}}, "not a regular file"),
    ("arrivals 1e9", {"training": {"arrivals_per_day": 1e9}}, "out of range"),
    ("replicas 10**9", {"services": [{**TINY["services"][0], "replicas": 10**9}]}, "out of range"),
    ("envelope 1e12", {"hall": {"system": "hgx-h100", "it_envelope_w": 1e12}}, "out of range"),
    ("envelope 1e9", {"hall": {"system": "hgx-h100", "it_envelope_w": 1e9}}, "at most 20,000"),
]


@pytest.mark.parametrize(
    ("label", "change", "needle"), SUBPROCESS_CASES, ids=[c[0] for c in SUBPROCESS_CASES]
)
def test_inputs_that_used_to_hang_or_exhaust_memory(
    tmp_path: Path, label: str, change: dict[str, Any], needle: str
) -> None:
    data = {**json.loads(json.dumps(TINY)), **change}
    if "hall" in change:
        data["hall"] = dict(change["hall"])
    (tmp_path / "s.toml").write_text(to_toml(data), encoding="utf-8")
    for args in (["validate", "s.toml"], ["run", "s.toml", "--hours", "1", "--out", "o.duckdb"]):
        p = run_twin(args, tmp_path)
        assert p.returncode == 2, (label, p.stderr[-500:])
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and needle in lines[0] and "Traceback" not in p.stderr, p.stderr[-500:]
    assert sorted(x.name for x in tmp_path.iterdir()) == ["s.toml"]


def test_a_fifo_scenario_and_hours_nan_in_a_subprocess(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "s.toml")
    p = run_twin(["validate", "s.toml"], tmp_path, timeout_s=60)
    assert p.returncode == 2 and "not a regular file" in p.stderr
    p = run_twin(["run", "default", "--hours", "nan", "--out", "o.duckdb"], tmp_path, timeout_s=60)
    assert p.returncode == 2 and "--hours: must be a positive finite number" in p.stderr
    assert not (tmp_path / "o.duckdb").exists()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["run", "--seed", "nan"], "Invalid value for '--seed': 'nan' is not a valid integer"),
        (["validate"], "Missing argument 'SCENARIO'"),
        (["run", "default", "--hours", "1", "--days", "1"], "give --hours or --days, not both"),
        (["run", "default", "--seed", "-1", "--hours", "1"], "--seed: must lie in 0 ≤ seed < 2^63 (got -1)"),
        (["validate", "a\x00b"], "cannot contain a NUL character"),
    ],
)
def test_bad_arguments_get_one_line_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], needle: str
) -> None:
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and needle in r.stderr, r.stderr
    assert r.stderr.startswith("twin: error: ") and list(tmp_path.iterdir()) == []
