"""Oversubscribed power-chain tiers and deployable capacity, on halls solvable by hand.

A tier oversubscribed by r is rated at nameplate IT / (1 + r) and a standing cap holds it there;
``twin plan --maximize`` finds the most UltraServers a fixed feed hosts at a cap-hit share.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from tests.conftest import small_params
from tui.cli import main
from twin.compose.hall import Hall
from twin.physics import design, power
from twin.spec import catalog
from twin.spec.params import (
    FailureParams,
    HallParams,
    PowerChainParams,
    ScheduledEvent,
    SiteParams,
    TrainingParams,
)

CALM = SiteParams(weather_noise_k=0.0, diurnal_amplitude_k=0.0, seasonal_amplitude_k=0.0)

# A Trn3 Gen2 UltraServer by hand (catalog: 144 Trainium3 at 700 W TDP, 140 W idle; 36 servers
# with 500 W hosts idling at 60 %; 4 kW of switches; rectifier (P + 17 W/server) / 0.96).
SYS, ACC = catalog.system("trn3-gen2"), catalog.accelerator("trainium3")
US_DC_FULL = SYS.chips * ACC.tdp_w + SYS.servers * SYS.host_w_per_server + SYS.switch_w  # 122,800 W
US_NAMEPLATE = (US_DC_FULL + 17.0 * SYS.servers) / 0.96  # rack input: 128,554 W
# Busy training at the compute activity a = 0.87 (a job without a model's plan computes all the
# time): chips idle + (TDP - idle) a, hosts linear in a.
A = TrainingParams().compute_activity
US_TRAINING = (
    SYS.chips * (ACC.idle_w + (ACC.tdp_w - ACC.idle_w) * A)
    + SYS.servers * SYS.host_w_per_server * (SYS.host_idle_fraction + (1 - SYS.host_idle_fraction) * A)
    + SYS.switch_w
    + 17.0 * SYS.servers
) / 0.96  # 116,659 W


def test_the_hand_figures_are_the_catalogs() -> None:
    assert US_DC_FULL == pytest.approx(122_800.0)
    assert US_NAMEPLATE == pytest.approx(128_554.17, abs=0.01)
    assert A == 0.87
    assert US_TRAINING == pytest.approx(116_659.17, abs=0.01)


def busy(
    ultraservers: int, per_row: int = 2, events: tuple[ScheduledEvent, ...] = (), **power_kw: object
) -> Hall:
    """A hall with every UltraServer training one 144-chip job: a steady load of US_TRAINING
    each (within the chips' power spread)."""
    p = small_params(
        ultraservers=ultraservers,
        training=TrainingParams(arrivals_per_day=0.0),
        services=(),
        failures=FailureParams(chip_hazard_per_h=0.0),
        site=CALM,
        power=PowerChainParams(**power_kw),  # type: ignore[arg-type]
        events=events,
    )
    p = dataclasses.replace(p, hall=dataclasses.replace(p.hall, ultraservers_per_row=per_row))
    sim = Hall(p)
    for _ in range(ultraservers):
        sim.pool.queue.append(sim.jobs.add("x", "fp8", kind=0, chips=144, params=1e9, tokens=1e15, work=6e25))
    return sim


def test_a_tier_is_rated_at_nameplate_over_one_plus_its_ratio() -> None:
    assert power.tier_rating_w(1.25e6, 0.25) == pytest.approx(1.0e6)
    assert power.tier_rating_w(1.3e6, 0.3) == pytest.approx(1.0e6)
    assert math.isinf(power.tier_rating_w(1.0e6, 0.0))  # rated at nameplate: no standing cap
    # The UPS is sized to the feed's rating: 2N x nameplate DC / (1 + r) / PDU efficiency.
    hall = HallParams(system=SYS, accelerator=ACC, ultraservers=10, ultraservers_per_row=2)
    p = dataclasses.replace(small_params(), hall=hall, power=PowerChainParams(oversubscription=0.25))
    assert design.derive(p).ups_rating_w == pytest.approx(2.0 * 10 * US_DC_FULL / 1.25 / 0.985)


def test_the_feed_cap_holds_the_hall_inside_its_rating_only_when_demand_exceeds_it() -> None:
    n = 3
    free = busy(n).advance(8)["factory_ts"]
    demand = n * US_TRAINING
    np.testing.assert_allclose(free["it_power_w"], demand, rtol=0.005)  # the chips' spread
    assert (free["throttled_chips"] == 0).all()
    # Demand / nameplate = 0.907: a feed oversubscribed by more than 1 / 0.907 - 1 = 10 % binds.
    r_bind = US_NAMEPLATE / US_TRAINING - 1.0
    assert r_bind == pytest.approx(0.1020, abs=1e-4)
    loose = busy(n, oversubscription=0.05).advance(8)["factory_ts"]  # rated 367.3 kW > 350.0 kW
    np.testing.assert_array_equal(loose["it_power_w"], free["it_power_w"])
    assert (loose["throttled_chips"] == 0).all()
    tight = busy(n, oversubscription=0.25).advance(8)["factory_ts"]
    rating = n * US_NAMEPLATE / 1.25  # 308.5 kW
    assert (tight["it_power_w"] <= rating * 1.0005).all()  # held from the first step
    assert (tight["it_power_w"] >= rating * 0.98).all()  # and not throttled more than needed
    assert (tight["throttled_chips"] == n * 144).all()
    assert (tight["mean_clock"] < 1.0).all()


def test_a_cleared_power_cap_does_not_lift_a_tiers_rating() -> None:
    n = 3
    ev = (ScheduledEvent(time_s=0, kind="power_cap", target="facility", value=0.0),)  # 0: cleared
    f = busy(n, events=ev, oversubscription=0.25).advance(6)["factory_ts"]
    assert (f["it_power_w"] <= n * US_NAMEPLATE / 1.25 * 1.0005).all()


def test_each_row_feed_is_held_inside_its_own_rating() -> None:
    # Four UltraServers, two per row; rows rated at 2 x nameplate / 1.25 = 205.7 kW against a
    # demand of 2 x 116.7 = 233.3 kW each.
    fr = busy(4, per_row=2, row_oversubscription=0.25).advance(8)
    u = fr["ultraserver_ts"]
    rating = 2 * US_NAMEPLATE / 1.25
    for t in np.unique(u["time_s"]):
        at = u["time_s"] == t
        rows = np.bincount(u["row_id"][at], weights=u["power_w"][at])
        assert len(rows) == 2
        assert (rows <= rating * 1.0005).all() and (rows >= rating * 0.98).all()
    f = fr["factory_ts"]
    assert (f["throttled_chips"] == 4 * 144).all()


# ---------------------------------------------------------------------- twin plan --maximize
SCENARIO = """
name = "feed"
seed = 7
dt_s = 300
duration_h = 1

[hall]
system = "trn3-gen2"
ultraservers = 2
ultraservers_per_row = 16

[site]
weather_noise_k = 0.0
diurnal_amplitude_k = 0.0
seasonal_amplitude_k = 0.0

[training]
arrivals_per_day = 0
trace = "jobs.csv"

[failures]
chip_hazard_per_h = 0.0
"""


@pytest.fixture
def feed(tmp_path: Path) -> Path:
    """A hall whose UltraServers (up to 12) each train one 144-chip job from the start."""
    rows = "".join("0,144,pretrain,864000\n" for _ in range(12))
    (tmp_path / "jobs.csv").write_text("submit_time_s,chips,kind,duration_s\n" + rows)
    f = tmp_path / "feed.toml"
    f.write_text(SCENARIO)
    return f


def invoke(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


def _plan(scenario: Path, *sets: str) -> dict[str, object]:
    code, out, err = invoke(
        "plan",
        str(scenario),
        "--maximize",
        "hall.ultraservers",
        "--subject-to",
        "cap_hit_share <= 0.01",
        "--range",
        "1:8",
        "-j",
        "1",
        "--json",
        *[a for s in sets for a in ("--set", s)],
    )
    assert code == 0, err
    res: dict[str, object] = json.loads(out)
    return res


def test_plan_finds_the_most_ultraservers_a_fixed_row_feed_hosts(feed: Path) -> None:
    # One row feed rated 4.5 UltraServers of training: 4 fit (459 kW < 517 kW), 5 (574 kW) do not.
    rating = 4.5 * US_TRAINING
    res = _plan(feed, f"power.row_cap_w={rating:.0f}")
    assert res["objective"] == "maximize"
    assert res["answer"] == math.floor(rating / US_TRAINING) == 4
    (case,) = res["cases"]  # type: ignore[misc]
    assert case["binding"] == ["cap_hit_share <= 0.01"]
    assert "binding at 5: cap_hit_share = 1," in case["why"]  # every step capped above the answer


def test_plan_finds_the_most_ultraservers_a_fixed_substation_hosts(feed: Path, tmp_path: Path) -> None:
    """The substation's rating as a standing facility cap: the answer is the largest count whose
    uncapped facility peak stays under it."""
    peaks = {}
    for n in (4, 5):
        out = tmp_path / f"free{n}.duckdb"
        code, text, err = invoke(
            "run", str(feed), "--set", f"hall.ultraservers={n}", "--out", str(out), "--json"
        )
        assert code == 0, err
        peaks[n] = json.loads(text)["peak_facility_mw"] * 1e6
    # Facility power per UltraServer ~ training IT x PUE (1.05-1.2): a step of 120-140 kW.
    assert 1.05 * US_TRAINING < peaks[5] - peaks[4] < 1.2 * US_TRAINING
    cap = 0.5 * (peaks[4] + peaks[5])
    res = _plan(feed, f"power.facility_cap_w={cap:.0f}")
    assert res["answer"] == 4
    (case,) = res["cases"]  # type: ignore[misc]
    assert "binding at 5: cap_hit_share" in case["why"]


def test_plan_takes_one_objective(feed: Path) -> None:
    code, _, err = invoke(
        "plan",
        str(feed),
        "--minimize",
        "hall.ultraservers",
        "--maximize",
        "hall.ultraservers",
        "--subject-to",
        "cap_hit_share <= 0.01",
    )
    assert code == 2 and "--minimize or --maximize" in err
