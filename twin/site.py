"""Site: synthetic weather (seasonal + diurnal + correlated anomaly), price and carbon.

Pure functions of time plus an AR(1) anomaly advanced with the exact discrete update, so the
weather statistics do not depend on the step size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from twin.params import SiteParams

DAY_S = 86400
YEAR_DAYS = 365.0


def outdoor_base_temp_c(p: SiteParams, time_s: float) -> float:
    """Deterministic dry-bulb temperature [°C]: seasonal cosine (warmest ~day 200 in the north,
    ~day 17 in the south) plus a diurnal cosine peaking at 15:00 local solar time."""
    day = p.start_day_of_year + time_s / DAY_S
    hour = (time_s % DAY_S) / 3600.0
    warmest_day = 200.0 if p.latitude_deg >= 0 else 17.0
    seasonal = p.seasonal_amplitude_k * math.cos(2 * math.pi * (day - warmest_day) / YEAR_DAYS)
    diurnal = p.diurnal_amplitude_k * math.cos(2 * math.pi * (hour - 15.0) / 24.0)
    return p.mean_temp_c + seasonal + diurnal


def anomaly_step(p: SiteParams, anomaly_k: float, dt_s: float, rng: np.random.Generator) -> float:
    """Exact AR(1) (Ornstein-Uhlenbeck) update of the weather anomaly [K]; the stationary std
    is ``weather_noise_k`` whatever ``dt_s`` is."""
    if p.weather_noise_k <= 0:
        return 0.0
    phi = math.exp(-dt_s / (p.weather_noise_tau_h * 3600.0))
    return phi * anomaly_k + p.weather_noise_k * math.sqrt(1 - phi * phi) * float(rng.standard_normal())


def wet_bulb_c(drybulb_c: float, rel_humidity: float) -> float:
    """Wet-bulb temperature from dry-bulb [°C] and relative humidity [-] (Stull 2011, J. Appl.
    Meteor. Climatol. 50, 2267: valid for RH 5-99 %, -20..50 °C; error within about 1 K)."""
    t = drybulb_c
    rh = min(max(rel_humidity * 100.0, 5.0), 99.0)
    return (
        t * math.atan(0.151977 * math.sqrt(rh + 8.313659))
        + math.atan(t + rh)
        - math.atan(rh - 1.676331)
        + 0.00391838 * rh**1.5 * math.atan(0.023101 * rh)
        - 4.686035
    )


@dataclass(frozen=True)
class Conditions:
    """What the site offers at one step."""

    drybulb_c: float
    wetbulb_c: float
    rel_humidity: float  # [-]
    price_usd_per_mwh: float
    carbon_g_per_kwh: float


class SiteModel:
    """Weather, price and carbon over time. Owns the weather anomaly state; ``step`` must be
    called once per simulation step, in order."""

    def __init__(self, p: SiteParams, rng: np.random.Generator) -> None:
        self.p = p
        self.rng = rng
        self.anomaly_k = 0.0

    def step(self, t_s: int, dt_s: int) -> Conditions:
        p = self.p
        dry = outdoor_base_temp_c(p, t_s) + self.anomaly_k
        self.anomaly_k = anomaly_step(p, self.anomaly_k, dt_s, self.rng)
        rh = p.rel_humidity
        return Conditions(dry, wet_bulb_c(dry, rh), rh, p.price_usd_per_mwh, p.carbon_g_per_kwh)
