"""The telemetry fact table: the column spec of every recorded quantity.

Each column has a name (SI unit as suffix), a dtype, a unit and a description. The Arrow schema and
the DuckDB DDL (``storage.schema``) and the TUI labels are all derived from this module. Pure data:
no I/O, no Arrow or DuckDB imports.
"""

from __future__ import annotations

from dataclasses import dataclass

# Schema version of the telemetry file. Bump on any incompatible change to the tables below.
# v2: calendar time (``runs.start``, ``ts`` in every time-series table), added by ``storage.schema``.
# v3: the aggregate tiers ``row_ts`` and ``hall_ts``.
# v4: cost of ownership in ``factory_ts`` (``COST_COLUMNS``).
# v5: mixed floors: ``system_ts`` (one row per system and step) and ``jobs.system``.
# v6: the cooling plant's units in ``factory_ts`` and each UltraServer's CDU flow (``V6_COLUMNS``).
# v7: campuses: ``hall_id`` of ``row_ts`` and ``system_ts`` (``hall_ts`` has one row per hall).
# v8: the heat balance of the water in ``factory_ts`` (``V8_COLUMNS``).
# v9: prompt tokens and the prefill time share of inference in ``factory_ts`` (``V9_COLUMNS``).
# v10: sub-step power of the halls and the grid connection, ``grid_ts``.
SCHEMA_VERSION = 11


@dataclass(frozen=True)
class Column:
    name: str
    dtype: str  # one of: int8 int32 int64 float32 float64 string bool
    unit: str  # SI unit, "-" for fractions/counts, "" for identifiers and text
    description: str
    # How a whole's row follows from its parts' rows of the same step (a hall's from its system
    # pools, a campus's from its halls; ``twin.compose.parts.merge_rows``): "sum", "same" (every part
    # carries the whole's value), "max", "ratio:NUM/DEN" (of the merged columns) or
    # "mean:WEIGHT" (weighted by that column of the parts).
    merge: str = "sum"
    # A campus's rule where it differs (each hall has a plant of its own); "" = ``merge``.
    campus: str = ""


def _c(name: str, dtype: str, unit: str, description: str, merge: str = "sum", campus: str = "") -> Column:
    return Column(name, dtype, unit, description, merge, campus)


RUN_ID = _c("run_id", "string", "", "Run identifier (one file may hold several runs)")
TIME_S = _c("time_s", "int64", "s", "Simulated time since the start of the run", "same")


def _tier_columns(scope: str) -> tuple[Column, ...]:
    """Columns of an aggregate tier: its UltraServers' rows summed (counts, power) or reduced
    (max, mean) over a ``scope`` (a row, one CDU; or a hall)."""
    return (
        _c("ultraservers", "int32", "-", f"UltraServers in the {scope}"),
        _c("power_w", "float64", "W", f"IT power (the {scope}'s UltraServers, rack input)"),
        _c("chips_busy", "int32", "-", "Chips doing work"),
        _c("chips_failed", "int32", "-", "Failed chips (hardware faults)"),
        _c("ultraservers_tripped", "int32", "-", "UltraServers powered off by thermal protection"),
        _c("activity", "float32", "-", "Mean chip activity", "mean:ultraservers"),
        _c("max_chip_temp_c", "float32", "°C", "Hottest chip junction temperature", "max"),
        _c(
            "coolant_return_c",
            "float32",
            "°C",
            "Mean cold-plate loop return temperature of its UltraServers",
            "mean:ultraservers",
        ),
        _c(
            "clock",
            "float32",
            "-",
            "Mean chip clock (1 = full; below 1 when capped or hot)",
            "mean:ultraservers",
        ),
    )


TABLES: dict[str, tuple[Column, ...]] = {
    "runs": (
        RUN_ID,
        _c("scenario_name", "string", "", "Scenario name"),
        _c("scenario_toml", "string", "", "Full scenario text the run was made from"),
        _c("seed", "int64", "", "Random seed"),
        _c("dt_s", "int64", "s", "Simulation time step"),
        _c("duration_s", "int64", "s", "Requested simulated duration"),
        _c("version", "string", "", "AI Factory Twin version that wrote the run"),
        _c("schema_version", "int32", "", "Telemetry schema version"),
        _c("status", "string", "", "running | complete | failed | stopped"),
        _c("started_at", "string", "", "Wall-clock start (UTC, ISO 8601)"),
        _c("finished_at", "string", "", "Wall-clock end (UTC, ISO 8601), empty while running"),
        _c("sim_time_s", "int64", "s", "Simulated time reached (last committed step)"),
        _c("chips_total", "int32", "-", "Chips in the factory"),
        _c("ultraservers", "int32", "-", "Scale-up systems in the factory"),
        _c("system", "string", "", "System type (catalog key)"),
        _c(
            "design_json",
            "string",
            "",
            "The run's Design as JSON: shapes, full-load powers, thermal and plant design values",
        ),
    ),
    "factory_ts": (
        RUN_ID,
        TIME_S,
        _c("it_power_w", "float64", "W", "IT power (chips + hosts + switches, at rack input)"),
        _c("facility_power_w", "float64", "W", "Facility power = IT + cooling + power-chain losses"),
        _c("cooling_power_w", "float64", "W", "Cooling plant power (chiller, pumps, fans)"),
        _c("power_loss_w", "float64", "W", "Power-chain losses (transformer, UPS, PDU)"),
        _c(
            "pue",
            "float64",
            "-",
            "Power usage effectiveness = facility / IT",
            "ratio:facility_power_w/it_power_w",
        ),
        _c("chip_power_w", "float64", "W", "Accelerator chips' power"),
        _c("psu_loss_w", "float64", "W", "Rack rectifier losses (inside IT power)"),
        _c("pdu_loss_w", "float64", "W", "PDU / busway losses"),
        _c("ups_loss_w", "float64", "W", "UPS losses (load-dependent efficiency)"),
        _c("transformer_loss_w", "float64", "W", "Utility transformer losses"),
        _c("chiller_power_w", "float64", "W", "Chiller compressor power"),
        _c("pump_power_w", "float64", "W", "CDU and facility water pump power"),
        _c("fan_power_w", "float64", "W", "Cooling tower / dry cooler and CRAH fan power"),
        _c(
            "free_cooling_fraction",
            "float64",
            "-",
            "Share of heat rejected by the economizer",
            "same",
            "mean:it_power_w",
        ),
        _c("chiller_cop", "float64", "-", "Chiller coefficient of performance", "same", "mean:it_power_w"),
        _c(
            "water_l",
            "float64",
            "L",
            "Site cooling water this step: tower / wet hybrid-cooler make-up (evaporation, blowdown, "
            "drift) and evaporative intake",
        ),
        _c(
            "facility_water_supply_c",
            "float64",
            "°C",
            "Facility water supply to the CDUs",
            "same",
            "mean:it_power_w",
        ),
        _c("unmet_heat_w", "float64", "W", "Heat the plant could not reject (warms the loops)"),
        _c("facility_cap_w", "float64", "W", "Active facility power cap (NULL/NaN: none)", "same"),
        _c("throttled_chips", "int32", "-", "Busy chips running below full clock (cap or heat)"),
        _c("mean_clock", "float64", "-", "Mean clock of busy chips (1 = full)", "mean:chips_busy"),
        _c("chips_total", "int32", "-", "Chips in the factory"),
        _c("chips_allocated", "int32", "-", "Chips allocated to jobs or inference replicas"),
        _c("chips_busy", "int32", "-", "Allocated chips doing work this step"),
        _c("chips_failed", "int32", "-", "Chips failed and awaiting repair (hardware faults)"),
        _c("ultraservers_tripped", "int32", "-", "UltraServers powered off by thermal protection"),
        _c("activity", "float64", "-", "Mean chip activity over all chips", "mean:chips_total"),
        _c("queue_jobs", "int32", "-", "Batch jobs (all classes) waiting in the queue after scheduling"),
        _c("running_jobs", "int32", "-", "Batch jobs (all classes) running"),
        _c("training_flops", "float64", "FLOP/s", "Model FLOP/s delivered to pre-training and fine-tuning"),
        _c("tokens_per_s", "float64", "1/s", "Output tokens per second served by inference"),
        _c("requests_per_s", "float64", "1/s", "Inference requests arriving per second"),
        _c(
            "requests_dropped_per_s",
            "float64",
            "1/s",
            "Inference requests dropped per second (no replica, or would wait beyond max_queue_wait_s)",
        ),
        _c(
            "energy_per_token_j",
            "float64",
            "J",
            "Facility energy per output token (inference)",
            "ratio:inference_power_w/tokens_per_s",
        ),
        _c(
            "job_flops",
            "float64",
            "FLOP/s",
            "Model FLOP/s delivered to all batch jobs (incl. eval, batch inference)",
        ),
        _c("requests_served_per_s", "float64", "1/s", "Inference requests served per second"),
        _c("requests_queued", "int64", "-", "Inference requests waiting at the end of the step"),
        _c("chips_free", "int32", "-", "Chips free for new work (not allocated, failed or drained)"),
        _c("chips_drained", "int32", "-", "Idle chips in UltraServers drained for maintenance"),
        _c("ultraservers_free", "int32", "-", "UltraServers with every chip free"),
        _c(
            "fragmentation",
            "float64",
            "-",
            "Share of free chips in partly occupied UltraServers",
            "mean:chips_free",
        ),
        _c("failures", "int32", "-", "Failures this step (random and injected)"),
        _c("preemptions", "int32", "-", "Jobs preempted this step"),
        _c("inference_power_w", "float64", "W", "Facility power attributed to inference replicas"),
        _c("outdoor_temp_c", "float64", "°C", "Outdoor dry-bulb temperature", "same"),
        _c("outdoor_wetbulb_c", "float64", "°C", "Outdoor wet-bulb temperature", "same"),
        _c("outdoor_rh", "float64", "-", "Outdoor relative humidity", "same"),
        _c(
            "coolant_supply_c",
            "float64",
            "°C",
            "Liquid loop (CDU secondary) supply to the cold plates = facility water + CDU approach",
            "same",
            "mean:it_power_w",
        ),
        _c("coolant_return_c", "float64", "°C", "Liquid loop return temperature (mean)", "mean:chips_total"),
        _c("max_chip_temp_c", "float64", "°C", "Hottest chip junction temperature", "max"),
        _c("price_usd_per_mwh", "float64", "USD/MWh", "Electricity price", "same"),
        _c("carbon_g_per_kwh", "float64", "g/kWh", "Grid carbon intensity", "same"),
        _c("cost_usd", "float64", "USD", "Electricity cost of this step"),
        _c("co2_kg", "float64", "kg", "CO2 emitted for this step's electricity"),
        _c("energy_j", "float64", "J", "Facility energy of this step"),
        # Schema v4: cost of ownership beyond electricity (twin.spec.tco) and inference's share of chips.
        _c("capex_usd", "float64", "USD", "Capital recovery of systems and facility for this step"),
        _c("fixed_opex_usd", "float64", "USD", "Maintenance and staff cost of this step"),
        _c("water_cost_usd", "float64", "USD", "Cooling-tower water cost of this step"),
        _c("inference_chips", "int32", "-", "Chips held by inference replicas"),
        # Schema v6: the cooling plant's units (twin.physics.plant): identical units, the running ones
        # sharing the load equally.
        _c(
            "chillers_running",
            "int32",
            "-",
            "Chillers running this step (the rest standby or failed)",
            "same",
            "sum",
        ),
        _c("chillers_failed", "int32", "-", "Chillers tripped and not yet restored", "same", "sum"),
        _c(
            "chiller_load_fraction",
            "float64",
            "-",
            "Part-load ratio of each running chiller (load / unit capacity)",
            "same",
            "mean:chillers_running",
        ),
        _c(
            "economizers_running",
            "int32",
            "-",
            "Cooling towers / dry coolers running (all healthy ones while heat is rejected)",
            "same",
            "sum",
        ),
        _c(
            "economizers_failed",
            "int32",
            "-",
            "Cooling towers / dry coolers lost and not yet restored",
            "same",
            "sum",
        ),
        _c(
            "economizer_load_fraction",
            "float64",
            "-",
            "Fan speed of the running towers / dry coolers (heat rejected / design load)",
            "same",
            "mean:economizers_running",
        ),
        # Schema v8: the heat balance of the water (twin.physics.plant.run): IT heat = heat rejected +
        # heat stored, every step; a PUE read while heat is stored is not a steady-state PUE.
        _c(
            "heat_rejected_w",
            "float64",
            "W",
            "Heat taken from the water by the economizer and the chillers' evaporators",
        ),
        _c(
            "heat_stored_w",
            "float64",
            "W",
            "Rate of change of the heat held in the rack loops, facility water and chilled water"
            " (+ stored: the plant is not keeping up; - released)",
        ),
        _c(
            "unrejected_fraction",
            "float64",
            "-",
            "Share of the step's heat the plant could not reject (stored instead; 0 = keeping up)",
            "same",
            "mean:it_power_w",
        ),
        _c(
            "chilled_water_supply_c",
            "float64",
            "°C",
            "Chilled water supply to the CRAHs (above its setpoint while the air side stores heat)",
            "same",
            "mean:it_power_w",
        ),
        _c("input_tokens_per_s", "float64", "1/s", "Prompt (input) tokens per second prefilled by inference"),
        _c(
            "prefill_time_share",
            "float64",
            "-",
            "Share of the warm inference replicas' time spent prefilling (chip-weighted; the rest decodes)",
            "mean:inference_chips",
        ),
    ),
    "ultraserver_ts": (
        RUN_ID,
        TIME_S,
        _c("ultraserver_id", "int32", "", "UltraServer index in the hall"),
        _c("row_id", "int32", "", "Row (one CDU per row)"),
        _c("power_w", "float64", "W", "IT power of the UltraServer (chips + hosts + switches)"),
        _c("chips_busy", "int32", "-", "Chips doing work"),
        _c("chips_failed", "int32", "-", "Failed chips (hardware faults)"),
        _c("tripped", "bool", "", "Powered off by thermal protection (loop trip or junction shutdown)"),
        _c("activity", "float32", "-", "Mean chip activity"),
        _c("max_chip_temp_c", "float32", "°C", "Hottest chip junction temperature"),
        _c("coolant_return_c", "float32", "°C", "Cold-plate loop return temperature"),
        _c("clock", "float32", "-", "Mean chip clock (1 = full; below 1 when capped or hot)"),
        # Schema v6: the coolant flow of the UltraServer's CDU (its row's pumps).
        _c("cdu_flow_fraction", "float32", "-", "Flow of its row's CDU pumps (1 healthy, 0 lost)"),
    ),
    "chip_ts": (
        RUN_ID,
        TIME_S,
        _c("chip_id", "int32", "", "Chip index in the hall"),
        _c("ultraserver_id", "int32", "", "UltraServer of the chip"),
        _c("job_id", "int32", "", "Job or replica on the chip (-1 idle)"),
        _c("neuroncore_utilization", "float32", "-", "Activity of the chip's cores (neuron-monitor)"),
        _c("chip_power_w", "float32", "W", "Chip power (simulated ground truth)"),
        _c("t_junction_c", "float32", "°C", "Junction temperature (simulated ground truth)"),
        _c(
            "failed",
            "bool",
            "",
            "Chip failed (hardware fault; a chip of a tripped UltraServer is off, not failed)",
        ),
        _c("clock", "float32", "-", "Clock the chip ran at (1 = full; lower when capped or hot)"),
    ),
    "jobs": (
        RUN_ID,
        _c("job_id", "int32", "", "Job identifier"),
        _c(
            "kind",
            "string",
            "",
            "pretrain | finetune | eval | batch_inference | inference (a service replica)",
        ),
        _c("name", "string", "", "Model or service name"),
        _c("chips", "int32", "-", "Chips in the gang"),
        _c("precision", "string", "", "Numeric precision"),
        _c("priority", "int32", "-", "Scheduling priority (higher first under the priority policy)"),
        _c("params", "float64", "-", "Model parameters N (active for MoE)"),
        _c("tokens", "float64", "-", "Tokens D"),
        _c("work_flop", "float64", "FLOP", "Work = 6·N·D (training) or 2·N·D (eval, batch inference)"),
        _c("done_flop", "float64", "FLOP", "Work done (from the last checkpoint on after an interruption)"),
        _c("lost_flop", "float64", "FLOP", "Work lost to interruptions (done since the last checkpoint)"),
        _c("submit_time_s", "int64", "s", "Submit time"),
        _c("first_start_time_s", "int64", "s", "First start (-1 not started)"),
        _c("start_time_s", "int64", "s", "Start of the current placement (-1 not started)"),
        _c("end_time_s", "int64", "s", "End time (-1 not ended)"),
        _c("state", "string", "", "queued | running | done | stopped (replica scaled down)"),
        _c("wait_s", "float64", "s", "Time spent queued, over all waits (after interruptions too)"),
        _c("run_s", "float64", "s", "Time holding chips"),
        _c("effective_s", "float64", "s", "Time making progress that was kept (not lost, not restarting)"),
        _c("lost_s", "float64", "s", "Progress time lost to interruptions"),
        _c("estimate_s", "float64", "s", "Nominal run length on the ideal placement"),
        _c("ultraservers_spanned", "int32", "-", "UltraServers the gang spans"),
        _c("ultraservers", "string", "", "UltraServers of the current placement (comma-separated)"),
        _c("mfu", "float64", "-", "Model FLOP utilisation of the placement"),
        _c("restarts", "int32", "-", "Restarts after interruptions (failures + preemptions)"),
        _c("failures", "int32", "-", "Interruptions by failures, drains and thermal trips"),
        _c("preemptions", "int32", "-", "Interruptions by higher-priority work"),
        _c("source", "string", "", "synthetic | trace | service | manual"),
        _c("system", "string", "", "System the job or replica runs on (catalog key; mixed floors)"),
    ),
    "service_ts": (
        RUN_ID,
        TIME_S,
        _c("service_id", "int32", "", "Service index in the scenario"),
        _c("service", "string", "", "Service name"),
        _c("requests_arrived", "int64", "-", "Requests arriving this step"),
        _c("requests_served", "int64", "-", "Requests served this step"),
        _c("requests_dropped", "int64", "-", "Requests dropped this step"),
        _c("requests_queued", "int64", "-", "Requests waiting at the end of the step"),
        _c("request_rate_per_s", "float64", "1/s", "Arrival rate this step"),
        _c("replicas_running", "int32", "-", "Warm replicas serving"),
        _c("replicas_starting", "int32", "-", "Replicas placed and loading weights"),
        _c("replicas_target", "int32", "-", "Replicas wanted (running, starting or waiting for chips)"),
        _c("tokens_per_s", "float64", "1/s", "Output tokens per second"),
        _c("input_tokens_per_s", "float64", "1/s", "Prompt tokens per second prefilled"),
        _c("ttft_p50_s", "float64", "s", "Time to first token, median of requests served"),
        _c("ttft_p90_s", "float64", "s", "Time to first token, 90th percentile"),
        _c("ttft_p99_s", "float64", "s", "Time to first token, 99th percentile"),
        _c("tpot_p50_s", "float64", "s", "Time per output token, median"),
        _c("tpot_p90_s", "float64", "s", "Time per output token, 90th percentile"),
        _c("tpot_p99_s", "float64", "s", "Time per output token, 99th percentile"),
        _c("slo_met", "float64", "-", "Requests served within both the TTFT and the TPOT SLO"),
        _c("slo_attainment", "float64", "-", "slo_met / (served + dropped)"),
        _c("occupancy", "float64", "-", "Sequences resident per warm replica (decode batch)"),
        _c("kv_cache_fraction", "float64", "-", "KV cache in use / KV capacity of a replica's HBM"),
        _c("utilization", "float64", "-", "Requests served / serving capacity"),
        _c("power_w", "float64", "W", "Facility power attributed to the service's replicas"),
    ),
    "failures": (
        RUN_ID,
        TIME_S,
        _c("level", "string", "", "chip | server | ultraserver"),
        _c("target_id", "int32", "", "Index of the chip, server or UltraServer"),
        _c("cause", "string", "", "accelerator | hbm | network | host | software | injected"),
        _c("chips_down", "int32", "-", "Chips taken out of service (0 for software faults)"),
        _c("repair_s", "int64", "s", "Time to repair (0: none needed, or until a repair event)"),
        _c("jobs_interrupted", "int32", "-", "Jobs and replicas interrupted (the blast radius)"),
        _c("source", "string", "", "model | scenario | operator"),
    ),
    "interruptions": (
        RUN_ID,
        TIME_S,
        _c("job_id", "int32", "", "Job or replica interrupted"),
        _c("reason", "string", "", "failure | preemption | drain"),
        _c("cause", "string", "", "Failure cause, the preemptor's priority, or maintenance"),
        _c("lost_flop", "float64", "FLOP", "Work rolled back to the last checkpoint"),
        _c("lost_s", "float64", "s", "Progress time rolled back"),
        _c("chips", "int32", "-", "Chips the job held"),
        _c("by_job_id", "int32", "", "Preempting job (-1 none)"),
    ),
    "events": (
        RUN_ID,
        TIME_S,
        _c("kind", "string", "", "Event kind"),
        _c("target", "string", "", "What the event applies to"),
        _c("detail", "string", "", "Human-readable detail"),
        _c("source", "string", "", "scenario | operator | model"),
        _c("arg", "string", "", "Target argument as given (scenario/operator events; for re-runs)"),
        _c("value", "float64", "", "Event value as given (surge factor, cap in W, units, …)"),
        _c("duration_s", "int64", "s", "Event duration as given (0: until cleared)"),
    ),
    # Aggregate tiers: the UltraServer rows summed (counts, power) or reduced (max, mean) over a
    # row (one CDU) and over the hall, each at its own interval (``[telemetry]``).
    "row_ts": (
        RUN_ID,
        TIME_S,
        _c("row_id", "int32", "", "Row (one CDU per row)"),
        *_tier_columns("row"),
        _c("hall_id", "int32", "", "Hall (building) of the row"),
    ),
    "hall_ts": (
        RUN_ID,
        TIME_S,
        _c("hall_id", "int32", "", "Hall (building) of the site", "same"),
        *_tier_columns("hall"),
    ),
    # Sub-step power (``twin.compose.grid``): every ``grid_interval_s`` within each step, each hall's
    # facility power and the grid connection's draw after its storage (hall_id -1). The mean of
    # a hall's rows over a step is its factory_ts power of that step (without a power floor).
    "grid_ts": (
        RUN_ID,
        TIME_S,
        _c("hall_id", "int32", "", "Hall (building); -1: the grid connection (after its storage)"),
        _c("p_w", "float64", "W", "Power over the interval from time_s (mean): facility or grid draw"),
    ),
}

# Columns of factory_ts recorded per system in ``system_ts``.
_SYSTEM_COLUMNS = (
    "it_power_w",
    "facility_power_w",
    "cooling_power_w",
    "power_loss_w",
    "chip_power_w",
    "water_l",
    "chips_total",
    "chips_allocated",
    "chips_busy",
    "chips_failed",
    "activity",
    "mean_clock",
    "max_chip_temp_c",
    "queue_jobs",
    "running_jobs",
    "training_flops",
    "job_flops",
    "tokens_per_s",
    "requests_served_per_s",
    "inference_power_w",
    "inference_chips",
    "cost_usd",
    "co2_kg",
    "energy_j",
    "capex_usd",
    "fixed_opex_usd",
    "water_cost_usd",
)
# One row per system (a homogeneous pool of one catalog system) and step: the factory_ts columns
# of that system's share. IT, chips and work are the system's own; the plant's and the power
# chain's power, water and their cost are the floor's, shared in proportion to IT power (every
# system sees the floor's PUE). A single-system hall has one row per step, equal to its
# factory_ts row.
TABLES["system_ts"] = (
    RUN_ID,
    TIME_S,
    _c("system_id", "int32", "", "System index on the floor (order of [[hall.rows]])"),
    _c("system", "string", "", "System (catalog key)"),
    *(c for c in TABLES["factory_ts"] if c.name in _SYSTEM_COLUMNS),
    _c("hall_id", "int32", "", "Hall (building) of the system's rows"),
)


# Columns of factory_ts added in schema v6: the plant's units (``twin.physics.plant.UNIT_COLUMNS``).
PLANT_UNIT_COLUMNS = (
    "chillers_running",
    "chillers_failed",
    "chiller_load_fraction",
    "economizers_running",
    "economizers_failed",
    "economizer_load_fraction",
)


# Columns the writer upserts on (one row per key, latest wins).
UPSERT_KEYS: dict[str, tuple[str, ...]] = {"runs": ("run_id",), "jobs": ("run_id", "job_id")}


def column(table: str, name: str) -> Column:
    """The spec of ``table``'s column ``name`` (KeyError naming it when there is none)."""
    for col in TABLES[table]:
        if col.name == name:
            return col
    raise KeyError(f"{table}.{name}")
