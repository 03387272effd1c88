"""Total cost of ownership: what the factory costs beyond its electricity, as cost rates.

Capital is turned into an equal yearly payment with the capital recovery factor
``CRF = r (1 + r)^n / ((1 + r)^n - 1)`` (r the financing rate per year, n the life in years;
``1 / n`` when r = 0): servers over their depreciation life, the building and plant over theirs.
Maintenance is a share of capital per year, staff a number of people per MW of critical IT at a
loaded cost. Energy is priced by the site model per step; water at a price per m³ here.

Every price is an assumption unless the catalog says otherwise: prices are the least certain
inputs of the twin, and each is a scenario key (``[tco]``). Pure functions and data: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from twin.catalog import System

YEAR_S = 365.25 * 86400.0  # [s]


@dataclass(frozen=True)
class TcoParams:
    """Prices and lives of the factory's capital and fixed operating cost (all ASM defaults)."""

    # Price of one system (UltraServer / rack / node) [USD]; 0 = the catalog's figure.
    system_capex_usd: float = 0.0
    # Building, power chain and cooling plant per W of critical IT (design full load) [USD/W];
    # 0 = by cooling type below. ASM: industry rules of thumb of ~$10-12M per MW for air-cooled
    # halls and more for liquid-cooled AI halls (CDUs, facility water, denser power); no source read.
    facility_capex_usd_per_w: float = 0.0
    facility_capex_liquid_usd_per_w: float = 12.0  # ASM
    facility_capex_air_usd_per_w: float = 10.0  # ASM
    server_life_years: float = 5.0  # ASM: accelerator depreciation 4-6 years
    facility_life_years: float = 20.0  # ASM: building and plant 15-25 years
    financing_rate: float = 0.08  # ASM: cost of capital per year [-]
    maintenance_share_per_year: float = 0.03  # ASM: maintenance per year / capital [-]
    staff_per_mw: float = 0.5  # ASM: operations staff per MW of critical IT [1/MW]
    staff_loaded_usd_per_year: float = 150_000.0  # ASM: loaded cost per person and year [USD]
    water_usd_per_m3: float = 2.0  # ASM: US commercial water + sewer, order of $1-4/m³


def capital_recovery_factor(rate: float, years: float) -> float:
    """Yearly payment per unit of capital [1/year]: r (1+r)^n / ((1+r)^n - 1); 1/n when r = 0."""
    if years <= 0:
        raise ValueError("a depreciation life must be positive")
    if rate == 0:
        return 1.0 / years
    g: float = (1.0 + rate) ** years
    return float(rate * g / (g - 1.0))


@dataclass(frozen=True)
class CostRates:
    """The run's fixed cost rates [USD/s] and the capital behind them [USD]."""

    server_capex_usd: float  # capital of the systems [USD]
    facility_capex_usd: float  # capital of the building and plant [USD]
    capex_usd_per_s: float  # capital recovery of both [USD/s]
    fixed_opex_usd_per_s: float  # maintenance + staff [USD/s]
    water_usd_per_l: float  # [USD/L]


def system_capex_usd(sysm: System, p: TcoParams) -> float:
    """Price of one system: the scenario's, else the catalog's [USD]."""
    return p.system_capex_usd or sysm.capex_usd


def facility_capex_usd_per_w(sysm: System, p: TcoParams) -> float:
    """Facility capital per W of critical IT: the scenario's, else by cooling type [USD/W]."""
    if p.facility_capex_usd_per_w:
        return p.facility_capex_usd_per_w
    return p.facility_capex_liquid_usd_per_w if sysm.liquid_fraction > 0 else p.facility_capex_air_usd_per_w


def cost_rates(sysm: System, systems: int, design_it_w: float, p: TcoParams) -> CostRates:
    """Fixed cost rates of a hall of ``systems`` systems with ``design_it_w`` critical IT [W]."""
    servers = systems * system_capex_usd(sysm, p)
    facility = design_it_w * facility_capex_usd_per_w(sysm, p)
    per_year = servers * capital_recovery_factor(p.financing_rate, p.server_life_years)
    per_year += facility * capital_recovery_factor(p.financing_rate, p.facility_life_years)
    fixed = p.maintenance_share_per_year * (servers + facility)
    fixed += p.staff_per_mw * design_it_w / 1e6 * p.staff_loaded_usd_per_year
    return CostRates(
        server_capex_usd=servers,
        facility_capex_usd=facility,
        capex_usd_per_s=per_year / YEAR_S,
        fixed_opex_usd_per_s=fixed / YEAR_S,
        water_usd_per_l=p.water_usd_per_m3 / 1000.0,
    )
