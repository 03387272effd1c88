"""The scenario fact table: every key a scenario file may set, defined once.

Each ``Fact`` gives a key's type, unit, physical bounds, default, one-line description and the
source of its default. The pydantic models in ``scenarios.spec`` are generated from this table, and
so are ``twin schema`` (JSON Schema for editors) and the README's key tables
(``python -m scenarios.facts --readme``). Model defaults stay in ``twin.spec.params`` (the model's own
dataclasses); the table reads them from there, so a default exists in exactly one place.

Bounds are physical, not guessed from names: hours of the day lie in [0, 24), fractions in [0, 1],
efficiencies in (0, 1], temperatures in a stated range, counts are at least 1 with a stated maximum,
and enumerations are closed. Resource limits (hall size, run length x hall size, file sizes) are
the ``MAX_*`` constants below; every refusal message states the limit.

This module must not import pydantic or read files: it is data plus small pure helpers.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import sys
from dataclasses import dataclass
from typing import Any

from storage.schema import DEFAULT_START
from twin.compose import campus, floorplan
from twin.compose.sim import EVENT_KINDS
from twin.spec import catalog, params, tco
from twin.work import routing
from twin.work.workload import TOKEN_PROFILES

# ---------------------------------------------------------------------- resource limits
MAX_CHIPS = 1_000_000  # accelerators in one hall (model arrays are per chip; ~200 MB at the limit)
MAX_ULTRASERVERS = 20_000  # scale-up systems in one hall
MAX_HALLS = campus.MAX_HALLS  # halls (buildings) of one campus ([[halls]])
MAX_CAMPUS_CHIPS = 2_000_000  # accelerators on one campus, all halls (~400 MB of per-chip arrays)
MAX_US_STEPS = 1_000_000_000  # run length x hall size: steps x UltraServers (ultraserver_ts rows)
MAX_RUN_H = 87_600.0  # ten years of simulated time
MAX_WARMUP_H = 720.0  # a warm-up of at most 30 days (it is simulated like the run)
MAX_ARRIVALS_PER_DAY = 100_000.0  # batch jobs submitted per weekday (synthetic arrivals)
# ... per chip and day when the rate grows with the fleet (6x Seren's ~1.6): a larger hall may have
# max(MAX_ARRIVALS_PER_DAY, this x its chips)
MAX_ARRIVALS_PER_CHIP_DAY = 10.0
MAX_REPLICAS = 100_000  # replicas of one service
MAX_SCENARIO_BYTES = 1 << 20  # a scenario file (1 MiB)
MAX_SITE_FILE_BYTES = 32 << 20  # a weather, price or carbon file (32 MiB; a year of EPW is ~1.6 MB)
MAX_TRACE_BYTES = 256 << 20  # a request or job trace (256 MiB)
MAX_TRACE_ROWS = 2_000_000  # rows of a request or job trace
MAX_FIELD_BYTES = 128 << 10  # one CSV field (128 KiB)
MAX_NAME_CHARS = 64  # scenario, variant, service and model names
MAX_TEXT_CHARS = 4096  # descriptions and file paths
MAX_LIST_ITEMS = 64  # size_chips, models, ... of a job class
MAX_TABLE_ITEMS = 256  # [[services]], [[models]], [[events]], [[variants]]
MAX_COP = 50.0

PRECISION_NAMES = (*catalog.PRECISIONS, *sorted(catalog._ALIASES))


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
CLIMATE_NAMES = tuple(CLIMATES)
# A safe file stem: scenario and variant names become file names under twin-runs/.
NAME_PATTERN = rf"^[A-Za-z0-9][A-Za-z0-9._-]{{0,{MAX_NAME_CHARS - 1}}}$"

PARAMS = object()  # default: the model's, from the section's twin.spec.params dataclass
NONE = object()  # optional key without a default value (catalog, preset or derived)


@dataclass(frozen=True)
class Fact:
    """One scenario key. ``type``: int, float, bool, str, name, path, enum, datetime, list[int],
    list[float], list[str], table[float] (precision -> value) or target (str or int)."""

    section: str  # "" top level; "training.<class>" and "failures.<cause>" stand for each table
    key: str
    type: str
    unit: str  # SI unit or "-" for a ratio; "" for text
    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False  # lo excluded
    hi_open: bool = False  # hi excluded
    choices: tuple[str, ...] = ()
    description: str = ""
    source: str = ""
    default: Any = PARAMS

    @property
    def path(self) -> str:
        return f"{self.section}.{self.key}" if self.section else self.key

    def range_text(self) -> str:
        """The bounds as people write them: ``0 ≤ x < 24``, ``0 < x ≤ 1``, ``x ≥ 0``."""
        if self.lo is None and self.hi is None:
            return ""
        lo = "" if self.lo is None else f"{_num(self.lo)} {'<' if self.lo_open else '≤'} "
        hi = "" if self.hi is None else f" {'<' if self.hi_open else '≤'} {_num(self.hi)}"
        return f"{lo}x{hi}"


REQUIRED = object()


def _num(x: float) -> str:
    if x == 2**63 - 1:
        return "2^63 - 1"
    if x == int(x) and abs(x) < 1e7:
        return f"{int(x):,}" if abs(x) >= 10_000 else str(int(x))
    return f"{x:g}"


@dataclass(frozen=True)
class Section:
    name: str
    title: str  # how it is written in TOML: "[cooling]", "[[services]]", "top level"
    doc: str
    dataclass: Any = None  # the twin.spec.params dataclass (or instance) holding its defaults


def _hour(section: str, key: str, desc: str, src: str = "ASM") -> Fact:
    return Fact(section, key, "float", "h", 0, 24, hi_open=True, description=desc, source=src)


def _frac(section: str, key: str, desc: str, src: str = "ASM", **kw: Any) -> Fact:
    return Fact(section, key, "float", "-", 0, 1, description=desc, source=src, **kw)


def _eff(section: str, key: str, desc: str, src: str = "ASM", **kw: Any) -> Fact:
    return Fact(section, key, "float", "-", 0, 1, lo_open=True, description=desc, source=src, **kw)


def _f(
    section: str,
    key: str,
    typ: str,
    unit: str,
    lo: float | None,
    hi: float | None,
    desc: str,
    src: str = "ASM",
    **kw: Any,
) -> Fact:
    return Fact(section, key, typ, unit, lo, hi, description=desc, source=src, **kw)


def _pos(
    section: str, key: str, typ: str, unit: str, hi: float, desc: str, src: str = "ASM", **kw: Any
) -> Fact:
    return Fact(section, key, typ, unit, 0, hi, lo_open=True, description=desc, source=src, **kw)


def _temp(section: str, key: str, lo: float, hi: float, desc: str, src: str = "ASM") -> Fact:
    return Fact(section, key, "float", "°C", lo, hi, description=desc, source=src)


def _enum(section: str, key: str, choices: tuple[str, ...], desc: str, src: str = "", **kw: Any) -> Fact:
    return Fact(section, key, "enum", "", choices=tuple(choices), description=desc, source=src, **kw)


SYSTEM_KEYS = tuple(catalog.SYSTEMS)

SECTIONS: dict[str, Section] = {
    s.name: s
    for s in (
        Section(
            "", "top level", "The scenario itself: name, time step, length and start.", params.FactoryParams
        ),
        Section("hall", "[hall]", "The hall: which scale-up system and how many.", params.HallParams),
        Section(
            "hall.rows",
            "[[hall.rows]]",
            "A mixed floor instead of `hall.system`: rows of one system "
            "each (one table per system, in floor order), on one plant, one power chain and one grid "
            "connection (twin.compose.hall). Work goes to the systems by `scheduler.routing`.",
        ),
        Section(
            "halls",
            "[[halls]]",
            "A campus instead of one `[hall]`: several halls (buildings), one table "
            "each with the keys of `[hall]` (and its own `[[halls.rows]]`), each with its own rows, CDUs, "
            "cooling plant and power chain, under one substation and grid connection "
            "(twin.compose.campus). Rows, UltraServers, servers and chips are numbered across the campus hall by "
            "hall; an event names a hall's plant or cap as `hall:K`; service `i` runs in hall `i mod H`; "
            "batch arrivals are shared by the halls' chips. `[hardware]` applies to every hall, `[cooling]` "
            "too unless a hall's own `[halls.cooling]` table sets some of its keys (checked with the "
            f"campus's). 1..{campus.MAX_HALLS} halls.",
        ),
        Section(
            "hardware", "[hardware]", "Overrides of catalog values (`twin hardware` lists them with sources)."
        ),
        Section(
            "site",
            "[site]",
            "Site weather (synthetic, a `climate` preset, or a file) and a heat wave.",
            params.SiteParams,
        ),
        Section(
            "grid",
            "[grid]",
            "The grid connection's view of the site (twin.compose.grid): what-ifs that shape the power "
            "within a step (a software power floor, checkpoint stalls) and storage at the "
            "connection (rack power shelves, a site battery); seen in grid_ts "
            "(`telemetry.grid_interval_s`).",
            params.GridParams,
        ),
        Section(
            "grid.price", "[grid.price]", 'Electricity price: kind = "flat", "tou" (time of use) or "file".'
        ),
        Section("grid.carbon", "[grid.carbon]", 'Grid carbon intensity: kind = "flat" or "file".'),
        Section(
            "power",
            "[power]",
            "The power chain from the grid to the chips, and standing caps.",
            params.PowerChainParams,
        ),
        Section(
            "cooling",
            "[cooling]",
            "Liquid and air cooling, the heat-rejection plant and chip protection.",
            params.CoolingParams,
        ),
        Section(
            "tco",
            "[tco]",
            "Cost of ownership beyond electricity: prices and lives of capital, maintenance, "
            "staff and water (twin.spec.tco). Every default is an assumption.",
            tco.TcoParams,
        ),
        Section(
            "training",
            "[training]",
            "Batch work: arrivals of training, fine-tuning, eval and batch-inference "
            "jobs. Class keys given directly here describe one class of pre-training jobs.",
            params.TrainingParams,
        ),
        Section(
            "training.<class>",
            "[training.pretrain], [training.finetune], [training.eval], [training.batch_inference]",
            "One class of batch work; defaults per class (the fitted mix).",
            params.PRETRAIN,
        ),
        Section("scheduler", "[scheduler]", "Queue policy and placement.", params.SchedulerParams),
        Section(
            "services",
            "[[services]]",
            "Online inference services (one table each; none if the scenario gives none).",
            params.ServiceParams,
        ),
        Section(
            "models", "[[models]]", "Models the scenario defines or redefines for its jobs and services."
        ),
        Section("failures", "[failures]", "Hardware and software failures.", params.FailureParams),
        Section(
            "failures.<cause>",
            "[failures.accelerator], [failures.hbm], [failures.network], "
            "[failures.host], [failures.software]",
            "One failure cause; defaults per cause.",
        ),
        Section("telemetry", "[telemetry]", "What is recorded.", params.FactoryParams),
        Section("events", "[[events]]", "Scheduled what-ifs (one table each)."),
    )
}

_CAP_W = 1e10  # 10 GW: above any site
FACTS: tuple[Fact, ...] = (
    # ------------------------------------------------------------------ top level
    Fact(
        "",
        "name",
        "name",
        "",
        description="Scenario name; also the stem of its default output file "
        "(letters, digits, `.`, `_`, `-`; up to 64)",
        default=REQUIRED,
    ),
    Fact("", "description", "str", "", description="One line shown by `twin scenarios`", default=""),
    _f("", "seed", "int", "", 0, 2**63 - 1, "Random seed of the run (same seed, same run)", ""),
    _f("", "dt_s", "int", "s", 1, 3600, "Time step of the model"),
    _f(
        "",
        "duration_h",
        "float",
        "h",
        0.001,
        MAX_RUN_H,
        "Simulated length of `twin run` without --hours/--days",
        default=168.0,
    ),
    _f(
        "",
        "warmup_h",
        "float",
        "h",
        0,
        MAX_WARMUP_H,
        "Simulated before the recording starts and not recorded: the run starts from the state "
        "this reaches (jobs running and waiting, loops warm) instead of an empty hall. A job "
        "trace's jobs arrive from the recording's start on; the weather runs back from `start`",
        "ASM: a day reaches the steady queue of the built-ins",
        default=0.0,
    ),
    Fact(
        "",
        "start",
        "datetime",
        "",
        description="Wall-clock time of the run's first step, ISO 8601 with a "
        "zone (`2026-06-29T00:00:00Z`); stamps the telemetry's `ts`. The weather day is "
        "`site.start_day_of_year` (the defaults agree: 29 June = day 180)",
        source="ASM: a Monday",
        default=DEFAULT_START,
    ),
    # ------------------------------------------------------------------ hall
    _enum(
        "hall",
        "system",
        SYSTEM_KEYS,
        "Scale-up system (`twin hardware`)",
        "twin.spec.catalog",
        default="trn3-gen2",
    ),
    _f(
        "hall",
        "ultraservers",
        "int",
        "",
        1,
        MAX_ULTRASERVERS,
        "Number of systems (default 16 unless `it_envelope_w` is given)",
        default=NONE,
    ),
    _pos(
        "hall",
        "it_envelope_w",
        "float",
        "W",
        1e9,
        "Size the hall to an IT power envelope instead: as many systems as fit at full-load IT power",
        default=NONE,
    ),
    _f(
        "hall",
        "ultraservers_per_row",
        "int",
        "",
        1,
        1000,
        "Systems per row (one CDU and one row cap per row)",
    ),
    _enum(
        "hall.rows",
        "system",
        SYSTEM_KEYS,
        "Scale-up system of these rows (`twin hardware`)",
        "twin.spec.catalog",
        default=REQUIRED,
    ),
    _f(
        "hall.rows",
        "count",
        "int",
        "",
        1,
        MAX_ULTRASERVERS,
        "Number of these systems (UltraServers, NVL72 racks, HGX nodes)",
        "",
        default=REQUIRED,
    ),
    _f(
        "hall.rows",
        "ultraservers_per_row",
        "int",
        "",
        1,
        1000,
        "Systems per row (default: `hall.ultraservers_per_row`)",
        "",
        default=NONE,
    ),
    _f(
        "hall.rows",
        "capex_usd",
        "float",
        "USD",
        0,
        1e9,
        "Price of one of these systems, hosts and switches "
        "included (default: the catalog's, all ASM; `tco.system_capex_usd` does not apply to a mixed floor)",
        "ASM (twin.spec.catalog)",
        default=NONE,
    ),
    # ------------------------------------------------------------------ hardware (catalog overrides)
    _pos("hardware", "tdp_w", "float", "W", 5000, "Accelerator TDP", "twin.spec.catalog", default=NONE),
    Fact(
        "hardware",
        "idle_fraction",
        "float",
        "-",
        0,
        1,
        hi_open=True,
        description="Idle power / TDP",
        source="twin.spec.catalog",
        default=NONE,
    ),
    _pos(
        "hardware",
        "hbm_bytes",
        "float",
        "B",
        1.2e12,
        "HBM capacity per chip",
        "twin.spec.catalog",
        default=NONE,
    ),
    _pos(
        "hardware",
        "hbm_bw_bytes_s",
        "float",
        "B/s",
        1e14,
        "HBM bandwidth per chip",
        "twin.spec.catalog",
        default=NONE,
    ),
    _eff(
        "hardware",
        "hbm_efficiency",
        "HBM bandwidth a streaming kernel reaches / nominal (services' default `bw_efficiency`)",
        "3P: Azure ND GB200 v6, 7.35 of 8 TB/s (twin.spec.catalog)",
        default=NONE,
    ),
    Fact(
        "hardware",
        "peak_flops",
        "table[float]",
        "FLOP/s",
        0,
        1e18,
        lo_open=True,
        choices=PRECISION_NAMES,
        description="Dense peak per precision, e.g. `{ fp8 = 2.6e15 }` (replaces or adds to the catalog's)",
        source="twin.spec.catalog",
        default=NONE,
    ),
    _f(
        "hardware",
        "host_w_per_server",
        "float",
        "W",
        0,
        1e5,
        "Host (CPU, NIC, fans) power per server",
        "twin.spec.catalog",
        default=NONE,
    ),
    _frac(
        "hardware", "host_idle_fraction", "Host idle power / host power", "twin.spec.catalog", default=NONE
    ),
    _f(
        "hardware",
        "switch_w",
        "float",
        "W",
        0,
        1e6,
        "Scale-up switch power per system",
        "twin.spec.catalog",
        default=NONE,
    ),
    _frac(
        "hardware",
        "liquid_fraction",
        "Share of the system's heat taken by liquid",
        "twin.spec.catalog",
        default=NONE,
    ),
    _f("hardware", "chips", "int", "", 1, 1024, "Chips per system", "twin.spec.catalog", default=NONE),
    _f(
        "hardware",
        "servers",
        "int",
        "",
        1,
        1024,
        "Servers per system (chips must divide evenly)",
        "twin.spec.catalog",
        default=NONE,
    ),
    _f("hardware", "racks", "int", "", 1, 64, "Racks per system", "twin.spec.catalog", default=NONE),
    # ------------------------------------------------------------------ site
    _enum(
        "site",
        "climate",
        CLIMATE_NAMES,
        "Preset of the synthetic weather keys below (keys given override it)",
        "ASM, scenarios/spec.py CLIMATES",
        default=NONE,
    ),
    _f("site", "latitude_deg", "float", "°", -90, 90, "Latitude; its sign picks the hemisphere"),
    _temp("site", "mean_temp_c", -50, 50, "Annual mean dry-bulb"),
    _f("site", "seasonal_amplitude_k", "float", "K", 0, 40, "Half the summer-winter swing"),
    _f("site", "diurnal_amplitude_k", "float", "K", 0, 30, "Half the day-night swing"),
    _f(
        "site",
        "dewpoint_depression_k",
        "float",
        "K",
        0,
        50,
        "Annual mean dew-point depression below the daily-mean dry-bulb",
    ),
    _f(
        "site",
        "dewpoint_seasonal_k",
        "float",
        "K",
        -30,
        30,
        "Half-swing of the depression, largest in summer",
    ),
    _f("site", "weather_noise_k", "float", "K", 0, 20, "Std of the AR(1) temperature anomaly"),
    _f("site", "dewpoint_noise_k", "float", "K", 0, 20, "Std of the AR(1) anomaly of the depression"),
    _pos("site", "weather_noise_tau_h", "float", "h", 8760, "Correlation time of the anomalies"),
    _f(
        "site",
        "start_day_of_year",
        "int",
        "",
        1,
        366,
        "Day of the weather year the run starts at (00:00; 1 = 1 January)",
    ),
    Fact(
        "site",
        "weather_file",
        "path",
        "",
        description="Hourly weather for one year: EPW (`.epw`) or CSV, "
        "relative to the scenario file; replaces the synthetic weather",
        default=NONE,
    ),
    _f(
        "site",
        "price_usd_per_mwh",
        "float",
        "USD/MWh",
        0,
        10_000,
        "Flat electricity price (shorthand for [grid.price])",
        "ASM flat industrial (facts §10; EIA avg $80/MWh)",
    ),
    _f(
        "site",
        "carbon_g_per_kwh",
        "float",
        "g/kWh",
        0,
        2000,
        "Flat grid carbon intensity (shorthand for [grid.carbon])",
        "3P: US grid average 2023 (codecarbon; facts §10)",
    ),
    _f("site", "heatwave_start_h", "float", "h", 0, MAX_RUN_H, "Start of a heat wave after the run starts"),
    _f("site", "heatwave_days", "float", "d", 0, 365, "Length of the heat wave (0: none)"),
    _f(
        "site",
        "heatwave_delta_k",
        "float",
        "K",
        0,
        30,
        "Peak dry-bulb rise of the heat wave (a smooth sin² bump)",
    ),
    _frac("site", "heatwave_dewpoint_share", "Share of the rise the dew point follows"),
    # ------------------------------------------------------------------ grid
    _enum("grid.price", "kind", ("flat", "tou", "file"), "Price model", default="flat"),
    _f(
        "grid.price",
        "usd_per_mwh",
        "float",
        "USD/MWh",
        0,
        10_000,
        'Flat price (kind = "flat"; default 75)',
        "ASM (facts §10)",
        default=NONE,
    ),
    _f(
        "grid.price",
        "peak_usd_per_mwh",
        "float",
        "USD/MWh",
        0,
        10_000,
        'Peak price (kind = "tou"; default 97.5)',
        "ASM: $75/MWh + 30 % (facts §10)",
        default=NONE,
    ),
    _f(
        "grid.price",
        "offpeak_usd_per_mwh",
        "float",
        "USD/MWh",
        0,
        10_000,
        'Off-peak price (kind = "tou"; default 52.5)',
        "ASM: $75/MWh - 30 %",
        default=NONE,
    ),
    Fact(
        "grid.price",
        "peak_start_h",
        "float",
        "h",
        0,
        24,
        hi_open=True,
        description="Start of the peak window "
        '(kind = "tou"; default 14; a window with start > end wraps midnight)',
        source="ASM",
        default=NONE,
    ),
    Fact(
        "grid.price",
        "peak_end_h",
        "float",
        "h",
        0,
        24,
        hi_open=True,
        description='End of the peak window (kind = "tou"; default 20)',
        source="ASM",
        default=NONE,
    ),
    Fact(
        "grid.price",
        "weekend_peak",
        "bool",
        "",
        description='Peak prices on weekends too (kind = "tou"; default false)',
        source="ASM",
        default=NONE,
    ),
    Fact(
        "grid.price",
        "file",
        "path",
        "",
        description='Hourly price CSV (kind = "file"): hour or timestamp, price_usd_per_mwh',
        default=NONE,
    ),
    _enum("grid.carbon", "kind", ("flat", "file"), "Carbon model", default="flat"),
    _f(
        "grid.carbon",
        "g_per_kwh",
        "float",
        "g/kWh",
        0,
        2000,
        'Flat intensity (kind = "flat"; default 369)',
        "3P: US average 2023 (facts §10)",
        default=NONE,
    ),
    Fact(
        "grid.carbon",
        "file",
        "path",
        "",
        description='Hourly carbon CSV (kind = "file"): hour or timestamp, carbon_g_per_kwh',
        default=NONE,
    ),
    # ------------------------------------------------------------------ power
    _eff("power", "psu_efficiency", "Rack rectifier efficiency", "3P: Frontier fit (ExaDigiT/RAPS)"),
    _f(
        "power",
        "psu_fixed_w_per_server",
        "float",
        "W",
        0,
        1000,
        "Rectifier fixed loss per server",
        "3P: Frontier fit (ExaDigiT/RAPS)",
    ),
    _eff("power", "pdu_efficiency", "PDU efficiency", "ASM 98-99 % (facts §8.3)"),
    _frac(
        "power",
        "ups_a",
        "UPS no-load loss coefficient a of x/(x + a + b x + c x²)",
        "fitted to facts §8.3 (Schneider WP108 shape)",
    ),
    _frac("power", "ups_b", "UPS proportional loss coefficient b", "fitted to facts §8.3"),
    _frac("power", "ups_c", "UPS square-law loss coefficient c", "fitted to facts §8.3"),
    _f("power", "ups_rating_factor", "float", "-", 1, 10, "UPS rating / design IT load (2N: 2)", "ASM"),
    _eff("power", "transformer_efficiency", "Transformer efficiency", "ASM 98.5-99.5 % (facts §8.3)"),
    _f("power", "facility_cap_w", "float", "W", 0, _CAP_W, "Standing facility power cap (0: none)"),
    _f("power", "row_cap_w", "float", "W", 0, _CAP_W, "Standing IT power cap of every row (0: none)"),
    _f(
        "power",
        "oversubscription",
        "float",
        "-",
        0,
        1,
        "Oversubscription of the hall's IT feed (UPS and distribution): rated at nameplate IT "
        "/ (1 + ratio), held inside it by a standing IT cap (0: rated at nameplate, no cap)",
        "3P: >= 25 % on Google's medium-voltage power plane (Sakalkar et al., ASPLOS 2020); "
        "~30 % headroom in inference clusters (POLCA, ASPLOS 2024); ASM default 0",
    ),
    _f(
        "power",
        "row_oversubscription",
        "float",
        "-",
        0,
        1,
        "Oversubscription of every row's feed: rated at the row's nameplate IT / (1 + ratio), "
        "held inside it by a standing row cap (0: rated at nameplate, no cap)",
        "3P: Sakalkar et al., ASPLOS 2020; ASM default 0",
    ),
    _f(
        "power",
        "campus_cap_w",
        "float",
        "W",
        0,
        _CAP_W,
        "Cap on a campus's grid connection, the halls' "
        "facility power summed ([[halls]]; 0: none), shared among the halls so that every busy chip runs at one clock",
        "ASM",
    ),
    # ------------------------------------------------------------------ cooling
    _temp("cooling", "supply_setpoint_c", 5, 60, "Liquid loop supply to the cold plates", "ASM: ASHRAE W32"),
    _temp("cooling", "air_supply_c", 5, 40, "CRAH supply air", "ASHRAE recommended 18-27 °C"),
    _temp("cooling", "chilled_water_c", 1, 30, "Chilled water for the air side"),
    _pos(
        "cooling",
        "flow_l_min_per_kw",
        "float",
        "L/min/kW",
        10,
        "Liquid flow per kW of design heat",
        "3P: OCP/OAI 1.25-2.0 (facts §8.5)",
    ),
    _pos(
        "cooling",
        "loop_volume_l_per_ultraserver",
        "float",
        "L",
        1e5,
        "Rack + CDU loop volume per system",
        "ASM (facts §8.5)",
    ),
    _f(
        "cooling",
        "cold_plate_r_k_per_w",
        "float",
        "K/W",
        0,
        1,
        "Junction-to-coolant resistance at design flow (0: sized to the chip)",
        "ASM (facts §8.5: 0.02-0.05 K/W)",
    ),
    _pos(
        "cooling",
        "junction_rise_at_tdp_k",
        "float",
        "K",
        100,
        "Junction above coolant at TDP when the resistance is sized to the chip",
    ),
    _f(
        "cooling",
        "air_r_k_per_w",
        "float",
        "K/W",
        0,
        2,
        "Junction-to-inlet-air resistance (0: sized to the chip)",
    ),
    _pos(
        "cooling",
        "air_junction_rise_at_tdp_k",
        "float",
        "K",
        100,
        "Junction above inlet air at TDP (air-cooled, sized)",
    ),
    _frac(
        "cooling",
        "cold_plate_convective_share",
        "Share of the cold-plate resistance that is forced convection",
    ),
    _frac("cooling", "natural_convection_speed", "Convection of a stagnant loop, as a share of design flow"),
    _f(
        "cooling",
        "drycooler_approach_k",
        "float",
        "K",
        0,
        30,
        "Dry cooler / economizer approach to outdoor air",
    ),
    _f("cooling", "condenser_approach_k", "float", "K", 0, 40, "Air-cooled chiller condensing above outdoor"),
    _eff("cooling", "carnot_fraction", "Chiller COP as a fraction of Carnot", "ASM 0.5-0.6 (facts §8.5)"),
    _pos("cooling", "cop_min", "float", "-", MAX_COP, "Lowest chiller COP"),
    _pos("cooling", "cop_max", "float", "-", MAX_COP, "Highest chiller COP"),
    _f("cooling", "pump_head_pa", "float", "Pa", 0, 2e6, "Pump pressure rise", "SustainDC (facts §8.5)"),
    _eff("cooling", "pump_efficiency", "Pump efficiency", "SustainDC (facts §8.5)"),
    _f(
        "cooling",
        "drycooler_fan_w_per_w",
        "float",
        "W/W",
        0,
        1,
        "Dry-cooler fan power per W rejected at full speed",
    ),
    _f(
        "cooling",
        "crah_fan_w_per_w",
        "float",
        "W/W",
        0,
        1,
        "CRAH / air-handler fan power per W of the air side's design heat at full speed (cube law below)",
        "ASM; fan affinity law P ~ flow^3 (SustainDC, facts §8.5)",
    ),
    Fact(
        "cooling",
        "air_economizer",
        "bool",
        "",
        description="Air-side economizer: outside air into the cold aisle while its dew point is in the "
        "envelope (mixed when colder than the supply, coil-trimmed up to the return temperature)",
        source="ASM",
    ),
    _pos(
        "cooling",
        "air_return_rise_k",
        "float",
        "K",
        40,
        "Hot-aisle return above the supply air",
        "ASM: server air rise ~10-15 K (facts §8.5 CRAH load)",
    ),
    _temp(
        "cooling",
        "air_max_dewpoint_c",
        -20,
        30,
        "Highest outside-air dew point the economizer admits",
        "3P: ASHRAE TC9.9 recommended dew point <= 15 °C",
    ),
    Fact(
        "cooling",
        "evaporative_intake",
        "bool",
        "",
        description="Direct evaporative cooling of the economizer's intake air (uses site water)",
        source="ASM",
    ),
    _eff(
        "cooling",
        "evaporative_effectiveness",
        "Saturation effectiveness of the evaporative intake (towards the wet-bulb)",
        "3P: 0.75-0.95 (Wang, Handbook of Air Conditioning and Refrigeration §9.8)",
    ),
    _temp(
        "cooling",
        "throttle_temp_c",
        40,
        150,
        "Junction temperature where throttling starts",
        "ASM (facts §8.7)",
    ),
    _temp(
        "cooling",
        "throttle_full_c",
        40,
        150,
        "Junction temperature of the 50 % clock (above throttle_temp_c)",
        "ASM (facts §8.7)",
    ),
    _temp(
        "cooling",
        "shutdown_temp_c",
        40,
        200,
        "Junction temperature that powers an UltraServer off when "
        "even the lowest thermal clock cannot hold it",
        "ASM (facts §8.7)",
    ),
    _f(
        "cooling",
        "shutdown_restart_s",
        "int",
        "s",
        0,
        86400,
        "An UltraServer shut down by its junctions stays off at least this long",
    ),
    _enum(
        "cooling",
        "plant",
        ("tower", "dry", "hybrid"),
        "Heat rejection: cooling towers + water-cooled chillers, dry coolers + air-cooled chillers, "
        "or hybrid coolers (dry, wet above hybrid_switch_c)",
        "ASM",
    ),
    _temp(
        "cooling",
        "hybrid_switch_c",
        -30,
        50,
        "Dry-bulb above which hybrid coolers run wet",
        "ASM: where dry coolers stop making the facility water setpoint",
    ),
    _f("cooling", "cdu_approach_k", "float", "K", 0, 30, "CDU secondary supply above facility water supply"),
    _pos("cooling", "facility_volume_l_per_kw", "float", "L/kW", 1000, "Facility water loop + buffer volume"),
    _f(
        "cooling",
        "tower_approach_k",
        "float",
        "K",
        0,
        30,
        "Tower leaving water above wet-bulb",
        "3P: design 3-5 K (facts §8.5)",
    ),
    _f("cooling", "hx_approach_k", "float", "K", 0, 30, "Plate heat exchanger approach"),
    _f("cooling", "economizer_units", "int", "", 1, 100, "Cooling towers or dry coolers"),
    _f(
        "cooling",
        "economizer_redundancy",
        "int",
        "",
        0,
        99,
        "Spare economizer units (N+1: 1; fewer than the units)",
    ),
    _eff("cooling", "economizer_effectiveness", "Effectiveness of the N needed units together"),
    _f("cooling", "chiller_units", "int", "", 1, 100, "Chillers"),
    _f("cooling", "chiller_redundancy", "int", "", 0, 99, "Spare chillers (fewer than the units)"),
    _frac("cooling", "evaporative_fraction", "Share of tower heat rejected by evaporation", "ASM 0.75-0.85"),
    Fact(
        "cooling",
        "cycles_of_concentration",
        "float",
        "-",
        1,
        50,
        lo_open=True,
        description="Tower blowdown: make-up = evaporation x N/(N-1)",
        source="facts §8.5",
    ),
    _f(
        "cooling",
        "tower_drift_fraction",
        "float",
        "-",
        0,
        0.01,
        "Tower drift: droplets lost with the air, as a share of the circulating water",
        "3P: 0.0005-0.002 % with cellular drift eliminators (Brentwood / CTI)",
    ),
    _f("cooling", "dvfs_exponent", "float", "-", 1, 5, "Dynamic power ~ clock^k"),
    _eff("cooling", "min_clock", "Lowest clock a power cap may set"),
    _temp("cooling", "loop_trip_c", 20, 150, "Rack loop return that powers a system off"),
    _temp("cooling", "loop_restart_c", 10, 150, "... and back on once cooled below this (below loop_trip_c)"),
    _temp(
        "cooling", "air_trip_c", 20, 80, "Air inlet that powers air-cooled systems off", "ASHRAE A3 max 40 °C"
    ),
    _temp(
        "cooling", "air_restart_c", 10, 80, "... and back on (below air_trip_c)", "ASHRAE A1 allowable 32 °C"
    ),
    # ------------------------------------------------------------------ tco
    _f(
        "tco",
        "system_capex_usd",
        "float",
        "USD",
        0,
        1e9,
        "Price of one system (UltraServer, rack or node); 0: the catalog's figure",
        "twin.spec.catalog",
    ),
    _f(
        "tco",
        "facility_capex_usd_per_w",
        "float",
        "USD/W",
        0,
        100,
        "Building, power chain and plant per W of nameplate critical IT (every system at TDP); "
        "0: by cooling type below",
    ),
    _f(
        "tco",
        "facility_capex_liquid_usd_per_w",
        "float",
        "USD/W",
        0,
        100,
        "Facility capital of a liquid-cooled hall per W of nameplate critical IT",
        "3P: AI-optimised halls $15-20M/MW (infra-economics.com; gigaenergy.com 2026 '$20M+'); mid",
    ),
    _f(
        "tco",
        "facility_capex_air_usd_per_w",
        "float",
        "USD/W",
        0,
        100,
        "Facility capital of an air-cooled hall per W of nameplate critical IT",
        "3P: $7-12M/MW (gigaenergy.com 2026), $7-15M/MW (cortexconstruct.com 2026)",
    ),
    _f(
        "tco",
        "network_usd_per_gbps",
        "float",
        "USD/(Gb/s)",
        0,
        1000,
        "Scale-out network (switches, optics, cables) per Gb/s of each chip's EFA/InfiniBand/Ethernet link",
        "3P: 1,024-H100 NDR bill $10.6/(Gb/s) two-tier (2024); $3-10k/GPU; ASM 15 three-tier",
    ),
    _f(
        "tco",
        "storage_usd_per_chip",
        "float",
        "USD",
        0,
        1e6,
        "Shared storage (parallel file system) per chip",
        "3P: ~$250k/PB flash file system (infra-economics.com) x ASM ~6 TB per chip",
    ),
    _frac(
        "tco",
        "spares_share",
        "Spare systems and parts, share of the systems' price",
        "ASM: hot-spare pools 2-5 % of nodes",
    ),
    _f(
        "tco",
        "grid_usd_per_kw",
        "float",
        "USD/kW",
        0,
        10_000,
        "Grid connection (substation, tie-in) per kW of nameplate critical IT",
        "ASM: ~$20-40M per 100-200 MW substation and tie-in",
    ),
    _f(
        "tco",
        "construction_years",
        "float",
        "yr",
        0,
        10,
        "Build time: interest during construction on facility and grid capital spent evenly over it",
        "ASM: 18-36 months",
    ),
    _frac(
        "tco",
        "residual_share",
        "Resale value of the systems at the end of their life, share of their price",
        "ASM: 25-35 % after 3 years (3P GPU TCO notes) => ~10 % after 5",
    ),
    _pos(
        "tco",
        "server_life_years",
        "float",
        "yr",
        30,
        "Depreciation life of the systems",
        "ASM: accelerators 4-6 years",
    ),
    _pos(
        "tco",
        "facility_life_years",
        "float",
        "yr",
        100,
        "Depreciation life of the building and plant",
        "ASM: 15-25 years",
    ),
    _f("tco", "financing_rate", "float", "1/yr", 0, 1, "Cost of capital per year", "ASM"),
    _f(
        "tco",
        "maintenance_share_per_year",
        "float",
        "1/yr",
        0,
        1,
        "Maintenance per year as a share of capital",
        "ASM",
    ),
    _f("tco", "staff_per_mw", "float", "1/MW", 0, 100, "Operations staff per MW of critical IT", "ASM"),
    _f(
        "tco",
        "staff_loaded_usd_per_year",
        "float",
        "USD/yr",
        0,
        1e7,
        "Loaded cost of one person per year",
        "ASM",
    ),
    _f(
        "tco",
        "water_usd_per_m3",
        "float",
        "USD/m³",
        0,
        1000,
        "Price of cooling-tower water (supply + sewer)",
        "ASM: US commercial, order of $1-4/m³",
    ),
    # ------------------------------------------------------------------ training
    _f(
        "training",
        "arrivals_per_day",
        "float",
        "1/d",
        0,
        MAX_ARRIVALS_PER_DAY,
        "Mean weekday job arrivals, all classes",
        "DER: AcmeTrace Seren (facts §9.2)",
    ),
    _f(
        "training",
        "arrivals_per_chip_day",
        "float",
        "1/d",
        0,
        MAX_ARRIVALS_PER_CHIP_DAY,
        "Mean weekday job arrivals per accelerator of the site, instead of arrivals_per_day: the "
        "batch work grows with the fleet",
        "DER: ~1.6 jobs per GPU and day on Seren (facts §9.2); the default's 4,000 on 2,304 chips is 1.74",
        default=NONE,
    ),
    _f(
        "training",
        "arrivals_per_mw_day",
        "float",
        "1/(MW·d)",
        0,
        1e5,
        "Mean weekday job arrivals per MW of the site's full-load IT power, instead of arrivals_per_day",
        "ASM: the default hall's 4,000 a day on its 1.97 MW of full-load IT is ~2,000",
        default=NONE,
    ),
    _f(
        "training",
        "offered_load",
        "float",
        "-",
        0,
        2,
        "Arrivals sized so the batch jobs ask for this share of the chip-time the inference replicas "
        "leave (a week's mean; the classes' mean gang size x run length on the reference hardware), "
        "instead of arrivals_per_day: 0.9 keeps a hall of any size near 90 % busy once its long jobs have "
        "built up (warmup_h of a day or more)",
        "DER: twin.work.workload.mean_job_chip_s (the default class mix asks ~9 chip-h a job, Seren's 32,405 GPU-s)",
        default=NONE,
    ),
    _f("training", "diurnal_peak_to_trough", "float", "-", 1, 100, "Arrival rate peak / trough over a day"),
    _hour("training", "peak_hour", "Hour of the day of peak arrivals"),
    _f("training", "weekend_factor", "float", "-", 0, 10, "Weekend arrival rate / weekday rate"),
    _pos(
        "training",
        "global_batch_tokens",
        "float",
        "token",
        1e10,
        "Smallest global batch of one training step (the batch grows with the data-parallel replicas)",
        "3P: Llama 3 405B started at 4 M tokens per step (Llama 3 paper §3.4.1)",
    ),
    _pos(
        "training",
        "global_batch_tokens_max",
        "float",
        "token",
        1e10,
        "Largest global batch of one training step",
        "3P: Llama 3 405B ended at 16 M tokens per step (Llama 3 paper §3.4.1)",
    ),
    _pos(
        "training",
        "replica_batch_tokens",
        "float",
        "token",
        1e9,
        "Tokens per data-parallel replica and step (global batch = replicas x this, within the bounds)",
        "3P: 16 sequences of 8,192 per DP replica at 16,384 GPUs (Llama 3 paper Table 4)",
    ),
    _f(
        "training",
        "sequence_tokens",
        "int",
        "token",
        1,
        10_000_000,
        "Training sequence length (one sequence per micro-batch)",
        "3P: Llama 3 pre-training 8,192 (Llama 3 paper §3.4.1)",
    ),
    _pos(
        "training",
        "weight_bytes_per_param",
        "float",
        "B",
        8,
        "Bytes per weight held for training",
        "3P: BF16 (ZeRO, Rajbhandari et al. 2020)",
    ),
    _pos(
        "training",
        "grad_bytes_per_param",
        "float",
        "B",
        8,
        "Bytes per parameter and gradient held and on the wire",
        "3P: BF16 (ZeRO, Rajbhandari et al. 2020)",
    ),
    _f(
        "training",
        "optimizer_bytes_per_param",
        "float",
        "B",
        0,
        64,
        "Optimiser state per parameter, sharded over data-parallel ranks",
        "3P: FP32 master weights + two Adam moments = 12 B (ZeRO, Rajbhandari et al. 2020)",
    ),
    _pos(
        "training", "activation_bytes", "float", "B", 8, "Bytes per activation value on the wire", "ASM: BF16"
    ),
    _frac(
        "training",
        "nongemm_time_share",
        "Share of a BF16 step's compute time outside the GEMMs (not sped up by FP8)",
        "ASM 0.15; 3P upper bound 0.39 unfused (Ivanov et al. MLSys 2021)",
    ),
    _frac(
        "training",
        "tp_overlap",
        "Share of tensor-parallel all-reduces (and MoE all-to-alls) hidden behind compute",
        "ASM: mostly exposed (Megatron-Core tp-comm-overlap; Wang et al. ASPLOS 2023)",
    ),
    _frac(
        "training",
        "pp_overlap",
        "Share of pipeline point-to-point transfers hidden behind compute",
        "ASM: asynchronous send/receive beside the next micro-batch",
    ),
    _frac(
        "training",
        "dp_overlap",
        "Share of the data-parallel gradient reduction hidden behind the backward pass "
        "(at most one micro-batch's compute)",
        "ASM; 3P: bucketed overlap (PyTorch DDP, Li et al. VLDB 2020)",
    ),
    _f(
        "training",
        "pod_chips",
        "int",
        "",
        1,
        MAX_CAMPUS_CHIPS,
        "Chips under one full-bisection scale-out pod",
        "3P: 3,072 GPUs (Llama 3 paper §3.3.1)",
    ),
    _f(
        "training",
        "pod_oversubscription",
        "float",
        "-",
        1,
        1000,
        "Scale-out bandwidth per chip within a pod / between pods",
        "3P: 1:7 at the aggregation layer (Llama 3 paper §3.3.1)",
    ),
    _f(
        "training",
        "hall_link_oversubscription",
        "float",
        "-",
        1,
        10000,
        "Scale-out bandwidth per chip within a pod / between halls of a campus",
        "ASM: a further 1:4 over the aggregation layer",
    ),
    _frac(
        "training",
        "compute_activity",
        "Chip power activity of a gang's busy compute (waiting at 0.1); mean = duty x this + (1 - duty) x 0.1",
        "DER: H100 node 8.4 kW of 10.2 kW training Llama 2 13B (Latif et al. 2024), plan duty 0.976",
    ),
    _f(
        "training",
        "restart_cost_s",
        "int",
        "s",
        0,
        7 * 86400,
        "Time to reload a checkpoint and re-form the gang",
    ),
    _f(
        "training",
        "checkpoint_bytes_per_param",
        "float",
        "B",
        0,
        64,
        "Checkpoint bytes per parameter (weights + optimiser state)",
        "3P: 2 + 12 B (ZeRO, Rajbhandari et al. 2020)",
    ),
    _pos(
        "training",
        "checkpoint_chip_bw_bytes_s",
        "float",
        "B/s",
        1e13,
        "Checkpoint write bandwidth per chip",
        "ASM: ~1 GB/s per chip to a parallel file system",
    ),
    _pos(
        "training",
        "checkpoint_storage_bw_bytes_s",
        "float",
        "B/s",
        1e15,
        "Checkpoint write bandwidth of the storage, all chips of a gang",
        "3P: Tectonic 2 TB/s sustained, 7 TB/s peak (Llama 3 paper §3.3.1)",
    ),
    _f(
        "training",
        "checkpoint_min_interval_s",
        "int",
        "s",
        1,
        30 * 86400,
        "Shortest derived (Young/Daly) checkpoint interval",
    ),
    _f(
        "training",
        "checkpoint_max_interval_s",
        "int",
        "s",
        1,
        30 * 86400,
        "Longest derived (Young/Daly) checkpoint interval",
        "ASM: at most an hour of work at risk (preemptions are not in Young/Daly)",
    ),
    _enum(
        "training",
        "precision",
        PRECISION_NAMES,
        "Precision of every class that sets none",
        "twin.spec.catalog",
        default=NONE,
    ),
    Fact(
        "training",
        "trace",
        "path",
        "",
        description="Job trace CSV replayed on top of the arrivals (relative to the scenario file)",
        default=NONE,
    ),
    # ------------------------------------------------------------------ job classes
    _frac(
        "training.<class>",
        "share",
        "Share of the arrivals (normalised over classes)",
        "fitted to AcmeTrace Seren (facts §9.2)",
    ),
    Fact(
        "training.<class>",
        "size_chips",
        "list[int]",
        "",
        1,
        MAX_CHIPS,
        description="Gang sizes",
        source="ASM (Seren/Kalos max 1,024 GPUs)",
    ),
    Fact(
        "training.<class>",
        "size_weights",
        "list[float]",
        "-",
        0,
        1e6,
        description="Weights of the gang sizes (same length, positive sum)",
        source="ASM",
    ),
    _pos(
        "training.<class>",
        "duration_median_h",
        "float",
        "h",
        8760,
        "Median nominal run length",
        "fitted to Seren",
    ),
    _f(
        "training.<class>",
        "duration_sigma",
        "float",
        "-",
        0,
        5,
        "Log-normal sigma of the run length",
        "fitted to Seren",
    ),
    _pos("training.<class>", "duration_max_h", "float", "h", MAX_RUN_H, "Longest run"),
    Fact(
        "training.<class>",
        "models",
        "list[str]",
        "",
        description="Models the class runs (catalog or [[models]] names)",
        source="ASM",
    ),
    Fact(
        "training.<class>",
        "model_weights",
        "list[float]",
        "-",
        0,
        1e6,
        description="Weights of the models (same length, positive sum)",
        source="ASM",
    ),
    _enum("training.<class>", "precision", PRECISION_NAMES, "Number format", "ASM"),
    _eff("training.<class>", "mfu_factor", "x the model's training MFU", "facts §9.5"),
    _f(
        "training.<class>", "priority", "int", "", 0, 1_000_000, "Higher goes first under the priority policy"
    ),
    Fact(
        "training.<class>",
        "preemptible",
        "bool",
        "",
        description="May be preempted by higher-priority work",
        source="ASM",
    ),
    _f(
        "training.<class>",
        "checkpoint_interval_s",
        "int",
        "s",
        0,
        30 * 86400,
        "Checkpoint interval (0: none; unset: Young/Daly sqrt(2 C M) of the gang)",
        "3P: Young 1974, Daly 2006",
    ),
    _enum(
        "training.<class>",
        "family",
        routing.FAMILIES,
        "System family the class's code needs (`gpu`: CUDA-only, `trainium`: Neuron-only) or `any`",
        "ASM",
    ),
    _enum(
        "training.<class>",
        "system",
        ("", *SYSTEM_KEYS),
        "System the `pinned` routing policy sends the "
        'class to ("": the first system of the floor it may run on)',
        "",
    ),
    # ------------------------------------------------------------------ scheduler
    _enum(
        "scheduler",
        "policy",
        ("fifo", "backfill", "priority"),
        "fifo, EASY backfill, or priority with preemption",
    ),
    _enum("scheduler", "placement", ("topology", "first_fit"), "Topology-aware best fit, or first fit"),
    _enum(
        "scheduler",
        "routing",
        routing.POLICIES,
        "Mixed floor: where each job and service goes — the "
        "system that does the work soonest, at the lowest marginal $ per unit of work (TCO rates + IT "
        "energy at the flat price), at the lowest IT J per unit of work, or its `system` key",
        "twin.work.routing",
    ),
    _f("scheduler", "backfill_depth", "int", "", 1, 100_000, "Queued jobs examined for backfill per pass"),
    _pos(
        "scheduler", "runtime_estimate_factor", "float", "-", 100, "User runtime estimate / true run length"
    ),
    # ------------------------------------------------------------------ services
    Fact(
        "services", "name", "name", "", description="Service name (unique; the target of a surge)", source=""
    ),
    Fact(
        "services",
        "model",
        "str",
        "",
        description="Model (fills the architecture: catalog or [[models]] name)",
        source="twin.spec.models",
    ),
    _pos("services", "params", "float", "-", 1e14, "Parameters N (weights)", "twin.spec.models"),
    _pos(
        "services",
        "active_params",
        "float",
        "-",
        1e14,
        "Active parameters per token (≤ params)",
        "twin.spec.models",
    ),
    _f("services", "layers", "int", "", 1, 1000, "Transformer layers", "twin.spec.models"),
    _f("services", "kv_heads", "int", "", 1, 1024, "KV heads", "twin.spec.models"),
    _f("services", "head_dim", "int", "", 1, 4096, "Head dimension", "twin.spec.models"),
    _f(
        "services",
        "hidden",
        "int",
        "",
        0,
        1_000_000,
        "Model width (0: from params and layers)",
        "twin.spec.models",
    ),
    _f("services", "experts", "int", "", 0, 100_000, "Routed experts (0: dense)", "twin.spec.models"),
    _f("services", "experts_active", "int", "", 0, 100_000, "Experts per token", "twin.spec.models"),
    _f(
        "services",
        "weight_bytes_per_param",
        "float",
        "B",
        0,
        8,
        "Bytes per weight (0: the precision's native size with its block scales: FP8 1, "
        "MXFP8 1.03, FP4 = NVFP4 0.5625, MXFP4 0.53125)",
        "DER: OCP Microscaling spec v1.0 (8-bit scale per 32); NVFP4 (FP8 scale per 16)",
    ),
    _pos("services", "kv_bytes_per_elem", "float", "B", 8, "Bytes per KV-cache element (BF16: 2)"),
    _pos(
        "services",
        "activation_bytes",
        "float",
        "B",
        8,
        "Bytes per activation element on the scale-up fabric (tensor-parallel all-reduces)",
    ),
    _f("services", "chips_per_replica", "int", "", 1, 100_000, "Chips per replica"),
    _f(
        "services",
        "replicas",
        "int",
        "",
        0,
        MAX_REPLICAS,
        "Replicas at the start (always, without the autoscaler)",
    ),
    _f(
        "services",
        "batch_max",
        "int",
        "",
        0,
        1_000_000,
        "Largest decode batch (0: only the KV cache and the TPOT SLO limit it)",
    ),
    _enum(
        "services",
        "token_profile",
        tuple(TOKEN_PROFILES),
        "Token-length shape (fills the means, day shape and bursts)",
        "3P: Azure LLM inference traces 2023",
    ),
    _pos(
        "services",
        "context_tokens",
        "float",
        "tokens",
        1e7,
        "Mean input tokens",
        "3P: Azure conv 2023 (facts §9.3)",
    ),
    _pos(
        "services",
        "output_tokens",
        "float",
        "tokens",
        1e6,
        "Mean output tokens",
        "3P: Azure conv 2023 (facts §9.3)",
    ),
    _f(
        "services",
        "bw_efficiency",
        "float",
        "-",
        0,
        1,
        "HBM bandwidth efficiency (0: the chip's measured figure, 0.92)",
        "3P: Azure ND GB200 v6, 7.35 of 8 TB/s (Microsoft Tech Community 2025)",
    ),
    _eff("services", "prefill_mfu", "MFU while prefilling", "ASM (facts §9.5)"),
    _enum(
        "services",
        "precision",
        PRECISION_NAMES,
        "Number format of the weights and their math (`fp4`/`mxfp4`: 4-bit weights; compute at the "
        "chip's FP4 rate, Trainium3's at its MXFP8 rate)",
        "ASM",
    ),
    Fact(
        "services",
        "prefill_replica_share",
        "float",
        "-",
        0,
        1,
        hi_open=True,
        description="Share of replicas that prefill only and hand the KV cache to the rest, which decode "
        "only (0: every replica interleaves prefill and decode)",
        source="ASM",
    ),
    _f("services", "mean_requests_per_s", "float", "1/s", 0, 1e6, "Weekday mean request rate, before bursts"),
    _f(
        "services",
        "diurnal_peak_to_trough",
        "float",
        "-",
        1,
        100,
        "Request rate peak / trough over a day",
        "3P: Azure 2024 (facts §9.3)",
    ),
    _hour("services", "peak_hour", "Hour of the day of peak demand"),
    _f("services", "weekend_factor", "float", "-", 0, 10, "Weekend rate / weekday rate", "ASM (facts §9.3)"),
    _f("services", "burst_rate_per_day", "float", "1/d", 0, 1440, "Burst onsets per day"),
    _pos("services", "burst_multiplier", "float", "-", 100, "Rate multiplier while a burst is on"),
    _f("services", "burst_duration_s", "float", "s", 0, 86400, "Mean burst length"),
    _frac("services", "decode_activity", "Chip power activity when decode-bound and busy"),
    _frac("services", "prefill_activity", "Chip power activity while prefilling"),
    Fact("services", "autoscale", "bool", "", description="Scale replicas with demand", source="ASM"),
    _f("services", "replicas_min", "int", "", 0, MAX_REPLICAS, "Fewest replicas (autoscaler)"),
    _f("services", "replicas_max", "int", "", 0, MAX_REPLICAS, "Most replicas (autoscaler; 0: = replicas)"),
    _eff("services", "target_utilization", "Autoscaler's target utilisation"),
    _f("services", "startup_s", "float", "s", 0, 86400, "Time a new replica loads weights before serving"),
    _pos("services", "scale_interval_s", "float", "s", 86400, "Autoscaler decision interval"),
    _f(
        "services",
        "scale_down_delay_s",
        "float",
        "s",
        0,
        7 * 86400,
        "Lower demand held this long before scaling down",
    ),
    _f("services", "max_queue_wait_s", "float", "s", 0, 86400, "Requests waiting longer are dropped"),
    _pos(
        "services",
        "ttft_slo_s",
        "float",
        "s",
        3600,
        "Time-to-first-token SLO",
        "3P: MLPerf Inference llama2-70b Server",
    ),
    _pos(
        "services",
        "tpot_slo_s",
        "float",
        "s",
        60,
        "Time-per-output-token SLO",
        "3P: MLPerf Inference llama2-70b Server",
    ),
    _f(
        "services",
        "priority",
        "int",
        "",
        0,
        1_000_000,
        "Replicas' priority (may preempt training under the priority policy)",
    ),
    Fact(
        "services",
        "trace",
        "path",
        "",
        description="Azure-format request trace replacing the demand shape (relative to the scenario file)",
        default=NONE,
    ),
    _pos("services", "trace_speedup", "float", "-", 10_000, "Replay the trace this many times faster"),
    Fact("services", "trace_loop", "bool", "", description="Repeat the trace to fill the run", source="ASM"),
    _enum("services", "family", routing.FAMILIES, "System family the service's code needs, or `any`", "ASM"),
    _enum(
        "services",
        "system",
        ("", *SYSTEM_KEYS),
        "System the `pinned` routing policy puts every replica "
        'on ("": the first system of the floor that can hold them)',
        "",
    ),
    # ------------------------------------------------------------------ models
    Fact("models", "name", "name", "", description="Model name", default=REQUIRED),
    _pos("models", "params", "float", "-", 1e14, "Parameters (weights)", "", default=REQUIRED),
    _pos(
        "models",
        "active_params",
        "float",
        "-",
        1e14,
        "Active parameters per token (default: params)",
        "",
        default=NONE,
    ),
    _f("models", "layers", "int", "", 1, 1000, "Transformer layers", "", default=REQUIRED),
    _f("models", "kv_heads", "int", "", 1, 1024, "KV heads", "", default=REQUIRED),
    _f("models", "head_dim", "int", "", 1, 4096, "Head dimension", "", default=REQUIRED),
    _f("models", "hidden", "int", "", 0, 1_000_000, "Hidden size (0: unknown)", "", default=0),
    _f("models", "experts", "int", "", 0, 100_000, "Experts (0: dense)", "", default=0),
    _f("models", "experts_active", "int", "", 0, 100_000, "Experts active per token", "", default=0),
    _eff("models", "mfu", "Training MFU (default 0.40 dense, 0.30 MoE)", "ASM", default=NONE),
    # ------------------------------------------------------------------ failures
    _f(
        "failures",
        "chip_hazard_per_h",
        "float",
        "1/h",
        0,
        1,
        "Per-chip failure rate, all causes",
        "DER: Llama 3 405B (facts §9.4)",
    ),
    _f("failures", "repair_sigma", "float", "-", 0, 5, "Log-normal spread of repair times"),
    _f(
        "failures.<cause>",
        "weight",
        "float",
        "-",
        0,
        1e6,
        "Share of failures (normalised over causes)",
        "3P: Llama 3 405B interruptions (facts §9.4)",
    ),
    _f("failures.<cause>", "repair_h", "float", "h", 0, 8760, "Mean repair time"),
    _enum(
        "failures.<cause>",
        "blast",
        ("chip", "server", "job"),
        "What fails: the chip, its server, or only the job (software)",
        "ASM",
    ),
    # ------------------------------------------------------------------ telemetry
    _f(
        "telemetry",
        "chip_sample_interval_s",
        "int",
        "s",
        0,
        365 * 86400,
        "chip_ts every this much simulated time (0: off)",
    ),
    _f(
        "telemetry",
        "ultraserver_interval_s",
        "int",
        "s",
        0,
        365 * 86400,
        "ultraserver_ts every this much simulated time, at most once a step (1: every step; 0: off)",
    ),
    _f(
        "telemetry",
        "row_interval_s",
        "int",
        "s",
        0,
        365 * 86400,
        "row_ts (per row / CDU) every this much simulated time, at most once a step (1: every step; 0: off)",
    ),
    _f(
        "telemetry",
        "hall_interval_s",
        "int",
        "s",
        0,
        365 * 86400,
        "hall_ts every this much simulated time, at most once a step (1: every step; 0: off)",
    ),
    _f(
        "telemetry",
        "jobs_interval_s",
        "int",
        "s",
        0,
        365 * 86400,
        "jobs rows of waiting and running jobs "
        "whose state did not change, every this much simulated time (0: every advance); a job that "
        "changes state is written at once, and every job at the end of the run",
    ),
    _f(
        "telemetry",
        "grid_interval_s",
        "int",
        "s",
        0,
        3600,
        "grid_ts (each hall's and the grid connection's power) every this many seconds within "
        "each step; must divide dt_s (0: off)",
    ),
    # ------------------------------------------------------------------ grid connection
    _frac(
        "grid",
        "power_floor",
        "Chips kept busy during communication: low phases raised to this fraction of the compute "
        "phase's activity (0: off); costs energy",
        "3P: software mitigation, Choukse et al. 2025 (arXiv 2508.14318)",
    ),
    _f(
        "grid",
        "checkpoint_stall_s",
        "float",
        "s",
        0,
        3600,
        "A checkpoint stalls its gang this long within the step it is booked in (0: off)",
        "ASM: a synchronous save of a large model takes tens of seconds",
    ),
    Fact(
        "grid",
        "checkpoint_stagger",
        "bool",
        "",
        description="Checkpoint stalls spread through the step (each gang at its own offset) "
        "instead of all at its end",
        source="ASM",
    ),
    _f(
        "grid",
        "rack_storage_j_per_chip",
        "float",
        "J",
        0,
        1e5,
        "Energy stored in the racks' power shelves per chip (0: none; 65: GB300 NVL72)",
        "OFF-2: NVIDIA GB300 NVL72 power smoothing blog 2025 (per-chip figure ASM)",
    ),
    _eff("grid", "rack_storage_efficiency", "Round-trip efficiency of the rack storage"),
    _pos("grid", "rack_storage_window_s", "float", "s", 3600, "Rack storage smooths toward this moving mean"),
    _f("grid", "battery_power_w", "float", "W", 0, _CAP_W, "Site battery power rating (0: none)"),
    _f("grid", "battery_energy_j", "float", "J", 0, 1e14, "Site battery energy rating (0: none)"),
    _eff(
        "grid",
        "battery_efficiency",
        "Site battery round-trip efficiency",
        "3P: Li-ion utility-scale 85 % (NREL ATB 2023)",
    ),
    _pos("grid", "battery_window_s", "float", "s", 86400, "Site battery smooths toward this moving mean"),
    _f(
        "grid",
        "ramp_limit_mw_per_min",
        "float",
        "MW/min",
        0,
        1e5,
        "Ramp limit at the grid connection: steps whose ramp (change of the one-minute means, or "
        "of the step means without grid_ts) exceeds it raise the 'grid ramp limit' alarm (0: off)",
        "ASM: utilities set ramp limits for large loads case by case in the interconnection "
        "agreement (ERCOT large-load process, NERC Large Load Task Force 2025); no common figure",
    ),
    # ------------------------------------------------------------------ events
    _f("events", "at_h", "float", "h", 0, MAX_RUN_H, "When, after the start", default=REQUIRED),
    _enum("events", "kind", EVENT_KINDS, "What happens", default=REQUIRED),
    Fact(
        "events",
        "target",
        "target",
        "",
        description="Index of the chip/server/system; a service name for "
        "a surge; `facility` or `row:N` for a cap; a row for a CDU",
        default="",
    ),
    _f(
        "events",
        "value",
        "float",
        "",
        0,
        _CAP_W,
        "Surge factor; cap in W (0 clears); CDU flow left (0-1); units lost; drain grace in hours",
        default=0.0,
    ),
    _f(
        "events",
        "duration_h",
        "float",
        "h",
        0,
        MAX_RUN_H,
        "Automatic repair / restore / end (0: none)",
        default=0.0,
    ),
)

CLASS_NAMES = params.JOB_CLASSES
CAUSE_NAMES = params.FAILURE_CAUSES


def facts(section: str) -> tuple[Fact, ...]:
    return tuple(f for f in FACTS if f.section == section)


def fact(path: str) -> Fact | None:
    """The fact of a dotted key path (``cooling.plant``, ``services.peak_hour``,
    ``training.eval.share``, ``failures.hbm.blast``); None if there is none."""
    section, _, key = path.rpartition(".")
    if section.startswith("training.") and section[len("training.") :] in CLASS_NAMES:
        section = "training.<class>"
    elif section.startswith("failures.") and section[len("failures.") :] in CAUSE_NAMES:
        section = "failures.<cause>"
    for f in FACTS:
        if f.section == section and f.key == key:
            return f
    return None


def default(f: Fact, owner: str | None = None) -> Any:
    """The default value of a fact: its own, or the model's (``twin.spec.params``). ``owner`` picks the
    job class or failure cause for the per-class and per-cause tables."""
    if f.default is not PARAMS:
        return f.default
    if f.section == "training.<class>":
        return getattr(params.TrainingParams().job_class(owner or "pretrain"), f.key)
    if f.section == "failures.<cause>":
        return getattr(params.FailureParams().cause(owner or "accelerator"), f.key)
    dc = SECTIONS[f.section].dataclass
    if dc is None:
        raise KeyError(f"{f.path}: no default")
    if not isinstance(dc, type):
        return getattr(dc, f.key)
    fld = {x.name: x for x in dataclasses.fields(dc)}[f.key]
    if fld.default is not dataclasses.MISSING:
        return fld.default
    if fld.default_factory is dataclasses.MISSING:
        raise KeyError(f"{f.path}: no default")
    return fld.default_factory()


def default_text(f: Fact) -> str:
    if f.section == "training.<class>":
        return "per class"
    if f.section == "failures.<cause>":
        return "per cause"
    if f.default is REQUIRED:
        return "required"
    v = default(f)
    if v is NONE or v is None:
        return "–"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return f'"{v}"' if v else '""'
    if isinstance(v, _dt.datetime):
        return v.isoformat().replace("+00:00", "Z")
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


# ---------------------------------------------------------------------- JSON Schema
def _schema_of(f: Fact, owner: str | None = None) -> dict[str, Any]:
    t = f.type
    out: dict[str, Any] = {}
    bounds: dict[str, Any] = {}
    if f.lo is not None:
        bounds["exclusiveMinimum" if f.lo_open else "minimum"] = f.lo
    if f.hi is not None:
        bounds["exclusiveMaximum" if f.hi_open else "maximum"] = f.hi
    if t in ("int", "float"):
        out = {"type": "integer" if t == "int" else "number", **bounds}
    elif t == "bool":
        out = {"type": "boolean"}
    elif t == "name":
        out = {"type": "string", "pattern": NAME_PATTERN}
    elif t in ("str", "path"):
        out = {"type": "string", "minLength": 1 if t == "path" else 0, "maxLength": MAX_TEXT_CHARS}
    elif t == "enum":
        out = {"enum": list(f.choices)}
    elif t == "datetime":
        out = {"type": ["string"], "format": "date-time"}
    elif t.startswith("list["):
        inner = t[5:-1]
        item: dict[str, Any] = {"type": {"int": "integer", "float": "number", "str": "string"}[inner]}
        if inner != "str":
            item.update(bounds)
        out = {"type": "array", "items": item, "minItems": 1, "maxItems": MAX_LIST_ITEMS}
    elif t == "table[float]":
        out = {
            "type": "object",
            "propertyNames": {"enum": list(f.choices)},
            "additionalProperties": {"type": "number", **bounds},
        }
    elif t == "target":
        out = {"type": ["string", "integer"]}
    unit = f" [{f.unit}]" if f.unit and f.unit != "-" else (" [-]" if f.unit == "-" else "")
    out["description"] = f"{f.description}{unit}" + (f" — {f.source}" if f.source else "")
    if f.section not in ("training.<class>", "failures.<cause>") or owner is not None:
        v = default(f, owner)
        if v is not NONE and v is not REQUIRED and v is not None:
            if isinstance(v, _dt.datetime):
                v = v.isoformat().replace("+00:00", "Z")
            elif isinstance(v, tuple):
                v = list(v)
            out["default"] = v
    return out


def _object(section: str, owner: str | None = None, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    fs = facts(section)
    props = {f.key: _schema_of(f, owner) for f in fs}
    props.update(extra or {})
    out: dict[str, Any] = {"type": "object", "properties": props, "additionalProperties": False}
    req = [f.key for f in fs if f.default is REQUIRED]
    if req:
        out["required"] = req
    doc = SECTIONS[section].doc
    if doc:
        out["description"] = doc
    return out


def _training_schema() -> dict[str, Any]:
    """[training]: its own keys, a table per job class, and the one-class shorthand."""
    classes = {c: _object("training.<class>", c) for c in CLASS_NAMES}
    training = _object("training", extra={**classes})
    # Shorthand: class keys directly under [training] describe one class of pre-training jobs.
    for k, v in _object("training.<class>", "pretrain")["properties"].items():
        if k not in ("share", "precision"):
            training["properties"].setdefault(k, v)
    return training


def _hall_schema(with_cooling: bool = False) -> dict[str, Any]:
    """[hall] with its [[hall.rows]]; a campus's [[halls]] entry also has its own cooling table."""
    extra: dict[str, Any] = {
        "rows": {"type": "array", "maxItems": floorplan.MAX_SYSTEMS, "items": _object("hall.rows")}
    }
    if with_cooling:
        extra["cooling"] = _object("cooling")
    return _object("hall", extra=extra)


def _variants_schema() -> dict[str, Any]:
    """[[variants]]: a name plus any tables (not described further: they override the base)."""
    return {
        "type": "array",
        "maxItems": MAX_TABLE_ITEMS,
        "description": "Variants of a comparison scenario: a name plus tables that override the base",
        "items": {
            "type": "object",
            "required": ["name"],
            "properties": {"name": {"type": "string", "pattern": NAME_PATTERN}},
        },
    }


def json_schema() -> dict[str, Any]:
    """A JSON Schema (draft 2020-12) of scenario files, for editors (TOML language servers such as
    Taplo and Even Better TOML read it). Cross-key rules (lengths that must match, event targets
    inside the hall, resource limits) are checked by ``twin validate``, not by the schema."""
    training = _training_schema()
    failures = _object("failures", extra={c: _object("failures.<cause>", c) for c in CAUSE_NAMES})
    top = _object("")
    top["properties"].update(
        hall=_hall_schema(),
        halls={
            "type": "array",
            "minItems": 1,
            "maxItems": campus.MAX_HALLS,
            "items": _hall_schema(with_cooling=True),
        },
        hardware=_object("hardware"),
        site=_object("site"),
        grid={
            "type": "object",
            "additionalProperties": False,
            "properties": {"price": _object("grid.price"), "carbon": _object("grid.carbon")},
        },
        power=_object("power"),
        cooling=_object("cooling"),
        tco=_object("tco"),
        training=training,
        scheduler=_object("scheduler"),
        services={"type": "array", "maxItems": MAX_TABLE_ITEMS, "items": _object("services")},
        models={"type": "array", "maxItems": MAX_TABLE_ITEMS, "items": _object("models")},
        failures=failures,
        telemetry=_object("telemetry"),
        events={"type": "array", "maxItems": MAX_TABLE_ITEMS, "items": _object("events")},
        variants=_variants_schema(),
    )
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "AI Factory Twin scenario",
        **top,
    }


# ---------------------------------------------------------------------- README tables
README_BEGIN = "<!-- scenario-keys:begin (generated by `python -m scenarios.facts --readme`) -->"
README_END = "<!-- scenario-keys:end -->"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def limits_text() -> str:
    """The resource limits, as the README states them."""
    mib = 1 << 20
    return (
        "Limits, checked before anything is allocated (each refusal states its limit): at most "
        f"{MAX_CHIPS:,} chips and {MAX_ULTRASERVERS:,} systems in a hall, {MAX_HALLS} halls and "
        f"{MAX_CAMPUS_CHIPS:,} chips on a campus; at most {MAX_US_STEPS:,} "
        f"system-steps in a run (steps × systems); runs of at most {MAX_RUN_H:,.0f} h (ten years); at "
        f"most {MAX_ARRIVALS_PER_DAY:,.0f} batch arrivals a day and {MAX_REPLICAS:,} replicas in all; "
        f"scenario files up to {MAX_SCENARIO_BYTES // mib} MiB, weather/price/carbon files up to "
        f"{MAX_SITE_FILE_BYTES // mib} MiB, traces up to {MAX_TRACE_BYTES // mib} MiB and "
        f"{MAX_TRACE_ROWS:,} rows, CSV fields up to {MAX_FIELD_BYTES >> 10} KiB; files must be regular "
        f"files (not devices or pipes); names up to {MAX_NAME_CHARS} characters, {MAX_TABLE_ITEMS} "
        f"[[services]], [[models]], [[events]] or [[variants]], {MAX_LIST_ITEMS} items in a list."
    )


def markdown() -> str:
    """The README's scenario key tables (one table per section), after the limits."""
    out: list[str] = [limits_text(), ""]
    for s in SECTIONS.values():
        out.append(f"**{s.title}** — {s.doc}")
        out.append("")
        if not facts(s.name):
            continue
        out.append("| key | type | unit | range | default | description (source) |")
        out.append("|---|---|---|---|---|---|")
        for f in facts(s.name):
            typ = " \\| ".join(f"`{c}`" for c in f.choices) if f.type == "enum" else _cell(f.type)
            if f.type == "table[float]":
                typ = "table of number"
            rng = f.range_text().replace("x", "value")
            if f.type.startswith("list["):
                rng = f"each {rng}" if rng else ""
            src = f" ({f.source})" if f.source else ""
            out.append(
                f"| `{f.key}` | {typ} | {f.unit if f.unit != '-' else '–'} | {_cell(rng)} | "
                f"{_cell(default_text(f))} | {_cell(f.description)}{_cell(src)} |"
            )
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def readme_with_tables(readme: str) -> str:
    """``readme`` with the text between the scenario-key markers replaced by ``markdown()``."""
    head, sep, rest = readme.partition(README_BEGIN)
    if not sep:
        raise ValueError("README has no scenario-keys marker")
    _, sep2, tail = rest.partition(README_END)
    if not sep2:
        raise ValueError("README has no scenario-keys end marker")
    return f"{head}{README_BEGIN}\n{markdown()}{README_END}{tail}"


def main(argv: list[str]) -> int:
    """``python -m scenarios.facts --readme [docs/scenario-keys.md]``: rewrite the key reference's tables."""
    if not argv or argv[0] != "--readme":
        print("usage: python -m scenarios.facts --readme [docs/scenario-keys.md]", file=sys.stderr)
        return 2
    from pathlib import Path

    path = Path(argv[1] if len(argv) > 1 else "docs/scenario-keys.md")
    text = path.read_text(encoding="utf-8")
    new = readme_with_tables(text)
    if new != text:
        path.write_text(new, encoding="utf-8")
        print(f"{path}: scenario key tables updated")
    else:
        print(f"{path}: scenario key tables up to date")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
