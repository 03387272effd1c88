"""The one mapping table: each twin quantity <-> each format's field, unit, entity and precision.

Read by the emitters (``storage.interop.emit``), the ingest (``storage.interop.ingest``), the docs
(``docs/interop.md`` is generated from ``markdown_table()``) and the tests. Nothing else states a
format's field name, unit or scale.

A *quantity* is one recorded telemetry column (``TABLE.COLUMN`` of ``twin.spec.telemetry``) seen as an
entity's metric; the ``observed`` table names it by ``Quantity.name`` in the quantity's canonical
unit (the recorded column's unit; ``1`` for a ratio). A *field* is where one format carries it:

    format value = twin value * scale        (codec "linear")
    format value = FLAG_VALUE if twin value else 0   (codec "flag": a failure as the hardware
                                                      counter or code that reports it)

``precision`` is the largest difference, in the twin's unit, that the format's rounding can make
(half of the last digit the format carries, as the emitters write it): a round trip reproduces the
recorded value within it.

Entities are paths naming the twin's objects, the same in every format:

    site                          the facility (one power meter, one chiller plant)
    row{R}                        a row of racks (its rack PDU)
    us{U}                         an UltraServer (a Redfish chassis, a neuron-monitor instance)
    us{U}/chip{K}                 chip K (0-based, in chip-id order) of UltraServer U
    cdu{U}                        the coolant distribution unit of UltraServer U's rack loop
    job{J}                        a batch job

Sources (the public documentation of each format; field names are taken from them):
"""

from __future__ import annotations

from dataclasses import dataclass

SOURCES: dict[str, str] = {
    "neuron-monitor": "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/tools/neuron-sys-tools/neuron-monitor-user-guide.html",
    "dcgm": "https://github.com/NVIDIA/dcgm-exporter/blob/main/etc/default-counters.csv ; "
    "https://docs.nvidia.com/datacenter/dcgm/latest/dcgm-api/dcgm-api-field-ids.html",
    "prometheus-text": "https://prometheus.io/docs/instrumenting/exposition_formats/",
    "prometheus-api": "https://prometheus.io/docs/prometheus/latest/querying/api/",
    "redfish": "https://redfish.dmtf.org/schemas/v1/ (Power, EnvironmentMetrics, PowerDistributionMetrics, "
    "CoolingUnit, CoolantConnector, Pump); DMTF DSP0268 Redfish Resource and Schema Guide",
    "slurm": "https://slurm.schedmd.com/rest_api.html (sacct --json / squeue --json: data_parser v0.0.40 "
    "job objects)",
    "kube-state-metrics": "https://github.com/kubernetes/kube-state-metrics/blob/main/docs/metrics/workload/job-metrics.md",
    "bms": "MQTT 3.1.1 (OASIS) as transport; topic bms/<site>/<equipment>/<id>/<point> and a JSON payload "
    "{value, unit, timestamp, quality}: the twin's own scheme (a BMS gateway's points are site-specific)",
    "bms-csv": "a BMS trend export: Timestamp,Point,Value,Units,Status (ISO 8601 UTC time, one row a sample)",
}

FORMATS = ("neuron-monitor", "dcgm", "redfish", "slurm", "kube-state-metrics", "bms")

# neuron-monitor has no clock; the DCGM SM clock is the twin's clock ratio times the NeuronCore
# engine clock (1.2 GHz, facts.md section 1: trainium3_arch.rst).
CLOCK_MHZ = 1200.0
# A failed chip in the formats that report hardware faults: one uncorrectable memory ECC error
# (neuron-monitor's neuron_hw_counters) and XID 79, "GPU has fallen off the bus" (DCGM's last XID).
FLAG_VALUES = {"neuron-monitor": 1.0, "dcgm": 79.0}


@dataclass(frozen=True)
class Quantity:
    name: str  # the observed table's metric
    table: str  # the recorded table (twin.spec.telemetry)
    column: str
    entity: str  # entity kind: site, row, us, chip, cdu, job
    unit: str  # canonical unit (the observed table's)
    description: str


@dataclass(frozen=True)
class Field:
    quantity: str
    fmt: str
    field: str  # the format's field: metric name, JSON path (dots; <k> a key), topic point
    unit: str  # the format's unit
    scale: float = 1.0
    precision: float = 0.0  # in the quantity's unit
    codec: str = "linear"  # linear | flag | counter (a cumulative total whose rate is the quantity)
    decimals: int | None = None  # digits the emitter writes after the point (None: as is)


QUANTITIES: tuple[Quantity, ...] = (
    Quantity("chip.power", "chip_ts", "chip_power_w", "chip", "W", "Chip power"),
    Quantity("chip.utilization", "chip_ts", "neuroncore_utilization", "chip", "1", "NeuronCore utilisation"),
    Quantity("chip.temperature", "chip_ts", "t_junction_c", "chip", "°C", "Junction temperature"),
    Quantity("chip.clock", "chip_ts", "clock", "chip", "1", "Clock / full clock"),
    Quantity("chip.failed", "chip_ts", "failed", "chip", "1", "Chip failed (1) or healthy (0)"),
    Quantity("us.power", "ultraserver_ts", "power_w", "us", "W", "UltraServer IT power"),
    Quantity("us.max_chip_temperature", "ultraserver_ts", "max_chip_temp_c", "us", "°C", "Hottest chip"),
    Quantity("cdu.flow", "ultraserver_ts", "cdu_flow_fraction", "cdu", "1", "CDU flow / design flow"),
    Quantity("cdu.return_temperature", "ultraserver_ts", "coolant_return_c", "cdu", "°C", "Loop return"),
    Quantity("cdu.supply_temperature", "factory_ts", "coolant_supply_c", "cdu", "°C", "Loop supply"),
    Quantity("row.power", "row_ts", "power_w", "row", "W", "Row (rack PDU) power"),
    Quantity("site.power", "factory_ts", "facility_power_w", "site", "W", "Facility power meter"),
    Quantity("site.it_power", "factory_ts", "it_power_w", "site", "W", "IT power"),
    Quantity("site.chiller_power", "factory_ts", "chiller_power_w", "site", "W", "Chiller power"),
    Quantity(
        "site.chilled_water_supply_temperature",
        "factory_ts",
        "chilled_water_supply_c",
        "site",
        "°C",
        "Chilled water supply",
    ),
    Quantity(
        "site.facility_water_supply_temperature",
        "factory_ts",
        "facility_water_supply_c",
        "site",
        "°C",
        "Facility water supply",
    ),
    Quantity("job.submit_time", "jobs", "submit_time_s", "job", "s", "Submitted (Unix time)"),
    Quantity("job.start_time", "jobs", "start_time_s", "job", "s", "Started (Unix time; absent: not yet)"),
    Quantity("job.end_time", "jobs", "end_time_s", "job", "s", "Ended (Unix time; absent: not yet)"),
    Quantity("job.chips", "jobs", "chips", "job", "1", "Chips allocated"),
    Quantity("job.state", "jobs", "state", "job", "state", "State code (JOB_STATES)"),
)

FIELDS: tuple[Field, ...] = (
    # neuron-monitor JSON: report.neuroncore_counters.neuroncores_in_use.<index> (percent), and
    # system_data.neuron_hw_counters.neuron_devices[].mem_ecc_uncorrected (a count).
    Field(
        "chip.utilization",
        "neuron-monitor",
        "neuron_runtime_data[].report.neuroncore_counters.neuroncores_in_use.<k>.neuroncore_utilization",
        "%",
        100.0,
        5e-5,
        decimals=3,
    ),
    Field(
        "chip.failed",
        "neuron-monitor",
        "system_data.neuron_hw_counters.neuron_devices[].mem_ecc_uncorrected",
        "1",
        codec="flag",
    ),
    # DCGM exporter (Prometheus text; labels gpu, UUID, device, modelName, Hostname).
    Field("chip.power", "dcgm", "DCGM_FI_DEV_POWER_USAGE", "W", 1.0, 5e-4, decimals=3),
    Field("chip.temperature", "dcgm", "DCGM_FI_DEV_GPU_TEMP", "°C", 1.0, 0.5, decimals=0),
    Field("chip.clock", "dcgm", "DCGM_FI_DEV_SM_CLOCK", "MHz", CLOCK_MHZ, 0.5 / CLOCK_MHZ, decimals=0),
    Field("chip.utilization", "dcgm", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "1", 1.0, 5e-7, decimals=6),
    Field("chip.failed", "dcgm", "DCGM_FI_DEV_XID_ERRORS", "1", codec="flag"),
    # Energy in mJ since the exporter started (a counter): its rate is the chip's power.
    Field("chip.power", "dcgm", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "mJ", 1e3, 1e-3, "counter", 0),
    # Redfish resources (paths under /redfish/v1; <id> the entity's name).
    Field(
        "us.power",
        "redfish",
        "Chassis/<id>/Power#PowerControl[0].PowerConsumedWatts",
        "W",
        1.0,
        0.05,
        decimals=1,
    ),
    Field(
        "us.max_chip_temperature",
        "redfish",
        "Chassis/<id>/EnvironmentMetrics#TemperatureCelsius.Reading",
        "°C",
        1.0,
        0.05,
        decimals=1,
    ),
    Field(
        "row.power",
        "redfish",
        "PowerEquipment/RackPDUs/<id>/Metrics#PowerWatts.Reading",
        "W",
        1.0,
        0.05,
        decimals=1,
    ),
    Field(
        "cdu.supply_temperature",
        "redfish",
        "ThermalEquipment/CDUs/<id>/SecondaryCoolantConnectors/1#SupplyTemperatureCelsius.Reading",
        "°C",
        1.0,
        0.005,
        decimals=2,
    ),
    Field(
        "cdu.return_temperature",
        "redfish",
        "ThermalEquipment/CDUs/<id>/SecondaryCoolantConnectors/1#ReturnTemperatureCelsius.Reading",
        "°C",
        1.0,
        0.005,
        decimals=2,
    ),
    # The twin's CDU flow is a share of design flow: the pump's speed in percent is the one
    # Redfish reading of the CDU in those terms.
    Field(
        "cdu.flow",
        "redfish",
        "ThermalEquipment/CDUs/<id>/Pumps/1#PumpSpeedPercent.Reading",
        "%",
        100.0,
        5e-4,
        decimals=1,
    ),
    # Slurm (sacct --json / squeue --json): jobs[] objects.
    Field("job.submit_time", "slurm", "jobs[].time.submission", "s", 1.0, 0.5, decimals=0),
    Field("job.start_time", "slurm", "jobs[].time.start", "s", 1.0, 0.5, decimals=0),
    Field("job.end_time", "slurm", "jobs[].time.end", "s", 1.0, 0.5, decimals=0),
    Field("job.chips", "slurm", "jobs[].tres.allocated[type=gres,name=neuron].count", "1", 1.0, 0.0),
    Field("job.state", "slurm", "jobs[].state.current[0]", "state"),
    # kube-state-metrics job series (Prometheus text; label job_name).
    Field("job.start_time", "kube-state-metrics", "kube_job_status_start_time", "s", 1.0, 0.5, decimals=0),
    Field("job.end_time", "kube-state-metrics", "kube_job_status_completion_time", "s", 1.0, 0.5, decimals=0),
    # BMS points (MQTT topic bms/<site>/<equipment>/<id>/<point>; CSV Point column the same path).
    Field("site.power", "bms", "power_meter/main/active_power", "kW", 1e-3, 5e-1, decimals=3),
    Field("site.it_power", "bms", "power_meter/it/active_power", "kW", 1e-3, 5e-1, decimals=3),
    Field("site.chiller_power", "bms", "chiller/plant/power", "kW", 1e-3, 5e-1, decimals=3),
    Field(
        "site.chilled_water_supply_temperature",
        "bms",
        "chiller/plant/chw_supply_temp",
        "°C",
        1.0,
        0.005,
        decimals=2,
    ),
    Field(
        "site.facility_water_supply_temperature",
        "bms",
        "chiller/plant/fw_supply_temp",
        "°C",
        1.0,
        0.005,
        decimals=2,
    ),
    Field("cdu.supply_temperature", "bms", "cdu/<id>/liquid_supply_temp", "°C", 1.0, 0.005, decimals=2),
    Field("cdu.return_temperature", "bms", "cdu/<id>/liquid_return_temp", "°C", 1.0, 0.005, decimals=2),
    Field("cdu.flow", "bms", "cdu/<id>/flow_pct", "%", 100.0, 5e-4, decimals=1),
)

# Slurm job states (JOB_STATE_* of the docs) and the twin's; the observed job.state is the index.
JOB_STATES: tuple[str, ...] = ("PENDING", "RUNNING", "COMPLETED", "FAILED", "CANCELLED", "PREEMPTED")
TWIN_JOB_STATES: dict[str, str] = {
    "queued": "PENDING",
    "running": "RUNNING",
    "done": "COMPLETED",
    "stopped": "CANCELLED",  # a replica scaled down
}

# Units the ingest normalises to a quantity's canonical unit: unit -> (canonical, factor).
UNITS: dict[str, tuple[str, float]] = {
    "W": ("W", 1.0),
    "mW": ("W", 1e-3),
    "kW": ("W", 1e3),
    "MW": ("W", 1e6),
    "°C": ("°C", 1.0),
    "C": ("°C", 1.0),
    "degC": ("°C", 1.0),
    "Cel": ("°C", 1.0),
    "%": ("1", 0.01),
    "1": ("1", 1.0),
    "ratio": ("1", 1.0),
    "s": ("s", 1.0),
    "ms": ("s", 1e-3),
    "MHz": ("MHz", 1.0),
    "J": ("J", 1.0),
    "mJ": ("J", 1e-3),
    "kWh": ("J", 3.6e6),
    "state": ("state", 1.0),
}
# Units whose zero is not the canonical one's: canonical = value * factor + offset.
UNITS["K"] = ("°C", 1.0)
UNIT_OFFSETS: dict[str, float] = {"K": -273.15}

BY_NAME: dict[str, Quantity] = {q.name: q for q in QUANTITIES}


def fields(fmt: str) -> tuple[Field, ...]:
    """Every field of ``fmt`` (KeyError naming it for an unknown format)."""
    if fmt not in FORMATS:
        raise KeyError(f"unknown format {fmt!r}; known: {', '.join(FORMATS)}")
    return tuple(f for f in FIELDS if f.fmt == fmt)


def field_index(fmt: str) -> dict[str, Field]:
    """``fmt``'s fields by field name (for the ingest)."""
    return {f.field: f for f in fields(fmt)}


def quantity(name: str) -> Quantity:
    return BY_NAME[name]


def markdown_table() -> str:
    """The table as Markdown (docs/interop.md holds this text; a test keeps them equal)."""
    lines = [
        "| quantity | recorded column | entity | format | field | unit | scale | precision |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for f in FIELDS:
        q = BY_NAME[f.quantity]
        scale = f.codec if f.codec != "linear" else f"{f.scale:g}"
        lines.append(
            f"| {q.name} ({q.unit}) | {q.table}.{q.column} | {q.entity} | {f.fmt} | `{f.field}` "
            f"| {f.unit} | {scale} | {f.precision:g} |"
        )
    return "\n".join(lines)
