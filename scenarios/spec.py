"""Scenario files: TOML validated against the scenario fact table, turned into model parameters.

The pydantic section models are generated from ``scenarios.facts`` (each key's type, unit,
bounds, default and description, defined once); this module adds the rules that tie keys
together (lengths that must match, a climate preset, price kinds, event targets inside the hall)
and the resource limits, checked before anything is allocated. Booleans are not numbers, NaN and
infinity are refused, enumerations are closed. Errors name the file, the key path and what is
wrong, in one line.

``load_scenario_dict(data, source)`` validates a raw TOML dict (``--set`` overrides are applied to
it first); ``prepare(scenario, seed, duration_s)`` is the one set of checks ``twin validate`` and
``twin run`` share.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
import tomllib
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictBool,
    ValidationError,
    create_model,
    model_validator,
)

from scenarios import facts as F
from scenarios import sitefiles, traces
from scenarios.facts import CLIMATES, Fact
from twin import catalog, params, workload
from twin.models import DENSE_MFU, MODELS, MOE_MFU, ModelSpec
from twin.workload import TOKEN_PROFILES

__all__ = ["CLIMATES", "Scenario", "ScenarioError", "load", "load_scenario_dict", "parse", "prepare"]

STRICT = ConfigDict(extra="forbid", frozen=True)


class ScenarioError(Exception):
    """A scenario could not be loaded: ``str()`` is the one-line message for the user."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(str(message).split("\n")))


# ---------------------------------------------------------------------- fields from the table
_NAME_RE = re.compile(F.NAME_PATTERN)


def _safe_name(v: str) -> str:
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
            raise ValueError(f"not an ISO 8601 date-time with a zone (e.g. 2026-01-05T00:00:00Z): {v!r}") from None
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
        return Annotated[str, Field(strict=True, max_length=F.MAX_NAME_CHARS), AfterValidator(_safe_name)]
    if t in ("str", "path"):
        return Annotated[str, Field(strict=True, min_length=1 if t == "path" else 0, max_length=F.MAX_TEXT_CHARS)]
    if t == "enum":
        return Literal[f.choices]  # type: ignore[valid-type]
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


def _model(name: str, section: str, base: type[BaseModel], owner: str | None = None,
           skip: tuple[str, ...] = (), **extra: Any) -> Any:
    return create_model(name, __base__=base, **fields_of(section, owner, skip), **extra)


class _Strict(BaseModel):
    model_config = STRICT


# ---------------------------------------------------------------------- power and cooling
PowerSection: Any = _model("PowerSection", "power", _Strict)


class _CoolingChecks(_Strict):
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


# ---------------------------------------------------------------------- batch work
class _JobClassChecks(_Strict):
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
    kind: _model(f"JobClass_{kind}", "training.<class>", _JobClassChecks, owner=kind) for kind in params.JOB_CLASSES
}
PretrainSection = _CLASS_MODELS["pretrain"]
FinetuneSection = _CLASS_MODELS["finetune"]
EvalSection = _CLASS_MODELS["eval"]
BatchInferenceSection = _CLASS_MODELS["batch_inference"]
_CLASS_KEYS = {f.key for f in F.facts("training.<class>")}


class _TrainingChecks(_Strict):
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
                raise ValueError(f"{clash[0]} is given both under [training] and [training.pretrain]; keep one")
            out["pretrain"] = {**short, **pre}
        for kind in ("finetune", "eval", "batch_inference"):
            other = out.get(kind, {})
            if isinstance(other, dict) and "share" not in other:
                out[kind] = {**other, "share": 0.0}
        return out

    @model_validator(mode="after")
    def _some_share(self) -> Any:
        s: Any = self
        if s.arrivals_per_day > 0 and sum(getattr(s, k).share for k in params.JOB_CLASSES) <= 0:
            raise ValueError("training: every class has share 0 but arrivals_per_day is positive")
        return s


TrainingSection: Any = _model(
    "TrainingSection",
    "training",
    _TrainingChecks,
    **{kind: (m, m()) for kind, m in _CLASS_MODELS.items()},
)
SchedulerSection: Any = _model("SchedulerSection", "scheduler", _Strict)
_CAUSE_MODELS = {
    name: _model(f"FailureCause_{name}", "failures.<cause>", _Strict, owner=name) for name in params.FAILURE_CAUSES
}


class _FailureChecks(_Strict):
    @model_validator(mode="after")
    def _weights(self) -> Any:
        s: Any = self
        if s.chip_hazard_per_h > 0 and sum(getattr(s, c).weight for c in params.FAILURE_CAUSES) <= 0:
            raise ValueError("failures: every cause has weight 0 but chip_hazard_per_h is positive")
        return s


FailureSection: Any = _model(
    "FailureSection", "failures", _FailureChecks, **{n: (m, m()) for n, m in _CAUSE_MODELS.items()}
)


# ---------------------------------------------------------------------- models and services
class _ModelChecks(_Strict):
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
    }


class _ServiceChecks(_Strict):
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


class _SiteChecks(_Strict):
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
_TOU_KEYS = ("peak_usd_per_mwh", "offpeak_usd_per_mwh", "peak_start_h", "peak_end_h", "weekend_peak")


def _check_kind_keys(section: Any, allowed: tuple[str, ...]) -> None:
    extra = sorted(section.model_fields_set - {"kind", *allowed})
    if extra:
        raise ValueError(
            f"{extra[0]} does not apply to kind = {section.kind!r} (its keys: kind, {', '.join(allowed)})"
        )
    if section.kind == "file" and section.file is None:
        raise ValueError('kind = "file" needs file = "path.csv" (relative to the scenario file)')


class _PriceChecks(_Strict):
    @model_validator(mode="after")
    def _keys_fit_kind(self) -> Any:
        s: Any = self
        allowed = {"flat": ("usd_per_mwh",), "tou": _TOU_KEYS, "file": ("file",)}[s.kind]
        _check_kind_keys(s, allowed)
        if s.kind == "tou":
            tou = params.TouTariff(**s.model_dump(include=set(_TOU_KEYS), exclude_none=True))
            if tou.peak_start_h == tou.peak_end_h:
                raise ValueError("peak_start_h equals peak_end_h: the tariff has no peak hours")
        return s


class _CarbonChecks(_Strict):
    @model_validator(mode="after")
    def _keys_fit_kind(self) -> Any:
        s: Any = self
        _check_kind_keys(s, {"flat": ("g_per_kwh",), "file": ("file",)}[s.kind])
        return s


PriceSection: Any = _model("PriceSection", "grid.price", _PriceChecks)
CarbonSection: Any = _model("CarbonSection", "grid.carbon", _CarbonChecks)


class GridSection(_Strict):
    """[grid]: electricity price and grid carbon intensity. Defaults: flat $75/MWh (ASM, facts
    §10) and 369 g/kWh (US average 2023, facts §10); [site] price_usd_per_mwh and
    carbon_g_per_kwh are the same flat values, kept as a shorthand."""

    price: PriceSection = PriceSection()
    carbon: CarbonSection = CarbonSection()


def site_params(site: Any, grid: GridSection, base_dir: Path | None, origin: str) -> params.SiteParams:
    """The model's site parameters, with the hourly series read from the files the scenario
    names (paths relative to ``base_dir``, the scenario file's directory)."""

    def read(key: str, reader: Any, name: str) -> Any:
        path = Path(name).expanduser()
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        try:
            return reader(path)
        except sitefiles.SiteFileError as e:
            raise ScenarioError(f"{origin}: {key}: {e}") from None

    kw: dict[str, Any] = site.model_dump(exclude={"climate", "weather_file"})
    if site.weather_file is not None:
        w = read("site.weather_file", sitefiles.read_weather, site.weather_file)
        kw.update(
            weather_drybulb_c=w.drybulb_c, weather_rel_humidity=w.rel_humidity, weather_wetbulb_c=w.wetbulb_c
        )
    price, carbon = grid.price, grid.carbon
    if price.kind == "flat" and price.usd_per_mwh is not None:
        kw["price_usd_per_mwh"] = price.usd_per_mwh
    elif price.kind == "tou":
        kw["price_tou"] = params.TouTariff(**price.model_dump(include=set(_TOU_KEYS), exclude_none=True))
    elif price.kind == "file":
        kw["price_hourly_usd_per_mwh"] = read("grid.price.file", sitefiles.read_price_csv, price.file)
    if carbon.kind == "flat" and carbon.g_per_kwh is not None:
        kw["carbon_g_per_kwh"] = carbon.g_per_kwh
    elif carbon.kind == "file":
        kw["carbon_hourly_g_per_kwh"] = read("grid.carbon.file", sitefiles.read_carbon_csv, carbon.file)
    return params.SiteParams(**kw)


# ---------------------------------------------------------------------- hall and hardware
class _HallChecks(_Strict):
    @model_validator(mode="after")
    def _one_size(self) -> Any:
        s: Any = self
        if s.ultraservers is not None and s.it_envelope_w is not None:
            raise ValueError("give hall.ultraservers or hall.it_envelope_w, not both")
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


HallSection: Any = _model("HallSection", "hall", _HallChecks)

_ACC_OVERRIDABLE = {"tdp_w", "idle_fraction", "hbm_bytes", "hbm_bw_bytes_s", "peak_flops"}
_SYS_OVERRIDABLE = {"host_w_per_server", "host_idle_fraction", "switch_w", "liquid_fraction", "chips", "servers", "racks"}


class _HardwareChecks(_Strict):
    """Overrides of catalog values (e.g. Trainium3 TDP, which AWS does not publish)."""

    @model_validator(mode="after")
    def _shape(self) -> Any:
        s: Any = self
        if s.peak_flops is not None:
            out = {}
            for k, x in s.peak_flops.items():
                key = catalog.normalize_precision(k)
                if key not in catalog.PRECISIONS:
                    raise ValueError(f"peak_flops: unknown precision {k!r}; known: {', '.join(catalog.PRECISIONS)}")
                out[key] = float(x)
            object.__setattr__(s, "peak_flops", out)
        if s.chips is not None and s.servers is not None and s.chips % s.servers:
            raise ValueError("hardware.chips must divide evenly into hardware.servers")
        return s


HardwareSection: Any = _model("HardwareSection", "hardware", _HardwareChecks)
EventSection: Any = _model("EventSection", "events", _Strict)
TelemetrySection: Any = _model("TelemetrySection", "telemetry", _Strict)


# ---------------------------------------------------------------------- the scenario
_ScenarioFields: Any = create_model(
    "ScenarioFields",
    __base__=_Strict,
    **fields_of(""),
    hall=(HallSection, HallSection()),
    hardware=(HardwareSection, HardwareSection()),
    site=(SiteSection, SiteSection()),
    grid=(GridSection, GridSection()),
    power=(PowerSection, PowerSection()),
    cooling=(CoolingSection, CoolingSection()),
    training=(TrainingSection, TrainingSection()),
    services=(
        Annotated[list[ServiceSection], Field(max_length=F.MAX_TABLE_ITEMS)],  # type: ignore[valid-type]
        Field(default_factory=lambda: [ServiceSection()]),
    ),
    failures=(FailureSection, FailureSection()),
    scheduler=(SchedulerSection, SchedulerSection()),
    models=(Annotated[list[ModelSection], Field(max_length=F.MAX_TABLE_ITEMS)], Field(default_factory=list)),  # type: ignore[valid-type]
    telemetry=(TelemetrySection, TelemetrySection()),
    events=(Annotated[list[EventSection], Field(max_length=F.MAX_TABLE_ITEMS)], Field(default_factory=list)),  # type: ignore[valid-type]
)


class Scenario(_ScenarioFields):  # type: ignore[misc]
    """A validated scenario. ``start`` is the tz-aware wall-clock time of the first step."""

    # Where the scenario came from (set by ``parse``): error messages and site file paths.
    _origin: str = PrivateAttr("scenario")
    _base_dir: Path | None = PrivateAttr(None)
    # Variants of a comparison scenario ([[variants]]: a name plus tables that override the base).
    _variants: list[Scenario] = PrivateAttr(default_factory=list)

    @property
    def variants(self) -> list[Scenario]:
        return self._variants

    @model_validator(mode="after")
    def _price_and_carbon_in_one_place(self) -> Scenario:
        for key, sub in (("price_usd_per_mwh", "price"), ("carbon_g_per_kwh", "carbon")):
            if key in self.site.model_fields_set and sub in self.grid.model_fields_set:
                raise ValueError(f"site.{key} and [grid.{sub}] both set the {sub}; keep one")
        return self

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        known = {**MODELS, **{m.name: m.spec() for m in self.models}}
        acc = catalog.ACCELERATORS[catalog.SYSTEMS[self.hall.system].accelerator]
        for kind in params.JOB_CLASSES:
            c = getattr(self.training, kind)
            for m in c.models:
                if m not in known:
                    raise ValueError(f"training.{kind}.models: unknown model {m!r}; known: {', '.join(known)}")
            prec = self._class_precision(kind)
            if not acc.supports(prec):
                where = f"training.{kind}.precision" if "precision" in c.model_fields_set else "training.precision"
                raise ValueError(
                    f"{where}: {acc.name} has no {prec!r} rate; use one of {', '.join(acc.peak_flops)}"
                )
        for i, s in enumerate(self.services):
            if not acc.supports(s.precision):
                raise ValueError(f"services[{i}].precision: {acc.name} has no {s.precision!r} rate")
            if s.model not in known and "params" not in s.model_fields_set:
                raise ValueError(
                    f"services[{i}].model: unknown model {s.model!r}; known: {', '.join(known)} "
                    "(or define it in [[models]])"
                )
        names = [s.name for s in self.services]
        if len(set(names)) != len(names):
            raise ValueError("services: service names must be unique")
        return self

    @model_validator(mode="before")
    @classmethod
    def _scenario_models(cls, data: Any) -> Any:
        """Services of a model defined in [[models]] take its architecture unless given."""
        if not isinstance(data, dict) or not isinstance(data.get("models"), list):
            return data
        custom = {m["name"]: m for m in data["models"] if isinstance(m, dict) and isinstance(m.get("name"), str)}
        svcs = data.get("services")
        if not isinstance(svcs, list):
            return data
        out = []
        for s in svcs:
            m = custom.get(s["model"]) if isinstance(s, dict) and isinstance(s.get("model"), str) else None
            if m is not None:
                arch = {k: m[k] for k in ("params", "layers", "kv_heads", "head_dim") if k in m}
                arch["active_params"] = m.get("active_params", m.get("params"))
                s = {**{k: v for k, v in arch.items() if v is not None}, **s}
            out.append(s)
        return {**data, "services": out}

    # ------------------------------------------------------------------ to model
    def _trace_path(self, name: str) -> Path:
        path = Path(name).expanduser()
        if not path.is_absolute() and self._base_dir is not None:
            path = self._base_dir / path
        return path

    def _training_params(self) -> params.TrainingParams:
        t = self.training
        kw: dict[str, Any] = t.model_dump(exclude={"trace", "precision", *params.JOB_CLASSES})
        for kind in params.JOB_CLASSES:
            dump = {**getattr(t, kind).model_dump(), "precision": self._class_precision(kind)}
            kw[kind] = params.JobClassParams(**dump)
        if t.trace is not None:
            known = set(MODELS) | {m.name for m in self.models}
            try:
                kw["trace"] = traces.read_job_trace(self._trace_path(t.trace), known)
            except traces.TraceError as e:
                raise ScenarioError(f"{self._origin}: training.trace: {e}") from None
        return params.TrainingParams(**kw)

    def _class_precision(self, kind: str) -> str:
        c = getattr(self.training, kind)
        if self.training.precision is not None and "precision" not in c.model_fields_set:
            return self.training.precision
        p: str = c.precision
        return p

    def _service_params(self, i: int) -> params.ServiceParams:
        s = self.services[i]
        kw: dict[str, Any] = s.model_dump(exclude={"trace"})
        if s.trace is not None:
            try:
                kw["trace"] = traces.read_request_trace(self._trace_path(s.trace))
            except traces.TraceError as e:
                raise ScenarioError(f"{self._origin}: services[{i}].trace: {e}") from None
        return params.ServiceParams(**kw)

    def _failure_params(self) -> params.FailureParams:
        f = self.failures
        causes = {n: params.FailureCause(**getattr(f, n).model_dump()) for n in params.FAILURE_CAUSES}
        return params.FailureParams(chip_hazard_per_h=f.chip_hazard_per_h, repair_sigma=f.repair_sigma, **causes)

    def _check_hall(self, sysm: catalog.System, n: int) -> None:
        """Hall size, service replicas and event targets against the hall, before anything is
        allocated (``ValueError`` with the key path and the limit)."""
        if n > F.MAX_ULTRASERVERS:
            raise ValueError(
                f"hall: {n:,} systems; a hall may hold at most {F.MAX_ULTRASERVERS:,} (hall.it_envelope_w too large?)"
            )
        chips = n * sysm.chips
        if chips > F.MAX_CHIPS:
            raise ValueError(
                f"hall: {n:,} x {sysm.chips} = {chips:,} chips; a hall may hold at most {F.MAX_CHIPS:,} chips"
            )
        servers = n * sysm.servers
        rows = -(-n // self.hall.ultraservers_per_row)
        slots = 0
        for i, s in enumerate(self.services):
            top = max(s.replicas, s.replicas_max if s.autoscale else 0)
            if top * s.chips_per_replica > chips:
                what = "replicas_max" if top != s.replicas else "replicas"
                raise ValueError(
                    f"services[{i}].{what}: {top:,} replicas x {s.chips_per_replica} chips = "
                    f"{top * s.chips_per_replica:,} chips; the hall has {chips:,}"
                )
            slots += top
        if slots > F.MAX_REPLICAS:
            raise ValueError(f"services: {slots:,} replicas in all; at most {F.MAX_REPLICAS:,}")
        need = sum(s.replicas * s.chips_per_replica for s in self.services)
        if need > chips:
            raise ValueError(f"services: the initial replicas need {need:,} chips but the hall has {chips:,}")
        names = {s.name for s in self.services}
        for i, e in enumerate(self.events):
            _check_event(f"events[{i}]", e, chips, servers, n, rows, names, self.cooling)

    def _hardware(self) -> tuple[catalog.System, catalog.Accelerator, int]:
        """The system and accelerator with the scenario's overrides, and the number of systems."""
        hw = self.hardware.model_dump(exclude_none=True)
        sysm = catalog.system(self.hall.system, {k: v for k, v in hw.items() if k in _SYS_OVERRIDABLE})
        if sysm.chips % sysm.servers:
            raise ValueError(f"hardware: {sysm.chips} chips do not divide into {sysm.servers} servers")
        acc_over = {k: v for k, v in hw.items() if k in _ACC_OVERRIDABLE}
        if "peak_flops" in acc_over:
            base = catalog.ACCELERATORS[sysm.accelerator].peak_flops
            acc_over["peak_flops"] = {**base, **acc_over["peak_flops"]}
        acc = catalog.accelerator_for(sysm, acc_over)
        return sysm, acc, self.hall.count(sysm, acc)

    def longest_run_s(self) -> int:
        """The longest run this hall may have: ten years, or fewer for a hall so large that
        steps x systems would pass ``MAX_US_STEPS`` (a live session runs until it is quit)."""
        try:
            n = self._hardware()[2]
        except ValueError as e:
            raise ScenarioError(f"{self._origin}: {e}") from None
        return int(min(F.MAX_RUN_H * 3600, (F.MAX_US_STEPS // max(n, 1)) * self.dt_s))

    def to_params(self, seed: int | None = None) -> params.FactoryParams:
        sysm, acc, n = self._hardware()
        self._check_hall(sysm, n)
        hall = params.HallParams(sysm, acc, n, self.hall.ultraservers_per_row)
        site = site_params(self.site, self.grid, self._base_dir, self._origin)
        events = tuple(
            params.ScheduledEvent(
                time_s=int(round(e.at_h * 3600)),
                kind=e.kind,
                target=str(e.target),
                value=e.value,
                duration_s=int(round(e.duration_h * 3600)),
            )
            for e in self.events
        )
        return params.FactoryParams(
            hall=hall,
            dt_s=self.dt_s,
            seed=self.seed if seed is None else seed,
            power=params.PowerChainParams(**self.power.model_dump()),
            cooling=params.CoolingParams(**self.cooling.model_dump()),
            site=site,
            training=self._training_params(),
            services=tuple(self._service_params(i) for i in range(len(self.services))),
            failures=self._failure_params(),
            scheduler=params.SchedulerParams(**self.scheduler.model_dump()),
            models=tuple(m.spec() for m in self.models),
            events=events,
            chip_sample_interval_s=self.telemetry.chip_sample_interval_s,
        )


# ---------------------------------------------------------------------- events against the hall
_INDEX_RE = re.compile(r"^[0-9]{1,9}$")
_EVENT_LEVEL = {
    "fail_chip": "chip",
    "repair_chip": "chip",
    "fail_server": "server",
    "repair_server": "server",
    "fail_ultraserver": "ultraserver",
    "repair_ultraserver": "ultraserver",
    "drain_ultraserver": "ultraserver",
    "undrain_ultraserver": "ultraserver",
}


def _index(where: str, target: Any, what: str, count: int, prefix: str = "") -> None:
    t = str(target)
    if prefix and t.startswith(prefix):
        t = t[len(prefix):]
    if not _INDEX_RE.match(t):
        form = f"{prefix}N or N" if prefix else "an index"
        raise ValueError(f"{where}.target: expected {form}, a {what} 0..{count - 1} (got {target!r})")
    if int(t) >= count:
        raise ValueError(f"{where}.target: {what} {int(t)} is beyond the hall ({what}s 0..{count - 1})")


def _check_event(where: str, e: Any, chips: int, servers: int, systems: int, rows: int,
                 services: set[str], cooling: Any) -> None:
    """An event's target and value make sense for its kind in this hall."""
    kind, target, value = e.kind, e.target, e.value
    level = _EVENT_LEVEL.get(kind)
    if level is not None:
        count = {"chip": chips, "server": servers, "ultraserver": systems}[level]
        _index(where, target, level, count)
        if kind == "drain_ultraserver" and value > 8760:
            raise ValueError(f"{where}.value: drain grace is in hours, at most 8,760 (got {value:g})")
    elif kind == "power_cap":
        if target not in ("", "facility"):
            _index(where, target, "row", rows, prefix="row:")
    elif kind == "cdu_pump_failure":
        if target != "":
            _index(where, target, "row", rows, prefix="row:")
        if value > 1:
            raise ValueError(f"{where}.value: the CDU flow left is a fraction 0..1 (got {value:g})")
    elif kind in ("chiller_trip", "cooling_tower_loss"):
        units = cooling.chiller_units if kind == "chiller_trip" else cooling.economizer_units
        if value != int(value) or value > units:
            raise ValueError(f"{where}.value: units lost, a whole number 0..{units} (got {value:g}; 0 means 1)")
        if target not in ("", "plant"):
            raise ValueError(f"{where}.target: {kind} acts on the plant; leave target out (got {target!r})")
    elif kind == "cooling_restore":
        if target not in ("", "plant"):
            raise ValueError(f"{where}.target: cooling_restore acts on the plant; leave target out (got {target!r})")
    elif kind == "inference_surge":
        if target != "" and target not in services:
            known = ", ".join(sorted(services)) or "none"
            raise ValueError(f"{where}.target: no service named {target!r} (services: {known})")
        if value > 1000:
            raise ValueError(f"{where}.value: surge factor at most 1,000 (got {value:g})")


# ---------------------------------------------------------------------- the checks run and validate share
def check_seed(seed: int | None, where: str = "--seed") -> None:
    if seed is not None and not 0 <= seed < 2**63:
        raise ScenarioError(f"{where}: must lie in 0 ≤ seed < 2^63 (got {seed})")


def check_duration(duration_s: int | None, where: str = "--hours/--days") -> None:
    if duration_s is not None and not 1 <= duration_s <= F.MAX_RUN_H * 3600:
        raise ScenarioError(
            f"{where}: the run must last between 1 s and {F.MAX_RUN_H:,.0f} h (ten years) (got {duration_s:,} s)"
        )


def duration_arg(hours: float | None, days: float | None) -> int | None:
    """Seconds from ``--hours`` or ``--days`` (at most one; finite, positive, at most ten years)."""
    if hours is not None and days is not None:
        raise ScenarioError("give --hours or --days, not both")
    for flag, v, unit in (("--hours", hours, 3600), ("--days", days, 86400)):
        if v is None:
            continue
        if not math.isfinite(v) or v <= 0:
            raise ScenarioError(f"{flag}: must be a positive finite number (got {v!r})")
        if v * unit > F.MAX_RUN_H * 3600:
            raise ScenarioError(f"{flag}: at most {F.MAX_RUN_H * 3600 / unit:,.0f} (ten years) (got {v:g})")
        return max(1, int(round(v * unit)))
    return None


def prepare(
    scenario: Scenario,
    seed: int | None = None,
    duration_s: int | None = None,
    extra_events: tuple[params.ScheduledEvent, ...] = (),
) -> params.FactoryParams:
    """Every check ``twin validate`` and ``twin run`` make, in one place, before anything is
    allocated: the scenario's keys (done by validation), the hall size, replicas and event targets
    against the hall, the site and trace files (regular files within their size limits), the
    seed, and run length x hall size. Returns the model parameters."""
    origin = scenario._origin
    check_seed(seed)
    check_duration(duration_s)
    try:
        p = scenario.to_params(seed)
    except ValueError as e:
        raise ScenarioError(f"{origin}: {e}") from None
    if extra_events:
        import dataclasses

        p = dataclasses.replace(p, events=p.events + tuple(extra_events))
    total_s = duration_s if duration_s is not None else int(round(scenario.duration_h * 3600))
    steps = -(-total_s // p.dt_s)
    n = p.hall.ultraservers
    if steps * n > F.MAX_US_STEPS:
        raise ScenarioError(
            f"{origin}: {steps:,} steps x {n:,} systems = {steps * n:,} system-steps; a run may have at most "
            f"{F.MAX_US_STEPS:,} (shorten the run, raise dt_s or shrink the hall)"
        )
    for svc in p.services:
        try:
            workload.roofline(svc, p.hall.accelerator)
        except ValueError as e:
            raise ScenarioError(f"{origin}: {e}") from None
    return p


def build_simulation(
    scenario: Scenario,
    seed: int | None = None,
    duration_s: int | None = None,
    extra_events: tuple[params.ScheduledEvent, ...] = (),
) -> tuple[params.FactoryParams, Any]:
    """``prepare`` and then the model itself (its own checks, e.g. weights that do not fit in
    HBM): what ``twin run`` starts from and what ``twin validate`` builds and drops."""
    from twin.sim import Simulation

    p = prepare(scenario, seed, duration_s, extra_events)
    try:
        return p, Simulation(p)
    except ValueError as e:
        raise ScenarioError(f"{scenario._origin}: {e}") from None


# ---------------------------------------------------------------------- loading
def builtin_names() -> list[str]:
    files = resources.files("scenarios.builtin")
    return sorted(f.name[:-5] for f in files.iterdir() if f.name.endswith(".toml"))


def _key_text(part: Any) -> str:
    text = str(part)
    return text if re.fullmatch(r"[A-Za-z0-9_.<>-]{1,64}", text) else repr(text[:64])


def _format_loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif str(part).startswith(("function-", "tagged-union", "int", "str", "literal[", "float")) and out:
            continue
        else:
            out += ("." if out else "") + _key_text(part)
    return out or "(top level)"


def _fact_of_loc(loc: tuple[Any, ...]) -> Fact | None:
    keys = [str(p) for p in loc if not isinstance(p, int)]
    if not keys:
        return None
    return F.fact(".".join(keys))


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 80 else text[:60] + f"… ({len(text):,} characters)"


_TYPE_WORDS = {
    "int": "a whole number",
    "float": "a number",
    "bool": "true or false",
    "str": "a string",
    "name": "a name",
    "path": "a file path (a string)",
    "datetime": "an ISO 8601 date-time with a zone",
    "target": "an index or a name",
    "table[float]": "a table of numbers",
}


def _message(err: Any) -> str:
    """One line for a pydantic error: the key path, the problem in the table's terms, the value."""
    loc = tuple(err["loc"])
    typ = err["type"]
    f = _fact_of_loc(loc)
    msg = err["msg"]
    got = "" if typ in ("extra_forbidden", "missing") or isinstance(err.get("input"), dict) else (
        f" (got {_short(err.get('input'))})"
    )
    if typ == "extra_forbidden":
        msg = "unknown key"
    elif typ == "missing":
        msg = "required key is missing"
    elif f is not None and typ in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        unit = f" [{f.unit}]" if f.unit and f.unit != "-" else ""
        msg = f"out of range: must lie in {f.range_text()}{unit}"
    elif typ == "finite_number":
        msg = "must be a finite number (not nan or inf)"
    elif typ in ("int_type", "float_type", "bool_type", "string_type", "int_from_float", "bool_parsing"):
        want = _TYPE_WORDS.get(f.type if f is not None else typ.split("_")[0], "another type")
        if f is not None and f.type.startswith("list["):
            want = _TYPE_WORDS.get(f.type[5:-1], "another type") + " in each item"
        if isinstance(err.get("input"), bool) and typ != "bool_type":
            want += " (true/false is not a number)"
        msg = f"expected {want}"
    elif typ == "literal_error" and f is not None:
        noun = {"events": "event ", "grid.price": "price ", "grid.carbon": "carbon "}.get(f.section, "")
        noun += f.key.replace("_", " ")
        msg, got = f"unknown {noun} {_short(err.get('input'))}; known: {', '.join(f.choices)}", ""
    elif typ in ("too_long", "string_too_long"):
        msg = msg.replace("Value should have", "at most").replace("String should have", "at most")
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    text = _format_loc(loc)
    if (text == "(top level)" and re.match(r"^[A-Za-z_][\w.\[\]]*[:( ]", msg)) or msg.startswith(f"{text}."):
        text = ""  # a check that names its own key path
    return f"{text + ': ' if text else ''}{msg}{got}"


def validate(data: dict[str, Any], origin: str, base_dir: str | Path | None = None) -> Scenario:
    """Validate one scenario's parsed data (no [[variants]]); errors name ``origin``, the key
    path and the problem."""
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as e:
        errors = e.errors()
        more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
        raise ScenarioError(f"{origin}: {_message(errors[0])}{more}") from None
    except RecursionError:
        raise ScenarioError(f"{origin}: tables or arrays nested too deeply") from None
    scenario._origin = origin
    scenario._base_dir = Path(base_dir) if base_dir is not None else None
    return scenario


def load_scenario_dict(data: Any, source: str, base_dir: str | Path | None = None) -> Scenario:
    """Validate a raw scenario dict as read from TOML (``--set`` overrides already applied),
    with its [[variants]]. ``source`` names it in every message; ``base_dir`` is where relative
    file paths start (default: the working directory). Does not change ``data``."""
    if not isinstance(data, dict):
        raise ScenarioError(f"{source}: expected a table of scenario keys")
    data = dict(data)
    variants = data.pop("variants", None)
    scenario = validate(data, source, base_dir)
    if variants is None:
        return scenario
    if not isinstance(variants, list) or not all(isinstance(v, dict) for v in variants):
        raise ScenarioError(f"{source}: variants: expected [[variants]] tables")
    if not 1 <= len(variants) <= F.MAX_TABLE_ITEMS:
        raise ScenarioError(f"{source}: variants: give 1 to {F.MAX_TABLE_ITEMS} [[variants]] tables")
    seen: set[str] = set()
    for i, v in enumerate(variants):
        vname = v.get("name")
        if not isinstance(vname, str) or not vname:
            raise ScenarioError(f"{source}: variants[{i}].name: required key is missing")
        try:
            _safe_name(vname)
        except ValueError as e:
            raise ScenarioError(f"{source}: variants[{i}].name: {e}") from None
        if vname in seen:
            raise ScenarioError(f"{source}: variants[{i}].name: {vname!r} is used twice")
        seen.add(vname)
        merged = _deep_merge(data, {k: val for k, val in v.items() if k != "name"})
        merged["name"] = vname
        scenario._variants.append(validate(merged, f"{source} (variant '{vname}')", base_dir))
    return scenario


def parse(text: str, origin: str, base_dir: str | Path | None = None) -> Scenario:
    """Parse and validate scenario text; ``origin`` names the file in error messages and
    ``base_dir`` is where relative file paths in it start (default: the working directory).
    A UTF-8 byte-order mark at the top is ignored."""
    if len(text) > F.MAX_SCENARIO_BYTES:
        raise ScenarioError(f"{origin}: {len(text):,} characters; a scenario may be at most {F.MAX_SCENARIO_BYTES:,}")
    text = text.removeprefix("\ufeff")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(f"{origin}: invalid TOML: {e}") from None
    except RecursionError:
        raise ScenarioError(f"{origin}: invalid TOML: arrays or tables nested too deeply") from None
    return load_scenario_dict(data, origin, base_dir)


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Variant overrides: tables merge key by key, anything else replaces."""
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = v
    return out


def read_scenario_file(p: Path) -> str:
    """A scenario file's text: a regular file of at most ``MAX_SCENARIO_BYTES``, UTF-8 (a BOM is
    dropped)."""
    problem = sitefiles.file_problem(p, F.MAX_SCENARIO_BYTES, "scenario file")
    if problem:
        raise ScenarioError(problem)
    try:
        return p.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:
        raise ScenarioError(f"{p}: cannot read: {e}") from None


def load(name_or_path: str) -> tuple[Scenario, str, str]:
    """Load a built-in scenario by name or a scenario file by path.

    Returns (scenario, its full TOML text, where it came from)."""
    if "\x00" in name_or_path:
        raise ScenarioError(f"{_short(name_or_path)}: a scenario name or path cannot contain a NUL character")
    p = Path(name_or_path)
    try:
        exists = p.exists()
    except OSError as e:
        raise ScenarioError(f"{_short(name_or_path)}: cannot read: {e.strerror or e}") from None
    if p.suffix == ".toml" or exists or "/" in name_or_path:
        if not exists:
            raise ScenarioError(f"{p}: no such scenario file")
        text = read_scenario_file(p)
        return parse(text, str(p), base_dir=p.parent), text, str(p)
    names = builtin_names()
    if name_or_path not in names:
        raise ScenarioError(
            f"{_short(name_or_path)}: no built-in scenario of that name and no such file; built-in: {', '.join(names)}"
        )
    text = resources.files("scenarios.builtin").joinpath(f"{name_or_path}.toml").read_text(encoding="utf-8")
    return parse(text, f"built-in scenario '{name_or_path}'"), text, f"builtin:{name_or_path}"
