"""The power-chain and cooling relations the step calls (``twin.physics.power``, ``twin.physics.cooling``), against
hand calculations, published figures and conservation laws."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twin.physics import capping, cooling, power
from twin.spec.params import CoolingParams, PowerChainParams
from twin.work.chips import Load


@pytest.mark.parametrize(("load", "eta"), [(0.25, 0.936), (0.5, 0.952), (1.0, 0.958)])
def test_ups_efficiency_curve_matches_the_fact_sheet(load: float, eta: float) -> None:
    # facts §8.3 (Schneider WP108 shape): ~93.6 % @25 %, 95.2 % @50 %, 95.8 % @100 % load.
    p = PowerChainParams()
    rating = 1e6
    out = load * rating
    efficiency = out / (out + power.ups_loss_w(out, rating, p))
    assert efficiency == pytest.approx(eta, abs=0.0015)


def test_chain_losses_by_hand() -> None:
    p = PowerChainParams()
    it, cool, rating = 1_000_000.0, 100_000.0, 4_000_000.0
    losses = power.chain_losses(it, cool, rating, p)
    pdu_in = it / 0.985
    x = pdu_in / rating
    ups = rating * (p.ups_a + p.ups_b * x + p.ups_c * x * x)
    tx_out = pdu_in + ups + cool
    assert losses.pdu_w == pytest.approx(pdu_in - it)
    assert losses.ups_w == pytest.approx(ups)
    assert losses.transformer_w == pytest.approx(tx_out / 0.99 - tx_out)


def test_chip_power_is_linear_in_utilisation_cubic_in_clock_and_zero_when_unpowered() -> None:
    # P = P_idle + (P_tdp - P_idle) u f^3: idle 180 W, TDP 900 W.
    u = np.array([0.0, 0.5, 1.0, 1.0, 1.0])
    f = np.array([1.0, 1.0, 1.0, 0.5, 1.0])
    alive = np.array([True, True, True, True, False])
    p = power.chip_power_w((900.0 - 180.0) * u, 180.0, f, 3.0, alive)
    assert p.tolist() == [180.0, 540.0, 900.0, 180.0 + 720.0 / 8, 0.0]
    assert power.dvfs_power_factor(0.8, 2.0) == pytest.approx(0.64)


def test_host_and_rectifier_power_by_hand() -> None:
    p = PowerChainParams()
    # Host 2 kW, idle 40 %, half busy: 2000 (0.4 + 0.6 x 0.5) = 1400 W.
    assert power.host_power_w(np.array([0.5]), 2000.0, 0.4)[0] == pytest.approx(1400.0)
    # Rectifier: (10 kW + 4 x 17 W) / 0.96.
    assert power.rectifier_input_w(10_000.0, 4, p) == pytest.approx((10_000.0 + 68.0) / 0.96)


def test_loop_flow_from_the_ocp_rule_of_thumb() -> None:
    # 100 kW at 1.5 L/min/kW -> 150 L/min = 2.4925 kg/s -> dT = 9.60 K at steady state (facts §8.5).
    p = CoolingParams()
    flow = float(cooling.loop_flow_kg_s(100e3, p))
    assert flow == pytest.approx(150 / 60 * 0.997)
    steady = cooling.loop_return_c(np.array([30.0]), 30.0, np.array([100e3]), np.array([flow]), 50.0, 1e7)[0]
    assert steady - 30.0 == pytest.approx(100e3 / (flow * 4180.0))
    assert steady - 30.0 == pytest.approx(9.6, abs=0.05)


@given(
    dt=st.integers(1, 100_000),
    t0=st.floats(0, 80),
    q=st.floats(0, 2e5),
    m=st.floats(0.01, 5.0),
)
@settings(max_examples=60, deadline=None)
def test_loop_update_is_the_analytic_solution_and_never_overshoots(
    dt: int, t0: float, q: float, m: float
) -> None:
    mass = 80.0
    ss = 30.0 + q / (m * 4180.0)
    got = cooling.loop_return_c(np.array([t0]), 30.0, np.array([q]), np.array([m]), mass, dt)[0]
    tau = mass * 4180.0 / (m * 4180.0)
    assert got == pytest.approx(ss + (t0 - ss) * math.exp(-dt / tau), abs=1e-9)
    assert min(t0, ss) - 1e-9 <= got <= max(t0, ss) + 1e-9


def test_loop_update_composes_over_substeps() -> None:
    # Two half steps equal one full step for constant heat: the update is exact, not Euler.
    args = (30.0, np.array([50e3]), np.array([1.5]), 60.0)
    a = cooling.loop_return_c(np.array([35.0]), *args, 600)
    b = cooling.loop_return_c(cooling.loop_return_c(np.array([35.0]), *args, 300), *args, 300)
    assert a[0] == pytest.approx(b[0], abs=1e-12)


def test_stagnant_loop_stores_all_its_heat() -> None:
    # Energy conservation without flow: M c_p dT = Q dt.
    got = cooling.loop_return_c(np.array([40.0]), 30.0, np.array([60e3]), np.array([0.0]), 100.0, 10)[0]
    assert (got - 40.0) * 100.0 * 4180.0 == pytest.approx(60e3 * 10)


def test_mixed_loop_step_is_exact_exponential() -> None:
    assert cooling.mixed_loop_step(20.0, 40.0, 100.0, 100.0) == pytest.approx(40.0 - 20.0 / math.e)
    half = cooling.mixed_loop_step(cooling.mixed_loop_step(20.0, 40.0, 100.0, 50.0), 40.0, 100.0, 50.0)
    assert half == pytest.approx(cooling.mixed_loop_step(20.0, 40.0, 100.0, 100.0))


def test_cold_plate_resistance_follows_dittus_boelter() -> None:
    # R = R_cond + R_conv v^-0.8: design 0.03 K/W, 60 % convective; at half flow the convective
    # part grows by 2^0.8; without flow, natural convection as at 10 % of design velocity.
    r = cooling.cold_plate_r_k_per_w(0.03, 0.6, 0.1, np.array([1.0, 0.5, 0.0]))
    assert r[0] == pytest.approx(0.03)
    assert r[1] == pytest.approx(0.012 + 0.018 * 2**0.8)
    assert r[2] == pytest.approx(0.012 + 0.018 * 10**0.8)


def test_thermal_clock_lands_on_the_throttle_curve() -> None:
    """Junction 55 + 0.05 K/W x (180 W + 720 W f^3): the solved clock satisfies
    f = 1 - 0.5 (T_j(f) - 90) / 10 to the bisection's precision, and the junction is at the
    curve's allowed temperature for that clock."""
    p = CoolingParams()
    base, dyn = np.array([55.0 + 0.05 * 180.0]), np.array([0.05 * 720.0])
    f = cooling.thermal_clock(base, dyn, np.array([1.0]), 3.0, p)[0]
    tj = base[0] + dyn[0] * f**3
    assert 0.5 < f < 0.99
    assert f == pytest.approx(1 - 0.5 * (tj - 90.0) / 10.0, abs=1e-6)
    assert tj == pytest.approx(cooling.allowed_junction_c(np.array([f]), p)[0], abs=1e-4)
    # Cool enough to run at full clock: unchanged; too hot even at 50 %: the floor.
    assert cooling.thermal_clock(np.array([30.0]), np.array([10.0]), np.array([1.0]), 3.0, p)[
        0
    ] == pytest.approx(1.0)
    assert cooling.thermal_clock(np.array([120.0]), np.array([10.0]), np.array([1.0]), 3.0, p)[0] == 0.5


def test_allowed_junction_inverts_the_throttle_curve() -> None:
    p = CoolingParams()
    tj = np.array([90.0, 92.5, 95.0, 99.0])
    f = cooling.throttle_clock(tj, p)
    np.testing.assert_allclose(cooling.allowed_junction_c(f, p), tj)
    assert cooling.allowed_junction_c(np.array([0.5, 0.3]), p).tolist() == [p.shutdown_temp_c] * 2


def test_chiller_part_load_curve_by_hand() -> None:
    # EnergyPlus Chiller:Electric: FFL(1) = 1.00003 (full load), FFL(0.5) = 0.03303 + 0.3426 + 0.07045.
    assert cooling.chiller_part_load_fraction(1.0) == pytest.approx(1.0, abs=1e-4)
    assert cooling.chiller_part_load_fraction(0.5) == pytest.approx(0.03303 + 0.3426 + 0.07045)


def test_chiller_cop_by_hand_and_monotone_in_outdoor_temperature() -> None:
    p = CoolingParams()
    # evap 12 °C, outdoor 25 °C -> cond 35 °C: COP = 0.5 * 285.15 / 23 = 6.20
    assert cooling.chiller_cop(12.0, 25.0, p) == pytest.approx(0.5 * 285.15 / 23.0)
    cops = [cooling.chiller_cop(12.0, t, p) for t in range(-10, 46, 5)]
    assert all(a >= b for a, b in itertools.pairwise(cops))
    assert p.cop_min <= min(cops) and max(cops) <= p.cop_max


def test_throttle_clock() -> None:
    p = CoolingParams()
    clock = cooling.throttle_clock(np.array([60.0, 90.0, 95.0, 100.0, 130.0]), p)
    assert clock.tolist() == [1.0, 1.0, 0.75, 0.5, 0.5]


# ---------------------------------------------------------------- closed forms against their definitions
# The step uses fast closed forms (UltraServer sums at full clock, a junction split into its idle
# and dynamic parts, ...); each must equal the per-chip relation it stands for.

_IDLE, _TDP = 160.0, 1000.0  # W, an accelerator's idle and TDP power
_C, _SPU = 144, 36  # chips and servers per UltraServer (Trn3-like)


def _chips(seed: int, nus: int, dead_share: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(utilisation, clock, alive, UltraServer of each chip) with dead chips at utilisation 0."""
    rng = np.random.default_rng(seed)
    n = nus * _C
    util = rng.random(n) * (rng.random(n) < 0.8)
    clock = rng.uniform(0.5, 1.0, n)
    alive = rng.random(n) >= dead_share
    util[~alive] = 0.0
    return util, clock, alive, np.repeat(np.arange(nus), _C)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 6), st.sampled_from([0.0, 0.05, 1.0]))
def test_ultraserver_chip_power_at_full_clock_is_the_sum_of_its_chips(
    seed: int, nus: int, dead: float
) -> None:
    """Each chip draws g P(u) and runs its junction h R P above its coolant (its fixed spread,
    ``capping.spread``): the UltraServer sums from the sums of g and g u over its powered chips,
    and the hottest junction's h P, equal the per-chip definition."""
    util, _, alive, chip_us = _chips(seed, nus, dead)
    g, h = capping.spread(np.random.default_rng(seed), len(util), 0.025, 0.05)
    dp = _TDP - _IDLE
    per_chip = power.chip_power_w(
        power.dynamic_w(_TDP, _IDLE, util) * g, _IDLE * g, np.ones(len(util)), 3.0, alive
    )
    powered = np.bincount(chip_us, weights=alive * g, minlength=nus)
    gu = np.bincount(chip_us, weights=util * g, minlength=nus)
    us_sum = power.us_chip_power_full_w(powered, _IDLE, dp, gu)
    np.testing.assert_allclose(us_sum, np.bincount(chip_us, weights=per_chip, minlength=nus), rtol=1e-12)
    # The hottest junction's h P: per chip, the same relation (to rounding); its maximum is the
    # maximum of h P over the UltraServer's powered chips.
    dead_idx = np.flatnonzero(~alive)
    hp = power.hottest_chip_power_full_w(h * g, _IDLE, dp, util, dead_idx)
    np.testing.assert_allclose(hp, h * per_chip, rtol=1e-12)
    want = np.full(nus, -np.inf)
    np.maximum.at(want, chip_us, h * per_chip)
    got = np.full(nus, -np.inf)
    np.maximum.at(got, chip_us, hp)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    # Per chip on demand (``ItPower.chip_p``): the power law at f = 1 on powered chips.
    np.testing.assert_allclose(
        power.chip_power_full_w(_IDLE, dp, util, g)[alive], per_chip[alive], rtol=1e-12
    )
    # Identical chips (no spread): exactly the nominal chip's arithmetic.
    np.testing.assert_array_equal(
        power.chip_power_full_w(_IDLE, dp, util, np.ones(len(util)))[alive], (_IDLE + dp * util)[alive]
    )


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 6), st.sampled_from([2.0, 2.5, 3.0]))
def test_junction_split_into_idle_and_dynamic_parts_is_the_junction_relation(
    seed: int, nus: int, k: float
) -> None:
    util, clock, alive, chip_us = _chips(seed, nus, 0.0)
    rng = np.random.default_rng(seed + 1)
    coolant, r = rng.uniform(20.0, 60.0, nus)[chip_us], rng.uniform(0.01, 0.1, nus)[chip_us]
    dyn = power.dynamic_w(_TDP, _IDLE, util)
    want = cooling.junction_c(coolant, r, power.chip_power_w(dyn, _IDLE, clock, k, alive))
    base = cooling.junction_c(coolant, r, _IDLE)
    got = cooling.junction_dyn_c(base, r * dyn, power.dvfs_power_factor(clock, k))
    np.testing.assert_allclose(got, want, rtol=1e-13)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 6))
def test_ultraserver_host_power_from_its_activity_sum_is_the_sum_of_its_servers(seed: int, nus: int) -> None:
    util, clock, _, chip_us = _chips(seed, nus, 0.0)
    act = util * clock
    host_w, idle_fraction = 1200.0, 0.35
    server_mean = act.reshape(nus * _SPU, _C // _SPU).mean(axis=1)
    per_server = power.host_power_w(server_mean, host_w, idle_fraction).reshape(nus, _SPU).sum(axis=1)
    us_act = np.bincount(chip_us, weights=act, minlength=nus)
    got = power.us_host_power_w(us_act, _C, _SPU, host_w, idle_fraction)
    np.testing.assert_allclose(got, per_server, rtol=1e-12)


def test_full_load_ultraserver_power_is_every_chip_at_tdp_and_every_host_at_full() -> None:
    host_w, idle_fraction, switch_w = 1200.0, 0.35, 3000.0
    chips = power.chip_power_w(
        power.dynamic_w(_TDP, _IDLE, np.ones(_C)), _IDLE, np.ones(_C), 3.0, np.ones(_C, dtype=bool)
    )
    hosts = power.host_power_w(np.ones(_SPU), host_w, idle_fraction)
    want = float(chips.sum() + hosts.sum()) + switch_w
    got = power.us_full_load_dc_w(_C, _TDP, _SPU, host_w, switch_w)
    assert got == pytest.approx(want, rel=1e-13)


@settings(max_examples=100, deadline=None)
@given(st.floats(-1.0, 2.0), st.sampled_from([2.0, 2.5, 3.0]))
def test_dvfs_clock_inverts_the_power_factor(x: float, k: float) -> None:
    f = power.dvfs_clock(x, k)
    assert 0.0 <= f <= 1.0
    assert float(power.dvfs_power_factor(f, k)) == pytest.approx(min(max(x, 0.0), 1.0), rel=1e-12, abs=1e-15)
    # NumPy's vectorised power may differ from the scalar one in the last bit.
    assert power.dvfs_clocks(np.array([x]), k)[0] == pytest.approx(f, rel=1e-15)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 6), st.booleans())
def test_shared_cap_basis_is_the_chips_dynamic_rack_power(seed: int, nus: int, full: bool) -> None:
    """``capping.basis`` (from UltraServer activity sums at full clock) against the rack-input
    dynamic power of every chip at its clock and at full clock."""
    from types import SimpleNamespace

    from twin.physics import capping

    util, clock, _, chip_us = _chips(seed, nus, 0.05)
    if full:
        clock = np.ones(len(util))
    g, _h = capping.spread(np.random.default_rng(seed), len(util), 0.025, 0.05)
    acc = SimpleNamespace(tdp_w=_TDP, idle_w=_IDLE)
    fac = SimpleNamespace(acc=acc, pp=PowerChainParams(), cp=CoolingParams())
    us_gact = np.bincount(chip_us, weights=g * util * clock, minlength=nus)
    load = Load.of_chips(util, np.ones(len(util), dtype=bool))
    it, now, at_full = capping.basis(fac, load, clock, full, 1e6, us_gact, g)  # type: ignore[arg-type]
    dyn_rack = power.rack_dynamic_w(power.dynamic_w(_TDP, _IDLE, util) * g, fac.pp)
    k = fac.cp.dvfs_exponent
    assert it == 1e6
    assert at_full == pytest.approx(float(dyn_rack.sum()), rel=1e-12)
    assert now == pytest.approx(float((dyn_rack * power.dvfs_power_factor(clock, k)).sum()), rel=1e-12)
