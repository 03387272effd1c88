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
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)

from twin import catalog, params
from twin.models import MODELS
from twin.sim import EVENT_KINDS

STRICT = ConfigDict(extra="forbid", frozen=True)

# Fields whose values may be below zero (temperatures in °C).
_SIGNED = {"mean_temp_c", "latitude_deg"}
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
_SiteBase = _section(params.SiteParams)
TrainingSection = _section(params.TrainingParams)
FailureSection = _section(params.FailureParams)
_ServiceBase = _section(params.ServiceParams)

CLIMATES: dict[str, dict[str, float]] = {
    # Synthetic climates (ASM): annual mean, seasonal and diurnal half-swings of dry-bulb [°C, K].
    "temperate": {"mean_temp_c": 12.0, "seasonal_amplitude_k": 9.0, "diurnal_amplitude_k": 5.0},
    "hot": {"mean_temp_c": 24.0, "seasonal_amplitude_k": 9.0, "diurnal_amplitude_k": 7.0},
    "cold": {"mean_temp_c": 3.0, "seasonal_amplitude_k": 11.0, "diurnal_amplitude_k": 4.0},
}


class SiteSection(_SiteBase):  # type: ignore[misc,valid-type]
    climate: Literal["temperate", "hot", "cold"] | None = None

    @model_validator(mode="before")
    @classmethod
    def _preset(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("climate") in CLIMATES:
            merged = dict(CLIMATES[data["climate"]])
            merged.update(data)
            return merged
        return data


class ServiceSection(_ServiceBase):  # type: ignore[misc,valid-type]
    @model_validator(mode="before")
    @classmethod
    def _model_defaults(cls, data: Any) -> Any:
        """Fill the architecture of a catalogued model unless given explicitly."""
        if isinstance(data, dict) and data.get("model") in MODELS:
            m = MODELS[data["model"]]
            filled = {
                "params": m.params,
                "active_params": m.active_params,
                "layers": m.layers,
                "kv_heads": m.kv_heads,
                "head_dim": m.head_dim,
            }
            filled.update(data)
            return filled
        return data


class HallSection(BaseModel):
    model_config = STRICT
    system: str = "trn3-gen2"
    ultraservers: int = Field(16, gt=0, le=20000)
    ultraservers_per_row: int = Field(4, gt=0)

    @field_validator("system")
    @classmethod
    def _known_system(cls, v: str) -> str:
        if v not in catalog.SYSTEMS:
            raise ValueError(f"unknown system {v!r}; known: {', '.join(catalog.SYSTEMS)}")
        return v


_ACC_OVERRIDABLE = {"tdp_w", "idle_fraction", "hbm_bytes", "hbm_bw_bytes_s"}
_SYS_OVERRIDABLE = {"host_w_per_server", "host_idle_fraction", "switch_w", "liquid_fraction"}


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
    power: PowerSection = PowerSection()  # type: ignore[valid-type]
    cooling: CoolingSection = CoolingSection()  # type: ignore[valid-type]
    training: TrainingSection = TrainingSection()  # type: ignore[valid-type]
    services: list[ServiceSection] = Field(default_factory=lambda: [ServiceSection()])  # type: ignore[valid-type]
    failures: FailureSection = FailureSection()  # type: ignore[valid-type]
    telemetry: TelemetrySection = TelemetrySection()
    events: list[EventSection] = Field(default_factory=list)

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        t = self.training
        if len(t.size_chips) != len(t.size_weights):
            raise ValueError("training.size_chips and training.size_weights must have the same length")
        if len(t.models) != len(t.model_weights):
            raise ValueError("training.models and training.model_weights must have the same length")
        if any(c <= 0 for c in t.size_chips):
            raise ValueError("training.size_chips: gang sizes must be positive")
        for name in ("size_weights", "model_weights"):
            w = getattr(t, name)
            if any(x < 0 for x in w) or sum(w) <= 0:
                raise ValueError(f"training.{name}: weights must be non-negative with a positive sum")
        for m in t.models:
            if m not in MODELS:
                raise ValueError(f"training.models: unknown model {m!r}; known: {', '.join(MODELS)}")
        acc = catalog.ACCELERATORS[catalog.SYSTEMS[self.hall.system].accelerator]
        if not acc.supports(t.precision):
            raise ValueError(
                f"training.precision: {acc.name} has no {t.precision!r} rate; use one of {', '.join(acc.peak_flops)}"
            )
        for i, s in enumerate(self.services):
            if not acc.supports(s.precision):
                raise ValueError(f"services[{i}].precision: {acc.name} has no {s.precision!r} rate")
        return self

    # ------------------------------------------------------------------ to model
    def to_params(self, seed: int | None = None) -> params.FactoryParams:
        hw = self.hardware.model_dump(exclude_none=True)
        sysm = catalog.system(self.hall.system, {k: v for k, v in hw.items() if k in _SYS_OVERRIDABLE})
        acc = catalog.accelerator_for(sysm, {k: v for k, v in hw.items() if k in _ACC_OVERRIDABLE})
        hall = params.HallParams(sysm, acc, self.hall.ultraservers, self.hall.ultraservers_per_row)
        site = self.site.model_dump(exclude={"climate"})
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
            site=params.SiteParams(**site),
            training=params.TrainingParams(**self.training.model_dump()),
            services=tuple(params.ServiceParams(**s.model_dump()) for s in self.services),
            failures=params.FailureParams(**self.failures.model_dump()),
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


def parse(text: str, origin: str) -> Scenario:
    """Parse and validate scenario text; ``origin`` names the file in error messages."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(f"{origin}: invalid TOML: {e}") from None
    try:
        return Scenario.model_validate(data)
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
        raise ScenarioError(f"{origin}: {loc}: {msg}{got}{more}") from None


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
        return parse(text, str(p)), text, str(p)
    names = builtin_names()
    if name_or_path not in names:
        raise ScenarioError(
            f"{name_or_path}: no built-in scenario of that name and no such file; built-in: {', '.join(names)}"
        )
    text = resources.files("scenarios.builtin").joinpath(f"{name_or_path}.toml").read_text(encoding="utf-8")
    return parse(text, f"built-in scenario '{name_or_path}'"), text, f"builtin:{name_or_path}"
