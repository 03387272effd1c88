"""Chip-to-chip spread: each chip draws g times the nominal chip's power at its load and runs its
junction h R P above its coolant, g and h fixed per chip for a run and drawn once from the run's
own stream (``twin.spec.rng.chip_spread``), so hot spots exist and stay where they are."""

from __future__ import annotations

import numpy as np
import pytest

from tests.test_facility import busy_hall
from twin.physics import capping
from twin.spec import rng


def test_the_spread_is_drawn_once_per_seed_with_its_stated_distribution() -> None:
    a = busy_hall().pool.facility.chips
    b = busy_hall().pool.facility.chips
    np.testing.assert_array_equal(a.p_scale, b.p_scale)  # the same seed, the same chips
    np.testing.assert_array_equal(a.r_scale, b.r_scale)
    other = busy_hall(seed=8).pool.facility.chips
    assert not np.array_equal(a.p_scale, other.p_scale)
    # N(1, sigma) clipped to +-3 sigma: sigma 2.5 % for power, 5 % for the resistance (288
    # chips: the sample's standard deviation within 25 % of sigma).
    for x, sigma in ((a.p_scale, 0.025), (a.r_scale, 0.05)):
        assert np.abs(x - 1).max() <= 3 * sigma + 1e-12
        assert x.mean() == pytest.approx(1.0, abs=3 * sigma / np.sqrt(len(x)) * 2)
        assert x.std() == pytest.approx(sigma, rel=0.25)
    assert not a.p_scale.flags.writeable and not a.r_scale.flags.writeable


def test_the_spread_leaves_every_other_stream_as_it_was() -> None:
    """The spread is the root's child 5: the weather and the work streams draw as before."""
    s = rng.streams(7)
    root = np.random.SeedSequence(7).spawn(5)
    assert s.weather.random() == np.random.default_rng(root[0]).random()
    work = [np.random.default_rng(c) for c in root[4].spawn(4)]
    assert s.failures.random() == work[2].random()
    assert rng.chip_spread(7).random() != np.random.default_rng(root[0]).random()


def test_hot_spots_exist_and_persist() -> None:
    """Two UltraServers, every chip at the same load: their hottest junctions differ, and each
    one's hottest chip is the chip with the largest h g, step after step (the Floor's hot
    spots), h g times the nominal chip's junction rise above the coolant."""
    sim = busy_hall()
    sim.advance(10)
    ch = sim.pool.facility.chips
    hottest = []
    for _ in range(3):
        sim.advance(5)
        tj = sim.pool.chip_tj.reshape(2, -1)
        hottest.append(tj.argmax(axis=1))
    assert (hottest[0] == hottest[1]).all() and (hottest[1] == hottest[2]).all()
    busy = sim.pool.chip_activity.reshape(2, -1) > 0
    hg = np.where(busy, ch.hg.reshape(2, -1), 0.0)
    np.testing.assert_array_equal(hottest[-1], hg.argmax(axis=1))
    u = sim.advance(1)["ultraserver_ts"]
    assert u["max_chip_temp_c"][0] != u["max_chip_temp_c"][1]
    tj = sim.pool.chip_tj.reshape(2, -1)
    assert float(tj.max() - tj[busy].min()) > 2.0  # K: a spread the Floor can show


def test_without_spread_every_chip_is_the_nominal_chip(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(capping, "CHIP_POWER_SPREAD", 0.0)
    monkeypatch.setattr(capping, "COLD_PLATE_R_SPREAD", 0.0)
    sim = busy_hall()
    ch = sim.pool.facility.chips
    assert (ch.p_scale == 1.0).all() and (ch.r_scale == 1.0).all()
    u = sim.advance(10)["ultraserver_ts"]
    last = u["time_s"] == u["time_s"].max()
    assert u["max_chip_temp_c"][last][0] == u["max_chip_temp_c"][last][1]
