"""Scenario files: TOML validated against the scenario fact table, turned into model parameters.

The section models are generated from ``scenarios.facts`` (each key's type, unit, bounds, default
and description, defined once) in ``scenarios.sections``; this module assembles the ``Scenario``,
checks it against its hall (size, replicas, event targets) and the resource limits before anything
is allocated, reads the files it names and builds the model parameters. Booleans are not numbers,
NaN and infinity are refused, enumerations are closed. Errors name the file, the key path and what
is wrong, in one line.

``load_scenario_dict(data, source)`` validates a raw TOML dict (``--set`` overrides are applied to
it first); ``prepare(scenario, seed, duration_s)`` is the one set of checks ``twin validate`` and
``twin run`` share.
"""

from __future__ import annotations

import dataclasses
import math
import re
import tomllib
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, PrivateAttr, ValidationError, create_model, model_validator

from scenarios import facts as F
from scenarios import sitefiles, traces
from scenarios.facts import CLIMATES, Fact
from scenarios.sections import (
    ACC_OVERRIDABLE,
    SCALED_ARRIVAL_KEYS,
    SYS_OVERRIDABLE,
    TOU_KEYS,
    CampusHallSection,
    CarbonSection,
    CoolingSection,
    EventSection,
    FailureSection,
    GridSection,
    HallSection,
    HardwareSection,
    ModelSection,
    PowerSection,
    PriceSection,
    SchedulerSection,
    ServiceSection,
    SiteSection,
    Strict,
    TcoSection,
    TelemetrySection,
    TrainingSection,
    annotation,
    fields_of,
    safe_name,
)
from twin.compose import sim
from twin.compose.floorplan import check as check_hall
from twin.spec import catalog, params, tco
from twin.spec.models import MODELS
from twin.work import workload

__all__ = [
    "CLIMATES",
    "CarbonSection",
    "PriceSection",
    "Scenario",
    "ScenarioError",
    "annotation",
    "build_simulation",
    "load",
    "load_scenario_dict",
    "parse",
    "prepare",
]


class ScenarioError(Exception):
    """A scenario could not be loaded: ``str()`` is the one-line message for the user."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(str(message).split("\n")))


def user_path(name: str) -> Path:
    """A path of a scenario key with ``~`` or ``~user`` expanded; ``ValueError`` (naming it) when
    the home folder cannot be found (no such user)."""
    try:
        return Path(name).expanduser()
    except RuntimeError:
        home = name.split("/", 1)[0]
        raise ValueError(f"{name!r}: no home folder for {home!r} (no such user)") from None


def site_params(site: Any, grid: GridSection, base_dir: Path | None, origin: str) -> params.SiteParams:
    """The model's site parameters, with the hourly series read from the files the scenario
    names (paths relative to ``base_dir``, the scenario file's directory)."""

    def read(key: str, reader: Any, name: str) -> Any:
        try:
            path = user_path(name)
        except ValueError as e:
            raise ScenarioError(f"{origin}: {key}: {e}") from None
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
        kw["price_tou"] = params.TouTariff(**price.model_dump(include=set(TOU_KEYS), exclude_none=True))
    elif price.kind == "file":
        kw["price_hourly_usd_per_mwh"] = read("grid.price.file", sitefiles.read_price_csv, price.file)
    if carbon.kind == "flat" and carbon.g_per_kwh is not None:
        kw["carbon_g_per_kwh"] = carbon.g_per_kwh
    elif carbon.kind == "file":
        kw["carbon_hourly_g_per_kwh"] = read("grid.carbon.file", sitefiles.read_carbon_csv, carbon.file)
    return params.SiteParams(**kw)


# ---------------------------------------------------------------------- the scenario
_ScenarioFields: Any = create_model(
    "ScenarioFields",
    __base__=Strict,
    **fields_of(""),
    hall=(HallSection, HallSection()),
    halls=(Annotated[list[CampusHallSection], Field(max_length=F.MAX_HALLS)], Field(default_factory=list)),  # type: ignore[valid-type]
    hardware=(HardwareSection, HardwareSection()),
    site=(SiteSection, SiteSection()),
    grid=(GridSection, GridSection()),
    power=(PowerSection, PowerSection()),
    cooling=(CoolingSection, CoolingSection()),
    tco=(TcoSection, TcoSection()),
    training=(TrainingSection, TrainingSection()),
    services=(
        Annotated[list[ServiceSection], Field(max_length=F.MAX_TABLE_ITEMS)],  # type: ignore[valid-type]
        Field(default_factory=list),  # no service runs that the scenario does not declare
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
    def _one_site(self) -> Scenario:
        if "halls" in self.model_fields_set:
            if not self.halls:
                raise ValueError(f"halls: a campus holds 1..{F.MAX_HALLS} halls (got 0)")
            if "hall" in self.model_fields_set:
                raise ValueError("give [hall] or [[halls]], not both (a campus is its halls)")
        elif self.power.campus_cap_w:
            raise ValueError(
                "power.campus_cap_w: caps a campus ([[halls]]); a single hall uses power.facility_cap_w"
            )
        return self

    @model_validator(mode="after")
    def _grid_interval_divides_the_step(self) -> Scenario:
        tau = self.telemetry.grid_interval_s
        if tau and self.dt_s % tau:
            raise ValueError(f"telemetry.grid_interval_s: {tau} s must divide dt_s = {self.dt_s} s")
        return self

    def hall_sections(self) -> list[Any]:
        """The halls of the site: the campus's ``[[halls]]``, or the one ``[hall]``."""
        return list(self.halls) if self.halls else [self.hall]

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        known = {**MODELS, **{m.name: m.spec() for m in self.models}}
        accs = [catalog.ACCELERATORS[s.accelerator] for s in self.floor_systems()]
        acc = accs[0]
        for kind in params.JOB_CLASSES:
            c = getattr(self.training, kind)
            for m in c.models:
                if m not in known:
                    raise ValueError(
                        f"training.{kind}.models: unknown model {m!r}; known: {', '.join(known)}"
                    )
            prec = self._class_precision(kind)
            if not any(a.supports(prec) for a in accs):
                where = (
                    f"training.{kind}.precision"
                    if "precision" in c.model_fields_set
                    else "training.precision"
                )
                raise ValueError(
                    f"{where}: {acc.name} has no {prec!r} rate; use one of {', '.join(acc.peak_flops)}"
                )
        for i, s in enumerate(self.services):
            if not any(a.supports(s.precision) for a in accs):
                raise ValueError(f"services[{i}].precision: {acc.name} has no {s.precision!r} rate")
            if s.model not in known and "params" not in s.model_fields_set:
                raise ValueError(
                    f"services[{i}].model: unknown model {s.model!r}; known: {', '.join(known)} "
                    "(or define it in [[models]])"
                )
        names = [s.name for s in self.services]
        if len(set(names)) != len(names):
            raise ValueError("services: service names must be unique")
        self._check_families()
        return self

    def floor_systems(self) -> list[catalog.System]:
        """The catalog systems of the hall, in floor order (one unless [[hall.rows]])."""
        keys = [k for h in self.hall_sections() for k in ([r.system for r in h.rows] or [h.system])]
        return [catalog.SYSTEMS[k] for k in dict.fromkeys(keys)]

    def _check_families(self) -> None:
        """Work that needs a system family, or is pinned to a system, finds it on the floor."""
        systems = self.floor_systems()
        keys = [s.key for s in systems]
        families = {s.family for s in systems}
        work = [(f"training.{k}", getattr(self.training, k)) for k in params.JOB_CLASSES]
        work += [(f"services[{i}]", s) for i, s in enumerate(self.services)]
        for where, w in work:
            if where.startswith("training.") and w.share <= 0:
                continue
            if w.family != "any" and w.family not in families:
                raise ValueError(
                    f"{where}.family: {w.family!r} work but the hall has only {', '.join(sorted(families))} systems"
                )
            if w.system and w.system not in keys:
                raise ValueError(f"{where}.system: {w.system!r} is not on the floor ({', '.join(keys)})")
            if w.system and w.family != "any" and catalog.SYSTEMS[w.system].family != w.family:
                raise ValueError(f"{where}.system: {w.system!r} is not a {w.family!r} system")

    @model_validator(mode="before")
    @classmethod
    def _scenario_models(cls, data: Any) -> Any:
        """Services of a model defined in [[models]] take its architecture unless given."""
        if not isinstance(data, dict) or not isinstance(data.get("models"), list):
            return data
        custom = {
            m["name"]: m for m in data["models"] if isinstance(m, dict) and isinstance(m.get("name"), str)
        }
        svcs = data.get("services")
        if not isinstance(svcs, list):
            return data
        out = []
        for s in svcs:
            m = custom.get(s["model"]) if isinstance(s, dict) and isinstance(s.get("model"), str) else None
            if m is not None:
                keys = ("params", "layers", "kv_heads", "head_dim", "hidden", "experts", "experts_active")
                arch = {k: m[k] for k in keys if k in m}
                arch["active_params"] = m.get("active_params", m.get("params"))
                s = {**{k: v for k, v in arch.items() if v is not None}, **s}
            out.append(s)
        return {**data, "services": out}

    # ------------------------------------------------------------------ to model
    def _trace_path(self, name: str, key: str) -> Path:
        try:
            path = user_path(name)
        except ValueError as e:
            raise ScenarioError(f"{self._origin}: {key}: {e}") from None
        if not path.is_absolute() and self._base_dir is not None:
            path = self._base_dir / path
        return path

    def _training_params(self, halls: list[params.HallParams] | None = None) -> params.TrainingParams:
        t = self.training
        kw: dict[str, Any] = t.model_dump(
            exclude={"trace", "precision", *params.JOB_CLASSES, *SCALED_ARRIVAL_KEYS}
        )
        for kind in params.JOB_CLASSES:
            dump = {**getattr(t, kind).model_dump(), "precision": self._class_precision(kind)}
            kw[kind] = params.JobClassParams(**dump)
        if halls is not None:
            kw["arrivals_per_day"] = self._arrivals_per_day(params.TrainingParams(**kw), halls)
        if t.trace is not None:
            known = set(MODELS) | {m.name for m in self.models}
            try:
                kw["trace"] = traces.read_job_trace(self._trace_path(t.trace, "training.trace"), known)
            except traces.TraceError as e:
                raise ScenarioError(f"{self._origin}: training.trace: {e}") from None
        return params.TrainingParams(**kw)

    def _arrivals_per_day(self, tp: params.TrainingParams, halls: list[params.HallParams]) -> float:
        """Weekday arrivals: ``arrivals_per_day``, or scaled with the site (``training``'s
        arrivals_per_chip_day, arrivals_per_mw_day or offered_load; ``ValueError`` beyond the
        limit of ``arrivals_per_day``)."""
        t = self.training
        pools = [r for h in halls for r in h.pools()]
        chips = sum(r.ultraservers * r.system.chips for r in pools)
        if t.arrivals_per_chip_day is not None:
            rate, how = (
                t.arrivals_per_chip_day * chips,
                f"{t.arrivals_per_chip_day:g} per chip x {chips:,} chips",
            )
        elif t.arrivals_per_mw_day is not None:
            mw = (
                sum(r.ultraservers * catalog.system_full_load_it_w(r.system, r.accelerator) for r in pools)
                / 1e6
            )
            rate, how = t.arrivals_per_mw_day * mw, f"{t.arrivals_per_mw_day:g} per MW x {mw:,.2f} MW"
        elif t.offered_load is not None:
            inference = sum(s.replicas * s.chips_per_replica for s in self.services)
            batch = max(chips - inference, 0)
            per_job = workload.mean_job_chip_s(tp, batch)
            week = workload.week_mean_factor(tp.weekend_factor)
            rate = t.offered_load * batch * 86400.0 / (per_job * week) if per_job > 0 else 0.0
            how = (
                f"{t.offered_load:g} of {batch:,} chips x 24 h / {per_job / 3600:,.2f} chip-h a job"
                f" / {week:.3f} (the week's mean)"
            )
        else:
            return tp.arrivals_per_day
        limit = max(F.MAX_ARRIVALS_PER_DAY, F.MAX_ARRIVALS_PER_CHIP_DAY * chips)
        if rate > limit:
            raise ValueError(
                f"training: {how} is {rate:,.0f} arrivals a day; at most {limit:,.0f} "
                f"({F.MAX_ARRIVALS_PER_CHIP_DAY:g} a chip, or {F.MAX_ARRIVALS_PER_DAY:,.0f} on a smaller hall)"
            )
        return float(rate)

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
                kw["trace"] = tr = traces.read_request_trace(
                    self._trace_path(s.trace, f"services[{i}].trace")
                )
            except traces.TraceError as e:
                raise ScenarioError(f"{self._origin}: services[{i}].trace: {e}") from None
            # A looped trace repeats with the period of its span: rows all at one time have none.
            if s.trace_loop and len(tr.time_s) > 1 and not tr.span_s > 0:
                raise ScenarioError(
                    f"{self._origin}: services[{i}].trace: all {len(tr.time_s):,} requests at one time "
                    f"({tr.time_s[0]:g} s), so trace_loop = true has no period to repeat; spread them "
                    "over time or set trace_loop = false"
                )
        return params.ServiceParams(**kw)

    def _failure_params(self) -> params.FailureParams:
        f = self.failures
        causes = {n: params.FailureCause(**getattr(f, n).model_dump()) for n in params.FAILURE_CAUSES}
        return params.FailureParams(
            chip_hazard_per_h=f.chip_hazard_per_h, repair_sigma=f.repair_sigma, **causes
        )

    def _check_hall(self, halls: list[tuple[params.SystemRows, ...]]) -> None:
        """Hall and campus size, service replicas and event targets against the halls, before
        anything is allocated (``ValueError`` with the key path and the limit)."""
        campus_ = bool(self.halls)
        hall_chips = []
        for k, pools in enumerate(halls):
            n = sum(r.ultraservers for r in pools)
            where = f"halls[{k}]" if campus_ else "hall"
            where += ".rows" if len(pools) > 1 else ""
            if n > F.MAX_ULTRASERVERS:
                raise ValueError(
                    f"{where}: {n:,} systems; a hall may hold at most {F.MAX_ULTRASERVERS:,} "
                    "(it_envelope_w too large?)"
                )
            chips = sum(r.ultraservers * r.system.chips for r in pools)
            if chips > F.MAX_CHIPS:
                what = " + ".join(f"{r.ultraservers:,} x {r.system.chips}" for r in pools)
                raise ValueError(
                    f"{where}: {what} = {chips:,} chips; a hall may hold at most {F.MAX_CHIPS:,} chips"
                )
            hall_chips.append(chips)
        every = [r for pools in halls for r in pools]
        chips = sum(hall_chips)
        if chips > F.MAX_CAMPUS_CHIPS:
            raise ValueError(
                f"halls: {len(halls)} halls hold {chips:,} chips; a campus may hold at most {F.MAX_CAMPUS_CHIPS:,}"
            )
        n = sum(r.ultraservers for r in every)
        servers = sum(r.ultraservers * r.system.servers for r in every)
        rows = sum(-(-r.ultraservers // r.ultraservers_per_row) for r in every)
        slots = 0
        where_svc = "the hall"
        for i, s in enumerate(self.services):
            top = max(s.replicas, s.replicas_max if s.autoscale else 0)
            have = hall_chips[i % len(halls)]
            if campus_:
                where_svc = f"its hall (halls[{i % len(halls)}])"
            if top * s.chips_per_replica > have:
                what = "replicas_max" if top != s.replicas else "replicas"
                raise ValueError(
                    f"services[{i}].{what}: {top:,} replicas x {s.chips_per_replica} chips = "
                    f"{top * s.chips_per_replica:,} chips; {where_svc} has {have:,}"
                )
            slots += top
        if slots > F.MAX_REPLICAS:
            raise ValueError(f"services: {slots:,} replicas in all; at most {F.MAX_REPLICAS:,}")
        for k, have in enumerate(hall_chips):
            need = sum(
                s.replicas * s.chips_per_replica for i, s in enumerate(self.services) if i % len(halls) == k
            )
            if need > have:
                where_h = f"halls[{k}]" if campus_ else "the hall"
                raise ValueError(
                    f"services: the initial replicas need {need:,} chips but {where_h} has {have:,}"
                )
        names = {s.name for s in self.services}
        nh = len(halls) if campus_ else 0
        for i, e in enumerate(self.events):
            _check_event(f"events[{i}]", e, chips, servers, n, rows, names, self.cooling, nh)

    def _site_pools(self) -> list[tuple[params.SystemRows, ...]]:
        """Each hall's systems, in the order of ``[[halls]]`` (one hall unless a campus)."""
        return [self._pools(h) for h in self.hall_sections()]

    def _pools(self, hall: Any = None) -> tuple[params.SystemRows, ...]:
        """A floor's systems: [[hall.rows]] (catalog values, each row's price), or the one
        system with the scenario's overrides."""
        hall = self.hall if hall is None else hall
        if not hall.rows:
            sysm, acc, n = self._hardware(hall)
            return (params.SystemRows(sysm, acc, n, hall.ultraservers_per_row),)
        hw = self.hardware.model_dump(exclude_none=True)
        if hw:
            raise ValueError(
                f"hardware.{sorted(hw)[0]}: [hardware] overrides apply to a one-system hall, not to "
                "[[hall.rows]]"
            )
        if self.tco.system_capex_usd:
            raise ValueError(
                "tco.system_capex_usd: a mixed floor prices each system by its [[hall.rows]] capex_usd"
            )
        out = []
        for r in hall.rows:
            sysm = catalog.system(r.system, {})
            if r.capex_usd is not None:
                sysm = dataclasses.replace(sysm, capex_usd=float(r.capex_usd))
            acc = catalog.accelerator_for(sysm, {})
            per_row = r.ultraservers_per_row or hall.ultraservers_per_row
            out.append(params.SystemRows(sysm, acc, r.count, per_row))
        return tuple(out)

    def _hall_cooling(self, k: int) -> params.CoolingParams:
        """Hall ``k``'s cooling: the campus's [cooling] with the keys its [halls.cooling] gives."""
        own = self.halls[k].cooling
        merged = {**self.cooling.model_dump(), **own.model_dump(include=own.model_fields_set)}
        try:
            checked = CoolingSection.model_validate(merged)
        except ValidationError as e:
            err = e.errors()[0]
            raise ValueError(_message({**err, "loc": ("halls", k, "cooling", *err["loc"])})) from None
        return params.CoolingParams(**checked.model_dump())

    def _hardware(self, hall: Any = None) -> tuple[catalog.System, catalog.Accelerator, int]:
        """The system and accelerator with the scenario's overrides, and the number of systems."""
        hall = self.hall if hall is None else hall
        hw = self.hardware.model_dump(exclude_none=True)
        sysm = catalog.system(hall.system, {k: v for k, v in hw.items() if k in SYS_OVERRIDABLE})
        if sysm.chips % sysm.servers:
            raise ValueError(f"hardware: {sysm.chips} chips do not divide into {sysm.servers} servers")
        acc_over = {k: v for k, v in hw.items() if k in ACC_OVERRIDABLE}
        if "peak_flops" in acc_over:
            base = catalog.ACCELERATORS[sysm.accelerator].peak_flops
            acc_over["peak_flops"] = {**base, **acc_over["peak_flops"]}
        acc = catalog.accelerator_for(sysm, acc_over)
        return sysm, acc, hall.count(sysm, acc)

    def longest_run_s(self) -> int:
        """The longest run this hall may have: ten years, or fewer for a hall so large that
        steps x systems would pass ``MAX_US_STEPS`` (a live session runs until it is quit)."""
        try:
            n = sum(r.ultraservers for pools in self._site_pools() for r in pools)
        except ValueError as e:
            raise ScenarioError(f"{self._origin}: {e}") from None
        return int(min(F.MAX_RUN_H * 3600, (F.MAX_US_STEPS // max(n, 1)) * self.dt_s))

    def warmup_steps(self) -> int:
        """Steps of the warm-up (``warmup_h``, whole steps, rounded up)."""
        return -(-int(round(self.warmup_h * 3600)) // self.dt_s)

    def to_params(self, seed: int | None = None) -> params.FactoryParams:
        return self.to_plan(seed)[0]

    def to_plan(self, seed: int | None = None) -> tuple[params.FactoryParams, tuple[sim.FloorPlan, ...]]:
        """The model parameters and each hall's floor plan (``twin.compose.sim.floor_plans``:
        pools, designs, routing facts, service pools), worked out once: the checks raise from
        it, and the model is built from it."""
        site_pools = self._site_pools()
        self._check_hall(site_pools)
        halls = []
        for k, pools in enumerate(site_pools):
            first = pools[0]
            h = params.HallParams(
                first.system,
                first.accelerator,
                first.ultraservers,
                first.ultraservers_per_row,
                rows=pools if len(pools) > 1 else (),
            )
            if h.rows:
                try:
                    check_hall(h)
                except ValueError as e:
                    raise ValueError(f"halls[{k}].{e}" if self.halls else str(e)) from None
            if self.halls and self.halls[k].cooling is not None:
                h = dataclasses.replace(h, cooling=self._hall_cooling(k))
            halls.append(h)
        hall = halls[0]
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
        p = params.FactoryParams(
            hall=hall,
            dt_s=self.dt_s,
            seed=self.seed if seed is None else seed,
            power=params.PowerChainParams(**self.power.model_dump()),
            cooling=params.CoolingParams(**self.cooling.model_dump()),
            tco=tco.TcoParams(**self.tco.model_dump()),
            site=site,
            training=self._training_params(halls),
            services=tuple(self._service_params(i) for i in range(len(self.services))),
            failures=self._failure_params(),
            scheduler=params.SchedulerParams(**self.scheduler.model_dump()),
            models=tuple(m.spec() for m in self.models),
            events=events,
            warmup_s=self.warmup_steps() * self.dt_s,
            chip_sample_interval_s=self.telemetry.chip_sample_interval_s,
            ultraserver_interval_s=self.telemetry.ultraserver_interval_s,
            row_interval_s=self.telemetry.row_interval_s,
            hall_interval_s=self.telemetry.hall_interval_s,
            jobs_interval_s=self.telemetry.jobs_interval_s,
            grid_interval_s=self.telemetry.grid_interval_s,
            grid=params.GridParams(**self.grid.model_dump(exclude={"price", "carbon"})),
            halls=tuple(halls) if self.halls else (),
        )
        return p, sim.floor_plans(p)


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
        t = t[len(prefix) :]
    if not _INDEX_RE.match(t):
        form = f"{prefix}N or N" if prefix else "an index"
        raise ValueError(f"{where}.target: expected {form}, a {what} 0..{count - 1} (got {target!r})")
    if int(t) >= count:
        raise ValueError(f"{where}.target: {what} {int(t)} is beyond the hall ({what}s 0..{count - 1})")


_HALL_TARGET_RE = re.compile(r"^hall:([0-9]{1,9})$")


def _event_hall_target(where: str, kind: str, target: Any, halls: int) -> Any:
    """The event's target with a ``hall:K`` of a plant or cap event checked against the campus and
    taken off (""); on a campus a power cap must name a hall or a row."""
    m = _HALL_TARGET_RE.match(str(target))
    if m is not None and kind in (
        "power_cap",
        "cdu_pump_failure",
        "chiller_trip",
        "cooling_tower_loss",
        "cooling_restore",
    ):
        if not halls:
            raise ValueError(f"{where}.target: {target!r} names a hall, but the scenario has no [[halls]]")
        if int(m.group(1)) >= halls:
            raise ValueError(
                f"{where}.target: hall {int(m.group(1))} is beyond the campus (halls 0..{halls - 1})"
            )
        return ""
    if halls and kind == "power_cap" and target in ("", "facility"):
        raise ValueError(
            f"{where}.target: on a campus a power cap names a hall (hall:K) or a row (row:N); "
            "the campus's own cap is power.campus_cap_w"
        )
    return target


def _check_cooling_event(where: str, kind: str, target: Any, value: Any, cooling: Any) -> None:
    """A chiller_trip, cooling_tower_loss or cooling_restore: acts on the plant, units it has."""
    if kind in ("chiller_trip", "cooling_tower_loss"):
        units = cooling.chiller_units if kind == "chiller_trip" else cooling.economizer_units
        if value != int(value) or value > units:
            raise ValueError(
                f"{where}.value: units lost, a whole number 0..{units} (got {value:g}; 0 means 1)"
            )
        if target not in ("", "plant"):
            raise ValueError(f"{where}.target: {kind} acts on the plant; leave target out (got {target!r})")
    elif target not in ("", "plant"):
        raise ValueError(
            f"{where}.target: cooling_restore acts on the plant; leave target out (got {target!r})"
        )


def _check_event(
    where: str,
    e: Any,
    chips: int,
    servers: int,
    systems: int,
    rows: int,
    services: set[str],
    cooling: Any,
    halls: int = 0,
) -> None:
    """An event's target and value make sense for its kind in this hall (or campus of
    ``halls`` halls: a plant or cap event may name one as ``hall:K``)."""
    kind, value = e.kind, e.value
    level = _EVENT_LEVEL.get(kind)
    target = _event_hall_target(where, kind, e.target, halls)
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
    elif kind in ("chiller_trip", "cooling_tower_loss", "cooling_restore"):
        _check_cooling_event(where, kind, target, value, cooling)
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
    return _prepare(scenario, seed, duration_s, extra_events)[0]


def _prepare(
    scenario: Scenario,
    seed: int | None,
    duration_s: int | None,
    extra_events: tuple[params.ScheduledEvent, ...],
) -> tuple[params.FactoryParams, tuple[sim.FloorPlan, ...]]:
    """``prepare``, with the floor plans its checks worked out (``Scenario.to_plan``)."""
    origin = scenario._origin
    check_seed(seed)
    check_duration(duration_s)
    try:
        p, floors = scenario.to_plan(seed)
    except ValueError as e:
        raise ScenarioError(f"{origin}: {e}") from None
    # The scenario's own caps; what-ifs an operator injected (a re-run's ``extra_events``) happened.
    _check_caps(origin, p)
    if extra_events:  # the floor plans hold no events: the hall routes them
        import dataclasses

        p = dataclasses.replace(p, events=p.events + tuple(extra_events))
    total_s = duration_s if duration_s is not None else int(round(scenario.duration_h * 3600))
    check_duration(total_s, "duration_h")
    # One rule for every command: a run lasts at least one step (never silently one step longer).
    if total_s < p.dt_s:
        what = "the run's length (--hours/--days)" if duration_s is not None else "duration_h"
        raise ScenarioError(
            f"{origin}: {what}: {total_s:,} s is shorter than one step (dt_s = {p.dt_s} s); "
            "a run lasts at least one step"
        )
    if duration_s is None:  # a run of another length says which events it ends before instead
        _check_event_times(scenario, p)
    steps = -(-total_s // p.dt_s) + p.warmup_s // p.dt_s
    n = sum(r.ultraservers for h in (p.halls or (p.hall,)) for r in h.pools())
    if steps * n > F.MAX_US_STEPS:
        raise ScenarioError(
            f"{origin}: {steps:,} steps x {n:,} systems = {steps * n:,} system-steps; a run may have at most "
            f"{F.MAX_US_STEPS:,} (shorten the run, raise dt_s or shrink the hall)"
        )
    halls = p.halls or (p.hall,)
    for i, svc in enumerate(p.services):  # a mixed floor's: routing.service_pool
        h = halls[i % len(halls)]
        if h.rows:
            continue
        try:
            workload.roofline(svc, h.accelerator, h.system)
        except ValueError as e:
            raise ScenarioError(f"{origin}: {e}") from None
    return p, floors


def it_floor_w(p: params.FactoryParams, hall: params.HallParams | None = None) -> tuple[float, float]:
    """(idle, slowest busy) IT power at rack input of one hall (``hall``) or of every hall [W]:
    every chip idle and the hosts at their idle share; every chip busy at the lowest clock a cap
    may set (``cooling.min_clock``; dynamic power ~ clock^``dvfs_exponent``) and the hosts at full.
    No cap can bring the hall below the first; one below the second cannot hold while the hall is
    busy (the plant and the power chain draw more on top of both)."""
    cp, pp = p.cooling, p.power
    lowest = cp.min_clock**cp.dvfs_exponent
    idle = busy = 0.0
    for h in (hall,) if hall is not None else p.halls or (p.hall,):
        for r in h.pools():
            sy, acc = r.system, r.accelerator
            fixed = sy.switch_w + pp.psu_fixed_w_per_server * sy.servers
            host = sy.host_w_per_server * sy.servers
            idle += r.ultraservers * (sy.chips * acc.idle_w + host * sy.host_idle_fraction + fixed)
            busy += r.ultraservers * (
                sy.chips * (acc.idle_w + (acc.tdp_w - acc.idle_w) * lowest) + host + fixed
            )
    return idle / pp.psu_efficiency, busy / pp.psu_efficiency


def _caps(p: params.FactoryParams) -> list[tuple[str, float, tuple[float, float]]]:
    """The facility and campus caps a scenario sets, each with the IT floors it is held to
    (``it_floor_w``): (where, watts, floors) of the standing caps and of each power_cap event. A
    campus's facility cap holds each hall: the smallest hall's floors."""
    site = it_floor_w(p)
    halls = p.halls or (p.hall,)
    hall = min((it_floor_w(p, h) for h in halls), key=lambda f: f[0])
    out = []
    if p.power.facility_cap_w > 0:
        out.append(("power.facility_cap_w", p.power.facility_cap_w, hall))
    if p.power.campus_cap_w > 0:
        out.append(("power.campus_cap_w", p.power.campus_cap_w, site))
    for i, e in enumerate(p.events):
        if e.kind == "power_cap" and e.target in ("facility", "campus") and 0 < e.value < math.inf:
            out.append(
                (f"events[{i}].value", e.value, site if e.target == "campus" or len(halls) == 1 else hall)
            )
    return out


def _cap_text(where: str, cap_w: float) -> str:
    """``power.facility_cap_w = 1.6 W`` with a reminder of the unit for a value that reads as MW."""
    unit = f" (the value is in W; {cap_w:g} MW = {cap_w:g}e6)" if cap_w < 1e3 else ""
    return f"{where} = {cap_w:,.6g} W{unit}"


def _check_caps(origin: str, p: params.FactoryParams) -> None:
    """A facility cap below what the hall's IT draws with every chip idle can never hold: refused
    (most often MW written for W)."""
    for where, cap, (idle, _) in _caps(p):
        if cap < idle:
            raise ScenarioError(
                f"{origin}: {_cap_text(where, cap)} is below the {idle / 1e3:,.0f} kW the hall's IT draws "
                "with every chip idle: no clock can hold it"
            )


def cap_warnings(p: params.FactoryParams) -> list[str]:
    """The caps that cannot hold while the hall is busy: below the IT power of every chip busy at
    the lowest clock a cap may set (``it_floor_w``)."""
    return [
        f"{_cap_text(where, cap)} is below the {busy / 1e3:,.0f} kW the hall's IT draws busy at its lowest "
        f"clock ({p.cooling.min_clock:g}): while the hall is busy the cap cannot hold"
        for where, cap, (_, busy) in _caps(p)
        if cap < busy
    ]


def _check_event_times(scenario: Scenario, p: params.FactoryParams) -> None:
    """A scheduled event at or after the scenario's own end never happens in a run of the
    scenario's length: refused, naming it (a run given its own length with ``--hours`` is warned
    of the events it ends before, ``cut_events``)."""
    end_s = int(round(scenario.duration_h * 3600))
    for i, (e, ev) in enumerate(zip(scenario.events, p.events, strict=False)):
        if ev.time_s >= end_s:
            raise ScenarioError(
                f"{scenario._origin}: events[{i}].at_h: {e.at_h:g} h is at or after the end of the scenario "
                f"(duration_h = {scenario.duration_h:g}); it would never happen"
            )


def cut_events(scenario: Scenario, duration_s: int | None) -> list[str]:
    """The scheduled events a shorter run (``--hours``/``--days``) ends before, described for a
    warning (empty when the run is the scenario's own length or reaches them all)."""
    if duration_s is None:
        return []
    return [
        f"events[{i}] {e.kind} at {e.at_h:g} h"
        for i, e in enumerate(scenario.events)
        if int(round(e.at_h * 3600)) >= duration_s
    ]


def build_simulation(
    scenario: Scenario,
    seed: int | None = None,
    duration_s: int | None = None,
    extra_events: tuple[params.ScheduledEvent, ...] = (),
) -> tuple[params.FactoryParams, Any]:
    """``prepare`` and then the model itself (its own checks, e.g. weights that do not fit in
    HBM): what ``twin run`` starts from and what ``twin validate`` builds and drops."""
    p, floors = _prepare(scenario, seed, duration_s, extra_events)
    try:
        return p, sim.build(p, floors)
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


def did_you_mean(word: str, known: Any) -> str:
    """``; did you mean 'x'?`` for the closest of ``known`` to ``word`` (a typo), or ''."""
    import difflib

    close = difflib.get_close_matches(word, list(known), n=1, cutoff=0.75)
    return f"; did you mean {close[0]!r}?" if close else ""


def _sibling_keys(loc: tuple[Any, ...]) -> set[str]:
    """The keys the fact table knows next to the unknown one at ``loc``: its section's keys and
    sub-tables (a job class's and a failure cause's tables stand for each of them)."""
    keys = [str(p) for p in loc if not isinstance(p, int)]
    if not keys:
        return set()
    parts = keys[:-1]
    if len(parts) == 2 and parts[0] == "training" and parts[1] in F.CLASS_NAMES:
        parts[1] = "<class>"
    elif len(parts) == 2 and parts[0] == "failures" and parts[1] in F.CAUSE_NAMES:
        parts[1] = "<cause>"
    section = ".".join(parts)
    out: set[str] = set()
    for f in F.FACTS:
        if f.section == section:
            out.add(f.key)
        elif section == "" or f.section.startswith(section + "."):
            sub = f.section[len(section) + 1 if section else 0 :].split(".")[0]
            names = {"<class>": F.CLASS_NAMES, "<cause>": F.CAUSE_NAMES}.get(sub, (sub,))
            out.update(names)
    return out


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
    got = (
        ""
        if typ in ("extra_forbidden", "missing") or isinstance(err.get("input"), dict)
        else (f" (got {_short(err.get('input'))})")
    )
    if typ == "extra_forbidden":
        msg = "unknown key" + did_you_mean(str(loc[-1]), _sibling_keys(loc))
    elif typ == "missing":
        msg = "required key is missing"
    elif f is not None and typ in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        unit = f" [{f.unit}]" if f.unit and f.unit != "-" else ""
        msg = f"out of range: must lie in {f.range_text()}{unit}"
    elif typ in ("model_type", "model_attributes_type", "dict_type"):
        msg = "expected a table"
    elif typ in ("list_type", "tuple_type"):
        msg = "expected an array"
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
        msg = msg[len("Value error, ") :]
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
            safe_name(vname)
        except ValueError as e:
            raise ScenarioError(f"{source}: variants[{i}].name: {e}") from None
        if vname in seen:
            raise ScenarioError(f"{source}: variants[{i}].name: {vname!r} is used twice")
        seen.add(vname)
        merged = merged_variant(data, v)
        carried = system_carry_over(
            data,
            merged,
            lambda p, v=v: _in(v, p),
            override=False,
        )
        if carried:
            raise ScenarioError(f"{source} (variant '{vname}'): {carried}")
        scenario._variants.append(validate(merged, f"{source} (variant '{vname}')", base_dir))
    return scenario


def parse(text: str, origin: str, base_dir: str | Path | None = None) -> Scenario:
    """Parse and validate scenario text; ``origin`` names the file in error messages and
    ``base_dir`` is where relative file paths in it start (default: the working directory).
    A UTF-8 byte-order mark at the top is ignored."""
    if len(text) > F.MAX_SCENARIO_BYTES:
        raise ScenarioError(
            f"{origin}: {len(text):,} characters; a scenario may be at most {F.MAX_SCENARIO_BYTES:,}"
        )
    text = text.removeprefix("\ufeff")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(f"{origin}: invalid TOML: {e}") from None
    except RecursionError:
        raise ScenarioError(f"{origin}: invalid TOML: arrays or tables nested too deeply") from None
    return load_scenario_dict(data, origin, base_dir)


def _in(data: Any, path: KeyPath) -> bool:
    """Whether raw data sets ``path`` (or a table or list on the way to it)."""
    node = data
    for p in path:
        if isinstance(p, int):
            if not isinstance(node, list) or not -len(node) <= p < len(node):
                return False
        elif not isinstance(node, dict) or p not in node:
            return False
        node = node[p]
        if not isinstance(node, (dict, list)):
            return True
    return True


def merged_variant(base: dict[str, Any], variant: dict[str, Any]) -> dict[str, Any]:
    """A variant's raw data: the base's with the variant's tables merged in, and its name."""
    merged = _deep_merge(base, {k: val for k, val in variant.items() if k != "name"})
    merged["name"] = variant.get("name")
    return merged


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Variant overrides: tables merge key by key, anything else replaces."""
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = v
    return out


# ---------------------------------------------------------------------- per-system keys
# Keys that describe one system: the catalog overrides of [hardware] and tco.system_capex_usd (both
# apply to the system of each hall), and a row's capex_usd (the price of that row's system). They
# belong to the system they were written for: when a --set, sweep or plan override or a variant
# switches a hall's (or row's) system without restating them, the scenario is refused (a 900 W
# Trainium3 TDP must not silently become a 900 W H100). Refused rather than reset: a reset would
# change the result of a run or sweep point behind a message that is easy to miss, and the fix
# is one more --set (or the variant's own [hardware]).
KeyPath = tuple[str | int, ...]


def _system_default() -> str:
    f = F.fact("hall.system")
    return str(f.default) if f is not None else "trn3-gen2"


def _path_text(path: KeyPath) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")


def per_system_keys(data: Any) -> list[tuple[str, str, KeyPath, Any]]:
    """Every key of raw scenario data that describes one system, as (where the system is named,
    that system, the key's path, its value)."""
    if not isinstance(data, dict):
        return []
    hw = data.get("hardware")
    tco_ = data.get("tco")
    hall_keys: list[tuple[KeyPath, Any]] = (
        [(("hardware", k), v) for k, v in hw.items()] if isinstance(hw, dict) else []
    )
    if isinstance(tco_, dict) and tco_.get("system_capex_usd"):
        hall_keys.append((("tco", "system_capex_usd"), tco_["system_capex_usd"]))
    halls = data.get("halls")
    where: list[tuple[KeyPath, Any]] = (
        [(("halls", k), h) for k, h in enumerate(halls)]
        if isinstance(halls, list)
        else [(("hall",), data.get("hall"))]
    )
    out = []
    for hpath, hall in where:
        hall = hall if isinstance(hall, dict) else {}
        rows = hall.get("rows")
        if isinstance(rows, list) and rows:
            for i, r in enumerate(rows):
                if isinstance(r, dict) and "capex_usd" in r:
                    rpath = (*hpath, "rows", i)
                    out.append(
                        (
                            _path_text((*rpath, "system")),
                            str(r.get("system")),
                            (*rpath, "capex_usd"),
                            r["capex_usd"],
                        )
                    )
            continue
        system = str(hall.get("system", _system_default()))
        out += [(_path_text((*hpath, "system")), system, k, v) for k, v in hall_keys]
    return out


def restated_by(paths: list[KeyPath]) -> Any:
    """A test: is a key path set (or replaced with its table) by one of ``paths``?"""
    return lambda key: any(p[: len(key)] == key[: len(p)] for p in paths)


def system_carry_over(before: Any, after: Any, restated: Any, override: bool) -> str | None:
    """The message refusing a per-system key carried over to another system (``after`` switched a
    system ``before`` named, and ``restated(path)`` is false for the key), or None. ``override``:
    the switch came from --set (or a sweep or plan), else from a variant."""
    old = {(w, p): sysm for w, sysm, p, _ in per_system_keys(before)}
    for w, sysm, p, v in per_system_keys(after):
        was = old.get((w, p))
        if was is None or was == sysm or restated(p):
            continue
        key = _path_text(p)
        if override:
            drop = {
                "hardware": " or drop [hardware] (--set hardware={})",
                "tco": f" or drop it (--set {key}=0)",
            }
            fix = f"restate it for {sysm} (--set {key}=VALUE){drop.get(str(p[0]), '')}"
        else:
            fix = (
                f"give the variant its own {key} for {sysm}, or move the key from the base into every variant"
            )
        return f"{w}: {key} = {_short(v)} was written for {was}, not {sysm}; {fix}"
    return None


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
            f"{_short(name_or_path)}: no built-in scenario of that name and no such file"
            f"{did_you_mean(name_or_path, names)} (built-in: {', '.join(names)})"
        )
    text = resources.files("scenarios.builtin").joinpath(f"{name_or_path}.toml").read_text(encoding="utf-8")
    return parse(text, f"built-in scenario '{name_or_path}'"), text, f"builtin:{name_or_path}"
