"""Site: synthetic weather (seasonal + diurnal + correlated anomaly), price and carbon.

Pure functions of time plus an AR(1) anomaly advanced with the exact discrete update, so the
weather statistics do not depend on the step size.
"""

from __future__ import annotations

import math

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
