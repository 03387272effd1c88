"""The scenario fact table: one definition of every key, read by validation, the schema and the
key reference (docs/scenario-keys.md); physical bounds honoured by the generated types; the model's defaults kept."""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import json
import math
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from scenarios import facts as F
from scenarios.spec import ScenarioError, annotation, builtin_names, load, load_scenario_dict, parse
from tui.cli import main
from twin.spec import params, tco

ROOT = Path(__file__).resolve().parent.parent

# Model fields that are not scenario keys: arrays filled from files, nested parameter objects
# and the run-level fields set from other keys.
NOT_KEYS = {
    "SiteParams": {
        "price_tou",
        "weather_drybulb_c",
        "weather_rel_humidity",
        "weather_wetbulb_c",
        "price_hourly_usd_per_mwh",
        "carbon_hourly_g_per_kwh",
    },
    "TrainingParams": {*params.JOB_CLASSES},
    "FailureParams": {*params.FAILURE_CAUSES},
}
SECTION_OF = {
    params.PowerChainParams: "power",
    params.CoolingParams: "cooling",
    tco.TcoParams: "tco",
    params.SiteParams: "site",
    params.TrainingParams: "training",
    params.JobClassParams: "training.<class>",
    params.SchedulerParams: "scheduler",
    params.ServiceParams: "services",
    params.FailureParams: "failures",
    params.FailureCause: "failures.<cause>",
}


@pytest.mark.parametrize("dc", list(SECTION_OF), ids=lambda d: d.__name__)
def test_every_model_parameter_is_a_scenario_key_and_back(dc: type) -> None:
    model = {f.name for f in dataclasses.fields(dc)} - NOT_KEYS.get(dc.__name__, set())
    table = {f.key for f in F.facts(SECTION_OF[dc])}
    # Keys that are not model parameters: file paths, presets, a shared precision and the ways to
    # state arrivals_per_day that grow with the fleet.
    from scenarios.sections import SCALED_ARRIVAL_KEYS

    extra = {"site": {"climate", "weather_file"}, "training": {"precision", *SCALED_ARRIVAL_KEYS}}.get(
        SECTION_OF[dc], set()
    )
    assert table - extra == model


def test_paths_are_unique_and_every_fact_is_described() -> None:
    paths = [f.path for f in F.FACTS]
    assert len(paths) == len(set(paths))
    for f in F.FACTS:
        assert f.description, f.path
        assert f.type in (
            "int",
            "float",
            "bool",
            "str",
            "name",
            "path",
            "enum",
            "datetime",
            "list[int]",
            "list[float]",
            "list[str]",
            "table[float]",
            "target",
        ), f.path
        if f.type in ("int", "float"):
            assert f.lo is not None and f.hi is not None, f"{f.path}: a number needs both bounds"
        if f.type == "enum":
            assert f.choices, f.path


def test_no_default_lies_outside_its_own_bounds() -> None:
    for f in F.FACTS:
        owners: list[str | None] = [None]
        if f.section == "training.<class>":
            owners = list(params.JOB_CLASSES)
        elif f.section == "failures.<cause>":
            owners = list(params.FAILURE_CAUSES)
        for o in owners:
            d = F.default(f, o)
            if d in (F.NONE, F.REQUIRED, None):
                continue
            TypeAdapter(annotation(f)).validate_python(d)


def test_a_bare_scenario_gets_the_model_defaults() -> None:
    """The defaults come from twin.spec.params, not from a second copy."""
    p = parse('name = "bare"', "bare.toml").to_params()
    assert p.power == params.PowerChainParams()
    assert p.cooling == params.CoolingParams()
    assert p.scheduler == params.SchedulerParams()
    assert p.failures == params.FailureParams()
    assert p.training == params.TrainingParams()
    assert p.services == ()  # no service runs that the scenario does not declare
    one = parse('name = "bare"\n[[services]]\n', "bare.toml").to_params()
    assert one.services == (params.ServiceParams(),)
    assert p.dt_s == params.FactoryParams.dt_s and p.seed == 0
    assert p.chip_sample_interval_s == params.FactoryParams.chip_sample_interval_s


# ---------------------------------------------------------------------- generated types honour the table
NUMERIC = [f for f in F.FACTS if f.type in ("int", "float")]


@functools.cache
def _adapter(path: str) -> TypeAdapter[Any]:
    f = F.fact(path)
    assert f is not None
    return TypeAdapter(annotation(f))


def _accepted(f: F.Fact, v: Any) -> bool:
    """Whether the generated type of ``f`` takes ``v``."""
    try:
        _adapter(f.path).validate_python(v)
    except ValidationError:
        return False
    return True


def _within(f: F.Fact, v: Any) -> bool:
    """What the table says, worked out here: a whole number for an int key (a float is not one,
    even 3.0), a finite number for a float key (a TOML integer is a fine float), never a boolean,
    inside the bounds with their open or closed ends."""
    assert f.lo is not None and f.hi is not None
    if isinstance(v, bool) or not isinstance(v, int | float):
        return False
    if f.type == "int" and not isinstance(v, int):
        return False
    if f.type == "float":
        v = float(v)
        if not math.isfinite(v):
            return False
    above = v > f.lo if f.lo_open else v >= f.lo
    below = v < f.hi if f.hi_open else v <= f.hi
    return above and below


def _scenario_with(f: F.Fact, value: Any) -> tuple[dict[str, Any], str]:
    """A scenario that sets only ``f`` to ``value`` (with what its table needs besides), and the
    path an error about it names."""
    data: dict[str, Any] = {"name": "x"}
    section = f.section.replace("<class>", "eval").replace("<cause>", "hbm")
    item: dict[str, Any] = {f.key: value}
    if section == "events":
        item = {"at_h": 1.0, "kind": "chiller_trip", **item}
    if section == "models":
        item = {"name": "m", "params": 1e9, "layers": 2, "kv_heads": 1, "head_dim": 64, **item}
    if section == "hall.rows":
        data["hall"] = {"rows": [{"system": "trn3-gen2", "count": 1, **item}]}
        return data, f"hall.rows[0].{f.key}"
    if section in ("services", "models", "events"):
        data[section] = [item]
        return data, f"{section}[0].{f.key}"
    node: Any = data
    for part in [p for p in section.split(".") if p]:
        node = node.setdefault(part, {})
    node.update(item)
    return data, f"{section}.{f.key}" if section else f.key


def _refusal(f: F.Fact, value: Any) -> str:
    """The one-line message a scenario setting ``f`` to ``value`` is refused with; it names the key."""
    data, where = _scenario_with(f, value)
    with pytest.raises(ScenarioError) as e:
        load_scenario_dict(data, "s.toml")
    msg = str(e.value)
    assert msg.startswith(f"s.toml: {where}: ") and "\n" not in msg, (f.path, value, msg)
    return msg


@functools.cache
def _values(f: F.Fact) -> st.SearchStrategy[Any]:
    """Values for ``f``: inside, at and just beyond its bounds, far outside, huge, NaN and
    infinities, booleans, the wrong kind of number and things that are no number at all."""
    assert f.lo is not None and f.hi is not None
    lo, hi = f.lo, f.hi
    edges: list[Any] = [lo, hi, math.nextafter(lo, -math.inf), math.nextafter(hi, math.inf)]
    if f.type == "int":
        lo_i, hi_i = int(lo), int(hi)
        edges = [lo_i, hi_i, lo_i - 1, hi_i + 1, lo_i + 1, hi_i - 1]
        pad = max(10, (hi_i - lo_i) // 4)
        numbers = st.integers(lo_i - pad, hi_i + pad) | st.floats(float(lo), float(hi))  # refused, even 3.0
    else:
        pad = max(1.0, (hi - lo) / 4)
        numbers = st.floats(lo - pad, hi + pad) | st.integers(int(lo) - 2, min(int(hi), 2**53) + 2)
    specials = st.sampled_from(
        [math.nan, math.inf, -math.inf, True, False, 1e308, -1e308, 2**63, 2**64, -(2**64), 10**30]
    )
    other = st.sampled_from([None, "1", [1], {"x": 1}])
    return st.one_of(st.sampled_from(edges), numbers, specials, other)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_numeric_key_takes_exactly_the_values_its_bounds_allow(data: st.DataObject) -> None:
    """Any numeric key, any value: the generated type takes it exactly when the table's type and
    bounds do, and a scenario refuses every other value with a message naming the key."""
    f = data.draw(st.sampled_from(NUMERIC), label="key")
    v = data.draw(_values(f), label="value")
    ok = _within(f, v)
    assert _accepted(f, v) is ok
    if not ok and v is not None:  # TOML has no null: None in a scenario dict means "not set"
        _refusal(f, v)


def test_every_numeric_key_at_its_edges_and_against_what_is_no_number() -> None:
    """Each key once, deterministically (the property above draws keys at random): a closed end
    is taken and an open one refused, the nearest values beyond either end are refused by a
    scenario that says which key and which range, the middle is taken, and booleans, text, null,
    lists, NaN and infinities never are (nor a float for an int key, or 2^64)."""
    for f in NUMERIC:
        assert f.lo is not None and f.hi is not None
        if f.type == "int":
            lo, hi = int(f.lo), int(f.hi)
            below, above, mid = lo - 1, hi + 1, (lo + hi) // 2
        else:
            lo, hi = f.lo, f.hi
            below, above, mid = math.nextafter(lo, -math.inf), math.nextafter(hi, math.inf), (lo + hi) / 2
        assert _accepted(f, lo) is not f.lo_open, f.path
        assert _accepted(f, hi) is not f.hi_open, f.path
        assert _accepted(f, mid), f.path
        for v in (below, above):
            assert not _accepted(f, v), (f.path, v)
            assert f"out of range: must lie in {f.range_text()}" in _refusal(f, v)
        for bad in (True, False, str(mid), None, [mid], math.nan, math.inf, -math.inf):
            assert not _accepted(f, bad), (f.path, bad)
        if f.type == "int":
            assert not _accepted(f, float(mid)) and not _accepted(f, 2**64), f.path
        elif mid == int(mid):
            assert _accepted(f, int(mid)), f.path  # a TOML integer is a fine float


@pytest.mark.parametrize(
    ("path", "value", "ok"),
    [
        ("services.peak_hour", 0, True),  # 0 ≤ x < 24
        ("services.peak_hour", 23.999, True),
        ("services.peak_hour", 24, False),
        ("cooling.carnot_fraction", 0.0, False),  # 0 < x ≤ 1
        ("cooling.carnot_fraction", 1, True),  # a TOML integer is a fine float
        ("seed", 2**63 - 1, True),
        ("seed", 2**63, False),
        ("hall.ultraservers", 2**65, False),
        ("hall.ultraservers", 16.0, False),  # a whole number, not a float
        ("dt_s", True, False),
        ("duration_h", 1e-9, False),
        ("power.facility_cap_w", math.inf, False),
        ("site.mean_temp_c", math.nan, False),
    ],
)
def test_named_numeric_cases(path: str, value: Any, ok: bool) -> None:
    f = F.fact(path)
    assert f is not None and f.type in ("int", "float")
    assert _accepted(f, value) is ok
    if not ok:
        _refusal(f, value)


@pytest.mark.parametrize("f", [f for f in F.FACTS if f.type == "enum"], ids=lambda f: f.path)
def test_enumerations_are_closed(f: F.Fact) -> None:
    ta = TypeAdapter(annotation(f))
    for c in f.choices:
        assert ta.validate_python(c) == c
    for bad in ("volcano", f.choices[0].upper() + "x", 1, True, None):
        with pytest.raises(ValidationError):
            ta.validate_python(bad)


def test_the_ranges_people_read() -> None:
    assert F.fact("services.peak_hour").range_text() == "0 ≤ x < 24"  # type: ignore[union-attr]
    assert F.fact("cooling.carnot_fraction").range_text() == "0 < x ≤ 1"  # type: ignore[union-attr]
    assert F.fact("training.eval.share").range_text() == "0 ≤ x ≤ 1"  # type: ignore[union-attr]
    assert F.fact("failures.hbm.blast").choices == ("chip", "server", "job")  # type: ignore[union-attr]
    assert F.fact("hall.nope") is None


# ---------------------------------------------------------------------- whole scenarios
def _refused(text: str, needle: str) -> str:
    with pytest.raises(ScenarioError) as e:
        parse(text, "s.toml")
    msg = str(e.value)
    assert msg.startswith("s.toml: ") and needle in msg, msg
    assert "\n" not in msg
    return msg


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        # Bounds from the table, not from parts of key names (issue 9).
        (
            'name = "x"\n[[services]]\npeak_hour = 30',
            "services[0].peak_hour: out of range: must lie in 0 ≤ x < 24 [h]",
        ),
        (
            'name = "x"\n[training]\npeak_hour = 30',
            "training.peak_hour: out of range: must lie in 0 ≤ x < 24",
        ),
        (
            'name = "x"\n[cooling]\ncarnot_fraction = 0',
            "cooling.carnot_fraction: out of range: must lie in 0 < x ≤ 1",
        ),
        (
            'name = "x"\n[cooling]\nplant = "volcano"',
            "cooling.plant: unknown plant 'volcano'; known: tower, dry",
        ),
        ('name = "x"\n[cooling]\ncop_min = 13', "cooling.cop_min (13) must be at most cooling.cop_max (12)"),
        ('name = "x"\n[cooling]\nchiller_redundancy = 3', "must be below cooling.chiller_units"),
        ('name = "x"\n[cooling]\ncycles_of_concentration = 1', "cycles_of_concentration: out of range"),
        ('name = "x"\nduration_h = 1e-9', "duration_h: out of range: must lie in 0.001 ≤ x ≤ 87,600 [h]"),
        # Booleans are not numbers; NaN and infinity are refused (issue 8).
        ('name = "x"\ndt_s = true', "dt_s: expected a whole number (true/false is not a number) (got True)"),
        ('name = "x"\n[site]\nmean_temp_c = nan', "site.mean_temp_c: must be a finite number"),
        ('name = "x"\n[power]\nfacility_cap_w = inf', "power.facility_cap_w: must be a finite number"),
        ('name = "x"\n[[services]]\nreplicas = 16.0', "services[0].replicas: expected a whole number"),
        ('name = "x"\n[hall]\nultraservers = 36893488147419103232', "hall.ultraservers: out of range"),
        ('name = "x"\n[training]\nsize_chips = [true]\nsize_weights = [1.0]', "expected a whole number"),
        ('name = "x"\n[site]\nmean_temp_c = 50\nseasonal_amplitude_k = 40', "synthetic dry-bulb would reach"),
        # Names are safe file stems.
        ('name = "../../etc/evil"', "name: not a safe name '../../etc/evil'"),
        ('name = "a/b"', "name: not a safe name"),
        ('name = ".hidden"', "name: not a safe name"),
        ('name = "x"\n[[variants]]\nname = "../up"', "variants[0].name: not a safe name"),
        (
            'name = "x"\n[[variants]]\nname = "a"\n[[variants]]\nname = "a"',
            "variants[1].name: 'a' is used twice",
        ),
        # start: an ISO 8601 date-time with a zone.
        ('name = "x"\nstart = 2026-01-05T00:00:00', "start: 2026-01-05T00:00:00 has no time zone"),
        ('name = "x"\nstart = 2026-01-05', "start: expected an ISO 8601 date-time with a zone"),
        ('name = "x"\nstart = "next monday"', "start: not an ISO 8601 date-time with a zone"),
        ('name = "x"\nstart = 1', "start: expected an ISO 8601 date-time"),
        # Unknown keys name themselves, one line even when they hold a newline.
        ('name = "x"\n"bad\\nkey" = 1', "'bad\\nkey': unknown key"),
        ('name = "x"\n[hall]\nsystem = "tpu9"', "hall.system: unknown system 'tpu9'"),
        ('name = "x"\nhall = 5', "hall: expected a table (got 5)"),
        ('name = "x"\nservices = 5', "services: expected an array (got 5)"),
    ],
)
def test_bad_values_are_refused_with_the_key_and_the_rule(text: str, needle: str) -> None:
    _refused(text, needle)


def test_inf_is_refused_for_every_float_key() -> None:
    """Issue 8 counted 36 keys that passed `inf`; now every float key of every section refuses it."""
    placed = 0
    for f in F.FACTS:
        if f.type != "float":
            continue
        assert "must be a finite number" in _refusal(f, math.inf)
        placed += 1
    assert placed >= 100


def test_a_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    f = tmp_path / "bom.toml"
    f.write_bytes(b'\xef\xbb\xbfname = "bom"\nduration_h = 1\n')
    spec, _, _ = load(str(f))
    assert spec.name == "bom" and spec.duration_h == 1


def test_start_is_a_tz_aware_monday_by_default() -> None:
    s = parse('name = "x"', "s.toml")
    # the first day of the time-of-use week, and the default weather day
    assert s.start.timetuple().tm_yday == params.SiteParams.start_day_of_year
    assert s.start.hour == 0 and s.start.weekday() == 0 and s.start.utcoffset() == dt.timedelta(0)
    s = parse('name = "x"\nstart = 2027-03-01T08:00:00+01:00', "s.toml")
    assert s.start.utcoffset() == dt.timedelta(hours=1) and s.start.hour == 8
    s = parse('name = "x"\nstart = "2027-03-01T07:00:00Z"', "s.toml")
    assert s.start == dt.datetime(2027, 3, 1, 7, tzinfo=dt.UTC)


def test_load_scenario_dict_validates_a_raw_dict_and_leaves_it_alone() -> None:
    data = tomllib.loads(
        'name = "x"\n[hall]\nultraservers = 2\n[[variants]]\nname = "y"\nhall = { ultraservers = 3 }'
    )
    before = json.dumps(data, sort_keys=True)
    s = load_scenario_dict(data, "override.toml")
    assert [v.hall.ultraservers for v in s.variants] == [3] and s.hall.ultraservers == 2
    assert json.dumps(data, sort_keys=True) == before
    data["hall"]["ultraservers"] = 0
    with pytest.raises(ScenarioError, match=r"^override.toml: hall.ultraservers: out of range"):
        load_scenario_dict(data, "override.toml")


# ---------------------------------------------------------------------- schema and README
def _schema() -> dict[str, Any]:
    r = CliRunner().invoke(main, ["schema"], catch_exceptions=False)
    assert r.exit_code == 0
    out: dict[str, Any] = json.loads(r.stdout)
    return out


def _jsonable(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_jsonable(x) for x in v]
    if isinstance(v, dt.datetime):
        return v.isoformat()
    return v


def test_the_schema_accepts_every_builtin_scenario_and_refuses_bad_values() -> None:
    schema = _schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    v = jsonschema.Draft202012Validator(schema)
    for name in builtin_names():
        text = resources.files("scenarios.builtin").joinpath(f"{name}.toml").read_text(encoding="utf-8")
        errors = list(v.iter_errors(_jsonable(tomllib.loads(text))))
        assert not errors, (name, errors[0].message)
    for bad in (
        {"name": "x", "dt_s": True},
        {"name": "x", "cooling": {"plant": "volcano"}},
        {"name": "x", "services": [{"peak_hour": 30}]},
        {"name": "../x"},
        {"name": "x", "colour": 1},
        {"name": "x", "cooling": {"carnot_fraction": 0}},
    ):
        assert list(v.iter_errors(bad)), bad
    # Every key of the table is in the schema, with its unit and default.
    cooling = schema["properties"]["cooling"]["properties"]
    assert set(cooling) == {f.key for f in F.facts("cooling")}
    assert cooling["supply_setpoint_c"]["default"] == params.CoolingParams.supply_setpoint_c
    assert "[°C]" in cooling["supply_setpoint_c"]["description"]
    assert (
        dt.datetime.fromisoformat(schema["properties"]["start"]["default"])
        == parse('name = "x"', "s.toml").start
    )


def test_the_key_reference_holds_the_generated_tables() -> None:
    ref = (ROOT / "docs" / "scenario-keys.md").read_text(encoding="utf-8")
    assert F.readme_with_tables(ref) == ref, (
        "docs/scenario-keys.md key tables are stale: python bench/docs.py --only scenario-keys"
    )
    for f in F.FACTS:
        assert f"| `{f.key}` |" in ref, f.path


@pytest.mark.parametrize(("system", "n"), [("trn3-gen2", 16), ("hgx-h100", 20_000), ("trn3-gen2", 6_000)])
def test_the_longest_run_is_the_limit_of_steps_times_systems(system: str, n: int) -> None:
    """A live session asks for the longest run the hall may have; one step more is refused."""
    from scenarios.spec import prepare

    s = parse(f'name = "x"\ndt_s = 60\n[hall]\nsystem = "{system}"\nultraservers = {n}', "s.toml")
    longest = s.longest_run_s()
    assert longest <= F.MAX_RUN_H * 3600
    prepare(s, duration_s=longest)
    if longest < F.MAX_RUN_H * 3600:
        assert (longest // 60) * n <= F.MAX_US_STEPS < (longest // 60 + 1) * n
        with pytest.raises(ScenarioError, match="system-steps; a run may have at most 1,000,000,000"):
            prepare(s, duration_s=longest + 60)
