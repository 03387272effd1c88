"""Mixed floors (twin.compose.hall) and routing (twin.work.routing): conservation, hand-calculated routing,
hardware constraints, and a one-system floor that is the single-system hall bit for bit."""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

import numpy as np
import pytest

from scenarios.spec import ScenarioError, build_simulation, parse, prepare
from tests.conftest import SMALL_TOML, small_params
from twin.compose import sim as model
from twin.compose.hall import Hall
from twin.spec import catalog, tco
from twin.spec.models import DENSE_MFU
from twin.spec.params import FactoryParams, JobClassParams, ScheduledEvent, SystemRows, TrainingParams
from twin.work import routing

TRN3, GB300 = catalog.SYSTEMS["trn3-gen2"], catalog.SYSTEMS["gb300-nvl72"]


def _rows(n_trn: int = 2, n_gb: int = 3) -> tuple[SystemRows, ...]:
    return (
        SystemRows(TRN3, catalog.accelerator_for(TRN3, {}), n_trn, 2),
        SystemRows(GB300, catalog.accelerator_for(GB300, {}), n_gb, 2),
    )


def _mixed(p: FactoryParams, rows: tuple[SystemRows, ...] | None = None) -> FactoryParams:
    rows = rows or _rows()
    hall = dataclasses.replace(
        p.hall,
        system=rows[0].system,
        accelerator=rows[0].accelerator,
        ultraservers=rows[0].ultraservers,
        rows=rows,
    )
    return dataclasses.replace(p, hall=hall)


def _idle_it_w(sysm: catalog.System, n: int, p: FactoryParams, g_sum: float | None = None) -> float:
    """Hand calculation: ``n`` idle systems at rack input. Chips at idle power (TDP x idle
    fraction, times each chip's power factor: ``g_sum`` their sum, None: identical chips), hosts
    at their idle share, switches on; the rectifier adds its fixed loss per server and divides
    by its efficiency."""
    acc = catalog.ACCELERATORS[sysm.accelerator]
    pp = p.power
    chips = n * sysm.chips if g_sum is None else g_sum
    dc = n * (sysm.servers * sysm.host_w_per_server * sysm.host_idle_fraction + sysm.switch_w)
    dc += chips * acc.tdp_w * acc.idle_fraction
    return (dc + n * pp.psu_fixed_w_per_server * sysm.servers) / pp.psu_efficiency


def test_idle_floor_it_power_is_the_sum_of_its_systems_by_hand() -> None:
    idle = dataclasses.replace(TrainingParams(), arrivals_per_day=0.0)
    p = _mixed(small_params(services=(), training=idle))
    sim = model.build(p)
    assert isinstance(sim, Hall) and len(sim.pools) > 1
    f = sim.advance(5)
    g = [float(pl.facility.chips.p_scale.sum()) for pl in sim.pools]  # the chips' spread
    want_trn, want_gb = _idle_it_w(TRN3, 2, p, g[0]), _idle_it_w(GB300, 3, p, g[1])
    st = f["system_ts"]
    assert list(st["system"][:2]) == ["trn3-gen2", "gb300-nvl72"]
    np.testing.assert_allclose(st["it_power_w"][0::2], want_trn, rtol=1e-12)
    np.testing.assert_allclose(st["it_power_w"][1::2], want_gb, rtol=1e-12)
    np.testing.assert_allclose(f["factory_ts"]["it_power_w"], want_trn + want_gb, rtol=1e-12)
    assert int(f["factory_ts"]["chips_total"][0]) == 2 * 144 + 3 * 72


def test_loaded_floor_conserves_power_energy_and_cost_across_its_systems() -> None:
    p = _mixed(small_params())
    f = Hall(p).advance(240)
    fa, st, us = f["factory_ts"], f["system_ts"], f["ultraserver_ts"]
    k = 2
    for col in (
        "it_power_w",
        "facility_power_w",
        "cooling_power_w",
        "power_loss_w",
        "energy_j",
        "cost_usd",
        "capex_usd",
        "job_flops",
        "tokens_per_s",
        "chips_busy",
    ):
        np.testing.assert_allclose(st[col].reshape(-1, k).sum(axis=1), fa[col], rtol=1e-9, err_msg=col)
    # Facility power = IT + cooling + losses, on the floor and for each system's share.
    np.testing.assert_allclose(
        fa["facility_power_w"], fa["it_power_w"] + fa["cooling_power_w"] + fa["power_loss_w"]
    )
    # Every UltraServer's IT power adds up to the floor's.
    np.testing.assert_allclose(us["power_w"].reshape(240, -1).sum(axis=1), fa["it_power_w"], rtol=1e-9)
    assert us["ultraserver_id"][:5].tolist() == [0, 1, 2, 3, 4]
    # Both systems worked (the test would not see a lost pool otherwise).
    assert (st["chips_busy"].reshape(-1, k) > 0).any(axis=0).all()
    # Same PUE for every system: the plant is shared in proportion to IT power.
    pue = st["facility_power_w"] / st["it_power_w"]
    np.testing.assert_allclose(pue.reshape(-1, k), np.repeat(fa["pue"][:, None], k, axis=1), rtol=1e-9)


def _frames_equal(a: dict[str, Any], b: dict[str, Any]) -> None:
    assert a.keys() == b.keys()
    for table in a:
        assert a[table].keys() == b[table].keys(), table
        for col in a[table]:
            x, y = a[table][col], b[table][col]
            if isinstance(x, list):
                assert x == list(y), (table, col)
            else:
                np.testing.assert_array_equal(x, y, err_msg=f"{table}.{col}")


def test_single_row_hall_rows_equals_hall_system() -> None:
    rows = SMALL_TOML.replace('system = "trn3-gen2"\nultraservers = 2\n', "").replace(
        "[training]", '[[hall.rows]]\nsystem = "trn3-gen2"\ncount = 2\n\n[training]'
    )
    assert "[[hall.rows]]" in rows
    _, a = build_simulation(parse(SMALL_TOML, "a.toml"))
    _, b = build_simulation(parse(rows, "b.toml"))
    assert isinstance(b, Hall) and len(b.pools) == 1
    _frames_equal(a.advance(90), b.advance(90))


def _chip_it_w_by_hand(sysm: catalog.System, activity: float, p: FactoryParams) -> float:
    acc = catalog.ACCELERATORS[sysm.accelerator]
    chip = acc.tdp_w * (acc.idle_fraction + (1 - acc.idle_fraction) * activity)
    host = sysm.host_w_per_server * (sysm.host_idle_fraction + (1 - sysm.host_idle_fraction) * activity)
    dc = sysm.chips * chip + sysm.servers * host + sysm.switch_w
    return (dc + p.power.psu_fixed_w_per_server * sysm.servers) / p.power.psu_efficiency / sysm.chips


@pytest.mark.parametrize("policy", ["fastest", "energy", "cheapest"])
def test_routing_picks_the_system_a_hand_calculation_picks(policy: str) -> None:
    """A 16-chip job of a model the catalog does not know (no fabric model: rate = chips x peak x
    the dense MFU) on an empty floor goes where the hand-calculated figure per FLOP is lowest."""
    idle = dataclasses.replace(TrainingParams(), arrivals_per_day=0.0)
    p = _mixed(small_params(services=(), training=idle))
    p = dataclasses.replace(p, scheduler=dataclasses.replace(p.scheduler, routing=policy))
    sim = Hall(p)
    cls = p.training.job_class("finetune")
    chips, act = 16, p.training.compute_activity
    fig = {}
    for pl in sim.pools:
        sysm = pl.sys
        acc = catalog.ACCELERATORS[sysm.accelerator]
        rate = chips * acc.peak_flops[cls.precision] * DENSE_MFU * cls.mfu_factor
        w = chips * _chip_it_w_by_hand(sysm, act, p)
        n = pl.topo.ultraservers
        rates = tco.cost_rates(sysm, n, pl.design.design_it_w, p.tco)
        own = (rates.capex_usd_per_s + rates.fixed_opex_usd_per_s) / (n * sysm.chips)
        usd = chips * own + w * p.site.price_usd_per_mwh / 3.6e9
        fig[sysm.key] = {"fastest": 1 / rate, "energy": w / rate, "cheapest": usd / rate}[policy]
    want = min(fig, key=lambda k: fig[k])
    router = sim.router
    assert router is not None
    got = router.pick(2, cls, chips, "no-such-model")  # code 2 = finetune
    assert got is not None and got.p.hall.system.key == want
    # And the two systems differ by more than rounding, so the pick is a real decision.
    a, b = fig.values()
    assert abs(a - b) / min(a, b) > 0.01


def test_a_neuron_only_job_never_lands_on_gpus() -> None:
    """Batch inference needs the Neuron SDK. Under `cheapest` the router would rank the GB300
    first for it (more FP8 work per dollar), so the constraint is what keeps it on Trainium;
    pre-training goes to the GB300."""
    toml = (
        SMALL_TOML.replace('system = "trn3-gen2"\nultraservers = 2\n', "")
        .replace(
            "arrivals_per_day = 40",
            'arrivals_per_day = 400\n\n[training.batch_inference]\nshare = 0.5\nfamily = "trainium"',
        )
        .replace("[training.pretrain]", "[training.pretrain]\nshare = 0.5")
    )
    toml = toml.replace(
        "[training]",
        '[[hall.rows]]\nsystem = "trn3-gen2"\ncount = 2\n\n'
        '[[hall.rows]]\nsystem = "gb300-nvl72"\ncount = 2\n\n[scheduler]\nrouting = "cheapest"\n\n'
        "[training]",
        1,
    )
    p, sim = build_simulation(parse(toml, "neuron.toml"))
    assert isinstance(sim, Hall) and len(sim.pools) > 1
    router = sim.router
    assert router is not None
    cls = p.training.job_class("batch_inference")
    assert cls.family == "trainium"
    unconstrained = dataclasses.replace(cls, family="any")
    assert sim.systems[router.rank(4, unconstrained, 4, cls.models[0])[0]] == "gb300-nvl72"
    kinds: list[str] = []
    systems: list[str] = []
    for _ in range(6):
        j = sim.advance(60)["jobs"]
        kinds += j["kind"]
        systems += j["system"]
    bi = [s for k, s in zip(kinds, systems, strict=True) if k == "batch_inference"]
    other = {s for k, s in zip(kinds, systems, strict=True) if k == "pretrain"}
    assert len(bi) > 5 and set(bi) == {"trn3-gen2"}
    assert "gb300-nvl72" in other


def test_family_constraint_in_routing_candidates() -> None:
    pools = [
        routing.pool_facts(s, catalog.accelerator_for(s, {}), 1, 1e5, tco.TcoParams()) for s in (TRN3, GB300)
    ]
    assert routing.candidates("gpu", "", "fastest", pools, [True, True]) == [1]
    assert routing.candidates("trainium", "", "fastest", pools, [True, True]) == [0]
    assert routing.candidates("any", "gb300-nvl72", "pinned", pools, [True, True]) == [1]
    assert routing.candidates("any", "", "pinned", pools, [True, True]) == [0]
    assert routing.candidates("gpu", "", "fastest", pools, [True, False]) == []
    # Pinned to a system that cannot hold it: nowhere (the job is rejected), not elsewhere.
    assert routing.candidates("any", "gb300-nvl72", "pinned", pools, [True, False]) == []


_MIXED_TOML = """
name = "mixed"
dt_s = 60

[[hall.rows]]
system = "trn3-gen2"
count = 2

[[hall.rows]]
system = "gb300-nvl72"
count = 2
"""


@pytest.mark.parametrize(
    ("change", "key"),
    [
        (('system = "gb300-nvl72"', 'system = "gb999"'), "hall.rows"),
        (("count = 2\n\n[[hall.rows]]", "count = 0\n\n[[hall.rows]]"), "count"),
        (("count = 2\n", "count = 19000\n"), "hall.rows"),  # 19,000 NVL72 + 2 UltraServers > 1e6 chips
        (('system = "gb300-nvl72"', 'system = "trn2-ultra"'), "hall.rows"),  # air + liquid
        (('system = "gb300-nvl72"', 'system = "trn3-gen2"'), "hall.rows"),  # twice
        (
            (
                '[[hall.rows]]\nsystem = "trn3-gen2"',
                '[hall]\nsystem = "trn3-gen2"\n\n[[hall.rows]]\nsystem = "trn3-gen2"',
            ),
            "hall.system",
        ),
    ],
)
def test_bad_floors_are_refused_before_allocation(change: tuple[str, str], key: str) -> None:
    text = _MIXED_TOML.replace(*change, 1)
    assert text != _MIXED_TOML
    with pytest.raises(ScenarioError, match=key) as e:
        prepare(parse(text, "m.toml"))
    assert "\n" not in str(e.value)


def test_work_needing_a_family_the_floor_lacks_is_refused() -> None:
    text = SMALL_TOML.replace("[[services]]", '[training.eval]\nfamily = "gpu"\n\n[[services]]')
    with pytest.raises(ScenarioError, match=r"training\.eval\.family"):
        parse(text, "f.toml")
    text = _MIXED_TOML + '\n[[services]]\nname = "chat"\nsystem = "hgx-b200"\n'
    with pytest.raises(ScenarioError, match=r"services\[0\]\.system"):
        parse(text, "f.toml")


def test_job_ids_are_unique_across_the_floor() -> None:
    f = Hall(_mixed(small_params())).advance(240)
    ids = f["jobs"]["job_id"]
    assert len(ids) > 10 and len(set(ids.tolist())) == len(ids)
    assert set(f["jobs"]["system"]) == {"trn3-gen2", "gb300-nvl72"}


def test_events_target_the_floor_numbering() -> None:
    """UltraServer 3 of the floor is the second GB300 rack (2 Trn3 first): failing it takes 72
    chips of the GB300 pool down."""
    p = _mixed(
        small_params(services=(), training=dataclasses.replace(TrainingParams(), arrivals_per_day=0.0))
    )
    sim = Hall(p)
    sim.inject("fail_ultraserver", "3", 0, 3600)
    f = sim.advance(2)
    assert f["events"]["target"] == ["ultraserver:3"]
    assert int(f["system_ts"]["chips_failed"][-1]) == 72  # the GB300 row of the last step
    assert int(f["system_ts"]["chips_failed"][-2]) == 0
    assert int(f["failures"]["target_id"][0]) == 3
    with pytest.raises(ValueError, match="ultraserver 5 out of range"):
        sim.inject("fail_ultraserver", "5")
        sim.advance(1)


def test_job_class_family_defaults() -> None:
    cls = TrainingParams().job_class("pretrain")
    assert isinstance(cls, JobClassParams) and cls.family == "any" and cls.system == ""


def test_per_system_kpis_add_up_to_the_floor_and_price_each_system(tmp_path: Any) -> None:
    """A mixed run through the writer: the systems' costs, energy and work add up to the floor's
    whole-run figures, shares add up to 1, and each system's capital is its own TCO rate x time."""
    import duckdb

    from scenarios.runner import run
    from storage.kpis import run_kpis

    toml = _MIXED_TOML + '\n[training]\narrivals_per_day = 400\n\n[[services]]\nname = "chat"\nreplicas = 2\n'
    scen = parse(toml, "m.toml")
    out = tmp_path / "m.duckdb"
    run(scen, toml, out, duration_s=4 * 3600)
    con = duckdb.connect(str(out), read_only=True)
    (run_id,) = con.sql("SELECT run_id FROM runs").fetchall()[0]
    k = run_kpis(con, run_id)
    (system,) = con.sql("SELECT system FROM runs").fetchall()[0]
    con.close()
    assert system == "trn3-gen2+gb300-nvl72"
    per = k["systems"]
    assert list(per) == ["trn3-gen2", "gb300-nvl72"]
    for key in (
        "total_cost_usd",
        "capex_usd",
        "energy_cost_usd",
        "cooling_cost_usd",
        "other_cost_usd",
        "facility_mwh",
        "it_mwh",
        "job_flop",
        "tokens",
        "chip_hours",
    ):
        assert sum(r[key] for r in per.values()) == pytest.approx(k[key], rel=1e-9), key
    # The chat service runs on one system: the floor's all-in $ per M tokens is that system's.
    (host,) = [r for r in per.values() if r["tokens"]]
    assert k["usd_per_mtok_all_in"] == pytest.approx(host["usd_per_mtok_all_in"], rel=1e-9)
    assert sum(r["job_share"] for r in per.values()) == pytest.approx(1.0)
    assert sum(r["token_share"] for r in per.values()) == pytest.approx(1.0)
    p = scen.to_params()
    for pool in p.hall.pools():
        hp = dataclasses.replace(
            p.hall, system=pool.system, accelerator=pool.accelerator, ultraservers=pool.ultraservers, rows=()
        )
        d = Hall(dataclasses.replace(p, hall=hp, services=())).design
        rates = tco.cost_rates(pool.system, pool.ultraservers, d.design_it_w, p.tco)
        assert per[pool.system.key]["capex_usd"] == pytest.approx(rates.capex_usd_per_s * 4 * 3600, rel=1e-9)
        assert per[pool.system.key]["chips"] == pool.ultraservers * pool.system.chips


def test_a_row_cap_lands_on_the_row_of_the_floor_it_names() -> None:
    """Rows are numbered across the floor: the Trn3 UltraServers fill row 0, the GB300 racks rows
    1 and 2. A cap on row 2 slows only that row's chips and holds its IT power to the cap."""
    p = _mixed(small_params(dt_s=60))
    sim = Hall(p)
    sim.advance(120)  # work arrives and starts
    sim.inject("power_cap", "row:2", 50e3, 0)
    f = sim.advance(60)
    ev = [
        (k, t, a)
        for k, t, a in zip(f["events"]["kind"], f["events"]["target"], f["events"]["arg"], strict=True)
        if k == "power_cap"
    ]
    assert ev == [("power_cap", "row:2", "row:2")]
    rows = f["row_ts"]
    row2 = rows["power_w"][rows["row_id"] == 2]
    busy2 = rows["chips_busy"][rows["row_id"] == 2]
    assert busy2[-1] > 0  # the capped row is working: the cap binds
    # Row caps are IT watts: they hold exactly from the step the cap arrives (inside the step).
    assert (row2 <= 50e3 * (1 + 1e-6)).all()
    clk = rows["clock"].reshape(-1, 3)[-1]
    assert clk[2] < 1.0 and clk[0] == 1.0 and clk[1] == 1.0


def test_a_facility_cap_on_a_mixed_floor_binds_both_systems_from_the_step_it_arrives() -> None:
    """The floor's facility cap is one cap for every system under it: injected mid-run, the
    floor's power meets it on the step it arrives (each system slows inside the step to its
    share), within the 0.5 % the plant's lag allows; and the systems share it so that their
    busy chips run at one clock (shares in proportion to IT power would send the lightly
    loaded Trainium3 row, mostly idle power, to its lowest clock)."""
    p = _mixed(small_params(dt_s=60))
    sim = Hall(p)
    f0 = sim.advance(180)["factory_ts"]
    cap = 0.85 * float(f0["facility_power_w"][-1])
    sim.inject("power_cap", "facility", cap, 0)
    f = sim.advance(60)
    fa = f["factory_ts"]
    assert (fa["facility_power_w"] <= cap * 1.005).all()
    assert fa["facility_power_w"].max() >= cap * 0.97  # the cap binds
    rows = f["row_ts"]  # row 0: the Trainium3 UltraServers; rows 1 and 2: the GB300 racks
    clk, busy = rows["clock"].reshape(-1, 3), rows["chips_busy"].reshape(-1, 3)
    # Steps of steady load (every row busy, as busy as the step before) with the cap binding:
    # one clock on both systems. (A job that starts is slowed on its first step, when the
    # shares still follow the step before.)
    steady = (
        np.flatnonzero(
            (busy[1:] > 0).all(axis=1) & (busy[1:] == busy[:-1]).all(axis=1) & (clk[1:] < 0.95).all(axis=1)
        )
        + 1
    )
    assert len(steady) >= 3
    np.testing.assert_allclose(clk[steady, 0], clk[steady, 1], atol=0.03)


def test_pinned_services_run_on_their_systems_and_keep_the_scenario_order() -> None:
    """Two services pinned to different systems: each one's replicas hold chips of its own
    system only, and service_ts keeps the scenario's service order and ids."""
    from twin.spec.params import SchedulerParams, ServiceParams

    svcs = (
        ServiceParams(name="a", replicas=2, mean_requests_per_s=5.0, system="gb300-nvl72"),
        ServiceParams(name="b", replicas=3, mean_requests_per_s=5.0, system="trn3-gen2"),
    )
    idle = dataclasses.replace(TrainingParams(), arrivals_per_day=0.0)
    p = _mixed(small_params(services=svcs, training=idle, scheduler=SchedulerParams(routing="pinned")))
    sim = Hall(p)
    assert sim.svc_pool == [1, 0]
    f = sim.advance(30)
    sv = f["service_ts"]
    assert sv["service"][:4] == ["a", "b", "a", "b"]
    assert sv["service_id"][:4].tolist() == [0, 1, 0, 1]
    assert sv["replicas_running"][-2:].tolist() == [2, 3]
    jobs = f["jobs"]
    on = {
        (n, s) for n, s, k in zip(jobs["name"], jobs["system"], jobs["kind"], strict=True) if k == "inference"
    }
    assert on == {("a", "gb300-nvl72"), ("b", "trn3-gen2")}
    st = f["system_ts"]
    assert st["inference_chips"][-2:].tolist() == [3 * 4, 2 * 4]  # trn3 (b: 3 x 4), gb300 (a: 2 x 4)


def test_a_mixed_floor_is_deterministic() -> None:
    p = _mixed(small_params())
    a, b = Hall(p), Hall(p)
    for _ in range(2):
        _frames_equal(a.advance(90), b.advance(90))


def test_system_summary_view_matches_the_per_system_kpis(tmp_path: Any) -> None:
    import duckdb

    from scenarios.runner import run
    from storage.kpis import per_system

    toml = _MIXED_TOML + "\n[training]\narrivals_per_day = 200\n"
    out = tmp_path / "v.duckdb"
    run(parse(toml, "v.toml"), toml, out, duration_s=2 * 3600)
    con = duckdb.connect(str(out), read_only=True)
    (run_id,) = con.sql("SELECT run_id FROM runs").fetchall()[0]
    view = con.sql("SELECT * FROM system_summary ORDER BY system_id").to_arrow_table().to_pylist()
    per = per_system(con, run_id)
    con.close()
    assert [v["system"] for v in view] == ["trn3-gen2", "gb300-nvl72"]
    for v, r in zip(view, per, strict=True):
        for key in (
            "it_mwh",
            "job_flop",
            "capex_usd",
            "energy_cost_usd",
            "cooling_cost_usd",
            "other_cost_usd",
            "total_cost_usd",
        ):
            assert v[key] == pytest.approx(r[key], rel=1e-9), key


def test_recorded_power_sums_hold_for_the_hall_and_each_system() -> None:
    """Cooling = chillers + pumps + fans and facility = IT + cooling + the chain's losses, in the
    rows recorded for a mixed hall (each system's share and the hall's merged row), under a cap
    that binds and a chiller trip."""
    p = _mixed(small_params(ultraservers=2))
    p = dataclasses.replace(
        p,
        events=(
            ScheduledEvent(600, "power_cap", "facility", 0.5 * Hall(p).design.design_it_w, 1800),
            ScheduledEvent(900, "chiller_trip", "", 1.0, 1200),
        ),
        warmup_s=0,
    )
    f = Hall(p).advance(60)
    rows = f["factory_ts"]
    cooling = rows["chiller_power_w"] + rows["pump_power_w"] + rows["fan_power_w"]
    losses = rows["pdu_loss_w"] + rows["ups_loss_w"] + rows["transformer_loss_w"]
    np.testing.assert_allclose(rows["cooling_power_w"], cooling, rtol=1e-12)
    np.testing.assert_allclose(rows["power_loss_w"], losses, rtol=1e-12)
    np.testing.assert_allclose(rows["facility_power_w"], rows["it_power_w"] + cooling + losses, rtol=1e-12)
    assert (cooling > 0).all() and (losses > 0).all() and np.nanmin(rows["facility_cap_w"]) > 0
    s = f["system_ts"]  # each system's share, and the shares sum to the hall
    np.testing.assert_allclose(
        s["facility_power_w"], s["it_power_w"] + s["cooling_power_w"] + s["power_loss_w"], rtol=1e-12
    )
    for col in ("it_power_w", "cooling_power_w", "facility_power_w"):
        np.testing.assert_allclose(s[col].reshape(-1, 2).sum(axis=1), rows[col], rtol=1e-12)


def test_the_hall_never_assigns_into_its_pools(monkeypatch: pytest.MonkeyPatch) -> None:
    """One state: each pool owns its facility state (clocks, cap, trips, racks) and work state,
    the hall owns the one plant state and the cap's shares, and hands a pool's step its cap and
    share as values. So no attribute of a pool, its facility, its cap or its work state is set
    from ``twin.compose`` outside the pool itself (construction and the steps of a mixed hall
    under a shared cap and a plant fault), and no pool's facility state is another's."""
    from twin.compose.pool import Pool
    from twin.physics.capping import PowerCap
    from twin.physics.facility import Facility
    from twin.work.cluster import Cluster

    writes: list[str] = []
    for cls in (Pool, Facility, PowerCap, Cluster):
        base = cls.__setattr__

        def guard(obj: object, name: str, value: object, base: Any = base) -> None:
            caller = sys._getframe(1).f_code.co_filename.replace("\\", "/")
            if "twin/compose/" in caller and not caller.endswith("/pool.py"):
                writes.append(f"{type(obj).__name__}.{name} from {caller.rsplit('/', 1)[-1]}")
            base(obj, name, value)

        monkeypatch.setattr(cls, "__setattr__", guard)
    p = _mixed(small_params(ultraservers=2))
    cap = 0.5 * Hall(p).design.design_it_w
    p = dataclasses.replace(
        p,
        events=(
            ScheduledEvent(600, "power_cap", "facility", cap, 1800),
            ScheduledEvent(900, "chiller_trip", "", 1.0, 1200),
        ),
        warmup_s=0,
    )
    sim = Hall(p)
    f = sim.advance(40)
    assert writes == []
    assert np.nanmin(f["factory_ts"]["facility_cap_w"]) == cap  # the shared cap was in force
    a, b = (pl.facility for pl in sim.pools)
    for part in ("cap", "trips", "racks", "timeline", "clock", "row_flow_fraction"):
        assert getattr(a, part) is not getattr(b, part), part
    assert a.plant is b.plant is sim.plant_state  # one plant, the hall's
    assert a.owns_plant and not b.owns_plant


def test_a_floor_plan_worked_out_once_builds_the_hall(monkeypatch: pytest.MonkeyPatch) -> None:
    """One plan: the floor plan validation works out (pool parameters, designs, routing facts,
    service pools) is what the hall is built from, not worked out again; the hall it builds
    records what a hall that works out its own plan records; a plan of another floor is refused."""
    from twin.compose import floorplan
    from twin.compose import hall as hall_module

    p = _mixed(small_params(ultraservers=2))
    (fp,) = model.floor_plans(p)
    assert len(fp.pools) == 2 and len(fp.facts) == 2 and len(fp.svc_pool) == len(p.services) > 0
    for k, pp in enumerate(fp.pools):  # each service on the pool the plan gives it, once
        assert pp.services == tuple(s for s, q in zip(p.services, fp.svc_pool, strict=True) if q == k)

    def again(*_: object) -> None:
        raise AssertionError("the floor plan was worked out again")

    monkeypatch.setattr(hall_module, "plan", again)
    monkeypatch.setattr(floorplan, "derive", again)
    sim = model.build(p, (fp,))
    assert [pl.design for pl in sim.pools] == list(fp.designs)
    assert all(pl.design is d for pl, d in zip(sim.pools, fp.designs, strict=True))
    got = sim.advance(20)["factory_ts"]
    monkeypatch.undo()
    want = Hall(p).advance(20)["factory_ts"]
    for col, v in want.items():
        np.testing.assert_array_equal(got[col], v, err_msg=col)
    (other,) = model.floor_plans(_mixed(small_params(ultraservers=2), _rows(3, 3)))
    with pytest.raises(ValueError, match="not the plan of this hall"):
        Hall(p, floor=other)
