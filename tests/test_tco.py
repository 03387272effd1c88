"""Total cost of ownership (``twin.spec.tco``, the cost KPIs of ``storage.kpis``) against hand calculations."""

from __future__ import annotations

import dataclasses

import duckdb
import pytest

from scenarios.spec import ScenarioError, parse
from storage.batches import to_arrow
from storage.database import init_schema
from storage.kpis import run_kpis, whole_run
from storage.schema import DEFAULT_START, columns, migrations
from tests.conftest import SMALL_TOML, small_params
from twin.compose.hall import Hall
from twin.spec import catalog, tco
from twin.spec.params import PowerChainParams, TrainingParams
from twin.spec.telemetry import SCHEMA_VERSION
from twin.work import routing

YEAR_S = 365.25 * 86400


# ---------------------------------------------------------------------- capital recovery
def test_capital_recovery_factor_by_hand() -> None:
    # 8 % over 5 years: 0.08 * 1.08^5 / (1.08^5 - 1); 1.08^5 = 1.4693280768
    assert tco.capital_recovery_factor(0.08, 5) == pytest.approx(0.08 * 1.4693280768 / 0.4693280768)
    assert tco.capital_recovery_factor(0.08, 5) == pytest.approx(0.250456, abs=1e-6)
    # One year: pay the capital back with one year's interest.
    assert tco.capital_recovery_factor(0.1, 1) == pytest.approx(1.1)
    # No interest: straight-line.
    assert tco.capital_recovery_factor(0.0, 4) == pytest.approx(0.25)
    # Property: the payments' present value equals the capital.
    r, n = 0.06, 7
    pv = sum(tco.capital_recovery_factor(r, n) / (1 + r) ** k for k in range(1, n + 1))
    assert pv == pytest.approx(1.0)
    with pytest.raises(ValueError):
        tco.capital_recovery_factor(0.05, 0)


def test_cost_rates_by_hand() -> None:
    sysm = catalog.system("trn3-gen2")  # liquid-cooled: the liquid facility price applies
    p = tco.TcoParams(
        system_capex_usd=2.0e6,
        facility_capex_liquid_usd_per_w=11.0,
        facility_capex_air_usd_per_w=7.0,
        network_usd_per_gbps=0.0,
        storage_usd_per_chip=0.0,
        spares_share=0.0,
        grid_usd_per_kw=0.0,
        construction_years=0.0,
        residual_share=0.0,
        server_life_years=4,
        facility_life_years=20,
        financing_rate=0.0,
        maintenance_share_per_year=0.05,
        staff_per_mw=2.0,
        staff_loaded_usd_per_year=100_000.0,
        water_usd_per_m3=3.0,
    )
    r = tco.cost_rates(sysm, 10, 1.5e6, p)
    servers, facility = 10 * 2.0e6, 1.5e6 * 11.0
    assert r.server_capex_usd == pytest.approx(servers)
    assert r.facility_capex_usd == pytest.approx(facility)
    assert r.capex_usd_per_s * YEAR_S == pytest.approx(servers / 4 + facility / 20)
    assert r.fixed_opex_usd_per_s * YEAR_S == pytest.approx(0.05 * (servers + facility) + 2.0 * 1.5 * 100_000)
    assert r.water_usd_per_l == pytest.approx(0.003)
    # Air-cooled systems take the air price; the catalog price when the scenario sets none.
    air = catalog.system("trn2-ultra")
    r2 = tco.cost_rates(air, 3, 1e6, dataclasses.replace(p, system_capex_usd=0.0))
    assert r2.server_capex_usd == pytest.approx(3 * air.capex_usd)
    assert r2.facility_capex_usd == pytest.approx(7.0e6)


def test_network_storage_spares_grid_interest_and_resale_by_hand() -> None:
    """Two HGX H100 nodes (16 GPUs at 400 Gb/s) on 20 kW of nameplate IT, every term on."""
    sysm = catalog.system("hgx-h100")
    p = tco.TcoParams(
        system_capex_usd=200_000.0,
        facility_capex_air_usd_per_w=10.0,
        network_usd_per_gbps=12.5,
        storage_usd_per_chip=1000.0,
        spares_share=0.05,
        grid_usd_per_kw=300.0,
        construction_years=2.0,
        residual_share=0.2,
        server_life_years=4.0,
        facility_life_years=20.0,
        financing_rate=0.1,
        maintenance_share_per_year=0.02,
        staff_per_mw=1.0,
        staff_loaded_usd_per_year=100_000.0,
    )
    r = tco.cost_rates(sysm, 2, 20e3, p)
    servers = 2 * 200_000.0 * 1.05  # spares: 5 % more systems
    network = 16 * 12.5 * 400  # 400 Gb/s per GPU at $12.5 per Gb/s = $5,000 per GPU
    storage = 16 * 1000.0
    build = 20e3 * 10.0 + 20.0 * 300.0  # building and plant + grid connection
    idc = build * (1.1**1.0 - 1.0)  # half the two-year build at 10 %: 10 % of the capital
    assert tco.construction_interest_factor(0.1, 2.0) == pytest.approx(0.1)
    assert r.server_capex_usd == pytest.approx(servers)
    assert r.network_capex_usd == pytest.approx(network) and network / 16 == pytest.approx(5000.0)
    assert r.storage_capex_usd == pytest.approx(storage)
    assert r.facility_capex_usd == pytest.approx(build + idc)
    # Resale: 20 % of the systems back after 4 years, worth that over 1.1^4 today.
    it = servers + network + storage - 0.2 * servers / 1.1**4
    crf4 = 0.1 * 1.1**4 / (1.1**4 - 1)
    crf20 = 0.1 * 1.1**20 / (1.1**20 - 1)
    assert r.capex_usd_per_s * YEAR_S == pytest.approx(it * crf4 + (build + idc) * crf20)
    fixed = 0.02 * (servers + network + storage + build) + 1.0 * 0.02 * 100_000.0
    assert r.fixed_opex_usd_per_s * YEAR_S == pytest.approx(fixed)
    # The owner's cost per chip-hour: the fixed rates plus the electricity, per chip.
    per_h = tco.usd_per_chip_hour(r, 16, 24e3, 100.0)
    assert per_h == pytest.approx(((r.capex_usd_per_s + r.fixed_opex_usd_per_s) * 3600 + 2.4) / 16)


# ---------------------------------------------------------------------- against published figures
def _owner_usd_per_gpu_hour(key: str, pue: float = 1.2, price: float = 75.0) -> float:
    """The owner's $ per GPU-hour of one system at the catalog's prices and the default [tco]
    keys: its nameplate sizes the facility (every chip at TDP, hosts and switches full), its
    chips run at the default training activity and the facility at ``pue`` and a flat price."""
    sysm = catalog.system(key)
    acc = catalog.accelerator_for(sysm)
    nameplate = catalog.system_full_load_it_w(sysm, acc)
    r = tco.cost_rates(sysm, 1, nameplate, tco.TcoParams())
    act = TrainingParams().compute_activity  # a busy gang computing (the plan's compute level)
    it_w = sysm.chips * routing.chip_it_w(sysm, acc, act, PowerChainParams())
    return tco.usd_per_chip_hour(r, sysm.chips, it_w * pue, price)


def test_owner_cost_of_an_h100_hour_is_within_public_estimates() -> None:
    """Owner TCO of an H100 hour, published estimates $1.2-2.3: ~$1.20 effective hourly rate of a
    bought node (v2-pseo-ai.pages.dev GPU TCO analysis), $2.3 with 3-year payback and 20 % opex
    (greaterwrong.com, 2025). PUE 1.2 (typical modern AI hall, aiinframap.com), $75/MWh."""
    assert 1.2 <= _owner_usd_per_gpu_hour("hgx-h100") <= 2.3


def test_gb200_over_h100_cost_per_gpu_hour_is_semianalysis_ratio() -> None:
    """SemiAnalysis, "H100 vs GB200 NVL72 Training Benchmarks" (2025-08-20): GB200 NVL72 needs a
    1.6x performance advantage over H100 to break even on TCO, i.e. its TCO per GPU-hour is ~1.6x
    H100's. Every price here is an estimate (catalog, [tco]), so the tolerance is 15 %: 1.36-1.84."""
    ratio = _owner_usd_per_gpu_hour("gb200-nvl72") / _owner_usd_per_gpu_hour("hgx-h100")
    assert ratio == pytest.approx(1.6, rel=0.15)


def test_the_new_terms_raise_the_cost_and_resale_lowers_it() -> None:
    """Property: each added term costs money, resale gives some back."""
    sysm = catalog.system("gb300-nvl72")
    base = tco.cost_rates(sysm, 4, 5e5, tco.TcoParams())
    for key in ("network_usd_per_gbps", "storage_usd_per_chip", "spares_share", "grid_usd_per_kw"):
        off = tco.cost_rates(sysm, 4, 5e5, dataclasses.replace(tco.TcoParams(), **{key: 0.0}))
        assert off.capex_usd_per_s < base.capex_usd_per_s, key
    off = tco.cost_rates(sysm, 4, 5e5, dataclasses.replace(tco.TcoParams(), construction_years=0.0))
    assert off.facility_capex_usd < base.facility_capex_usd
    off = tco.cost_rates(sysm, 4, 5e5, dataclasses.replace(tco.TcoParams(), residual_share=0.0))
    assert off.capex_usd_per_s > base.capex_usd_per_s


def test_every_system_has_a_sourced_price() -> None:
    for s in catalog.SYSTEMS.values():
        assert s.capex_usd > 0, s.key
        assert s.sources.get("capex_usd", "").startswith(("ASM", "OFF", "3P")), s.key
        if s.cloud_usd_per_chip_hour:
            assert "cloud_usd_per_chip_hour" in s.sources, s.key


# ---------------------------------------------------------------------- the simulation records it
def test_simulation_records_fixed_costs_per_step() -> None:
    p = small_params(tco=tco.TcoParams(system_capex_usd=1.0e6, financing_rate=0.05, water_usd_per_m3=4.0))
    sim = Hall(p)
    f = sim.advance(30)["factory_ts"]
    d = sim.design
    t = p.tco
    # The facility is built for the nameplate: every system at TDP, hosts and switches full.
    assert d.design_it_w == pytest.approx(
        2 * catalog.system_full_load_it_w(p.hall.system, p.hall.accelerator)
    )
    chips = 2 * p.hall.system.chips
    servers = 2 * 1.0e6 * (1 + t.spares_share)
    it = servers + chips * (t.network_usd_per_gbps * p.hall.system.scaleout_bw_bytes_s * 8 / 1e9)
    it += chips * t.storage_usd_per_chip
    build = d.design_it_w * t.facility_capex_liquid_usd_per_w + d.design_it_w / 1e3 * t.grid_usd_per_kw
    facility = build * 1.05 ** (t.construction_years / 2)
    crf = tco.capital_recovery_factor
    per_year = (it - t.residual_share * servers / 1.05**t.server_life_years) * crf(0.05, t.server_life_years)
    per_year += facility * crf(0.05, t.facility_life_years)
    assert f["capex_usd"] == pytest.approx([per_year * 60 / YEAR_S] * 30)
    fixed = t.maintenance_share_per_year * (it + build)
    fixed += t.staff_per_mw * d.design_it_w / 1e6 * t.staff_loaded_usd_per_year
    assert f["fixed_opex_usd"] == pytest.approx([fixed * 60 / YEAR_S] * 30)
    assert f["water_cost_usd"] == pytest.approx(f["water_l"] * 4.0 / 1000)
    # Two replicas of four chips hold eight chips once placed.
    assert f["inference_chips"][-1] == 2 * p.services[0].chips_per_replica


def test_tco_keys_in_scenarios() -> None:
    s = parse(SMALL_TOML + "\n[tco]\nsystem_capex_usd = 2.5e6\nfinancing_rate = 0.1\n", "t.toml")
    p = s.to_params()
    assert p.tco.system_capex_usd == 2.5e6 and p.tco.financing_rate == 0.1
    for bad, key in (
        ("server_life_years = 0", "server_life_years"),
        ("water_usd_per_m3 = -1", "water_usd_per_m3"),
        ("maintenance_share_per_year = 'x'", "maintenance_share_per_year"),
        ("capex = 1", "capex"),
        ("spares_share = 1.5", "spares_share"),
        ("residual_share = -0.1", "residual_share"),
        ("construction_years = -1", "construction_years"),
    ):
        with pytest.raises(ScenarioError, match=key) as e:
            parse(SMALL_TOML + f"\n[tco]\n{bad}\n", "t.toml")
        assert "t.toml" in str(e.value) and "\n" not in str(e.value)


# ---------------------------------------------------------------------- KPIs on a run by hand
def _file() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(":memory:")
    for stmts in migrations():
        for s in stmts:
            con.execute(s)
    return con


def _insert(con: duckdb.DuckDBPyConnection, table: str, rows: list[dict[str, object]]) -> None:
    zero = {"string": "", "bool": False, "timestamptz": DEFAULT_START}
    specs = [c for c in columns(table) if c.name not in ("run_id", "ts")]
    cols = {c.name: [r.get(c.name, zero.get(c.dtype, 0)) for r in rows] for c in specs}
    con.register("_b", to_arrow(table, "r", cols))
    con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM _b")
    con.unregister("_b")


# time, dt, facility W, cooling W, price $/MWh, inference W, tokens/s, capex, fixed, water $, inference chips
STEPS = [
    (0, 3600, 2.0e6, 0.2e6, 50.0, 0.5e6, 1.0e5, 100.0, 20.0, 1.0, 40),
    (86400, 3600, 1.0e6, 0.1e6, 100.0, 0.5e6, 2.0e5, 100.0, 20.0, 2.0, 20),
]


@pytest.fixture
def con() -> duckdb.DuckDBPyConnection:
    c = _file()
    rows = [
        {
            "time_s": t,
            "facility_power_w": fac,
            "it_power_w": fac - cool,
            "cooling_power_w": cool,
            "energy_j": fac * dt,
            "price_usd_per_mwh": price,
            "cost_usd": fac * dt / 3.6e9 * price,
            "inference_power_w": inf,
            "tokens_per_s": tok,
            "job_flops": 1e15,
            "capex_usd": capex,
            "fixed_opex_usd": fixed,
            "water_cost_usd": water,
            "inference_chips": ichips,
            "chips_total": 100,
        }
        for t, dt, fac, cool, price, inf, tok, capex, fixed, water, ichips in STEPS
    ]
    _insert(c, "factory_ts", rows)
    _insert(c, "runs", [{"system": "trn2-ultra"}])
    _insert(
        c,
        "jobs",
        [
            {"job_id": 1, "kind": "pretrain", "state": "done", "done_flop": 2e18},
            {"job_id": 2, "kind": "pretrain", "state": "done", "done_flop": 4e18},
            {"job_id": 3, "kind": "pretrain", "state": "running", "done_flop": 9e18},
        ],
    )
    return c


def test_cost_split_and_unit_costs_by_hand(con: duckdb.DuckDBPyConnection) -> None:
    k = run_kpis(con, "r")
    elec = 2.0e6 * 3600 / 3.6e9 * 50 + 1.0e6 * 3600 / 3.6e9 * 100  # 100 + 100 $
    cooling = 0.2e6 * 3600 / 3.6e9 * 50 + 0.1e6 * 3600 / 3.6e9 * 100  # 10 + 10 $
    total = elec + 200.0 + 40.0 + 3.0
    assert k["cost_usd"] == pytest.approx(elec)
    assert k["capex_usd"] == pytest.approx(200.0)
    assert k["cooling_cost_usd"] == pytest.approx(cooling)
    assert k["energy_cost_usd"] == pytest.approx(elec - cooling)
    assert k["other_cost_usd"] == pytest.approx(43.0)
    assert k["total_cost_usd"] == pytest.approx(total)
    # The split adds up to the total.
    split = ("capex_usd", "energy_cost_usd", "cooling_cost_usd", "other_cost_usd")
    assert sum(k[s] for s in split) == pytest.approx(total)
    assert k["usd_per_chip_hour"] == pytest.approx(total / (100 * 2))
    # Inference: its electricity + fixed costs by its share of chips (40 % then 20 %).
    inf_elec = 0.5e6 * 3600 / 3.6e9 * 50 + 0.5e6 * 3600 / 3.6e9 * 100
    inf_fixed = (100 + 20 + 1) * 0.4 + (100 + 20 + 2) * 0.2
    tokens = 1.0e5 * 3600 + 2.0e5 * 3600
    assert k["usd_per_mtok_all_in"] == pytest.approx((inf_elec + inf_fixed) / tokens * 1e6)
    # Batch work: the rest, per EFLOP of batch work; a finished pre-training job did 3 EFLOP on average.
    batch = total - inf_elec - inf_fixed
    eflop = 1e15 * 7200 / 1e18
    assert k["usd_per_eflop"] == pytest.approx(batch / eflop)
    assert k["usd_per_pretrain_job"] == pytest.approx(batch / eflop * 3.0)
    # Energy per unit of batch work: facility energy not attributed to inference.
    batch_kwh = ((2.0e6 - 0.5e6) * 3600 + (1.0e6 - 0.5e6) * 3600) / 3.6e6
    assert k["kwh_per_eflop"] == pytest.approx(batch_kwh / eflop)
    assert k["job_eflop"] == pytest.approx(eflop)
    assert k["cloud_usd_per_chip_hour"] == catalog.SYSTEMS["trn2-ultra"].cloud_usd_per_chip_hour


def test_cost_by_day_view_adds_up_to_the_run(con: duckdb.DuckDBPyConnection) -> None:
    days = con.sql("SELECT * FROM cost_by_day ORDER BY day").to_arrow_table().to_pylist()
    assert [d["day"] for d in days] == [0, 1]
    assert days[0]["capex_usd"] == pytest.approx(100.0)
    assert days[0]["cooling_cost_usd"] == pytest.approx(10.0)
    assert days[0]["energy_cost_usd"] == pytest.approx(90.0)
    assert days[1]["other_cost_usd"] == pytest.approx(22.0)
    assert sum(d["total_cost_usd"] for d in days) == pytest.approx(whole_run(con, "r")["total_cost_usd"])


def test_a_version_3_file_gains_the_cost_columns() -> None:
    """A file written before the cost columns existed (schema v3) is migrated on open for writing:
    the four columns are appended after its own, and a new step inserts (by name)."""
    con = duckdb.connect(":memory:")
    new = ("capex_usd", "fixed_opex_usd", "water_cost_usd", "inference_chips")
    for stmts in migrations()[:3]:
        for s in stmts:
            con.execute(s)
    for name in new:
        con.execute(f"ALTER TABLE factory_ts DROP COLUMN {name}")
    con.execute("INSERT INTO twin_meta VALUES ('schema_version', '3')")
    old = [r[0] for r in con.sql("DESCRIBE factory_ts").fetchall()]
    assert not set(new) & set(old)
    init_schema(con)
    cols = [r[0] for r in con.sql("DESCRIBE factory_ts").fetchall()]
    assert cols == [*old, *new]
    assert sorted(cols) == sorted(c.name for c in columns("factory_ts"))
    assert con.sql("SELECT value FROM twin_meta WHERE key = 'schema_version'").fetchall() == [
        (str(SCHEMA_VERSION),)
    ]
    _insert(con, "factory_ts", [{"time_s": 0, "capex_usd": 5.0, "chips_total": 1}])
    assert con.sql("SELECT sum(capex_usd) FROM cost_by_day").fetchall() == [(5.0,)]


# ---------------------------------------------------------------------- like-for-like comparisons
def _serve(s: object, steps: int) -> tuple[float, float, float]:
    sim = Hall(s.to_params())  # type: ignore[attr-defined]
    served = dropped = met = 0.0
    for _ in range(steps // 60):
        f = sim.advance(60)["service_ts"]
        served += float(f["requests_served"].sum())
        dropped += float(f["requests_dropped"].sum())
        met += float(f["slo_met"].sum())
    return served, dropped, met / max(served + dropped, 1.0)


def test_trn2_vs_trn3_serves_the_same_requests_at_the_same_service_level() -> None:
    """Through the first weekday peak (16 h), both halls serve every request within the SLO:
    the replicas are sized per hall; a fixed replica count overloads the Trn2 hall."""
    from scenarios.spec import load

    spec, _, _ = load("trn2-vs-trn3")
    got = {v.name: _serve(v, 16 * 60) for v in spec.variants}
    assert got["trn2"][0] == got["trn3"][0] > 0
    for _, dropped, slo in got.values():
        assert dropped == 0 and slo > 0.99
    trn2 = next(v for v in spec.variants if v.name == "trn2")
    fixed = trn2.model_copy(update={"services": [trn2.services[0].model_copy(update={"autoscale": False})]})
    _, dropped, slo = _serve(fixed, 16 * 60)
    assert dropped > 0 and slo < 0.95
