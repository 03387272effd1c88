"""Scenario files: TOML validated by pydantic (unknown keys refused), turned into model parameters.

The section models mirror the parameter dataclasses in ``twin.params`` field by field, so a key
added to the model is a key users can set. Every numeric value is checked: sizes, powers, rates and
durations must be non-negative (positive where zero makes no sense), efficiencies and fractions lie
in (0, 1]. Errors name the file, the key path and what is wrong.
"""

from __future__ import annotations

import dataclasses
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)

from scenarios import sitefiles, traces
from twin import catalog, params, tco
from twin.models import DENSE_MFU, MODELS, MOE_MFU, ModelSpec
from twin.sim import EVENT_KINDS
from twin.workload import TOKEN_PROFILES

STRICT = ConfigDict(extra="forbid", frozen=True)

# Fields whose values may be below zero (temperatures in °C).
_SIGNED = {"mean_temp_c", "latitude_deg", "dewpoint_seasonal_k"}
_UNIT_INTERVAL = ("efficiency", "fraction", "_factor", "mfu", "activity")
_POSITIVE = {
    "dt_s",
    "ultraservers",
    "ultraservers_per_row",
    "chips_per_replica",
    "batch_max",
    "layers",
    "kv_heads",
    "head_dim",
    "params",
    "active_params",
    "flow_l_min_per_kw",
    "pump_efficiency",
    "carnot_fraction",
    "cop_min",
    "cop_max",
    "loop_volume_l_per_ultraserver",
    "weather_noise_tau_h",
    "server_life_years",
    "facility_life_years",
}


class ScenarioError(Exception):
    """A scenario could not be loaded: ``str()`` is the one-line message for the user."""


def _field_for(name: str, default: Any) -> tuple[Any, Any]:
    if isinstance(default, bool):
        return (bool, default)
    if isinstance(default, int | float) and not isinstance(default, bool):
        typ: Any = int if isinstance(default, int) else float
        if name in _SIGNED:
            return (typ, Field(default))
        if name.endswith(("_efficiency",)) or name in {
            "psu_efficiency",
            "pdu_efficiency",
            "transformer_efficiency",
        }:
            return (typ, Field(default, gt=0, le=1))
        if any(k in name for k in _UNIT_INTERVAL) and "rating" not in name and "peak" not in name:
            return (typ, Field(default, ge=0, le=1))
        if name in _POSITIVE:
            return (typ, Field(default, gt=0))
        return (typ, Field(default, ge=0))
    if isinstance(default, str):
        return (str, default)
    if isinstance(default, tuple):
        inner = type(default[0]) if default else float
        return (tuple[inner, ...], default)  # type: ignore[valid-type]
    raise TypeError(name)


def _section(dc: type, skip: tuple[str, ...] = ()) -> type[BaseModel]:
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(dc):
        if f.name in skip:
            continue
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        fields[f.name] = _field_for(f.name, default)
    return create_model(dc.__name__.replace("Params", "Section"), __config__=STRICT, **fields)


PowerSection = _section(params.PowerChainParams)
CoolingSection = _section(params.CoolingParams)
# [tco]: prices and lives of capital and fixed operating cost (twin.tco; every default ASM).
TcoSection = _section(tco.TcoParams)
_SiteBase = _section(
    params.SiteParams,
    skip=(
        "price_tou",
        "weather_drybulb_c",
        "weather_rel_humidity",
        "weather_wetbulb_c",
        "price_hourly_usd_per_mwh",
        "carbon_hourly_g_per_kwh",
    ),
)
class _JobClassChecks(BaseModel):
    model_config = STRICT

    @model_validator(mode="after")
    def _shapes(self) -> Any:
        s: Any = self
        if len(s.size_chips) != len(s.size_weights):
            raise ValueError("size_chips and size_weights must have the same length")
        if len(s.models) != len(s.model_weights):
            raise ValueError("models and model_weights must have the same length")
        if not s.size_chips or any(c <= 0 for c in s.size_chips):
            raise ValueError("size_chips: gang sizes must be positive")
        for name in ("size_weights", "model_weights"):
            w = getattr(s, name)
            if any(x < 0 for x in w) or sum(w) <= 0:
                raise ValueError(f"{name}: weights must be non-negative with a positive sum")
        if s.duration_median_h <= 0 or s.duration_max_h <= 0:
            raise ValueError("duration_median_h and duration_max_h must be positive")
        return s


def _job_class_section(kind: str) -> type[BaseModel]:
    inst = params.TrainingParams().job_class(kind)
    fields = {f.name: _field_for(f.name, getattr(inst, f.name)) for f in dataclasses.fields(inst)}
    model: type[BaseModel] = create_model(f"JobClass_{kind}", __base__=_JobClassChecks, **fields)
    return model


PretrainSection = _job_class_section("pretrain")
FinetuneSection = _job_class_section("finetune")
EvalSection = _job_class_section("eval")
BatchInferenceSection = _job_class_section("batch_inference")


class TrainingSection(BaseModel):
    """[training]: batch work. Per-class tables [training.pretrain], [training.finetune],
    [training.eval], [training.batch_inference] override the fitted defaults key by key."""

    model_config = STRICT
    arrivals_per_day: float = Field(params.TrainingParams.arrivals_per_day, ge=0)
    diurnal_peak_to_trough: float = Field(params.TrainingParams.diurnal_peak_to_trough, ge=1)
    peak_hour: float = Field(params.TrainingParams.peak_hour, ge=0, le=24)
    weekend_factor: float = Field(params.TrainingParams.weekend_factor, ge=0)
    pretrain: PretrainSection = PretrainSection()  # type: ignore[valid-type]
    finetune: FinetuneSection = FinetuneSection()  # type: ignore[valid-type]
    eval: EvalSection = EvalSection()  # type: ignore[valid-type]
    batch_inference: BatchInferenceSection = BatchInferenceSection()  # type: ignore[valid-type]
    comm_overlap_fraction: float = Field(params.TrainingParams.comm_overlap_fraction, ge=0, le=1)
    global_batch_tokens: float = Field(params.TrainingParams.global_batch_tokens, gt=0)
    grad_bytes_per_param: float = Field(params.TrainingParams.grad_bytes_per_param, gt=0)
    activation_bytes: float = Field(params.TrainingParams.activation_bytes, gt=0)
    activity: float = Field(params.TrainingParams.activity, ge=0, le=1)
    restart_cost_s: int = Field(params.TrainingParams.restart_cost_s, ge=0)
    # Precision of every class that does not set its own.
    precision: str | None = None
    # Job trace CSV (scenarios.traces), relative to the scenario file: replayed as batch work on
    # top of the synthetic arrivals (set arrivals_per_day = 0 to replay the trace alone).
    trace: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _single_class(cls, data: Any) -> Any:
        """Shorthand: class keys directly under [training] (size_chips, models, ...) describe one
        class of pre-training jobs; the other classes are off unless their tables are given."""
        if not isinstance(data, dict):
            return data
        keys = set(PretrainSection.model_fields) - {"share", "precision"}
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


class SchedulerSection(BaseModel):
    """[scheduler]: fifo | backfill (EASY) | priority (with preemption); topology-aware or
    first-fit placement."""

    model_config = STRICT
    policy: Literal["fifo", "backfill", "priority"] = "backfill"
    placement: Literal["topology", "first_fit"] = "topology"
    backfill_depth: int = Field(params.SchedulerParams.backfill_depth, gt=0)
    runtime_estimate_factor: float = Field(params.SchedulerParams.runtime_estimate_factor, gt=0)


class FailureCauseSection(BaseModel):
    model_config = STRICT
    weight: float = Field(ge=0)
    repair_h: float = Field(ge=0)
    blast: Literal["chip", "server", "job"]


def _cause_field(name: str) -> Any:
    c = params.FailureParams().cause(name)

    class _Cause(FailureCauseSection):
        weight: float = Field(c.weight, ge=0)
        repair_h: float = Field(c.repair_h, ge=0)
        blast: Literal["chip", "server", "job"] = c.blast  # type: ignore[assignment]

    _Cause.__name__ = f"FailureCause_{name}"
    return (_Cause, _Cause())


FailureSection = create_model(
    "FailureSection",
    __config__=STRICT,
    chip_hazard_per_h=(float, Field(params.FailureParams.chip_hazard_per_h, ge=0)),
    repair_sigma=(float, Field(params.FailureParams.repair_sigma, ge=0)),
    **{name: _cause_field(name) for name in params.FAILURE_CAUSES},
)

_ServiceBase = _section(params.ServiceParams, skip=("trace",))


class ModelSection(BaseModel):
    """[[models]]: a model the scenario defines (or redefines) for its jobs and services."""

    model_config = STRICT
    name: str = Field(min_length=1)
    params: float = Field(gt=0)
    active_params: float | None = Field(None, gt=0)  # default: params (dense)
    layers: int = Field(gt=0)
    kv_heads: int = Field(gt=0)
    head_dim: int = Field(gt=0)
    hidden: int = Field(0, ge=0)
    experts: int = Field(0, ge=0)
    experts_active: int = Field(0, ge=0)
    mfu: float | None = Field(None, gt=0, le=1)  # default: 0.40 dense, 0.30 MoE (ASM)

    def spec(self) -> ModelSpec:
        return ModelSpec(
            self.name,
            self.params,
            self.active_params if self.active_params is not None else self.params,
            self.layers,
            self.kv_heads,
            self.head_dim,
            self.hidden,
            self.experts,
            self.experts_active,
            self.mfu if self.mfu is not None else (MOE_MFU if self.experts else DENSE_MFU),
            "scenario",
        )


def _climate(
    mean: float, seasonal: float, diurnal: float, depression: float, depression_seasonal: float, **more: float
) -> dict[str, float]:
    return {
        "mean_temp_c": mean,
        "seasonal_amplitude_k": seasonal,
        "diurnal_amplitude_k": diurnal,
        "dewpoint_depression_k": depression,
        "dewpoint_seasonal_k": depression_seasonal,
        **more,
    }


# Synthetic climates: annual mean dry-bulb, its seasonal and diurnal half-swings [°C, K]; dew-point
# depression below the daily mean and its seasonal half-swing [K]. All ASM, rounded; the dry-bulb
# figures of hot-dry follow Phoenix AZ normals (3P: monthly mean highs/lows 20/8 °C in January,
# 41/29 °C in July), the rest are shaped on remembered normals of the places named and are not
# verified. Keys given in [site] override the preset's.
CLIMATES: dict[str, dict[str, float]] = {
    # Central Europe (Frankfurt-like): RH ~85 % in winter, ~65 % on summer days.
    "temperate": _climate(12.0, 9.0, 5.0, 5.0, 2.5),
    # Hot, semi-arid: between hot-dry and hot-humid.
    "hot": _climate(24.0, 9.0, 7.0, 10.0, 3.0),
    # Desert (Phoenix-like): afternoon RH 10-20 % in early summer, wet-bulb far below dry-bulb.
    "hot-dry": _climate(24.5, 10.5, 6.5, 19.0, 6.0),
    # Equatorial (Singapore-like): almost no seasons, RH 60-100 %, wet-bulb 24-27 °C year-round.
    "hot-humid": _climate(27.5, 1.0, 3.5, 3.5, 0.0, weather_noise_k=0.7, dewpoint_noise_k=0.5),
    # Boreal (Oulu-like): air close to saturation in winter.
    "cold": _climate(3.0, 11.0, 4.0, 3.0, 2.0),
}
# Keys of the synthetic weather: meaningless (and refused) next to a weather file.
_SYNTHETIC_WEATHER_KEYS = {"climate", *(k for c in CLIMATES.values() for k in c)}


class SiteSection(_SiteBase):  # type: ignore[misc,valid-type]
    climate: str | None = None
    latitude_deg: float = Field(params.SiteParams.latitude_deg, ge=-90, le=90)
    start_day_of_year: int = Field(params.SiteParams.start_day_of_year, ge=1, le=366)
    # Hourly weather for one year: an EPW file (.epw) or a CSV (scenarios.sitefiles), relative to
    # the scenario file's directory. Replaces the synthetic weather.
    weather_file: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _preset(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("weather_file") is not None:
            clash = sorted(k for k in data if k in _SYNTHETIC_WEATHER_KEYS)
            if clash:
                raise ValueError(f"weather_file replaces the synthetic weather; remove {', '.join(clash)}")
        if isinstance(data, dict) and data.get("climate") in CLIMATES:
            merged = dict(CLIMATES[data["climate"]])
            merged.update(data)
            return merged
        return data

    @field_validator("climate")
    @classmethod
    def _known_climate(cls, v: str | None) -> str | None:
        if v is not None and v not in CLIMATES:
            raise ValueError(f"unknown climate {v!r}; known: {', '.join(CLIMATES)}")
        return v


_TOU_KEYS = tuple(f.name for f in dataclasses.fields(params.TouTariff))


class PriceSection(BaseModel):
    """[grid.price]: kind = "flat" (usd_per_mwh), "tou" (time-of-use: peak/off-peak prices and
    hours, weekend_peak) or "file" (hourly CSV: hour or timestamp, price_usd_per_mwh)."""

    model_config = STRICT
    kind: Literal["flat", "tou", "file"] = "flat"
    usd_per_mwh: float | None = Field(None, ge=0)
    peak_usd_per_mwh: float | None = Field(None, ge=0)
    offpeak_usd_per_mwh: float | None = Field(None, ge=0)
    peak_start_h: float | None = Field(None, ge=0, le=24)
    peak_end_h: float | None = Field(None, ge=0, le=24)
    weekend_peak: bool | None = None
    file: str | None = None

    @model_validator(mode="after")
    def _keys_fit_kind(self) -> PriceSection:
        allowed = {"flat": ("usd_per_mwh",), "tou": _TOU_KEYS, "file": ("file",)}[self.kind]
        _check_kind_keys(self, allowed)
        if self.kind == "tou":
            tou = params.TouTariff(**self.model_dump(include=set(_TOU_KEYS), exclude_none=True))
            if tou.peak_start_h == tou.peak_end_h:
                raise ValueError("peak_start_h equals peak_end_h: the tariff has no peak hours")
        return self


class CarbonSection(BaseModel):
    """[grid.carbon]: kind = "flat" (g_per_kwh) or "file" (hourly CSV: hour or timestamp,
    carbon_g_per_kwh)."""

    model_config = STRICT
    kind: Literal["flat", "file"] = "flat"
    g_per_kwh: float | None = Field(None, ge=0)
    file: str | None = None

    @model_validator(mode="after")
    def _keys_fit_kind(self) -> CarbonSection:
        _check_kind_keys(self, {"flat": ("g_per_kwh",), "file": ("file",)}[self.kind])
        return self


def _check_kind_keys(section: PriceSection | CarbonSection, allowed: tuple[str, ...]) -> None:
    extra = sorted(section.model_fields_set - {"kind", *allowed})
    if extra:
        raise ValueError(
            f"{extra[0]} does not apply to kind = {section.kind!r} (its keys: kind, {', '.join(allowed)})"
        )
    if section.kind == "file" and section.file is None:
        raise ValueError('kind = "file" needs file = "path.csv" (relative to the scenario file)')


class GridSection(BaseModel):
    """[grid]: electricity price and grid carbon intensity. Defaults: flat $75/MWh (ASM, facts
    §10) and 369 g/kWh (US average 2023, facts §10); [site] price_usd_per_mwh and
    carbon_g_per_kwh are the same flat values, kept as a shorthand."""

    model_config = STRICT
    price: PriceSection = PriceSection()
    carbon: CarbonSection = CarbonSection()


def site_params(
    site: SiteSection, grid: GridSection, base_dir: Path | None, origin: str
) -> params.SiteParams:
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


def _architecture(m: ModelSpec) -> dict[str, Any]:
    return {
        "params": m.params,
        "active_params": m.active_params,
        "layers": m.layers,
        "kv_heads": m.kv_heads,
        "head_dim": m.head_dim,
    }


class ServiceSection(_ServiceBase):  # type: ignore[misc,valid-type]
    # Request trace in the Azure LLM inference format (scenarios.traces), relative to the
    # scenario file: the service's demand and token lengths (the rate shape keys do not apply).
    trace: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _model_defaults(cls, data: Any) -> Any:
        """Fill the demand shape of the token profile and the architecture of a catalogued model
        unless given explicitly."""
        if not isinstance(data, dict):
            return data
        filled: dict[str, Any] = {}
        prof = TOKEN_PROFILES.get(data.get("token_profile", params.ServiceParams.token_profile))
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
        if data.get("model") in MODELS:
            filled.update(_architecture(MODELS[data["model"]]))
        filled.update(data)
        return filled

    @field_validator("token_profile")
    @classmethod
    def _known_profile(cls, v: str) -> str:
        if v not in TOKEN_PROFILES:
            raise ValueError(f"unknown token profile {v!r}; known: {', '.join(TOKEN_PROFILES)}")
        return v

    @model_validator(mode="after")
    def _serving(self) -> ServiceSection:
        s: Any = self
        if not 0 < s.target_utilization <= 1:
            raise ValueError("target_utilization must be in (0, 1]")
        if s.trace_speedup <= 0:
            raise ValueError("trace_speedup must be positive")
        if s.burst_multiplier <= 0:
            raise ValueError("burst_multiplier must be positive")
        if s.diurnal_peak_to_trough < 1:
            raise ValueError("diurnal_peak_to_trough must be at least 1")
        if s.active_params > s.params:
            raise ValueError("active_params cannot exceed params")
        if s.autoscale:
            hi = s.replicas_max if s.replicas_max > 0 else s.replicas
            if not s.replicas_min <= s.replicas <= hi:
                raise ValueError(
                    f"autoscale needs replicas_min <= replicas <= replicas_max (got {s.replicas_min}, "
                    f"{s.replicas}, {hi})"
                )
        return self


class HallSection(BaseModel):
    model_config = STRICT
    system: str = "trn3-gen2"
    ultraservers: int | None = Field(None, gt=0, le=20000)  # default 16 unless it_envelope_w
    # Size the hall to a power envelope instead: as many systems as fit at full-load IT power.
    it_envelope_w: float | None = Field(None, gt=0)
    ultraservers_per_row: int = Field(4, gt=0)

    @model_validator(mode="after")
    def _one_size(self) -> HallSection:
        if self.ultraservers is not None and self.it_envelope_w is not None:
            raise ValueError("give hall.ultraservers or hall.it_envelope_w, not both")
        return self

    def count(self, sysm: catalog.System, acc: catalog.Accelerator) -> int:
        """Systems in the hall: given, or as many as the IT envelope holds at full load."""
        if self.it_envelope_w is None:
            return self.ultraservers if self.ultraservers is not None else 16
        n = int(self.it_envelope_w // catalog.system_full_load_it_w(sysm, acc))
        if n < 1:
            raise ValueError(
                f"hall.it_envelope_w: {self.it_envelope_w / 1e3:,.0f} kW is less than one "
                f"{sysm.name} at full load ({catalog.system_full_load_it_w(sysm, acc) / 1e3:,.0f} kW)"
            )
        return n

    @field_validator("system")
    @classmethod
    def _known_system(cls, v: str) -> str:
        if v not in catalog.SYSTEMS:
            raise ValueError(f"unknown system {v!r}; known: {', '.join(catalog.SYSTEMS)}")
        return v


_ACC_OVERRIDABLE = {"tdp_w", "idle_fraction", "hbm_bytes", "hbm_bw_bytes_s", "peak_flops"}
_SYS_OVERRIDABLE = {"host_w_per_server", "host_idle_fraction", "switch_w", "liquid_fraction", "chips", "servers", "racks"}


class HardwareSection(BaseModel):
    """Overrides of catalog values (e.g. Trainium3 TDP, which AWS does not publish)."""

    model_config = STRICT
    tdp_w: float | None = Field(None, gt=0)
    idle_fraction: float | None = Field(None, ge=0, lt=1)
    hbm_bytes: float | None = Field(None, gt=0)
    hbm_bw_bytes_s: float | None = Field(None, gt=0)
    host_w_per_server: float | None = Field(None, ge=0)
    host_idle_fraction: float | None = Field(None, ge=0, le=1)
    switch_w: float | None = Field(None, ge=0)
    liquid_fraction: float | None = Field(None, ge=0, le=1)
    # Per-precision dense peaks [FLOP/s] replacing (or adding to) the catalog's, e.g.
    # peak_flops = { fp8 = 2.6e15 }; names as in `twin hardware` (bf16, fp8, fp4, fp32).
    peak_flops: dict[str, float] | None = None
    # Scale-up system shape: chips per system and servers per system (chips must divide evenly).
    chips: int | None = Field(None, gt=0)
    servers: int | None = Field(None, gt=0)
    racks: int | None = Field(None, gt=0)

    @field_validator("peak_flops")
    @classmethod
    def _peaks(cls, v: dict[str, float] | None) -> dict[str, float] | None:
        if v is None:
            return v
        out = {}
        for k, x in v.items():
            key = catalog.normalize_precision(k)
            if key not in catalog.PRECISIONS:
                raise ValueError(f"unknown precision {k!r}; known: {', '.join(catalog.PRECISIONS)}")
            if not x > 0:
                raise ValueError(f"{k}: peak must be positive (got {x!r})")
            out[key] = float(x)
        return out

    @model_validator(mode="after")
    def _shape(self) -> HardwareSection:
        if self.chips is not None and self.servers is not None and self.chips % self.servers:
            raise ValueError("hardware.chips must divide evenly into hardware.servers")
        return self


class EventSection(BaseModel):
    model_config = STRICT
    at_h: float = Field(ge=0)
    kind: str
    target: str | int = ""
    value: float = Field(0.0, ge=0)
    duration_h: float = Field(0.0, ge=0)

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, v: str) -> str:
        if v not in EVENT_KINDS:
            raise ValueError(f"unknown event kind {v!r}; known: {', '.join(EVENT_KINDS)}")
        return v


class TelemetrySection(BaseModel):
    model_config = STRICT
    chip_sample_interval_s: int = Field(3600, ge=0)


class Scenario(BaseModel):
    model_config = STRICT
    name: str
    description: str = ""
    seed: int = Field(0, ge=0)
    dt_s: int = Field(60, gt=0, le=3600)
    duration_h: float = Field(168.0, gt=0)
    hall: HallSection = HallSection()
    hardware: HardwareSection = HardwareSection()
    site: SiteSection = SiteSection()  # type: ignore[valid-type]
    grid: GridSection = GridSection()
    power: PowerSection = PowerSection()  # type: ignore[valid-type]
    cooling: CoolingSection = CoolingSection()  # type: ignore[valid-type]
    tco: TcoSection = TcoSection()  # type: ignore[valid-type]
    training: TrainingSection = TrainingSection()  # type: ignore[valid-type]
    services: list[ServiceSection] = Field(default_factory=lambda: [ServiceSection()])  # type: ignore[valid-type]
    failures: FailureSection = FailureSection()  # type: ignore[valid-type]
    scheduler: SchedulerSection = SchedulerSection()
    models: list[ModelSection] = Field(default_factory=list)
    telemetry: TelemetrySection = TelemetrySection()
    events: list[EventSection] = Field(default_factory=list)
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
        custom = {m.get("name"): m for m in data["models"] if isinstance(m, dict)}
        svcs = data.get("services")
        if not isinstance(svcs, list):
            return data
        out = []
        for s in svcs:
            m = custom.get(s.get("model")) if isinstance(s, dict) else None
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

    def to_params(self, seed: int | None = None) -> params.FactoryParams:
        hw = self.hardware.model_dump(exclude_none=True)
        sysm = catalog.system(self.hall.system, {k: v for k, v in hw.items() if k in _SYS_OVERRIDABLE})
        if sysm.chips % sysm.servers:
            raise ValueError(f"hardware: {sysm.chips} chips do not divide into {sysm.servers} servers")
        acc_over = {k: v for k, v in hw.items() if k in _ACC_OVERRIDABLE}
        if "peak_flops" in acc_over:
            base = catalog.ACCELERATORS[sysm.accelerator].peak_flops
            acc_over["peak_flops"] = {**base, **acc_over["peak_flops"]}
        acc = catalog.accelerator_for(sysm, acc_over)
        hall = params.HallParams(sysm, acc, self.hall.count(sysm, acc), self.hall.ultraservers_per_row)
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
            tco=tco.TcoParams(**self.tco.model_dump()),
            site=site,
            training=self._training_params(),
            services=tuple(self._service_params(i) for i in range(len(self.services))),
            failures=self._failure_params(),
            scheduler=params.SchedulerParams(**self.scheduler.model_dump()),
            models=tuple(m.spec() for m in self.models),
            events=events,
            chip_sample_interval_s=self.telemetry.chip_sample_interval_s,
        )


# ---------------------------------------------------------------------- loading
def builtin_names() -> list[str]:
    files = resources.files("scenarios.builtin")
    return sorted(f.name[:-5] for f in files.iterdir() if f.name.endswith(".toml"))


def _format_loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("function-after[_consistent()]",) or str(part).startswith(
            ("function-", "tagged-union")
        ):
            continue
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


def parse(text: str, origin: str, base_dir: str | Path | None = None) -> Scenario:
    """Parse and validate scenario text; ``origin`` names the file in error messages and
    ``base_dir`` is where relative file paths in it start (default: the working directory)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(f"{origin}: invalid TOML: {e}") from None
    variants = data.pop("variants", None)
    scenario = validate(data, origin, base_dir)
    if variants is not None:
        if not isinstance(variants, list) or not all(isinstance(v, dict) for v in variants):
            raise ScenarioError(f"{origin}: variants: expected [[variants]] tables")
        for i, v in enumerate(variants):
            vname = v.get("name")
            if not isinstance(vname, str) or not vname:
                raise ScenarioError(f"{origin}: variants[{i}].name: required key is missing")
            merged = _deep_merge(data, {k: val for k, val in v.items() if k != "name"})
            merged["name"] = vname
            scenario._variants.append(validate(merged, f"{origin} (variant '{vname}')", base_dir))
    return scenario


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Variant overrides: tables merge key by key, anything else replaces."""
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = v
    return out


def validate(data: dict[str, Any], origin: str, base_dir: str | Path | None = None) -> Scenario:
    """Validate parsed scenario data; errors name ``origin``, the key path and the problem."""
    try:
        scenario = Scenario.model_validate(data)
        scenario._origin = origin
        scenario._base_dir = Path(base_dir) if base_dir is not None else None
        return scenario
    except ValidationError as e:
        err = e.errors()[0]
        more = f" (and {len(e.errors()) - 1} more problem(s))" if len(e.errors()) > 1 else ""
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        elif err["type"] == "missing":
            msg = "required key is missing"
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
        loc = _format_loc(tuple(err["loc"]))
        got = "" if err["type"] in ("extra_forbidden", "missing") else f" (got {err.get('input')!r})"
        if isinstance(err.get("input"), dict):
            got = ""
        if loc == "(top level)" and msg.split(": ", 1)[0].replace("[", ".").replace("]", "").replace(".", "_").isidentifier():
            loc = ""  # a whole-scenario check that names its own key path
        raise ScenarioError(f"{origin}: {loc + ': ' if loc else ''}{msg}{got}{more}") from None


def load(name_or_path: str) -> tuple[Scenario, str, str]:
    """Load a built-in scenario by name or a scenario file by path.

    Returns (scenario, its full TOML text, where it came from)."""
    p = Path(name_or_path)
    if p.suffix == ".toml" or p.exists() or "/" in name_or_path:
        if not p.exists():
            raise ScenarioError(f"{p}: no such scenario file")
        if p.is_dir():
            raise ScenarioError(f"{p}: is a directory, not a scenario file")
        try:
            text = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise ScenarioError(f"{p}: cannot read: {e}") from None
        return parse(text, str(p), base_dir=p.parent), text, str(p)
    names = builtin_names()
    if name_or_path not in names:
        raise ScenarioError(
            f"{name_or_path}: no built-in scenario of that name and no such file; built-in: {', '.join(names)}"
        )
    text = resources.files("scenarios.builtin").joinpath(f"{name_or_path}.toml").read_text(encoding="utf-8")
    return parse(text, f"built-in scenario '{name_or_path}'"), text, f"builtin:{name_or_path}"
