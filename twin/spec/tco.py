"""Total cost of ownership: what the factory costs beyond its electricity, as cost rates.

Capital is turned into an equal yearly payment with the capital recovery factor
``CRF = r (1 + r)^n / ((1 + r)^n - 1)`` (r the financing rate per year, n the life in years;
``1 / n`` when r = 0). IT capital (the systems and their spares, the scale-out network by its
bandwidth, shared storage) over the server life, less the present value of the systems' resale;
facility capital (building, power chain and plant by cooling type per W of nameplate IT, the grid
connection per kW, interest during construction) over the facility life. Maintenance is a share
of capital per year, staff a number of people per MW of critical IT at a loaded cost. Energy is
priced by the site model per step; water at a price per m³ here.

Prices are the least certain inputs of the twin: each is a scenario key (``[tco]``) with its
source (3P ranges where published, else ASM). Pure functions and data: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from twin.spec.catalog import System

YEAR_S = 365.25 * 86400.0  # [s]


@dataclass(frozen=True)
class TcoParams:
    """Prices and lives of the factory's capital and fixed operating cost (sources per field)."""

    # Price of one system (UltraServer / rack / node) [USD]; 0 = the catalog's figure.
    system_capex_usd: float = 0.0
    # Building, power chain and cooling plant per W of critical IT at nameplate (every system at
    # TDP, hosts and switches at full load) [USD/W]; 0 = by cooling type below.
    facility_capex_usd_per_w: float = 0.0
    # 3P: AI-optimised (liquid-cooled, high-density) halls $15-20M per MW (infra-economics.com;
    # gigaenergy.com 2026: "$20 million or more per MW" with land and power); ASM: 17, mid-range.
    facility_capex_liquid_usd_per_w: float = 17.0
    # 3P: conventional (air-cooled) halls $7-12M per MW (gigaenergy.com 2026), $7-15M per MW of IT
    # (cortexconstruct.com 2026), $10-12M on average (press); ASM: 11.
    facility_capex_air_usd_per_w: float = 11.0
    # Scale-out network (switches, optics, cables) per Gb/s of each chip's scale-out link
    # [USD/(Gb/s)]: EFA, InfiniBand or Ethernet rails priced alike by their bandwidth. 3P: a public
    # 1,024-H100 two-tier NDR InfiniBand bill (48 switches $1.73M, cables and optics $2.62M, Aug
    # 2024) = $4,250 per 400 Gb/s GPU = $10.6 per Gb/s; per-GPU interconnect $3-10k
    # (ipcarrier.blogspot.com 2026); ~20 % of cluster cost (amcompute.com BOM review). ASM: 15 for
    # a three-tier fabric at scale ($6k per 400 Gb/s GPU).
    network_usd_per_gbps: float = 15.0
    # Shared storage per chip [USD]: 3P: parallel file system (Lustre/GPFS on flash) ~$250k per PB
    # (infra-economics.com); ASM: ~6 TB per accelerator => $1,500.
    storage_usd_per_chip: float = 1500.0
    # Spare systems and parts as a share of the systems' price [-]. ASM: hot-spare pools of 2-5 %
    # of nodes (SemiAnalysis ClusterMAX counts hot spares as a TCO item, 2026).
    spares_share: float = 0.03
    # Grid connection (substation, transmission tie-in) per kW of nameplate critical IT [USD/kW].
    # ASM: ~$20-40M for a 100-200 MW substation and tie-in; PJM approved $4.36B of data-centre
    # connections in 2024 (UCS via datacenterfrontier.com), capacity not given.
    grid_usd_per_kw: float = 200.0
    # Time from first spend to energisation [yr]: interest during construction accrues on the
    # facility and grid capital, spent evenly over it. ASM: 18-36 months (utility queues).
    construction_years: float = 2.0
    # Resale value of the systems at the end of their life, share of their price [-]. ASM: 25-35 %
    # after 3 years (v2-pseo-ai.pages.dev GPU TCO notes) => ~10 % after 5.
    residual_share: float = 0.10
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


def construction_interest_factor(rate: float, years: float) -> float:
    """Interest during construction per unit of capital spent evenly over ``years`` [-]:
    (1 + r)^(T/2) - 1, the capital's mean time before energisation being half the build."""
    return float((1.0 + rate) ** (years / 2.0) - 1.0)


@dataclass(frozen=True)
class CostRates:
    """The run's fixed cost rates [USD/s] and the capital behind them [USD]."""

    server_capex_usd: float  # the systems and their spares [USD]
    network_capex_usd: float  # scale-out network [USD]
    storage_capex_usd: float  # shared storage [USD]
    facility_capex_usd: float  # building and plant, grid connection, interest during construction [USD]
    capex_usd_per_s: float  # capital recovery of all of it, less the systems' resale value [USD/s]
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


def network_usd_per_chip(sysm: System, p: TcoParams) -> float:
    """Scale-out network per chip: its link's bandwidth at the price per Gb/s [USD]."""
    return p.network_usd_per_gbps * sysm.scaleout_bw_bytes_s * 8.0 / 1e9


def cost_rates(sysm: System, systems: int, design_it_w: float, p: TcoParams) -> CostRates:
    """Fixed cost rates of a hall of ``systems`` systems whose nameplate critical IT is
    ``design_it_w`` [W] (every system at TDP with hosts and switches at full load: the load the
    building, its plant and its grid connection are built for).

    IT capital (systems + spares, network, storage) is recovered over the server life less the
    present value of the systems' resale; facility capital (building and plant by cooling type,
    grid connection, interest during construction) over the facility life. Maintenance is a share
    of the capital before interest, staff scale with the nameplate MW."""
    chips = systems * sysm.chips
    servers = systems * system_capex_usd(sysm, p) * (1.0 + p.spares_share)
    network = chips * network_usd_per_chip(sysm, p)
    storage = chips * p.storage_usd_per_chip
    build = design_it_w * facility_capex_usd_per_w(sysm, p) + design_it_w / 1e3 * p.grid_usd_per_kw
    facility = build * (1.0 + construction_interest_factor(p.financing_rate, p.construction_years))
    it = servers + network + storage
    resale_pv = p.residual_share * servers / (1.0 + p.financing_rate) ** p.server_life_years
    per_year = (it - resale_pv) * capital_recovery_factor(p.financing_rate, p.server_life_years)
    per_year += facility * capital_recovery_factor(p.financing_rate, p.facility_life_years)
    fixed = p.maintenance_share_per_year * (it + build)
    fixed += p.staff_per_mw * design_it_w / 1e6 * p.staff_loaded_usd_per_year
    return CostRates(
        server_capex_usd=servers,
        network_capex_usd=network,
        storage_capex_usd=storage,
        facility_capex_usd=facility,
        capex_usd_per_s=per_year / YEAR_S,
        fixed_opex_usd_per_s=fixed / YEAR_S,
        water_usd_per_l=p.water_usd_per_m3 / 1000.0,
    )


def usd_per_chip_hour(rates: CostRates, chips: int, facility_w: float, price_usd_per_mwh: float) -> float:
    """Owner's cost per chip-hour of a hall of ``chips`` chips drawing a steady ``facility_w``
    [W] at a flat price: its fixed rates plus its electricity [USD/chip-h]."""
    fixed = (rates.capex_usd_per_s + rates.fixed_opex_usd_per_s) * 3600.0
    return (fixed + facility_w / 1e6 * price_usd_per_mwh) / chips
