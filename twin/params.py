"""Parameter dataclasses of the factory model (frozen; units in names).

Defaults are the modelling assumptions of the reference factory; the scenario layer builds these
from validated TOML. Derived quantities are functions, never stored defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from twin.catalog import Accelerator, System

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class HallParams:
    system: System
    accelerator: Accelerator
    ultraservers: int = 16
    ultraservers_per_row: int = 4  # one CDU per row


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


@dataclass(frozen=True)
class CoolingParams:
    supply_setpoint_c: float = 30.0  # liquid loop supply to cold plates (ASHRAE W32 class, ASM)
    air_supply_c: float = 24.0  # CRAH supply air (ASHRAE recommended 18-27 °C)
    chilled_water_c: float = 14.0  # chilled water for the air side (ASM)
    flow_l_min_per_kw: float = 1.5  # OCP/OAI design rule 1.25-2.0, typical 1.5 (3P, facts §8.5)
    loop_volume_l_per_ultraserver: float = 300.0  # rack + CDU loop volume (ASM, facts §8.5)
    cold_plate_r_k_per_w: float = 0.03  # junction-to-coolant resistance (ASM 0.02-0.05 K/W)
    air_r_k_per_w: float = 0.06  # junction-to-air for air-cooled chips (ASM)
    drycooler_approach_k: float = 6.0  # dry cooler / economizer approach to outdoor air (ASM)
    condenser_approach_k: float = 10.0  # air-cooled chiller condensing above outdoor (ASM)
    carnot_fraction: float = 0.5  # chiller COP as fraction of Carnot (ASM 0.5-0.6, facts §8.5)
    cop_min: float = 2.0
    cop_max: float = 12.0
    # Pumps: P = dp * Vdot / eta (SustainDC formula, facts §8.5), dp = 300 kPa, eta = 0.87.
    pump_head_pa: float = 300e3
    pump_efficiency: float = 0.87
    drycooler_fan_w_per_w: float = 0.012  # fan power per W rejected at full speed (ASM)
    crah_fan_w_per_w: float = 0.03  # CRAH fan power per W of air-side heat (ASM)
    throttle_temp_c: float = 90.0  # T_j throttle start (ASM, facts §8.7)
    throttle_full_c: float = 100.0  # clock down to 50 % at this T_j (ASM, facts §8.7)
    # Plant. "tower": cooling towers (economizer through a plate heat exchanger; wet-bulb driven,
    # uses water) with water-cooled chillers; "dry": dry coolers (dry-bulb driven, no water) with
    # air-cooled chillers.
    plant: str = "tower"
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
    dvfs_exponent: float = 3.0  # dynamic power ~ clock^k (ASM: P ~ C V^2 f, V ~ f)
    min_clock: float = 0.3  # lowest clock a power cap may set (ASM)
    loop_trip_c: float = 60.0  # rack loop return that powers an UltraServer off (ASM)
    loop_restart_c: float = 45.0  # ... and back on once cooled below this (ASM; W45 class)
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
    # in summer); relative humidity from the Magnus formula (twin.site).
    dewpoint_depression_k: float = 5.0  # annual mean depression
    dewpoint_seasonal_k: float = 2.5  # half-swing of the depression, largest in summer
    weather_noise_k: float = 1.5  # std of the AR(1) temperature anomaly
    dewpoint_noise_k: float = 1.5  # std of the AR(1) anomaly of the depression (ASM)
    weather_noise_tau_h: float = 36.0  # correlation time of the anomalies
    start_day_of_year: int = 180  # the run starts at 00:00 of this day (1 = 1 January)
    price_usd_per_mwh: float = 75.0  # ASM flat industrial (facts §10; EIA avg $80/MWh)
    carbon_g_per_kwh: float = 369.0  # US grid average 2023 (3P, codecarbon; facts §10)
    price_tou: TouTariff | None = None  # time-of-use price instead of the flat one
    # Hourly series over one year (index 0 = 1 January 00:00; 8,760 or 8,784 values) read from
    # files by scenarios.sitefiles; each replaces its synthetic or flat counterpart. Weather is
    # interpolated linearly between hours, price and carbon hold for their hour; all wrap around.
    weather_drybulb_c: FloatArray | None = field(default=None, compare=False, repr=False)
    weather_rel_humidity: FloatArray | None = field(default=None, compare=False, repr=False)
    weather_wetbulb_c: FloatArray | None = field(default=None, compare=False, repr=False)
    price_hourly_usd_per_mwh: FloatArray | None = field(default=None, compare=False, repr=False)
    carbon_hourly_g_per_kwh: FloatArray | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class TrainingParams:
    arrivals_per_day: float = 90.0
    # Gang sizes (chips) and their probabilities: heavy-tailed, many small, a few huge (ASM
    # shaped on Acme/Helios GPU-count distributions, facts §9.2, scaled to 4-chip servers).
    size_chips: tuple[int, ...] = (4, 16, 36, 72, 144, 288, 576)
    size_weights: tuple[float, ...] = (0.30, 0.22, 0.16, 0.12, 0.10, 0.06, 0.04)
    # Nominal run length: log-normal, median 3 h, sigma 1.4 (ASM; mean/median run-time ratio of
    # 10-20x in AcmeTrace cluster_summary, facts §9.2).
    duration_median_h: float = 3.0
    duration_sigma: float = 1.4
    duration_max_h: float = 24.0 * 14
    # Model mix of training jobs (names from twin.models; N = active parameters).
    models: tuple[str, ...] = ("llama-3.1-8b", "llama-3.1-70b", "gpt-oss-120b", "llama-3.1-405b")
    model_weights: tuple[float, ...] = (0.4, 0.3, 0.2, 0.1)
    precision: str = "mxfp8"
    mfu: float = 0.40  # ASM pre-training MFU 0.35-0.45 (facts §9.5)
    cross_ultraserver_mfu_factor: float = 0.85  # ASM: leaving the scale-up domain costs MFU
    activity: float = 0.85  # chip power activity while training (ASM: H100 node 8.4/10.2 kW)
    checkpoint_interval_s: int = 1800
    restart_cost_s: int = 600


@dataclass(frozen=True)
class ServiceParams:
    name: str = "chat"
    model: str = "llama-3.1-70b"
    params: float = 70e9  # N (total for weights) [-]
    active_params: float = 70e9  # N active per token [-]
    layers: int = 80
    kv_heads: int = 8
    head_dim: int = 128
    weight_bytes_per_param: float = 1.0  # FP8 weights
    kv_bytes_per_elem: float = 2.0  # BF16 KV cache
    chips_per_replica: int = 4
    replicas: int = 16
    batch_max: int = 64
    context_tokens: float = 1155.0  # mean input (Azure conv 2023, facts §9.3)
    output_tokens: float = 211.0  # mean output (Azure conv 2023, facts §9.3)
    bw_efficiency: float = 0.7  # ASM eta_BW 0.6-0.8 (facts §9.5)
    prefill_mfu: float = 0.5  # ASM (facts §9.5 prefill example)
    precision: str = "mxfp8"
    mean_requests_per_s: float = 150.0
    diurnal_peak_to_trough: float = 2.5  # conversation 2-2.5x (Azure 2024, facts §9.3)
    peak_hour: float = 15.0
    weekend_factor: float = 0.6  # ASM: weekend peaks lower (facts §9.3)
    decode_activity: float = 0.6  # chip power activity when decode-bound and busy (ASM)


@dataclass(frozen=True)
class FailureParams:
    # Per-chip Poisson hazard ~2.0e-5 /h, all causes (DER from Llama 3 405B: 419 unexpected
    # interruptions on 16,384 GPUs in 54 days; facts §9.4).
    chip_hazard_per_h: float = 2.0e-5
    repair_time_h: float = 4.0  # ASM


@dataclass(frozen=True)
class ScheduledEvent:
    time_s: int
    kind: str
    target: str = ""
    value: float = 0.0
    duration_s: int = 0


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
    events: tuple[ScheduledEvent, ...] = ()
    chip_sample_interval_s: int = 3600  # chip_ts every this much simulated time (0 = off)
