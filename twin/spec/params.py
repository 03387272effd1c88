"""The model parameter fact table: the factory's parameters as frozen dataclasses (units in names).

Defaults are the modelling assumptions of the reference factory; the scenario layer builds these
from validated TOML. Derived quantities are functions, never stored defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from twin.spec.catalog import Accelerator, System
from twin.spec.models import ModelSpec
from twin.spec.tco import TcoParams

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class SystemRows:
    """Rows of one system on a mixed floor: ``ultraservers`` systems (UltraServers, NVL72 racks,
    HGX nodes) of one catalog entry, ``ultraservers_per_row`` to a row (one CDU per row)."""

    system: System
    accelerator: Accelerator
    ultraservers: int
    ultraservers_per_row: int = 4


@dataclass(frozen=True)
class HallParams:
    system: System
    accelerator: Accelerator
    ultraservers: int = 16
    ultraservers_per_row: int = 4  # one CDU per row
    # A mixed floor: rows of different systems on one plant, one power chain and one grid
    # connection (``twin.compose.hall``), in this order. Empty: one system (the fields above).
    rows: tuple[SystemRows, ...] = ()
    # A campus hall's own cooling (``[halls.cooling]``); None: the scenario's ``cooling``.
    cooling: CoolingParams | None = None

    def pools(self) -> tuple[SystemRows, ...]:
        """The floor's systems, one homogeneous pool each (one for a single-system hall)."""
        if self.rows:
            return self.rows
        return (SystemRows(self.system, self.accelerator, self.ultraservers, self.ultraservers_per_row),)


@dataclass(frozen=True)
class PowerChainParams:
    # Rack rectifier: P_in = (P_out + fixed) / eff per rectifier (3P: Frontier fit, ExaDigiT/RAPS
    # raps/power.py). Rectifier losses sit inside the IT power (rack input), as PUE defines it.
    psu_efficiency: float = 0.96
    psu_fixed_w_per_server: float = 17.0
    pdu_efficiency: float = 0.985  # ASM 98-99 % (facts §8.3)
    # UPS efficiency eta(x) = x / (x + a + b x + c x^2), x = load / rating (3P: Schneider WP108
    # shape). Coefficients fitted exactly to the fact sheet's efficiency points 93.6 % @25 %,
    # 95.2 % @50 %, 95.8 % @100 % (facts §8.3; the sheet's suggested a=0.015, b=0.02, c=0.01 give
    # 92.4/94.8/95.7 % instead). No-load term a is ~53 % of losses at 30 % load (WP108: > 40 %).
    ups_a: float = 0.00978
    ups_b: float = 0.02766
    ups_c: float = 0.0064
    ups_rating_factor: float = 2.0  # 2N UPS: rating = 2 x design IT load (runs 20-50 % loaded)
    transformer_efficiency: float = 0.99  # ASM 98.5-99.5 % (facts §8.3)
    # Standing power caps (0 = none): facility power, and IT power of every row. Grid events
    # (kind "power_cap") set or clear caps during a run.
    facility_cap_w: float = 0.0
    row_cap_w: float = 0.0
    # Oversubscription of the power chain's tiers: a tier is rated at the nameplate IT power
    # below it (every UltraServer at full load and full clock, rack input) / (1 + ratio), and a
    # standing cap holds the tier inside its rating (``twin.physics.power.tier_rating_w``; 0: the tier is
    # rated at nameplate, no standing cap). ``oversubscription``: the hall's IT feed (UPS and its
    # distribution; the UPS is sized to the rating); ``row_oversubscription``: every row's feed
    # (busway / row PDU). 3P: Google runs its medium-voltage power plane at >= 25 %
    # oversubscription across tens of MW with priority-aware capping (Sakalkar et al., "Data
    # Center Power Oversubscription with a Medium Voltage Power Plane and Priority-Aware
    # Capping", ASPLOS 2020, doi 10.1145/3373376.3378533); inference clusters leave ~30 %
    # headroom for oversubscription (POLCA, Patel et al., ASPLOS 2024; facts §8.4). ASM default 0
    # (not oversubscribed). The cap slows every busy chip in its scope to one clock: unlike the
    # priority-aware capping of Sakalkar et al., inference replicas are not spared.
    oversubscription: float = 0.0
    row_oversubscription: float = 0.0
    # A campus's cap on its grid connection (the halls' facility power summed; 0 = none), shared
    # among the halls so that every busy chip runs at one clock (``twin.compose.campus``).
    campus_cap_w: float = 0.0


@dataclass(frozen=True)
class CoolingParams:
    supply_setpoint_c: float = 30.0  # liquid loop supply to cold plates (ASHRAE W32 class, ASM)
    air_supply_c: float = 24.0  # CRAH supply air (ASHRAE recommended 18-27 °C)
    chilled_water_c: float = 14.0  # chilled water for the air side (ASM)
    flow_l_min_per_kw: float = 1.5  # OCP/OAI design rule 1.25-2.0, typical 1.5 (3P, facts §8.5)
    loop_volume_l_per_ultraserver: float = 300.0  # rack + CDU loop volume (ASM, facts §8.5)
    # Junction-to-coolant resistance at design flow [K/W]; 0 = sized to the chip: a cold plate is
    # designed so a chip at TDP runs junction_rise_at_tdp_k above its coolant (ASM: 27 K gives
    # 0.03 K/W for a 900 W Trainium3, 0.019 K/W for a 1,400 W GB300; facts §8.5: 0.02-0.05 K/W).
    cold_plate_r_k_per_w: float = 0.0
    junction_rise_at_tdp_k: float = 27.0
    # Air-cooled: junction-to-inlet-air resistance, likewise sized to the chip when 0 (ASM: 30 K
    # at TDP, i.e. 0.06 K/W for a 500 W Trainium2).
    air_r_k_per_w: float = 0.0
    air_junction_rise_at_tdp_k: float = 30.0
    cold_plate_convective_share: float = 0.5  # share of it that is forced convection (ASM)
    natural_convection_speed: float = 0.1  # stagnant loop: convection as at 10 % flow (ASM)
    drycooler_approach_k: float = 6.0  # dry cooler / economizer approach to outdoor air (ASM)
    condenser_approach_k: float = 10.0  # air-cooled chiller condensing above outdoor (ASM)
    carnot_fraction: float = 0.5  # chiller COP as fraction of Carnot (ASM 0.5-0.6, facts §8.5)
    cop_min: float = 2.0
    cop_max: float = 12.0
    # Pumps: P = dp * Vdot / eta (SustainDC formula, facts §8.5), dp = 300 kPa, eta = 0.87.
    pump_head_pa: float = 300e3
    pump_efficiency: float = 0.87
    drycooler_fan_w_per_w: float = 0.012  # fan power per W rejected at full speed (ASM)
    # CRAH / air-handler fans: power per W of the air side's design heat at full speed (ASM); the
    # air flow follows the heat (fixed supply-return rise), the power its cube (fan affinity law,
    # P = P_ref (V / V_ref)^3; SustainDC dc-rl, facts §8.5), never below MIN_FLOW speed.
    crah_fan_w_per_w: float = 0.03
    # Air-side economizer: outside air straight into the cold aisle while its dew point is inside
    # the supply envelope; mixed with return air when colder than the supply, trimmed by the
    # chilled-water coils when between supply and return, shut (recirculation) when warmer than
    # the return or too humid.
    air_economizer: bool = True
    # Hot-aisle return above the supply air (ASM: server air temperature rise ~10-15 K at full
    # load; the CRAH load is Q = rho Vdot c_p (T_return - T_supply), facts §8.5).
    air_return_rise_k: float = 12.0
    # Highest outside-air dew point the economizer admits (3P: ASHRAE TC9.9 recommended envelope
    # 18-27 °C, dew point 5.5-15 °C and RH <= 60 %, 2008 update, D. Beaty via datacenterpost.com;
    # the 2015 edition lowered the floor to -9 °C dew point, not modelled: dry air is admitted).
    air_max_dewpoint_c: float = 15.0
    # Direct evaporative cooling of the intake (wetted media) while outside air is warmer than the
    # supply: it cools the air towards the wet-bulb with saturation effectiveness
    # ``evaporative_effectiveness`` (3P: 0.75-0.95 at water-air ratio 0.1-0.4, S. K. Wang,
    # Handbook of Air Conditioning and Refrigeration, §9.8), only as far as the supply setpoint
    # and the dew-point limit allow; the water it evaporates is site water.
    evaporative_intake: bool = False
    evaporative_effectiveness: float = 0.85
    throttle_temp_c: float = 90.0  # T_j throttle start (ASM, facts §8.7)
    throttle_full_c: float = 100.0  # clock down to 50 % at this T_j (ASM, facts §8.7)
    shutdown_temp_c: float = 105.0  # T_j that powers the UltraServer off (ASM, facts §8.7)
    shutdown_restart_s: int = 600  # an UltraServer shut down by its junctions stays off this long (ASM)
    # Plant. "tower": cooling towers (economizer through a plate heat exchanger; wet-bulb driven,
    # uses water) with water-cooled chillers; "dry": dry coolers (dry-bulb driven, no water) with
    # air-cooled chillers; "hybrid": dry coolers that run wet (sprayed, wet-bulb driven, using
    # water as a tower does) only while the dry-bulb is above ``hybrid_switch_c``.
    plant: str = "tower"
    # Dry-bulb above which hybrid coolers run wet (ASM: near where dry coolers stop making the
    # facility water setpoint, 30 - 3 (CDU) - 6 (approach) = 21 °C).
    hybrid_switch_c: float = 21.0
    cdu_approach_k: float = 3.0  # CDU: secondary supply above facility water supply (ASM)
    facility_volume_l_per_kw: float = 15.0  # facility water loop + buffer volume (ASM: tau ~ 10-20 min)
    tower_approach_k: float = 4.0  # tower leaving water above wet-bulb (3P: design 3-5 K, facts §8.5)
    hx_approach_k: float = 2.0  # plate heat exchanger approach (ASM)
    economizer_units: int = 3  # cooling towers or dry coolers
    economizer_redundancy: int = 1  # N+1
    economizer_effectiveness: float = 0.7  # effectiveness of the N needed units together (ASM)
    chiller_units: int = 3
    chiller_redundancy: int = 1  # N+1: N units carry the whole design heat
    evaporative_fraction: float = 0.8  # share of tower heat rejected by evaporation (ASM 0.75-0.85)
    cycles_of_concentration: float = 4.0  # tower blowdown: make-up = evap x N/(N-1) (facts §8.5)
    # Tower drift: liquid droplets lost with the air, as a share of the circulating water (3P:
    # modern cellular drift eliminators 0.0005-0.002 % of the circulating flow, W. C. Miller,
    # Brentwood, CTI paper "Best Practices for Minimizing Drift Loss in a Cooling Tower"; efficient
    # towers 0.005 %; ASM 0.002 %).
    tower_drift_fraction: float = 2e-5
    dvfs_exponent: float = 3.0  # dynamic power ~ clock^k (ASM: P ~ C V^2 f, V ~ f)
    min_clock: float = 0.3  # lowest clock a power cap may set (ASM)
    loop_trip_c: float = 70.0  # rack loop return that powers an UltraServer off (ASM)
    loop_restart_c: float = 50.0  # ... and back on once cooled below this (ASM)
    air_trip_c: float = 40.0  # air inlet that powers air-cooled systems off (ASHRAE A3 max 40 °C)
    air_restart_c: float = 32.0  # ... and back on (ASHRAE A1 allowable max 32 °C)


@dataclass(frozen=True)
class TouTariff:
    """Time-of-use electricity price: peak from ``peak_start_h`` to ``peak_end_h`` (local hours; a
    window with start > end wraps midnight) on weekdays, and on weekends too if ``weekend_peak``;
    off-peak otherwise. The run starts on a Monday."""

    peak_usd_per_mwh: float = 97.5  # ASM: $75/MWh + 30 % (facts §10: optional TOU ±30 %)
    offpeak_usd_per_mwh: float = 52.5  # ASM: $75/MWh - 30 %
    peak_start_h: float = 14.0  # ASM: afternoon-evening peak window
    peak_end_h: float = 20.0
    weekend_peak: bool = False  # ASM: weekends off-peak all day, as in common TOU tariffs


@dataclass(frozen=True)
class SiteParams:
    """Weather (synthetic unless hourly series are given) and grid price and carbon."""

    latitude_deg: float = 45.0  # its sign picks the hemisphere: seasons flip south of the equator
    mean_temp_c: float = 12.0  # annual mean dry-bulb
    seasonal_amplitude_k: float = 9.0  # half of summer-winter swing
    diurnal_amplitude_k: float = 5.0  # half of day-night swing
    # Dew point = daily-mean dry-bulb minus a depression (ASM, temperate: ~3 K in winter to ~7 K
    # in summer); relative humidity from the Magnus formula (twin.physics.site).
    dewpoint_depression_k: float = 5.0  # annual mean depression
    dewpoint_seasonal_k: float = 2.5  # half-swing of the depression, largest in summer
    weather_noise_k: float = 1.5  # std of the AR(1) temperature anomaly
    dewpoint_noise_k: float = 1.5  # std of the AR(1) anomaly of the depression (ASM)
    weather_noise_tau_h: float = 36.0  # correlation time of the anomalies
    start_day_of_year: int = 180  # the run starts at 00:00 of this day (1 = 1 January)
    price_usd_per_mwh: float = 75.0  # ASM flat industrial (facts §10; EIA avg $80/MWh)
    carbon_g_per_kwh: float = 369.0  # US grid average 2023 (3P, codecarbon; facts §10)
    price_tou: TouTariff | None = None  # time-of-use price instead of the flat one
    # Heat wave: dry-bulb raised by up to heatwave_delta_k over heatwave_days from heatwave_start_h
    # (a smooth sin^2 bump), the dew point by heatwave_dewpoint_share of it. Off when delta is 0.
    heatwave_start_h: float = 0.0
    heatwave_days: float = 0.0
    heatwave_delta_k: float = 0.0
    heatwave_dewpoint_share: float = 0.5  # ASM: humid heat waves raise the dew point too
    # Hourly series over one year (index 0 = 1 January 00:00; 8,760 or 8,784 values) read from
    # files by scenarios.sitefiles; each replaces its synthetic or flat counterpart. Weather is
    # interpolated linearly between hours, price and carbon hold for their hour; all wrap around.
    weather_drybulb_c: FloatArray | None = field(default=None, compare=False, repr=False)
    weather_rel_humidity: FloatArray | None = field(default=None, compare=False, repr=False)
    weather_wetbulb_c: FloatArray | None = field(default=None, compare=False, repr=False)
    price_hourly_usd_per_mwh: FloatArray | None = field(default=None, compare=False, repr=False)
    carbon_hourly_g_per_kwh: FloatArray | None = field(default=None, compare=False, repr=False)


# ---------------------------------------------------------------------- batch work (jobs)
# Job classes: names in the order of their codes in the ``jobs`` table (code 1 is an inference
# replica of an online service, which is not a batch class).
# Chip activity while a gang waits (pipeline bubble, exposed communication, its compute units
# idle on a collective; HBM and the links stay busy). 3P: in production DGX-H100 training the
# compute-heavy phase runs near TDP and the communication-heavy phase near idle power (Choukse
# et al., "Power Stabilization for AI Training Datacenters", arXiv 2508.14318, 2025, §2 and
# Fig. 1); ASM: an activity of 0.1 above idle for the links and HBM. Read by a gang's mean
# activity (twin.work.queueing) and by its sub-step waveform's low level (twin.compose.grid).
COMM_ACTIVITY = 0.1
KIND_NAMES = ("pretrain", "inference", "finetune", "eval", "batch_inference")
JOB_CLASSES = ("pretrain", "finetune", "eval", "batch_inference")


@dataclass(frozen=True)
class JobClassParams:
    """One class of batch work: how often it arrives, how big and how long its jobs are, what
    they run and how the scheduler treats them.

    Sizes and run lengths are heavy-tailed: a discrete chip-count distribution and a log-normal
    nominal run length (the time the job takes on its ideal placement; the token budget D follows
    from it). The default classes are fitted to AcmeTrace ``data/cluster_summary.csv`` (Seren,
    663,813 GPU jobs, Mar-Aug 2023; facts §9.2): together they reproduce its median run 122 s,
    mean run 1,414 s, mean GPUs per job 5.68 (median 1, max 1,024) and mean GPU time per job
    32,405 GPU-s (= 21.5e9 GPU-s / 663,813 jobs). Class shapes are ASM; the fitted numbers are
    the eval/debug median and sigma (to the median and mean run), the pre-training share (to the
    mean job size) and the pre-training median (to the GPU time per job)."""

    share: float  # share of ``training.arrivals_per_day`` (shares are normalised) [-]
    size_chips: tuple[int, ...]
    size_weights: tuple[float, ...]
    duration_median_h: float
    duration_sigma: float  # log-normal sigma of the nominal run length [-]
    duration_max_h: float
    models: tuple[str, ...]
    model_weights: tuple[float, ...]
    precision: str
    mfu_factor: float  # x the model's training MFU (fine-tuning 0.3 vs 0.4, facts §9.5) [-]
    priority: int  # higher goes first under the priority policy
    preemptible: bool  # may be preempted by higher-priority work (restarts from its checkpoint)
    # 0: no checkpoints (an interrupted job starts over); None: the Young/Daly interval of the
    # gang (TrainingParams checkpoint keys)
    checkpoint_interval_s: int | None
    # On a mixed floor (twin.work.routing): the system family the class's software needs ("any",
    # "gpu" for CUDA-only code, "trainium" for Neuron-only code), and the system the "pinned"
    # routing policy sends it to ("": the first of the floor's systems it may run on).
    family: str = "any"
    system: str = ""


_TRAIN_MODELS = ("llama-3.1-8b", "llama-3.1-70b", "gpt-oss-120b", "llama-3.1-405b")

PRETRAIN = JobClassParams(
    share=0.0051,  # fitted: mean GPUs per job 5.68 (Seren)
    size_chips=(64, 128, 256, 512, 1024),  # ASM: 64-1,024 (Seren/Kalos max 1,024 GPUs)
    size_weights=(0.20, 0.25, 0.25, 0.20, 0.10),
    duration_median_h=1.354,  # fitted: GPU time per job 32,405 GPU-s (Seren)
    duration_sigma=1.5,  # ASM
    duration_max_h=14 * 24.0,  # ASM (trace maxima 7-50 days)
    models=_TRAIN_MODELS,
    model_weights=(0.3, 0.3, 0.25, 0.15),
    precision="fp8",  # MXFP8 on Trainium3 (ASM)
    mfu_factor=1.0,
    priority=0,
    preemptible=True,
    checkpoint_interval_s=None,  # Young/Daly from the gang's failure rate
)
FINETUNE = JobClassParams(
    share=0.09,  # ASM
    size_chips=(4, 8, 16, 32, 64, 128),
    size_weights=(0.10, 0.25, 0.25, 0.20, 0.15, 0.05),
    duration_median_h=1200 / 3600,  # ASM 20 min
    duration_sigma=1.2,
    duration_max_h=72.0,
    models=("llama-3.1-8b", "llama-3.1-70b", "gpt-oss-20b", "gpt-oss-120b"),
    model_weights=(0.4, 0.3, 0.15, 0.15),
    precision="bf16",
    mfu_factor=0.75,  # ASM: fine-tune MFU 0.3 vs pre-training 0.4 (facts §9.5)
    priority=1,
    preemptible=True,
    checkpoint_interval_s=None,
)
EVAL = JobClassParams(
    share=0.8549,  # rest of the arrivals: most jobs are short evaluation/debug runs (Acme)
    size_chips=(1, 2, 4, 8),
    size_weights=(0.85, 0.07, 0.05, 0.03),  # ASM: P(1 chip) 0.74 overall (facts §9.2: 0.6-0.7)
    duration_median_h=73.6 / 3600,  # fitted: median run 122 s (Seren)
    duration_sigma=2.466,  # fitted: mean run 1,414 s (Seren)
    duration_max_h=24.0,
    models=("llama-3.1-8b", "llama-3.1-70b", "gpt-oss-20b", "gpt-oss-120b"),
    model_weights=(0.4, 0.3, 0.15, 0.15),
    precision="bf16",
    mfu_factor=0.5,  # ASM: forward passes at small batch
    priority=2,  # interactive: jumps the queue under the priority policy
    preemptible=False,
    checkpoint_interval_s=0,
)
BATCH_INFERENCE = JobClassParams(
    share=0.05,  # ASM
    size_chips=(1, 4, 8, 16),
    size_weights=(0.3, 0.4, 0.2, 0.1),
    duration_median_h=1200 / 3600,  # ASM 20 min
    duration_sigma=1.0,
    duration_max_h=48.0,
    models=("llama-3.1-70b", "gpt-oss-120b", "gpt-oss-20b", "llama-3.1-8b"),
    model_weights=(0.3, 0.3, 0.2, 0.2),
    precision="fp8",
    mfu_factor=0.6,  # ASM: large-batch offline inference, prefill-heavy
    priority=0,
    preemptible=True,
    checkpoint_interval_s=600,  # finished shards are kept (ASM)
)


@dataclass(frozen=True, eq=False)
class JobTrace:
    """Batch work replayed from a job trace (built by ``scenarios.traces``; arrays, one per row,
    sorted by submit time). Each row has a duration or a work figure (NaN for the other)."""

    submit_s: npt.NDArray[np.int64]  # seconds after the start of the run
    chips: npt.NDArray[np.int64]
    duration_s: npt.NDArray[np.float64]  # nominal run length on the ideal placement (or NaN)
    work_flop: npt.NDArray[np.float64]  # work (or NaN)
    kind: npt.NDArray[np.int8]  # code into KIND_NAMES (never 1)
    priority: npt.NDArray[np.int64]  # -1: the class default
    model: tuple[str, ...]  # model name per row ("" = the class's first model)
    source: str = ""


@dataclass(frozen=True)
class TrainingParams:
    """Batch work: training, fine-tuning, evaluation/debug and batch-inference jobs."""

    # Mean weekday arrivals per day, all classes. Seren ran 663,813 GPU jobs in Mar-Aug 2023
    # (AcmeTrace cluster_summary.csv): ~3,600 a day (DER); on a cluster of ~2,300 GPUs (Acme
    # paper, not verified here) that is ~1.6 jobs per GPU and day. Modulated by hour of day and
    # day of week (ASM: submissions follow the working day, weekends lower).
    arrivals_per_day: float = 4000.0  # ~1.7 per chip and day on the 2,304-chip default hall
    diurnal_peak_to_trough: float = 2.0
    peak_hour: float = 14.0
    weekend_factor: float = 0.5
    pretrain: JobClassParams = PRETRAIN
    finetune: JobClassParams = FINETUNE
    eval: JobClassParams = EVAL
    batch_inference: JobClassParams = BATCH_INFERENCE
    # The parallelism plan (twin.work.fabric). Global batch: d replicas x replica_batch_tokens within
    # [global_batch_tokens, global_batch_tokens_max] (3P: Llama 3 405B trained at 4 M tokens per
    # step, then 8 M, then 16 M = DP 128 x 16 sequences of 8,192 on 16,384 H100; Llama 3 paper
    # §3.4.1 and Table 4); one sequence per micro-batch.
    global_batch_tokens: float = 4e6
    global_batch_tokens_max: float = 16e6
    replica_batch_tokens: float = 131072.0  # 3P: 16 x 8,192 tokens per DP replica (Llama 3 Table 4)
    sequence_tokens: int = 8192  # 3P: Llama 3 pre-training sequence length (§3.4.1)
    # Bytes per parameter: BF16 weights and gradients, FP32 master weights and two Adam moments
    # sharded over the DP ranks (3P: ZeRO, Rajbhandari et al. 2020: 2 + 2 + 12 bytes); BF16
    # activations on the wire.
    weight_bytes_per_param: float = 2.0
    grad_bytes_per_param: float = 2.0
    optimizer_bytes_per_param: float = 12.0
    activation_bytes: float = 2.0
    # Share of a BF16 step's compute time outside the GEMMs (norms, activations, softmax,
    # optimiser), which FP8/MXFP8 does not speed up. 3P: Ivanov et al. MLSys 2021 ("Data
    # Movement Is All You Need"): BERT training unfused, 99.8 % of the FLOP in tensor
    # contractions but 39 % of the time elsewhere; ASM 0.15 with today's fused kernels.
    nongemm_time_share: float = 0.15
    # Share of each collective kind hidden behind compute. TP all-reduces sit between the
    # dependent GEMMs of a layer: mostly exposed unless decomposed and overlapped (ASM 0.3; 3P:
    # Wang et al. ASPLOS 2023 hide most with decomposition, Megatron-Core tp-comm-overlap). PP
    # point-to-point is asynchronous beside the next micro-batch (ASM 0.5; Megatron overlap-p2p).
    # DP gradient reduce-scatter overlaps the backward pass bucket by bucket (3P: PyTorch DDP,
    # Li et al. VLDB 2020; ZeRO/FSDP prefetch): ASM 0.8, and at most one micro-batch's compute.
    tp_overlap: float = 0.3
    pp_overlap: float = 0.5
    dp_overlap: float = 0.8
    # Scale-out rails: full bisection inside a pod, oversubscribed above it (3P: Llama 3 paper
    # §3.3.1: pods of 3,072 GPUs at full bisection, 1:7 at the aggregation layer); links between
    # halls of a campus (ASM: a further 1:4 over the aggregation layer, 28 in all).
    pod_chips: int = 3072
    pod_oversubscription: float = 7.0
    hall_link_oversubscription: float = 28.0
    # Chip power activity of a gang's busy compute. A gang's mean activity is duty x
    # compute_activity + (1 - duty) x COMM_ACTIVITY, duty = the plan's compute_s / step_s (the
    # bubble and exposed communication wait near idle; twin.work.queueing.training_activity). DER:
    # calibrated on one HGX H100 node training Llama 2 13B (3P: Latif et al., arXiv 2412.08602,
    # 2024: max 8.4 kW of 10.2 kW rated; the node's mean activity was 0.85 from that figure,
    # ASM); that node's plan (8 GPUs, TP 8, BF16) is 76.3 s of compute in a 78.2 s step, duty
    # 0.976, so (0.85 - 0.024 x 0.1) / 0.976 = 0.868, rounded 0.87 (the node's mean 0.852,
    # bench/validation.py h100-node-training-power within its 10 %).
    compute_activity: float = 0.87
    restart_cost_s: int = 600  # ASM: reload checkpoint, re-initialise the gang
    # Checkpoints: a job class without an interval checkpoints at the Young/Daly interval
    # sqrt(2 C M) of its gang (twin.work.checkpoint.young_daly_interval_s), C = the checkpoint's bytes
    # (weights + optimiser state: checkpoint_bytes_per_param x N, 3P: ZeRO 2 + 12 bytes) over
    # the write bandwidth: checkpoint_chip_bw_bytes_s per chip up to checkpoint_storage_bw_bytes_s
    # (3P: Llama 3 paper §3.3.1: Tectonic 2 TB/s sustained, 7 TB/s peak; 1 MB-4 GB per GPU), M =
    # the gang's mean time between failures; the interval stays within
    # [checkpoint_min_interval_s, checkpoint_max_interval_s]. The gang pauses C per checkpoint.
    checkpoint_bytes_per_param: float = 14.0
    checkpoint_chip_bw_bytes_s: float = 1e9  # ASM: ~1 GB/s per chip to the parallel file system
    checkpoint_storage_bw_bytes_s: float = 2e12
    checkpoint_min_interval_s: int = 60
    checkpoint_max_interval_s: int = 3600  # ASM: at most an hour of work at risk (preemption)
    trace: JobTrace | None = None

    def job_class(self, kind: str) -> JobClassParams:
        cls: JobClassParams = getattr(self, kind)
        return cls


@dataclass(frozen=True)
class SchedulerParams:
    # fifo: strict submit order, the head blocks; backfill: EASY backfill (the head gets a
    # reservation, later jobs start if they do not delay it); priority: priority order, the head
    # may preempt lower-priority preemptible work, EASY backfill behind it.
    policy: str = "backfill"
    # topology: whole gang inside one UltraServer when it fits (best fit), else the fewest
    # UltraServers; first_fit: lowest free chip indices, topology-blind (for comparison).
    placement: str = "topology"
    backfill_depth: int = 100  # queued jobs examined for backfill per pass
    runtime_estimate_factor: float = 1.0  # user runtime estimate / true nominal run length
    # Mixed floors (twin.work.routing): where each job and service goes. fastest: the system that
    # does its work soonest; cheapest: the lowest marginal $ per unit of work (ownership rates
    # plus IT energy at the flat price); energy: the lowest IT J per unit of work; pinned: the
    # job class's or service's ``system`` (else the first system it may run on).
    routing: str = "fastest"


# ---------------------------------------------------------------------- online inference
@dataclass(frozen=True, eq=False)
class RequestTrace:
    """Inference requests replayed from a trace (Azure LLM inference format; built by
    ``scenarios.traces``): arrival times relative to the first request, sorted."""

    time_s: npt.NDArray[np.float64]
    input_tokens: npt.NDArray[np.int64]
    output_tokens: npt.NDArray[np.int64]
    source: str = ""

    @property
    def span_s(self) -> float:
        return float(self.time_s[-1]) if len(self.time_s) else 0.0


@dataclass(frozen=True)
class ServiceParams:
    name: str = "chat"
    model: str = "llama-3.1-70b"
    params: float = 70e9  # N (total for weights) [-]
    active_params: float = 70e9  # N active per token [-]
    layers: int = 80
    kv_heads: int = 8
    head_dim: int = 128
    hidden: int = 8192  # model width [-] (0: from params and layers, N ~ 12 L d^2)
    experts: int = 0  # routed experts (0: dense)
    experts_active: int = 0  # experts per token
    # Bytes per weight; 0: the native size of ``precision`` with its block scales
    # (``twin.work.inference.WEIGHT_BYTES``: FP8 1, MXFP4 0.53, NVFP4 0.56).
    weight_bytes_per_param: float = 0.0
    kv_bytes_per_elem: float = 2.0  # BF16 KV cache
    activation_bytes: float = 2.0  # BF16 activations on the scale-up fabric (ASM)
    chips_per_replica: int = 4
    replicas: int = 16  # at the start (and always, without the autoscaler)
    # Largest decode batch; 0: none beyond the replica's KV-cache memory and the TPOT SLO.
    batch_max: int = 0
    # Token lengths: the shape of the distribution ("conversation" or "code", fitted to the Azure
    # LLM inference 2023 traces, twin.work.workload.TOKEN_PROFILES) scaled to these means.
    token_profile: str = "conversation"
    context_tokens: float = 1155.0  # mean input (Azure conv 2023, facts §9.3)
    output_tokens: float = 211.0  # mean output (Azure conv 2023, facts §9.3)
    # HBM bandwidth efficiency; 0: the chip's measured figure (``Accelerator.hbm_efficiency``,
    # 3P: Azure GB200 7.35 of 8 TB/s).
    bw_efficiency: float = 0.0
    prefill_mfu: float = 0.5  # ASM (facts §9.5 prefill example)
    precision: str = "fp8"
    mean_requests_per_s: float = 150.0  # weekday mean, before bursts
    diurnal_peak_to_trough: float = 2.5  # conversation 2-2.5x (Azure 2024, facts §9.3)
    peak_hour: float = 15.0
    weekend_factor: float = 0.6  # ASM: weekend peaks lower (facts §9.3)
    # Bursts: onsets per day, rate multiplier while on, mean length (exponential). Mean rate is
    # preserved. The conversation trace shows none; the code profile's are fitted to it.
    burst_rate_per_day: float = 0.0
    burst_multiplier: float = 1.0
    burst_duration_s: float = 90.0
    # Prefill/decode disaggregation: this share of the replicas prefills only and hands the KV
    # cache to the rest, which decode only (0: every replica interleaves both, continuous
    # batching with chunked prefill).
    prefill_replica_share: float = 0.0
    decode_activity: float = 0.6  # chip power activity when decode-bound and busy (ASM)
    prefill_activity: float = 0.85  # chip power activity while prefilling (compute-bound, ASM)
    # Autoscaler: replicas = ceil(demand / (capacity per replica * target utilisation)) within
    # [replicas_min, replicas_max], decided every scale_interval_s; new replicas load weights for
    # startup_s before serving; scale-down waits scale_down_delay_s of lower demand.
    autoscale: bool = False
    replicas_min: int = 1
    replicas_max: int = 0  # 0: = replicas
    target_utilization: float = 0.7
    startup_s: float = 300.0  # ASM: weights from storage + warm-up
    scale_interval_s: float = 60.0
    scale_down_delay_s: float = 900.0
    # Requests that would wait longer than this in the queue are dropped (client time-out, ASM).
    max_queue_wait_s: float = 30.0
    # SLO per request (3P: MLPerf Inference llama2-70b Server, loadgen mlperf.conf: TTFT 2,000 ms,
    # TPOT 200 ms at p99).
    ttft_slo_s: float = 2.0
    tpot_slo_s: float = 0.2
    priority: int = 10  # replicas' priority (the priority policy lets them preempt training)
    trace: RequestTrace | None = None  # demand replayed from a request trace instead of the shape
    trace_speedup: float = 1.0  # replay the trace this many times faster (rate x speedup)
    trace_loop: bool = True  # repeat the trace to fill the run
    # On a mixed floor (twin.work.routing): the system family the service needs and the system the
    # "pinned" policy puts its replicas on (all of a service's replicas run on one system).
    family: str = "any"
    system: str = ""


# ---------------------------------------------------------------------- failures
@dataclass(frozen=True)
class FailureCause:
    weight: float  # share of failures [-] (normalised over causes)
    repair_h: float  # mean repair / replacement time (log-normal, sigma repair_sigma) [h]
    blast: str  # "chip": the chip is down; "server": its whole server; "job": software, restart only


FAILURE_CAUSES = ("accelerator", "hbm", "network", "host", "software")


@dataclass(frozen=True)
class FailureParams:
    # Per-chip Poisson hazard ~2.0e-5 /h, all causes (DER from Llama 3 405B: 419 unexpected
    # interruptions on 16,384 GPUs in 54 days; facts §9.4).
    chip_hazard_per_h: float = 2.0e-5
    # Cause mix: counts of the 419 Llama 3 405B interruptions (facts §9.4) grouped by cause.
    # accelerator = faulty GPU incl. NVLink 148 + SRAM 19 + system processor 17 + SDC 6 +
    # thermal interface 6; HBM 72; network = switch/cable 35 + NIC 7 + NCCL watchdog 7; host =
    # unplanned maintenance 32 + SSD 3 + PSU 3 + chassis/IO/dependency/CPU/DRAM 10; software 54.
    # Repair times and blast radius are ASM.
    accelerator: FailureCause = FailureCause(196, 8.0, "chip")
    hbm: FailureCause = FailureCause(72, 8.0, "chip")
    network: FailureCause = FailureCause(49, 2.0, "server")
    host: FailureCause = FailureCause(48, 4.0, "server")
    software: FailureCause = FailureCause(54, 0.0, "job")
    repair_sigma: float = 0.5  # log-normal spread of repair times (ASM)

    def cause(self, name: str) -> FailureCause:
        c: FailureCause = getattr(self, name)
        return c


@dataclass(frozen=True)
class ScheduledEvent:
    time_s: int
    kind: str
    target: str = ""
    value: float = 0.0
    duration_s: int = 0


@dataclass(frozen=True)
class GridParams:
    """The grid connection's view: sub-step what-ifs (``twin.compose.grid``)."""

    # Chips kept busy during communication: low phases raised to this fraction of the compute
    # phase's activity (0: off). 3P: the software mitigation of Choukse et al. 2025 (arXiv
    # 2508.14318), dummy work in the communication phase.
    power_floor: float = 0.0
    # A checkpoint stalls its gang this long within the step it is booked in (ASM: a synchronous
    # save of a large model's shards to storage takes tens of seconds; 0: off).
    checkpoint_stall_s: float = 30.0
    checkpoint_stagger: bool = False  # stalls spread through the step instead of all at its end
    rack_storage_j_per_chip: float = 0.0  # power-shelf storage per chip [J] (65: GB300, twin.compose.grid)
    rack_storage_efficiency: float = 0.95  # ASM: capacitor bank and converter round trip
    rack_storage_window_s: float = 2.0  # ASM: smooths swings of about an iteration
    battery_power_w: float = 0.0  # site battery at the connection [W] (0: none)
    battery_energy_j: float = 0.0  # [J]
    battery_efficiency: float = 0.85  # 3P: Li-ion round trip 85 % (NREL ATB 2023, utility-scale)
    battery_window_s: float = 300.0  # ASM: smooths toward the five-minute mean
    # The connection's ramp limit [MW/min] (0: off): steps whose ramp exceeds it raise the
    # "grid ramp limit" alarm (``storage.queries.ALARM_FLAGS``).
    ramp_limit_mw_per_min: float = 0.0


@dataclass(frozen=True)
class FactoryParams:
    hall: HallParams
    dt_s: int = 60
    seed: int = 0
    power: PowerChainParams = field(default_factory=PowerChainParams)
    cooling: CoolingParams = field(default_factory=CoolingParams)
    site: SiteParams = field(default_factory=SiteParams)
    training: TrainingParams = field(default_factory=TrainingParams)
    services: tuple[ServiceParams, ...] = (ServiceParams(),)
    failures: FailureParams = field(default_factory=FailureParams)
    tco: TcoParams = field(default_factory=TcoParams)
    scheduler: SchedulerParams = field(default_factory=SchedulerParams)
    models: tuple[ModelSpec, ...] = ()  # scenario-defined models (added to twin.spec.models.MODELS)
    events: tuple[ScheduledEvent, ...] = ()
    # Simulated before the recording starts (a multiple of dt_s): the model's clock starts at
    # -warmup_s, and the run is recorded from 0 (``scenarios.runner.Session``).
    warmup_s: int = 0
    # A campus: several halls (buildings), each with its own floor, plant and power chain, under
    # one substation and grid connection (``twin.compose.campus``). Empty: one hall (``hall``); when
    # given, ``hall`` is the first of them.
    halls: tuple[HallParams, ...] = ()
    chip_sample_interval_s: int = 3600  # chip_ts every this much simulated time (0 = off)
    # The aggregate tiers, every this much simulated time (at most once a step; 0 = off).
    ultraserver_interval_s: int = 1
    row_interval_s: int = 1
    hall_interval_s: int = 1
    # Rows of waiting and running jobs whose state did not change (their waits and work done move
    # on) every this much simulated time; 0: every advance. A job that changes state is written at
    # once, and ``refresh_jobs`` has the next advance write every job (the run's last rows).
    jobs_interval_s: int = 0
    # grid_ts: the halls' and the connection's power every this many seconds within a step (0 =
    # off; divides dt_s).
    grid_interval_s: int = 0
    grid: GridParams = field(default_factory=GridParams)
