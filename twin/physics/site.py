"""Site: outdoor weather (dry-bulb, humidity, wet-bulb), electricity price and grid carbon.

Weather is either synthetic or hourly series from a file. Synthetic: a seasonal cosine (flipped
south of the equator) plus a diurnal cosine plus an AR(1) anomaly advanced with the exact discrete
update, so the statistics do not depend on the step size; the dew point sits a climate-dependent
depression below the daily-mean temperature, and relative humidity follows from the Magnus
formula. File series (one year, hour 0 = 1 January 00:00, read by ``scenarios.sitefiles``) are
interpolated linearly between hours and wrap around the year. Price is flat, time-of-use or an
hourly series; carbon intensity is flat or an hourly series; hourly prices and intensities hold
for their hour. Wet-bulb comes from Stull (2011) unless a file gives it.

Pure functions plus ``SiteModel``, which owns the anomaly state. No I/O here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from twin.spec.params import SiteParams, TouTariff

DAY_S = 86400
HOUR_S = 3600
YEAR_DAYS = 365.0
# Warmest day of the year (days since 1 January 00:00): about four weeks after the solstice in
# the north (ASM: typical lag of the mid-latitude annual temperature cycle), half a year later in
# the south.
WARMEST_DAY_NORTH = 200.0
WARMEST_DAY_SOUTH = WARMEST_DAY_NORTH - YEAR_DAYS / 2
# Magnus formula over water, e_s(t) = 6.112 exp(17.62 t / (243.12 + t)) hPa, t in °C (WMO Guide
# to Meteorological Instruments and Methods of Observation, WMO-No. 8, Annex 4.B; -45..60 °C).
MAGNUS_HPA = 6.112
MAGNUS_A = 17.62
MAGNUS_B_C = 243.12
STANDARD_PRESSURE_HPA = 1013.25

FloatArray = npt.NDArray[np.float64]


# ---------------------------------------------------------------------- psychrometrics
def saturation_vapour_pressure_hpa(t_c: Any) -> Any:
    """Saturation vapour pressure over water [hPa] at temperature ``t_c`` [°C] (Magnus, WMO-No. 8
    Annex 4.B). Scalars or arrays."""
    t = np.asarray(t_c, dtype=np.float64)
    out = MAGNUS_HPA * np.exp(MAGNUS_A * t / (MAGNUS_B_C + t))
    return float(out) if out.ndim == 0 else out


def rel_humidity_from_dewpoint(drybulb_c: float, dewpoint_c: float) -> float:
    """Relative humidity [-] = e_s(T_d) / e_s(T) (Magnus); a dew point above the dry-bulb is
    saturation (1.0)."""
    td = min(dewpoint_c, drybulb_c)
    return math.exp(MAGNUS_A * td / (MAGNUS_B_C + td) - MAGNUS_A * drybulb_c / (MAGNUS_B_C + drybulb_c))


def rel_humidity_from_wetbulb(
    drybulb_c: Any, wetbulb_c: Any, pressure_hpa: float = STANDARD_PRESSURE_HPA
) -> Any:
    """Relative humidity [-] from dry- and wet-bulb temperatures [°C] with the psychrometric
    formula e = e_s(T_w) - 6.60e-4 (1 + 0.00115 T_w) p (T - T_w) (AMS Glossary of Meteorology,
    "Psychrometric formula"), clipped to [0, 1]. Scalars or arrays."""
    t = np.asarray(drybulb_c, dtype=np.float64)
    tw = np.asarray(wetbulb_c, dtype=np.float64)
    e = saturation_vapour_pressure_hpa(tw) - 6.60e-4 * (1 + 0.00115 * tw) * pressure_hpa * (t - tw)
    out = np.clip(e / saturation_vapour_pressure_hpa(t), 0.0, 1.0)
    return float(out) if out.ndim == 0 else out


def dewpoint_c(drybulb_c: float, rel_humidity: float) -> float:
    """Dew point from dry-bulb and relative humidity: the inverse of the Magnus formula
    (WMO-No. 8, Annex 4.B: e_s = 6.112 exp(17.62 t / (243.12 + t)) hPa)."""
    g = math.log(max(rel_humidity, 1e-6)) + 17.62 * drybulb_c / (243.12 + drybulb_c)
    return 243.12 * g / (17.62 - g)


def heatwave_offset_k(p: SiteParams, time_s: float) -> float:
    """Extra dry-bulb of a heat wave at this time [K]: a sin^2 bump from start to end."""
    if p.heatwave_delta_k <= 0 or p.heatwave_days <= 0:
        return 0.0
    x = (time_s / 3600.0 - p.heatwave_start_h) / (p.heatwave_days * 24.0)
    if not 0.0 < x < 1.0:
        return 0.0
    return p.heatwave_delta_k * math.sin(math.pi * x) ** 2


def wet_bulb_c(drybulb_c: float, rel_humidity: float) -> float:
    """Wet-bulb temperature from dry-bulb [°C] and relative humidity [-] (Stull 2011, J. Appl.
    Meteor. Climatol. 50, 2267: fitted for RH 5-99 %, -20..50 °C at standard pressure; error
    within about 1 K, e.g. 20 °C / 50 % -> 13.7 °C). RH is clamped to 5-99 %; the result is capped
    at the dry-bulb, which the fit overshoots when cold and dry."""
    t = drybulb_c
    rh = min(max(rel_humidity * 100.0, 5.0), 99.0)
    tw = (
        t * math.atan(0.151977 * math.sqrt(rh + 8.313659))
        + math.atan(t + rh)
        - math.atan(rh - 1.676331)
        + 0.00391838 * rh**1.5 * math.atan(0.023101 * rh)
        - 4.686035
    )
    return min(float(tw), t)


# ---------------------------------------------------------------------- synthetic weather
def year_day(p: SiteParams, time_s: float) -> float:
    """Days since 1 January 00:00 [d] at simulated time ``time_s`` (the run starts at 00:00 of
    day ``start_day_of_year``, 1 = 1 January)."""
    return (p.start_day_of_year - 1) + time_s / DAY_S


def seasonal_phase(p: SiteParams, time_s: float) -> float:
    """Seasonal cosine in [-1, 1]: +1 on the warmest day of the hemisphere of ``latitude_deg``."""
    warmest = WARMEST_DAY_NORTH if p.latitude_deg >= 0 else WARMEST_DAY_SOUTH
    return math.cos(2 * math.pi * (year_day(p, time_s) - warmest) / YEAR_DAYS)


def diurnal_phase(time_s: float) -> float:
    """Diurnal cosine in [-1, 1]: +1 at 15:00 local solar time, -1 at 03:00."""
    return math.cos(2 * math.pi * ((time_s % DAY_S) / HOUR_S - 15.0) / 24.0)


def synthetic_weather(
    p: SiteParams, time_s: float, anomaly_k: float = 0.0, depression_anomaly_k: float = 0.0
) -> tuple[float, float]:
    """Dry-bulb [°C] and relative humidity [-] of the synthetic climate.

    Dew point = daily-mean temperature (mean + seasonal + anomaly) minus a depression that grows
    in summer (``dewpoint_depression_k`` + ``dewpoint_seasonal_k`` x seasonal cosine + its own
    anomaly, never below 0). The dew point changes little over a day while the dry-bulb swings, so
    RH peaks before dawn and is lowest in the afternoon, as observed."""
    season = seasonal_phase(p, time_s)
    daily_mean = p.mean_temp_c + p.seasonal_amplitude_k * season + anomaly_k
    dry = daily_mean + p.diurnal_amplitude_k * diurnal_phase(time_s)
    depression = max(p.dewpoint_depression_k + p.dewpoint_seasonal_k * season + depression_anomaly_k, 0.0)
    return dry, rel_humidity_from_dewpoint(dry, daily_mean - depression)


def ar1_factor(dt_s: float, tau_h: float) -> float:
    """Autocorrelation of an AR(1) anomaly over one step: phi = exp(-dt / tau)."""
    return math.exp(-dt_s / (tau_h * 3600.0))


def ar1_update(x: float, phi: float, std: float, z: float) -> float:
    """Exact AR(1) (Ornstein-Uhlenbeck) update of an anomaly with autocorrelation ``phi`` over the
    step and a standard-normal draw ``z``; its stationary std is ``std`` whatever the step is."""
    return phi * x + std * math.sqrt(1.0 - phi * phi) * z


# ---------------------------------------------------------------------- hourly series, price
def hour_index(p: SiteParams, time_s: int) -> tuple[int, float]:
    """Whole hours since 1 January 00:00 and the fraction of the current hour [-]."""
    h, rem = divmod(int(time_s), HOUR_S)
    return (p.start_day_of_year - 1) * 24 + h, rem / HOUR_S


def hourly_linear(values: FloatArray | list[float], hour: int, frac: float) -> float:
    """Value between hour ``hour`` and the next (linear), wrapping around the series."""
    n = len(values)
    a = float(values[hour % n])
    return a + frac * (float(values[(hour + 1) % n]) - a)


def hourly_hold(values: FloatArray | list[float], hour: int) -> float:
    """Value of hour ``hour`` (held for the whole hour), wrapping around the series."""
    return float(values[hour % len(values)])


def tou_is_peak(tariff: TouTariff, time_s: float) -> bool:
    """Peak period of a time-of-use tariff. The run starts on a Monday at 00:00 (as the
    inference demand model assumes); days 5 and 6 of each week are the weekend."""
    weekday = int(time_s // DAY_S) % 7
    if weekday >= 5 and not tariff.weekend_peak:
        return False
    hour = (time_s % DAY_S) / HOUR_S
    start, end = tariff.peak_start_h, tariff.peak_end_h
    if start <= end:
        return start <= hour < end
    return hour >= start or hour < end  # window across midnight


def tou_price_usd_per_mwh(tariff: TouTariff, time_s: float) -> float:
    return tariff.peak_usd_per_mwh if tou_is_peak(tariff, time_s) else tariff.offpeak_usd_per_mwh


@dataclass(slots=True)
class Conditions:
    """What the site offers at one step."""

    drybulb_c: float
    wetbulb_c: float
    rel_humidity: float  # [-]
    price_usd_per_mwh: float
    carbon_g_per_kwh: float


def _as_list(a: FloatArray | None) -> list[float] | None:
    # Python floats index faster than NumPy scalars in the per-step path; same IEEE doubles.
    return None if a is None else [float(x) for x in np.asarray(a, dtype=np.float64)]


class SiteModel:
    """Weather, price and carbon over time. Owns the weather anomaly state; ``step`` must be
    called once per simulation step, in order. Scalar math only: it runs every step."""

    def __init__(self, p: SiteParams, rng: np.random.Generator) -> None:
        self.p = p
        self.rng = rng
        self.anomaly_k = 0.0
        self.depression_anomaly_k = 0.0
        self._dry = _as_list(p.weather_drybulb_c)
        self._rh = _as_list(p.weather_rel_humidity)
        self._wet = _as_list(p.weather_wetbulb_c)
        if (self._dry is None) != (self._rh is None):
            raise ValueError("site weather series need both dry-bulb and relative humidity")
        if self._dry is not None and self._rh is not None and len(self._dry) != len(self._rh):
            raise ValueError("site weather series differ in length")
        self._price = _as_list(p.price_hourly_usd_per_mwh)
        self._carbon = _as_list(p.carbon_hourly_g_per_kwh)
        self._phi_dt = -1.0
        self._phi = 0.0

    def _advance_anomalies(self, dt_s: float) -> None:
        p = self.p
        if dt_s != self._phi_dt:
            self._phi_dt, self._phi = dt_s, ar1_factor(dt_s, p.weather_noise_tau_h)
        if p.weather_noise_k > 0:
            z = float(self.rng.standard_normal())
            self.anomaly_k = ar1_update(self.anomaly_k, self._phi, p.weather_noise_k, z)
        if p.dewpoint_noise_k > 0:
            z = float(self.rng.standard_normal())
            self.depression_anomaly_k = ar1_update(
                self.depression_anomaly_k, self._phi, p.dewpoint_noise_k, z
            )

    def step(self, t_s: int, dt_s: int) -> Conditions:
        p = self.p
        hour, frac = hour_index(p, t_s)
        if self._dry is not None and self._rh is not None:
            dry = hourly_linear(self._dry, hour, frac)
            rh = hourly_linear(self._rh, hour, frac)
            wet = hourly_linear(self._wet, hour, frac) if self._wet is not None else wet_bulb_c(dry, rh)
        else:
            dry, rh = synthetic_weather(p, t_s, self.anomaly_k, self.depression_anomaly_k)
            wet = wet_bulb_c(dry, rh)
            self._advance_anomalies(dt_s)
        if self._price is not None:
            price = hourly_hold(self._price, hour)
        elif p.price_tou is not None:
            price = tou_price_usd_per_mwh(p.price_tou, t_s)
        else:
            price = p.price_usd_per_mwh
        carbon = hourly_hold(self._carbon, hour) if self._carbon is not None else p.carbon_g_per_kwh
        bump = heatwave_offset_k(p, t_s)
        if bump > 0:
            dew = dewpoint_c(dry, rh) + p.heatwave_dewpoint_share * bump
            dry += bump
            rh = rel_humidity_from_dewpoint(dry, dew)
            wet = wet_bulb_c(dry, rh)
        return Conditions(dry, wet, rh, price, carbon)
