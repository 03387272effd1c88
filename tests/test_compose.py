"""The composition shared by a hall (system pools) and a campus (halls): numbering across parts,
the event queue, and the merge of the parts' rows by each column's rule (twin.compose.parts)."""

from __future__ import annotations

import numpy as np
import pytest

from twin.compose.parts import EventQueue, Numbering, interleave, merge_rows
from twin.spec import telemetry
from twin.spec.params import ScheduledEvent


def _factory_part(**values: float) -> dict[str, np.ndarray]:
    """One step of a part's factory_ts row: every column 0 unless given."""
    out = {}
    for c in telemetry.TABLES["factory_ts"]:
        if c.name == "run_id":
            continue
        dtype = {"int32": np.int32, "int64": np.int64}.get(c.dtype, np.float64)
        out[c.name] = np.array([values.get(c.name, 0)], dtype=dtype)
    return out


def test_a_hall_row_from_two_pools_follows_each_columns_rule_by_hand() -> None:
    a = _factory_part(
        it_power_w=100.0,
        facility_power_w=130.0,
        chips_busy=10,
        chips_total=40,
        mean_clock=0.5,
        max_chip_temp_c=60.0,
        outdoor_temp_c=21.0,
        activity=0.25,
        inference_power_w=20.0,
        tokens_per_s=4.0,
    )
    b = _factory_part(
        it_power_w=300.0,
        facility_power_w=370.0,
        chips_busy=30,
        chips_total=60,
        mean_clock=0.9,
        max_chip_temp_c=70.0,
        outdoor_temp_c=21.0,
        activity=0.5,
        inference_power_w=0.0,
        tokens_per_s=0.0,
    )
    m = merge_rows("factory_ts", [a, b])
    assert m["it_power_w"][0] == 400.0 and m["chips_busy"][0] == 40  # sums
    assert m["pue"][0] == pytest.approx(500.0 / 400.0)  # ratio of the sums, not a mean of ratios
    assert m["mean_clock"][0] == pytest.approx((0.5 * 10 + 0.9 * 30) / 40)  # weighted by busy chips
    assert m["activity"][0] == pytest.approx((0.25 * 40 + 0.5 * 60) / 100)  # weighted by chips
    assert m["max_chip_temp_c"][0] == 70.0
    assert m["outdoor_temp_c"][0] == 21.0  # the site's, carried by every part
    assert m["energy_per_token_j"][0] == pytest.approx(20.0 / 4.0)
    assert m["chips_busy"].dtype == np.int32  # a sum keeps the column's type


def test_a_campus_adds_its_halls_plants_and_weights_their_temperatures_by_heat() -> None:
    a = _factory_part(
        it_power_w=100.0, chillers_running=2, chiller_load_fraction=0.5, free_cooling_fraction=1.0
    )
    b = _factory_part(
        it_power_w=300.0, chillers_running=1, chiller_load_fraction=0.8, free_cooling_fraction=0.2
    )
    hall = merge_rows("factory_ts", [a, b])
    camp = merge_rows("factory_ts", [a, b], campus=True)
    assert hall["chillers_running"][0] == 2  # a hall's pools share one plant
    assert camp["chillers_running"][0] == 3  # every hall has its own
    assert camp["chiller_load_fraction"][0] == pytest.approx((0.5 * 2 + 0.8 * 1) / 3)
    assert camp["free_cooling_fraction"][0] == pytest.approx((1.0 * 100 + 0.2 * 300) / 400)


def test_every_merge_rule_names_a_known_rule_and_existing_columns() -> None:
    for table, cols in telemetry.TABLES.items():
        names = {c.name for c in cols}
        for c in cols:
            for rule in (c.merge, c.campus):
                if rule in ("", "sum", "same", "max"):
                    continue
                kind, _, arg = rule.partition(":")
                assert kind in ("ratio", "mean"), (table, c.name, rule)
                assert all(x in names for x in arg.split("/")), (table, c.name, rule)


def test_one_part_is_the_whole() -> None:
    a = _factory_part(it_power_w=5.0, facility_power_w=6.0, pue=1.2)
    assert merge_rows("factory_ts", [a]) is a


def test_numbering_locates_and_maps_back_across_parts() -> None:
    num = Numbering({"chip": [288, 144], "server": [8, 4], "ultraserver": [2, 1], "row": [1, 1]})
    assert num.locate("chip", 0) == (0, 0)
    assert num.locate("chip", 287) == (0, 287)
    assert num.locate("chip", 288) == (1, 0)
    assert num.locate("ultraserver", 2) == (1, 0)
    with pytest.raises(ValueError, match=r"chip 432 out of range 0\.\.431"):
        num.locate("chip", 432)
    assert num.target("ultraserver:0", 1) == "ultraserver:2"
    assert num.target("plant", 1) == "plant"
    assert num.arg("fail_chip", "5", 1) == "293"
    assert num.arg("cdu_pump_failure", "0", 1) == "1"
    assert num.arg("power_cap", "row:0", 1) == "row:1"
    assert num.arg("inference_surge", "chat", 1) == "chat"


def test_the_event_queue_hands_out_due_events_in_time_then_arrival_order() -> None:
    q = EventQueue(("power_cap", "chiller_trip"))
    q.push(ScheduledEvent(60, "chiller_trip", "", 1.0, 0), "scenario")
    q.push(ScheduledEvent(0, "power_cap", "facility", 1e6, 0), "scenario")
    q.push(ScheduledEvent(60, "power_cap", "facility", 0.0, 0), "operator")
    assert [ev.time_s for ev, _ in q.due(0)] == [0]
    assert q.due(30) == []
    late = q.due(10**9)
    assert [(ev.kind, src) for ev, src in late] == [("chiller_trip", "scenario"), ("power_cap", "operator")]
    with pytest.raises(ValueError, match="unknown event kind 'fail_rack'"):
        q.push(ScheduledEvent(0, "fail_rack", "", 0.0, 0), "operator")


def test_interleave_is_time_major_with_ids_in_the_whole_numbering() -> None:
    num = Numbering({"chip": [2, 1], "server": [1, 1], "ultraserver": [2, 1], "row": [1, 1]})
    a = {"time_s": np.array([0, 0, 60, 60]), "ultraserver_id": np.array([0, 1, 0, 1], dtype=np.int32)}
    b = {"time_s": np.array([0, 60]), "ultraserver_id": np.array([0, 0], dtype=np.int32)}
    m = interleave([a, b], (("ultraserver_id", "ultraserver"),), num)
    assert m["time_s"].tolist() == [0, 0, 0, 60, 60, 60]
    assert m["ultraserver_id"].tolist() == [0, 1, 2, 0, 1, 2]
