"""Power-chain and cooling relations against hand calculations and published figures."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twin import cooling, power
from twin.params import CoolingParams, PowerChainParams


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


def test_chip_power_is_linear_between_idle_and_tdp_and_zero_when_failed() -> None:
    act = np.array([0.0, 0.5, 1.0, 1.0])
    alive = np.array([True, True, True, False])
    p = power.chip_power_w(act, 180.0, 900.0, alive)
    assert p.tolist() == [180.0, 540.0, 900.0, 0.0]


def test_steady_return_temperature_from_heat_balance() -> None:
    # Q = m c_p dT: 100 kW at 1.5 L/min/kW -> 150 L/min = 2.4925 kg/s -> dT = 9.60 K (facts §8.5).
    p = CoolingParams()
    flow = float(cooling.loop_flow_kg_s(100e3, p))
    assert flow == pytest.approx(150 / 60 * 0.997)
    ret = cooling.steady_return_c(30.0, np.array([100e3]), np.array([flow]))
    assert ret[0] - 30.0 == pytest.approx(100e3 / (flow * 4180.0))
    assert ret[0] - 30.0 == pytest.approx(9.6, abs=0.05)


@given(dt=st.integers(1, 100_000), t0=st.floats(0, 80), ss=st.floats(0, 80))
@settings(max_examples=60, deadline=None)
def test_exact_loop_update_is_stable_and_matches_the_analytic_solution(dt: int, t0: float, ss: float) -> None:
    tau = 120.0
    got = cooling.loop_return_step_c(np.array([t0]), np.array([ss]), tau, dt)[0]
    assert got == pytest.approx(ss + (t0 - ss) * math.exp(-dt / tau), abs=1e-9)
    assert min(t0, ss) - 1e-9 <= got <= max(t0, ss) + 1e-9  # never overshoots


def test_loop_update_composes_over_substeps() -> None:
    # Two half steps equal one full step for constant heat: the update is exact, not Euler.
    a = cooling.loop_return_step_c(np.array([30.0]), np.array([40.0]), 90.0, 600)
    b = cooling.loop_return_step_c(
        cooling.loop_return_step_c(np.array([30.0]), np.array([40.0]), 90.0, 300), np.array([40.0]), 90.0, 300
    )
    assert a[0] == pytest.approx(b[0], abs=1e-12)


def test_chiller_cop_by_hand_and_monotone_in_outdoor_temperature() -> None:
    p = CoolingParams()
    # evap 12 °C, outdoor 25 °C -> cond 35 °C: COP = 0.5 * 285.15 / 23 = 6.20
    assert cooling.chiller_cop(12.0, 25.0, p) == pytest.approx(0.5 * 285.15 / 23.0)
    cops = [cooling.chiller_cop(12.0, t, p) for t in range(-10, 46, 5)]
    assert all(a >= b for a, b in itertools.pairwise(cops))
    assert p.cop_min <= min(cops) and max(cops) <= p.cop_max


def test_economizer_fraction_bounds() -> None:
    p = CoolingParams()
    assert cooling.economizer_fraction(30.0, 40.0, 10.0, p) == 1.0  # 16 °C leaving <= 30
    assert cooling.economizer_fraction(30.0, 40.0, 40.0, p) == 0.0  # 46 °C leaving >= 40
    assert cooling.economizer_fraction(30.0, 40.0, 29.0, p) == pytest.approx((40 - 35) / 10)


def test_plant_uses_less_power_in_cold_weather() -> None:
    p = CoolingParams()
    flow = float(cooling.loop_flow_kg_s(2e6, p))
    cold = cooling.plant_power(1.7e6, 0.3e6, 39.0, 0.0, flow, p)
    hot = cooling.plant_power(1.7e6, 0.3e6, 39.0, 38.0, flow, p)
    assert cold.total_w < hot.total_w
    assert cold.free_fraction > hot.free_fraction
    assert 0.0 <= hot.free_fraction <= 1.0


def test_throttle_clock() -> None:
    p = CoolingParams()
    clock = cooling.throttle_clock(np.array([60.0, 90.0, 95.0, 100.0, 130.0]), p)
    assert clock.tolist() == [1.0, 1.0, 0.75, 0.5, 0.5]
