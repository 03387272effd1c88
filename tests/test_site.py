"""Site and grid: psychrometrics, synthetic climates, weather / price / carbon files, time-of-use
price, cost and CO2 of a run, and bad site files at the command line.

Fixture files are generated in ``tmp_path`` (no dependency on ../shared)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from scenarios import sitefiles
from scenarios.runner import run
from scenarios.spec import CLIMATES, ScenarioError, load, parse
from storage.reader import kpi_summary, open_run_file
from tests.conftest import SMALL_TOML, small_params
from tui.cli import main
from twin.compose.hall import Hall
from twin.physics import site
from twin.spec.params import FailureParams, SiteParams, TouTariff

YEAR = 8760
DAY_S = 86400


# ---------------------------------------------------------------------- fixture files
def write_csv(path: Path, header: Sequence[str], rows: Sequence[Sequence[object]]) -> Path:
    lines = [",".join(header)] + [",".join(str(v) for v in r) for r in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def hourly_csv(path: Path, column: str, values: Callable[[int], float], n: int = YEAR) -> Path:
    return write_csv(path, ["hour", column], [(k, values(k)) for k in range(n)])


def weather_csv(
    path: Path, dry: Callable[[int], float], rh: Callable[[int], float] = lambda k: 0.5, n: int = YEAR
) -> Path:
    return write_csv(path, ["hour", "drybulb_c", "rel_humidity"], [(k, dry(k), rh(k)) for k in range(n)])


def epw_text(rows: Sequence[tuple[float, float, float]], per_hour: int = 1) -> str:
    """An EPW file: 8 header lines, then 35 comma-separated fields per hourly row (dry-bulb,
    dew point and relative humidity in fields 7, 8, 9)."""
    header = [
        "LOCATION,Testville,XX,XXX,synthetic,000000,45.00,7.00,1.0,100.0",
        "DESIGN CONDITIONS,0",
        "TYPICAL/EXTREME PERIODS,0",
        "GROUND TEMPERATURES,0",
        "HOLIDAYS/DAYLIGHT SAVINGS,No,0,0,0",
        "COMMENTS 1,generated for tests",
        "COMMENTS 2,",
        f"DATA PERIODS,1,{per_hour},Data,Sunday, 1/ 1,12/31",
    ]
    start = dt.datetime(1999, 1, 1)
    out = []
    for k, (dry, dew, rh) in enumerate(rows):
        day = start + dt.timedelta(hours=k)
        fields = [1999, day.month, day.day, k % 24 + 1, 60, "?9?9?9?9E0?9?9?9", dry, dew, rh, 101325]
        fields += [0] * (35 - len(fields))
        out.append(",".join(str(f) for f in fields))
    return "\n".join(header + out) + "\n"


def year_of_weather(p: SiteParams, seed: int = 1, dt_s: int = 3600) -> dict[str, np.ndarray]:
    m = site.SiteModel(p, np.random.default_rng(seed))
    conds = [m.step(t, dt_s) for t in range(0, 365 * DAY_S, dt_s)]
    return {
        "dry": np.array([c.drybulb_c for c in conds]),
        "wet": np.array([c.wetbulb_c for c in conds]),
        "rh": np.array([c.rel_humidity for c in conds]),
    }


# ---------------------------------------------------------------------- psychrometrics
def test_wet_bulb_matches_stull_and_the_psychrometric_chart() -> None:
    # Stull (2011), J. Appl. Meteor. Climatol. 50, 2267, worked example: 20 °C, 50 % -> 13.7 °C.
    assert site.wet_bulb_c(20.0, 0.50) == pytest.approx(13.7, abs=0.05)
    # Psychrometric chart at 101.325 kPa (ASHRAE Fundamentals): 30 °C / 50 % -> 22.0 °C,
    # 25 °C / 60 % -> 19.5 °C, 10 °C / 80 % -> 8.3 °C. Stull's fit is good to within ~1 K.
    assert site.wet_bulb_c(30.0, 0.50) == pytest.approx(22.0, abs=0.5)
    assert site.wet_bulb_c(25.0, 0.60) == pytest.approx(19.5, abs=0.3)
    assert site.wet_bulb_c(10.0, 0.80) == pytest.approx(8.3, abs=0.5)


@settings(max_examples=300, deadline=None)
@given(st.floats(-40.0, 55.0), st.floats(0.0, 1.0))
def test_wet_bulb_never_exceeds_dry_bulb(t: float, rh: float) -> None:
    assert site.wet_bulb_c(t, rh) <= t


@pytest.mark.parametrize("t", [-20.0, -5.0, 0.0, 12.0, 25.0, 35.0, 50.0])
def test_wet_bulb_equals_dry_bulb_at_saturation(t: float) -> None:
    # Stull's fit stops at 99 % RH; its error there is a few tenths of a kelvin.
    assert site.wet_bulb_c(t, 1.0) == pytest.approx(t, abs=0.35)


def test_magnus_and_the_psychrometric_formula() -> None:
    # Magnus over water (WMO-No. 8 Annex 4.B): 6.112 hPa at 0 °C; tables: 23.39 hPa at 20 °C.
    assert site.saturation_vapour_pressure_hpa(0.0) == pytest.approx(6.112)
    assert site.saturation_vapour_pressure_hpa(20.0) == pytest.approx(23.39, rel=0.005)
    assert site.rel_humidity_from_dewpoint(20.0, 20.0) == pytest.approx(1.0)
    assert site.rel_humidity_from_dewpoint(20.0, 25.0) == 1.0  # supersaturation is capped
    assert site.rel_humidity_from_dewpoint(20.0, 10.0) == pytest.approx(12.27 / 23.39, abs=0.005)
    # Psychrometer tables at 1013 hPa: dry 20 °C, wet 15 °C -> 59 %; equal bulbs -> saturated.
    assert site.rel_humidity_from_wetbulb(20.0, 15.0) == pytest.approx(0.59, abs=0.02)
    assert site.rel_humidity_from_wetbulb(30.0, 30.0) == pytest.approx(1.0)
    arr = site.rel_humidity_from_wetbulb(np.array([20.0, 30.0]), np.array([15.0, 30.0]))
    assert arr.shape == (2,) and 0.0 <= arr.min() <= arr.max() <= 1.0


# ---------------------------------------------------------------------- synthetic climates
def _preset(name: str, **over: float) -> SiteParams:
    return SiteParams(**{**CLIMATES[name], "start_day_of_year": 1, **over})  # type: ignore[arg-type]


def test_synthetic_year_recovers_mean_seasonal_and_diurnal_swing() -> None:
    p = _preset("temperate")
    w = year_of_weather(p)
    dry = w["dry"]
    assert dry.mean() == pytest.approx(p.mean_temp_c, abs=0.5)
    daily = dry.reshape(365, 24).mean(axis=1)
    day = np.arange(365) + 0.5
    # First annual harmonic of the daily means, by least squares: amplitude and warmest day.
    a = 2 / 365 * np.sum(daily * np.cos(2 * np.pi * day / 365))
    b = 2 / 365 * np.sum(daily * np.sin(2 * np.pi * day / 365))
    assert math.hypot(a, b) == pytest.approx(p.seasonal_amplitude_k, abs=0.6)
    warmest = (math.degrees(math.atan2(b, a)) % 360) / 360 * 365
    assert warmest == pytest.approx(site.WARMEST_DAY_NORTH, abs=10)
    by_hour = dry.reshape(365, 24).mean(axis=0)
    assert int(np.argmax(by_hour)) == 15 and int(np.argmin(by_hour)) == 3
    assert (by_hour[15] - by_hour[3]) / 2 == pytest.approx(p.diurnal_amplitude_k, abs=0.1)
    # Humidity: RH within [0, 1], highest before dawn, lowest in the afternoon.
    rh = w["rh"].reshape(365, 24)
    assert 0.0 < w["rh"].min() and w["rh"].max() <= 1.0
    assert rh[:, 5].mean() > rh[:, 15].mean() + 0.15
    assert np.all(w["wet"] <= dry)


def test_noise_free_synthetic_weather_is_the_formula() -> None:
    p = _preset("temperate", weather_noise_k=0.0, dewpoint_noise_k=0.0)
    m = site.SiteModel(p, np.random.default_rng(0))
    t = 200 * DAY_S + 15 * 3600  # day 201, 15:00
    c = m.step(t, 60)
    season = math.cos(2 * math.pi * (200.625 - 200.0) / 365)
    daily = 12.0 + 9.0 * season
    assert c.drybulb_c == pytest.approx(daily + 5.0)
    dew = daily - (5.0 + 2.5 * season)
    es = site.saturation_vapour_pressure_hpa
    assert c.rel_humidity == pytest.approx(es(dew) / es(daily + 5.0))
    assert c.wetbulb_c == site.wet_bulb_c(c.drybulb_c, c.rel_humidity)


def test_climates_are_ordered_and_southern_seasons_flip() -> None:
    means = {name: year_of_weather(_preset(name))["dry"].mean() for name in CLIMATES}
    assert means["cold"] < means["temperate"] < means["hot"] < means["hot-humid"]
    assert means["hot-dry"] > means["temperate"] + 10
    dry, humid = year_of_weather(_preset("hot-dry")), year_of_weather(_preset("hot-humid"))
    assert dry["rh"].mean() < 0.4 < 0.75 < humid["rh"].mean()
    assert humid["wet"].mean() > dry["wet"].mean() + 5  # muggy beats dry heat for cooling towers
    assert dry["dry"].max() > humid["dry"].max()
    jan, jul = slice(0, 31 * 24), slice(181 * 24, 212 * 24)
    north = year_of_weather(_preset("temperate", latitude_deg=50.0))["dry"]
    south = year_of_weather(_preset("temperate", latitude_deg=-33.9))["dry"]
    assert north[jul].mean() > north[jan].mean() + 12
    assert south[jan].mean() > south[jul].mean() + 12


def test_weather_statistics_do_not_depend_on_the_step() -> None:
    p = _preset("temperate", mean_temp_c=0.0, seasonal_amplitude_k=0.0, diurnal_amplitude_k=0.0)
    for dt_s in (60, 3600):
        m = site.SiteModel(p, np.random.default_rng(3))
        x = np.array([m.step(t, dt_s).drybulb_c for t in range(0, 200 * DAY_S, dt_s)])
        assert x.std() == pytest.approx(p.weather_noise_k, rel=0.25)


def test_climate_presets_through_a_scenario() -> None:
    for name in CLIMATES:
        s = parse(SMALL_TOML + f'\n[site]\nclimate = "{name}"\n', "c.toml").to_params().site
        assert s.mean_temp_c == CLIMATES[name]["mean_temp_c"]
    s = parse(SMALL_TOML + '\n[site]\nclimate = "hot"\nmean_temp_c = 30.5\n', "c.toml").to_params().site
    assert s.mean_temp_c == 30.5 and s.seasonal_amplitude_k == CLIMATES["hot"]["seasonal_amplitude_k"]
    with pytest.raises(ScenarioError, match=r"site\.climate: unknown climate 'tropical'"):
        parse(SMALL_TOML + '\n[site]\nclimate = "tropical"\n', "c.toml")


# ---------------------------------------------------------------------- weather files
def _model(**site_kw: object) -> site.SiteModel:
    return site.SiteModel(SiteParams(**site_kw), np.random.default_rng(0))  # type: ignore[arg-type]


def test_csv_weather_is_interpolated_between_hours_and_wraps(tmp_path: Path) -> None:
    w = sitefiles.read_weather(
        weather_csv(tmp_path / "w.csv", lambda k: k * 0.001, lambda k: 0.2 + (k % 2) * 0.4)
    )
    assert w.wetbulb_c is None and len(w.drybulb_c) == YEAR
    series = {"weather_drybulb_c": w.drybulb_c, "weather_rel_humidity": w.rel_humidity}
    m = _model(start_day_of_year=1, **series)
    c = m.step(0, 60)
    assert (c.drybulb_c, c.rel_humidity) == (0.0, 0.2)
    c = m.step(1800, 60)  # half-way from hour 0 to hour 1
    assert c.drybulb_c == pytest.approx(0.0005) and c.rel_humidity == pytest.approx(0.4)
    assert c.wetbulb_c == site.wet_bulb_c(c.drybulb_c, c.rel_humidity)
    assert m.step(3600 + 900, 60).drybulb_c == pytest.approx(0.001 + 0.25 * 0.001)
    # start_day_of_year: day 32 begins at hour 31 * 24 = 744.
    assert _model(start_day_of_year=32, **series).step(0, 60).drybulb_c == pytest.approx(0.744)
    # Wrap around the year: the last hour (8759) interpolates towards hour 0.
    m = _model(start_day_of_year=365, **series)
    assert m.step(23 * 3600 + 1800, 60).drybulb_c == pytest.approx(0.5 * 8.759)
    assert m.step(DAY_S, 60).drybulb_c == pytest.approx(0.0)
    assert m.step(DAY_S + 7200, 60).drybulb_c == pytest.approx(0.002)


def test_csv_weather_with_wet_bulb_and_timestamps(tmp_path: Path) -> None:
    t0 = dt.datetime(2023, 1, 1)
    rows = [((t0 + dt.timedelta(hours=k)).isoformat(), 30.0, 30.0 - (k % 3)) for k in range(YEAR)]
    w = sitefiles.read_weather(write_csv(tmp_path / "w.csv", ["timestamp", "drybulb_c", "wetbulb_c"], rows))
    assert w.wetbulb_c is not None
    np.testing.assert_array_equal(w.wetbulb_c[:3], [30.0, 29.0, 28.0])
    assert w.rel_humidity[0] == pytest.approx(1.0)
    assert w.rel_humidity[2] == pytest.approx(site.rel_humidity_from_wetbulb(30.0, 28.0))
    m = _model(
        start_day_of_year=1,
        weather_drybulb_c=w.drybulb_c,
        weather_rel_humidity=w.rel_humidity,
        weather_wetbulb_c=w.wetbulb_c,
    )
    m.step(0, 60)
    assert m.step(5400, 60).wetbulb_c == pytest.approx(28.5)  # the file's wet-bulb, interpolated


def test_leap_year_files_have_8784_hours_and_wrap_there(tmp_path: Path) -> None:
    t0 = dt.datetime(2024, 1, 1)
    rows = [((t0 + dt.timedelta(hours=k)).isoformat(), float(k)) for k in range(8784)]
    price = sitefiles.read_price_csv(write_csv(tmp_path / "p.csv", ["timestamp", "price_usd_per_mwh"], rows))
    assert len(price) == 8784
    m = _model(start_day_of_year=366, price_hourly_usd_per_mwh=price)
    assert m.step(23 * 3600, 60).price_usd_per_mwh == 8783.0
    assert m.step(DAY_S, 60).price_usd_per_mwh == 0.0
    with pytest.raises(sitefiles.SiteFileError, match=r"p2\.csv:8761: 8,760 hourly rows, but 2024 has 8,784"):
        sitefiles.read_price_csv(
            write_csv(tmp_path / "p2.csv", ["timestamp", "price_usd_per_mwh"], rows[:YEAR])
        )
    with pytest.raises(ValueError, match="both dry-bulb and relative humidity"):
        _model(weather_drybulb_c=np.zeros(YEAR))


def test_epw_fields_and_hour_convention(tmp_path: Path) -> None:
    rows = [(k * 0.001, -5.0, 50.0 + (k % 2) * 10) for k in range(YEAR)]
    rows[5] = (20.0, 10.0, 999.0)  # relative humidity missing: computed from the dew point
    f = tmp_path / "site.epw"
    f.write_text(epw_text(rows))
    w = sitefiles.read_weather(f)
    # EPW row k covers hour k..k+1 and its value holds at its end, hour k + 1 of the year.
    assert w.drybulb_c[1] == 0.0 and w.drybulb_c[2] == pytest.approx(0.001)
    assert w.drybulb_c[0] == pytest.approx(8.759)  # the last row is 1 January 00:00 again
    assert w.rel_humidity[1] == pytest.approx(0.5) and w.rel_humidity[2] == pytest.approx(0.6)
    assert w.rel_humidity[6] == pytest.approx(site.rel_humidity_from_dewpoint(20.0, 10.0))
    m = _model(start_day_of_year=1, weather_drybulb_c=w.drybulb_c, weather_rel_humidity=w.rel_humidity)
    assert m.step(3600 + 1800, 60).drybulb_c == pytest.approx(0.0005)


def test_scenario_reads_site_files_relative_to_its_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = tmp_path / "scen"
    d.mkdir()
    weather_csv(d / "w.csv", lambda k: 10.0 + (k % 24))
    hourly_csv(d / "p.csv", "price_usd_per_mwh", lambda k: 50.0 + k % 24)
    hourly_csv(d / "c.csv", "carbon_g_per_kwh", lambda k: 300.0)
    text = SMALL_TOML + (
        '\n[site]\nweather_file = "w.csv"\nstart_day_of_year = 1\n'
        '[grid.price]\nkind = "file"\nfile = "p.csv"\n[grid.carbon]\nkind = "file"\nfile = "c.csv"\n'
    )
    (d / "s.toml").write_text(text)
    monkeypatch.chdir(tmp_path)  # not the scenario's directory
    spec, _, _ = load(str(d / "s.toml"))
    sp = spec.to_params().site
    assert sp.weather_drybulb_c is not None and sp.weather_drybulb_c[3] == 13.0
    assert sp.price_hourly_usd_per_mwh is not None and sp.price_hourly_usd_per_mwh[23] == 73.0
    assert sp.carbon_hourly_g_per_kwh is not None
    # Same text, other directory: the files are looked for there.
    with pytest.raises(ScenarioError, match=r"^s\.toml: site\.weather_file: .*w\.csv: no such file$") as e:
        parse(text, "s.toml", base_dir=tmp_path).to_params()
    assert str(tmp_path / "w.csv") in str(e.value)


# ---------------------------------------------------------------------- price and carbon
def test_time_of_use_schedule_by_hand() -> None:
    tou = TouTariff(peak_usd_per_mwh=120.0, offpeak_usd_per_mwh=40.0, peak_start_h=14.0, peak_end_h=20.0)
    h = 3600

    def price(day: int, seconds: int, tariff: TouTariff = tou) -> float:
        return site.tou_price_usd_per_mwh(tariff, day * DAY_S + seconds)

    # The run starts on a Monday: days 0-4 weekdays, 5-6 weekend, day 7 Monday again.
    assert price(0, 14 * h - 1) == 40.0
    assert price(0, 14 * h) == 120.0
    assert price(4, 20 * h - 1) == 120.0
    assert price(4, 20 * h) == 40.0
    assert price(5, 15 * h) == 40.0 and price(6, 15 * h) == 40.0
    assert price(7, 15 * h) == 120.0
    weekend = dataclasses.replace(tou, weekend_peak=True)
    assert price(5, 15 * h, weekend) == 120.0
    night = dataclasses.replace(tou, peak_start_h=22.0, peak_end_h=6.0)
    assert [price(1, x * h, night) for x in (21, 22, 23, 0, 5, 6)] == [40, 120, 120, 120, 120, 40]
    m = _model(price_tou=tou)
    assert (
        m.step(14 * h, 60).price_usd_per_mwh == 120.0
        and m.step(5 * DAY_S + 14 * h, 60).price_usd_per_mwh == 40.0
    )


def test_hourly_price_and_carbon_hold_for_the_hour(tmp_path: Path) -> None:
    price = sitefiles.read_price_csv(hourly_csv(tmp_path / "p.csv", "price_usd_per_mwh", lambda k: k - 10.0))
    carbon = sitefiles.read_carbon_csv(hourly_csv(tmp_path / "c.csv", "carbon_g_per_kwh", lambda k: 2.0 * k))
    m = _model(start_day_of_year=2, price_hourly_usd_per_mwh=price, carbon_hourly_g_per_kwh=carbon)
    c = m.step(3599, 60)  # day 2, hour 0 = hour 24 of the year, still
    assert (c.price_usd_per_mwh, c.carbon_g_per_kwh) == (14.0, 48.0)
    assert m.step(3600, 60).price_usd_per_mwh == 15.0
    assert price[0] == -10.0  # negative wholesale prices are allowed
    assert _model().step(0, 60).price_usd_per_mwh == 75.0  # facts §10 default
    assert _model().step(0, 60).carbon_g_per_kwh == 369.0


def test_flat_price_and_carbon_keys_old_and_new() -> None:
    old = parse(
        SMALL_TOML + "\n[site]\nprice_usd_per_mwh = 90.0\ncarbon_g_per_kwh = 100.0\n", "s"
    ).to_params()
    new = parse(
        SMALL_TOML + "\n[grid.price]\nusd_per_mwh = 90.0\n[grid.carbon]\ng_per_kwh = 100.0\n", "s"
    ).to_params()
    assert (old.site.price_usd_per_mwh, old.site.carbon_g_per_kwh) == (90.0, 100.0)
    assert (new.site.price_usd_per_mwh, new.site.carbon_g_per_kwh) == (90.0, 100.0)
    tou = parse(SMALL_TOML + '\n[grid.price]\nkind = "tou"\npeak_usd_per_mwh = 150\n', "s").to_params().site
    assert tou.price_tou == TouTariff(peak_usd_per_mwh=150.0)


def test_cost_and_co2_of_a_tiny_run_by_hand() -> None:
    tou = TouTariff(peak_usd_per_mwh=200.0, offpeak_usd_per_mwh=50.0, peak_start_h=1.0, peak_end_h=2.0)
    carbon = np.full(YEAR, 400.0)
    carbon[1] = 100.0  # start_day_of_year 1: hour 1 of the run
    p = small_params(
        dt_s=600,
        failures=FailureParams(chip_hazard_per_h=0.0),
        site=SiteParams(start_day_of_year=1, price_tou=tou, carbon_hourly_g_per_kwh=carbon),
    )
    f = Hall(p).advance(18)["factory_ts"]  # three hours
    hours = f["time_s"] // 3600
    price = np.where(hours == 1, 200.0, 50.0)
    intensity = np.where(hours == 1, 100.0, 400.0)
    kwh = f["facility_power_w"] * 600 / 3.6e6
    np.testing.assert_allclose(f["price_usd_per_mwh"], price)
    np.testing.assert_allclose(f["cost_usd"], kwh / 1000 * price, rtol=1e-12)
    np.testing.assert_allclose(f["co2_kg"], kwh * intensity / 1000, rtol=1e-12)
    assert f["cost_usd"].sum() == pytest.approx(float(np.sum(kwh / 1000 * price)), rel=1e-12)
    assert np.all((f["outdoor_rh"] > 0) & (f["outdoor_rh"] <= 1))


def test_run_summary_has_cost_co2_cue_and_humidity(tmp_path: Path) -> None:
    hourly_csv(tmp_path / "p.csv", "price_usd_per_mwh", lambda k: 60.0 + 30.0 * (k % 2))
    text = SMALL_TOML + '\n[site]\nstart_day_of_year = 1\n[grid.price]\nkind = "file"\nfile = "p.csv"\n'
    spec = parse(text, "s.toml", base_dir=tmp_path)
    res = run(spec, text, tmp_path / "r.duckdb", duration_s=3 * 3600)
    con = open_run_file(res.path)
    try:
        rows = con.sql(
            "SELECT time_s, energy_j, it_power_w, facility_power_w, cost_usd, co2_kg, outdoor_rh "
            "FROM factory_ts ORDER BY time_s"
        ).fetchnumpy()
        s = kpi_summary(con, res.run_id)
    finally:
        con.close()
    by_hand = rows["energy_j"] / 3.6e9 * np.where((rows["time_s"] // 3600) % 2 == 1, 90.0, 60.0)
    assert s["cost_usd"] == pytest.approx(float(by_hand.sum()), rel=1e-9)
    it_kwh = float(np.sum(rows["energy_j"] * rows["it_power_w"] / rows["facility_power_w"])) / 3.6e6
    assert s["cue_kg_per_kwh"] == pytest.approx(float(rows["co2_kg"].sum()) / it_kwh, rel=1e-9)
    assert s["cue_kg_per_kwh"] == pytest.approx(s["pue"] * 0.369, rel=1e-9)  # CUE = PUE x CI (flat)
    assert 0 < rows["outdoor_rh"].min() <= rows["outdoor_rh"].max() <= 1


def test_file_weather_runs_are_bit_identical(tmp_path: Path) -> None:
    w = sitefiles.read_weather(weather_csv(tmp_path / "w.csv", lambda k: 5.0 + math.sin(k / 7)))
    sp = SiteParams(weather_drybulb_c=w.drybulb_c, weather_rel_humidity=w.rel_humidity, price_tou=TouTariff())
    a = Hall(small_params(site=sp)).advance(120)["factory_ts"]
    b = Hall(small_params(site=sp)).advance(120)["factory_ts"]
    for col in a:
        np.testing.assert_array_equal(a[col], b[col], err_msg=col)


# ---------------------------------------------------------------------- bad input
def _lines(n: int = YEAR, bad: dict[int, str] | None = None) -> str:
    rows = [f"{k},{10 + k % 24},0.5" for k in range(n)]
    for k, row in (bad or {}).items():
        rows[k] = row
    return "\n".join(["hour,drybulb_c,rel_humidity", *rows]) + "\n"


def _epw(bad: dict[int, tuple[float, float, float]] | None = None, n: int = YEAR, per_hour: int = 1) -> str:
    rows = [(10.0, 5.0, 70.0)] * n
    for k, r in (bad or {}).items():
        rows[k] = r
    return epw_text(rows, per_hour)


def _epw_line(k: int, line: str) -> str:
    lines = _epw().splitlines()
    lines[8 + k] = line
    return "\n".join(lines) + "\n"


W = '\n[site]\nweather_file = "w.csv"\n'
E = '\n[site]\nweather_file = "w.epw"\n'
P = '\n[grid.price]\nkind = "file"\nfile = "p.csv"\n'
C = '\n[grid.carbon]\nkind = "file"\nfile = "c.csv"\n'
PRICE_OK = "hour,price_usd_per_mwh\n" + "".join(f"{k},70\n" for k in range(YEAR))

# (label, scenario additions, {file: text}, needle in the one-line error)
BAD_SITE_CASES = [
    ("missing weather file", W, {}, "w.csv: no such file"),
    (
        "missing column",
        W,
        {"w.csv": _lines().replace("drybulb_c", "temp_c")},
        "w.csv:1: needs a 'drybulb_c' column",
    ),
    (
        "no time column",
        W,
        {"w.csv": _lines().replace("hour,", "hr,")},
        "w.csv:1: needs an 'hour' or 'timestamp'",
    ),
    (
        "non-numeric value",
        W,
        {"w.csv": _lines(bad={3: "3,warm,0.5"})},
        "w.csv:5: drybulb_c: not a number (got 'warm')",
    ),
    ("nan value", W, {"w.csv": _lines(bad={9: "9,nan,0.5"})}, "w.csv:11: drybulb_c: not a finite number"),
    ("too few rows", W, {"w.csv": _lines(n=YEAR - 1)}, "w.csv:8760: 8,759 hourly rows"),
    ("too many rows", W, {"w.csv": _lines(n=YEAR + 30)}, "w.csv:8786: more than 8,784 hourly rows"),
    ("hour gap", W, {"w.csv": _lines(bad={7: "8,10,0.5"})}, "w.csv:9: hour 8, expected 7"),
    ("short row", W, {"w.csv": _lines(bad={2: "2,10"})}, "w.csv:4: 2 fields, the header has 3"),
    (
        "humidity in percent",
        W,
        {"w.csv": _lines(bad={4: "4,10,65"})},
        "w.csv:6: rel_humidity: relative humidity must lie in 0..1 (got 65); give a fraction",
    ),
    (
        "wet above dry",
        W,
        {
            "w.csv": "hour,drybulb_c,wetbulb_c\n"
            + "".join(f"{k},20,{25 if k == 6 else 15}\n" for k in range(YEAR))
        },
        "w.csv:8: wetbulb_c 25 is above drybulb_c 20",
    ),
    ("not an epw", E, {"w.epw": "hello\n"}, "w.epw:1: not an EPW file"),
    ("epw sub-hourly", E, {"w.epw": _epw(per_hour=4)}, "w.epw:8: 4 records per hour"),
    ("epw short row", E, {"w.epw": _epw_line(2, "1999,1,1,3")}, "w.epw:11: 4 fields"),
    (
        "epw missing dry-bulb",
        E,
        {"w.epw": _epw(bad={100: (99.9, 5.0, 70.0)})},
        "w.epw:109: dry-bulb (field 7) is missing",
    ),
    (
        "epw rh and dew missing",
        E,
        {"w.epw": _epw(bad={20: (10.0, 99.9, 999.0)})},
        "w.epw:29: relative humidity (field 9) and dew point (field 8) are both missing",
    ),
    ("epw rows", E, {"w.epw": _epw(n=8000)}, "w.epw:8008: 8,000 hourly rows"),
    ("price not a number", P, {"p.csv": PRICE_OK.replace("\n17,70\n", "\n17,cheap\n")}, "grid.price.file: "),
    (
        "negative carbon",
        C,
        {
            "c.csv": "hour,carbon_g_per_kwh\n"
            + "".join(f"{k},{-1 if k == 40 else 300}\n" for k in range(YEAR))
        },
        "c.csv:42: carbon_g_per_kwh: must not be negative",
    ),
    ("file kind without file", '\n[grid.price]\nkind = "file"\n', {}, 'grid.price: kind = "file" needs file'),
    (
        "key of another kind",
        "\n[grid.price]\npeak_start_h = 12\n",
        {},
        "grid.price: peak_start_h does not apply to kind = 'flat'",
    ),
    ("unknown price kind", '\n[grid.price]\nkind = "spot"\n', {}, "grid.price.kind:"),
    (
        "empty peak window",
        '\n[grid.price]\nkind = "tou"\npeak_start_h = 8\npeak_end_h = 8\n',
        {},
        "no peak hours",
    ),
    (
        "price in two places",
        "\n[site]\nprice_usd_per_mwh = 80\n[grid.price]\nusd_per_mwh = 70\n",
        {},
        "both set the price",
    ),
    (
        "weather file and climate",
        '\n[site]\nclimate = "hot"\nweather_file = "w.csv"\n',
        {"w.csv": _lines()},
        "site: weather_file replaces the synthetic weather; remove climate",
    ),
    ("bad start day", "\n[site]\nstart_day_of_year = 0\n", {}, "site.start_day_of_year:"),
]


@pytest.mark.parametrize(
    ("label", "extra", "files", "needle"), BAD_SITE_CASES, ids=[c[0] for c in BAD_SITE_CASES]
)
def test_bad_site_inputs_exit_2_with_file_and_line_and_write_nothing(
    tmp_path: Path, label: str, extra: str, files: dict[str, str], needle: str
) -> None:
    f = tmp_path / "bad.toml"
    f.write_text(SMALL_TOML + extra)
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    out = tmp_path / "out.duckdb"
    for args in (["run", str(f), "--hours", "1", "--out", str(out)], ["validate", str(f)]):
        r = CliRunner().invoke(main, args, catch_exceptions=False)
        assert r.exit_code == 2, (label, r.stdout, r.stderr)
        err = r.stderr
        assert needle in err, err
        assert "bad.toml" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    if "price not a number" == label:
        assert "p.csv:19: price_usd_per_mwh: not a number (got 'cheap')" in err
    assert not out.exists() and not Path(str(out) + ".wal").exists()
