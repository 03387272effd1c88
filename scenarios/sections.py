"""Scenario section models, generated from the scenario fact table (``scenarios.facts``).

Each section's fields (types, bounds, defaults, descriptions) come from the table; the classes
here add only the rules that tie a section's keys together (cop_min <= cop_max, lengths that
match, a climate preset, price kinds, one way to size the hall). ``scenarios.spec`` assembles them
into the ``Scenario`` and checks it against the hall. No file is read here.
"""

from __future__ import annotations

import datetime as _dt
import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    create_model,
    model_validator,
)

from scenarios import facts as F
from scenarios.facts import CLIMATES, Fact
from twin.compose.floorplan import MAX_SYSTEMS
from twin.spec import catalog, params
from twin.spec.models import DENSE_MFU, MODELS, MOE_MFU, ModelSpec
from twin.work.workload import TOKEN_PROFILES

STRICT = ConfigDict(extra="forbid", frozen=True)


# ---------------------------------------------------------------------- fields from the table
_NAME_RE = re.compile(F.NAME_PATTERN)


def safe_name(v: str) -> str:
    if not _NAME_RE.match(v):
        raise ValueError(
            f"not a safe name {v[:80]!r}: use 1-{F.MAX_NAME_CHARS} letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return v


def _start(v: Any) -> Any:
    """ISO 8601 date-time with a zone: a TOML offset date-time or a string."""
    if isinstance(v, str):
        if len(v) > 64:
            raise ValueError("not an ISO 8601 date-time")
        try:
            v = _dt.datetime.fromisoformat(v)
        except ValueError:
            raise ValueError(
                f"not an ISO 8601 date-time with a zone (e.g. 2026-01-05T00:00:00Z): {v!r}"
            ) from None
    if not isinstance(v, _dt.datetime):
        raise ValueError("expected an ISO 8601 date-time with a zone, e.g. 2026-01-05T00:00:00Z")
    if v.tzinfo is None or v.utcoffset() is None:
        raise ValueError(f"{v.isoformat()} has no time zone; add Z or an offset such as +01:00")
    if not 1970 <= v.year <= 2200:
        raise ValueError(f"year {v.year} is outside 1970-2200")
    return v


def _bounds(f: Fact) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if f.lo is not None:
        out["gt" if f.lo_open else "ge"] = f.lo
    if f.hi is not None:
        out["lt" if f.hi_open else "le"] = f.hi
    return out


def _number_type(f: Fact, typ: str) -> Any:
    if typ == "int":
        return Annotated[int, Field(strict=True, **_bounds(f))]
    return Annotated[float, Field(strict=True, allow_inf_nan=False, **_bounds(f))]


def annotation(f: Fact) -> Any:
    """The pydantic type of a fact: strict (a boolean is not a number, a number not a string),
    finite, inside its bounds."""
    t = f.type
    if t in ("int", "float"):
        return _number_type(f, t)
    if t == "bool":
        return StrictBool
    if t == "name":
        return Annotated[str, Field(strict=True, max_length=F.MAX_NAME_CHARS), AfterValidator(safe_name)]
    if t in ("str", "path"):
        return Annotated[
            str, Field(strict=True, min_length=1 if t == "path" else 0, max_length=F.MAX_TEXT_CHARS)
        ]
    if t == "enum":
        return Literal[f.choices]
    if t == "datetime":
        return Annotated[_dt.datetime, BeforeValidator(_start)]
    if t.startswith("list["):
        inner = t[5:-1]
        item = (
            Annotated[str, Field(strict=True, min_length=1, max_length=F.MAX_NAME_CHARS)]
            if inner == "str"
            else _number_type(f, inner)
        )
        return Annotated[tuple[item, ...], Field(min_length=1, max_length=F.MAX_LIST_ITEMS)]  # type: ignore[valid-type]
    if t == "table[float]":
        return Annotated[dict[str, _number_type(f, "float")], Field(max_length=len(f.choices))]  # type: ignore[misc]
    if t == "target":
        return (
            Annotated[int, Field(strict=True, ge=0, le=F.MAX_CHIPS)]
            | Annotated[str, Field(strict=True, max_length=F.MAX_NAME_CHARS)]
        )
    raise TypeError(f"{f.path}: unknown fact type {t}")


def fields_of(section: str, owner: str | None = None, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """Pydantic field definitions of a table section (``owner``: the job class or failure cause
    whose defaults apply)."""
    out: dict[str, Any] = {}
    for f in F.facts(section):
        if f.key in skip:
            continue
        ann = annotation(f)
        d = f.default if f.default is F.REQUIRED else F.default(f, owner)
        if d is F.REQUIRED:
            out[f.key] = (ann, Field(..., description=f.description))
        elif d is F.NONE or d is None:
            out[f.key] = (ann | None, Field(None, description=f.description))
        else:
            out[f.key] = (ann, Field(d, description=f.description))
    return out


def _model(
    name: str,
    section: str,
    base: type[BaseModel],
    owner: str | None = None,
    skip: tuple[str, ...] = (),
    **extra: Any,
) -> Any:
    return create_model(name, __base__=base, **fields_of(section, owner, skip), **extra)


class Strict(BaseModel):
    model_config = STRICT


# ---------------------------------------------------------------------- power and cooling
PowerSection: Any = _model("PowerSection", "power", Strict)


class _CoolingChecks(Strict):
    @model_validator(mode="after")
    def _ordered(self) -> Any:
        s: Any = self
        pairs = (
            ("cop_min", "cop_max", "<="),
            ("throttle_temp_c", "throttle_full_c", "<"),
            ("loop_restart_c", "loop_trip_c", "<"),
            ("air_restart_c", "air_trip_c", "<"),
            ("economizer_redundancy", "economizer_units", "<"),
            ("chiller_redundancy", "chiller_units", "<"),
        )
        for a, b, op in pairs:
            va, vb = getattr(s, a), getattr(s, b)
            if (va > vb) if op == "<=" else (va >= vb):
                word = "at most" if op == "<=" else "below"
                raise ValueError(f"cooling.{a} ({va:g}) must be {word} cooling.{b} ({vb:g})")
        return s


CoolingSection: Any = _model("CoolingSection", "cooling", _CoolingChecks)
# [tco]: prices and lives of capital and fixed operating cost (twin.spec.tco).
TcoSection: Any = _model("TcoSection", "tco", Strict)


# ---------------------------------------------------------------------- batch work
class _JobClassChecks(Strict):
    @model_validator(mode="after")
    def _shapes(self) -> Any:
        s: Any = self
        if len(s.size_chips) != len(s.size_weights):
            raise ValueError("size_chips and size_weights must have the same length")
        if len(s.models) != len(s.model_weights):
            raise ValueError("models and model_weights must have the same length")
        for name in ("size_weights", "model_weights"):
            if sum(getattr(s, name)) <= 0:
                raise ValueError(f"{name}: weights must have a positive sum")
        if s.duration_median_h > s.duration_max_h:
            raise ValueError(
                f"duration_median_h ({s.duration_median_h:g} h) exceeds duration_max_h ({s.duration_max_h:g} h)"
            )
        return s


_CLASS_MODELS: dict[str, Any] = {
    kind: _model(f"JobClass_{kind}", "training.<class>", _JobClassChecks, owner=kind)
    for kind in params.JOB_CLASSES
}
PretrainSection = _CLASS_MODELS["pretrain"]
FinetuneSection = _CLASS_MODELS["finetune"]
EvalSection = _CLASS_MODELS["eval"]
BatchInferenceSection = _CLASS_MODELS["batch_inference"]
_CLASS_KEYS = {f.key for f in F.facts("training.<class>")}


class _TrainingChecks(Strict):
    @model_validator(mode="before")
    @classmethod
    def _single_class(cls, data: Any) -> Any:
        """Shorthand: class keys directly under [training] (size_chips, models, ...) describe one
        class of pre-training jobs; the other classes are off unless their tables are given."""
        if not isinstance(data, dict):
            return data
        keys = _CLASS_KEYS - {"share", "precision"}
        short = {k: v for k, v in data.items() if k in keys}
        if not short:
            return data
        out = {k: v for k, v in data.items() if k not in keys}
        pre = out.get("pretrain", {})
        if isinstance(pre, dict):
            clash = sorted(set(pre) & set(short))
            if clash:
                raise ValueError(
                    f"{clash[0]} is given both under [training] and [training.pretrain]; keep one"
                )
            out["pretrain"] = {**short, **pre}
        for kind in ("finetune", "eval", "batch_inference"):
            other = out.get(kind, {})
            if isinstance(other, dict) and "share" not in other:
                out[kind] = {**other, "share": 0.0}
        return out

    @model_validator(mode="after")
    def _some_share(self) -> Any:
        s: Any = self
        given = [
            k
            for k in ARRIVAL_KEYS
            if k in s.model_fields_set and (k == "arrivals_per_day" or getattr(s, k) is not None)
        ]
        if len(given) > 1:
            raise ValueError(
                f"give one of {', '.join(ARRIVAL_KEYS)}, not {' and '.join(given)}"
                f" (`--set training.{given[0]}=` unsets the scenario's)"
            )
        if s.arrivals_per_day > 0 and sum(getattr(s, k).share for k in params.JOB_CLASSES) <= 0:
            raise ValueError("training: every class has share 0 but arrivals_per_day is positive")
        return s


# The ways to state the batch work's rate (``training``): a fixed rate, or one that grows with the
# fleet (per chip, per MW of full-load IT power, or the share of the chip-time it asks for).
ARRIVAL_KEYS = ("arrivals_per_day", "arrivals_per_chip_day", "arrivals_per_mw_day", "offered_load")
SCALED_ARRIVAL_KEYS = ARRIVAL_KEYS[1:]

# Typed as ``Any`` values so that mypy does not match the tuples against ``_model``'s own
# keyword parameters (``owner``, ``skip``): they are extra fields, every one.
_CLASS_FIELDS: dict[str, Any] = {kind: (m, m()) for kind, m in _CLASS_MODELS.items()}
TrainingSection: Any = _model("TrainingSection", "training", _TrainingChecks, **_CLASS_FIELDS)
SchedulerSection: Any = _model("SchedulerSection", "scheduler", Strict)
_CAUSE_MODELS = {
    name: _model(f"FailureCause_{name}", "failures.<cause>", Strict, owner=name)
    for name in params.FAILURE_CAUSES
}


class _FailureChecks(Strict):
    @model_validator(mode="after")
    def _weights(self) -> Any:
        s: Any = self
        if s.chip_hazard_per_h > 0 and sum(getattr(s, c).weight for c in params.FAILURE_CAUSES) <= 0:
            raise ValueError("failures: every cause has weight 0 but chip_hazard_per_h is positive")
        return s


_CAUSE_FIELDS: dict[str, Any] = {n: (m, m()) for n, m in _CAUSE_MODELS.items()}  # as _CLASS_FIELDS
FailureSection: Any = _model("FailureSection", "failures", _FailureChecks, **_CAUSE_FIELDS)


# ---------------------------------------------------------------------- models and services
class _ModelChecks(Strict):
    @model_validator(mode="after")
    def _sizes(self) -> Any:
        s: Any = self
        if s.active_params is not None and s.active_params > s.params:
            raise ValueError("active_params cannot exceed params")
        if s.experts_active > s.experts:
            raise ValueError("experts_active cannot exceed experts")
        return s

    def spec(self) -> ModelSpec:
        s: Any = self
        return ModelSpec(
            s.name,
            s.params,
            s.active_params if s.active_params is not None else s.params,
            s.layers,
            s.kv_heads,
            s.head_dim,
            s.hidden,
            s.experts,
            s.experts_active,
            s.mfu if s.mfu is not None else (MOE_MFU if s.experts else DENSE_MFU),
            "scenario",
        )


ModelSection: Any = _model("ModelSection", "models", _ModelChecks)


def _architecture(m: ModelSpec) -> dict[str, Any]:
    return {
        "params": m.params,
        "active_params": m.active_params,
        "layers": m.layers,
        "kv_heads": m.kv_heads,
        "head_dim": m.head_dim,
        "hidden": m.hidden,
        "experts": m.experts,
        "experts_active": m.experts_active,
    }


class _ServiceChecks(Strict):
    @model_validator(mode="before")
    @classmethod
    def _model_defaults(cls, data: Any) -> Any:
        """Fill the demand shape of the token profile and the architecture of a catalogued model
        unless given explicitly."""
        if not isinstance(data, dict):
            return data
        filled: dict[str, Any] = {}
        profile = data.get("token_profile", params.ServiceParams.token_profile)
        prof = TOKEN_PROFILES.get(profile) if isinstance(profile, str) else None
        if prof is not None:
            filled.update(
                context_tokens=prof.input_mean,
                output_tokens=prof.output_mean,
                diurnal_peak_to_trough=prof.diurnal_peak_to_trough,
                weekend_factor=prof.weekend_factor,
                burst_rate_per_day=prof.burst_rate_per_day,
                burst_multiplier=prof.burst_multiplier,
                burst_duration_s=prof.burst_duration_s,
            )
        model = data.get("model")
        if isinstance(model, str) and model in MODELS:
            filled.update(_architecture(MODELS[model]))
        filled.update(data)
        return filled

    @model_validator(mode="after")
    def _serving(self) -> Any:
        s: Any = self
        if s.active_params > s.params:
            raise ValueError("active_params cannot exceed params")
        if s.autoscale:
            hi = s.replicas_max if s.replicas_max > 0 else s.replicas
            if not s.replicas_min <= s.replicas <= hi:
                raise ValueError(
                    f"autoscale needs replicas_min <= replicas <= replicas_max (got {s.replicas_min}, "
                    f"{s.replicas}, {hi})"
                )
        return s


ServiceSection: Any = _model("ServiceSection", "services", _ServiceChecks)


# ---------------------------------------------------------------------- site and grid
# Keys of the synthetic weather: meaningless (and refused) next to a weather file.
_SYNTHETIC_WEATHER_KEYS = {"climate", *(k for c in CLIMATES.values() for k in c)}
# Outdoor dry-bulb the synthetic weather may reach at its extremes (mean ± swings + heat wave,
# before noise): the EPW data dictionary's dry-bulb limits, -70..70 °C.
_DRYBULB_RANGE_C = (-70.0, 70.0)


class _SiteChecks(Strict):
    @model_validator(mode="before")
    @classmethod
    def _preset(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("weather_file") is not None:
            clash = sorted(k for k in data if k in _SYNTHETIC_WEATHER_KEYS)
            if clash:
                raise ValueError(f"weather_file replaces the synthetic weather; remove {', '.join(clash)}")
        climate = data.get("climate") if isinstance(data, dict) else None
        if isinstance(climate, str) and climate in CLIMATES:
            merged: dict[str, Any] = dict(CLIMATES[climate])
            merged.update(data)
            return merged
        return data

    @model_validator(mode="after")
    def _extremes(self) -> Any:
        s: Any = self
        swing = s.seasonal_amplitude_k + s.diurnal_amplitude_k
        hi = s.mean_temp_c + swing + s.heatwave_delta_k
        lo = s.mean_temp_c - swing
        if lo < _DRYBULB_RANGE_C[0] or hi > _DRYBULB_RANGE_C[1]:
            raise ValueError(
                f"site: the synthetic dry-bulb would reach {lo:g}..{hi:g} °C (mean ± seasonal and diurnal "
                f"swings + heat wave); keep it within {_DRYBULB_RANGE_C[0]:g}..{_DRYBULB_RANGE_C[1]:g} °C"
            )
        return s


SiteSection: Any = _model("SiteSection", "site", _SiteChecks)
TOU_KEYS = ("peak_usd_per_mwh", "offpeak_usd_per_mwh", "peak_start_h", "peak_end_h", "weekend_peak")


def _check_kind_keys(section: Any, allowed: tuple[str, ...]) -> None:
    extra = sorted(section.model_fields_set - {"kind", *allowed})
    if extra:
        raise ValueError(
            f"{extra[0]} does not apply to kind = {section.kind!r} (its keys: kind, {', '.join(allowed)})"
        )
    if section.kind == "file" and section.file is None:
        raise ValueError('kind = "file" needs file = "path.csv" (relative to the scenario file)')


class _PriceChecks(Strict):
    @model_validator(mode="after")
    def _keys_fit_kind(self) -> Any:
        s: Any = self
        allowed = {"flat": ("usd_per_mwh",), "tou": TOU_KEYS, "file": ("file",)}[s.kind]
        _check_kind_keys(s, allowed)
        if s.kind == "tou":
            tou = params.TouTariff(**s.model_dump(include=set(TOU_KEYS), exclude_none=True))
            if tou.peak_start_h == tou.peak_end_h:
                raise ValueError("peak_start_h equals peak_end_h: the tariff has no peak hours")
        return s


class _CarbonChecks(Strict):
    @model_validator(mode="after")
    def _keys_fit_kind(self) -> Any:
        s: Any = self
        _check_kind_keys(s, {"flat": ("g_per_kwh",), "file": ("file",)}[s.kind])
        return s


PriceSection: Any = _model("PriceSection", "grid.price", _PriceChecks)
CarbonSection: Any = _model("CarbonSection", "grid.carbon", _CarbonChecks)


class _GridTables(Strict):
    """[grid]: electricity price and grid carbon intensity. Defaults: flat $75/MWh (ASM, facts
    §10) and 369 g/kWh (US average 2023, facts §10); [site] price_usd_per_mwh and
    carbon_g_per_kwh are the same flat values, kept as a shorthand. Its own keys: the grid
    connection's what-ifs (``twin.compose.grid``)."""

    price: PriceSection = PriceSection()
    carbon: CarbonSection = CarbonSection()


GridSection: Any = _model("GridSection", "grid", _GridTables)


# ---------------------------------------------------------------------- hall and hardware
RowSection: Any = _model("RowSection", "hall.rows", Strict)


class _HallChecks(Strict):
    @model_validator(mode="after")
    def _one_size(self) -> Any:
        s: Any = self
        if s.ultraservers is not None and s.it_envelope_w is not None:
            raise ValueError(
                "give hall.ultraservers or hall.it_envelope_w, not both (`--set hall.ultraservers=` unsets a "
                "scenario's ultraservers)"
            )
        if s.rows:
            given = sorted({"system", "ultraservers", "it_envelope_w"} & s.model_fields_set)
            if given:
                raise ValueError(
                    f"give [[hall.rows]] or hall.{given[0]}, not both (the rows say which systems)"
                )
        return s

    def count(self, sysm: catalog.System, acc: catalog.Accelerator) -> int:
        """Systems in the hall: given, or as many as the IT envelope holds at full load."""
        s: Any = self
        if s.it_envelope_w is None:
            n: int = s.ultraservers if s.ultraservers is not None else params.HallParams.ultraservers
            return n
        full = catalog.system_full_load_it_w(sysm, acc)
        n = int(s.it_envelope_w // full)
        if n < 1:
            raise ValueError(
                f"hall.it_envelope_w: {s.it_envelope_w / 1e3:,.0f} kW is less than one "
                f"{sysm.name} at full load ({full / 1e3:,.0f} kW)"
            )
        return n


HallSection: Any = _model(
    "HallSection",
    "hall",
    _HallChecks,
    rows=(Annotated[list[RowSection], Field(max_length=MAX_SYSTEMS)], Field(default_factory=list)),
)

# One hall of a campus ([[halls]]): the keys of [hall], its own rows, and its own [halls.cooling]
# (keys of [cooling] that differ from the campus's).
CampusHallSection: Any = _model(
    "CampusHallSection",
    "hall",
    _HallChecks,
    rows=(Annotated[list[RowSection], Field(max_length=MAX_SYSTEMS)], Field(default_factory=list)),
    cooling=(CoolingSection | None, None),
)

ACC_OVERRIDABLE = {"tdp_w", "idle_fraction", "hbm_bytes", "hbm_bw_bytes_s", "hbm_efficiency", "peak_flops"}
SYS_OVERRIDABLE = {
    "host_w_per_server",
    "host_idle_fraction",
    "switch_w",
    "liquid_fraction",
    "chips",
    "servers",
    "racks",
}


class _HardwareChecks(Strict):
    """Overrides of catalog values (e.g. Trainium3 TDP, which AWS does not publish)."""

    @model_validator(mode="after")
    def _shape(self) -> Any:
        s: Any = self
        if s.peak_flops is not None:
            out = {}
            for k, x in s.peak_flops.items():
                key = catalog.normalize_precision(k)
                if key not in catalog.PRECISIONS:
                    raise ValueError(
                        f"peak_flops: unknown precision {k!r}; known: {', '.join(catalog.PRECISIONS)}"
                    )
                out[key] = float(x)
            object.__setattr__(s, "peak_flops", out)
        if s.chips is not None and s.servers is not None and s.chips % s.servers:
            raise ValueError("hardware.chips must divide evenly into hardware.servers")
        return s


HardwareSection: Any = _model("HardwareSection", "hardware", _HardwareChecks)
EventSection: Any = _model("EventSection", "events", Strict)
TelemetrySection: Any = _model("TelemetrySection", "telemetry", Strict)
