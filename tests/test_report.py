"""twin report: a self-contained HTML page whose plots span exactly the recorded data."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import duckdb
import pytest
from click.testing import CliRunner

from storage.report import PLOTS
from tui.cli import main


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.figures: list[dict[str, Any]] = []
        self.kpis: dict[str, list[str]] = {}
        self.events: dict[str, int] = {}
        self.fetching: list[tuple[str, str]] = []
        self._kpi: str | None = None
        self._cells: list[str] = []
        self._in_td = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        for k in ("src", "href"):
            v = a.get(k)
            if v and not v.startswith("#"):
                self.fetching.append((tag, v))
        if tag == "link" or (tag == "script" and "src" in a):
            self.fetching.append((tag, str(a)))
        if tag == "figure":
            self.figures.append({**a, "svg": 0})
        elif tag == "svg" and self.figures:
            self.figures[-1]["svg"] += 1
        elif tag == "tr" and a.get("data-kpi"):
            self._kpi, self._cells = a["data-kpi"], []
        elif tag == "td" and self._kpi:
            self._in_td = True
            self._cells.append("")
        elif tag == "table" and a.get("data-events") is not None:
            self.events[str(a["data-file"])] = int(str(a["data-events"]))

    def handle_endtag(self, tag: str) -> None:
        if tag == "td":
            self._in_td = False
        elif tag == "tr" and self._kpi:
            self.kpis[self._kpi] = self._cells[1:]
            self._kpi = None

    def handle_data(self, data: str) -> None:
        if self._in_td:
            self._cells[-1] += data


# Independent SQL for each plotted series' range over the whole run, in the column's unit.
_RANGE_SQL = {
    "busy_share": "SELECT min(chips_busy / chips_total), max(chips_busy / chips_total) FROM factory_ts",
    # Running totals of non-negative amounts: the first step's amount, and the sum.
    "cost_usd_cum": "SELECT arg_min(cost_usd, time_s), sum(cost_usd) FROM factory_ts",
    "co2_kg_cum": "SELECT arg_min(co2_kg, time_s), sum(co2_kg) FROM factory_ts",
}


@pytest.fixture
def two_runs(tmp_path: Path, small_run: Path, small_scenario) -> list[Path]:  # type: ignore[no-untyped-def]
    from scenarios.runner import run

    spec, text = small_scenario
    other = tmp_path / "other.duckdb"
    run(spec, text, other, seed=11, duration_s=4 * 3600)
    return [small_run, other]


def test_report_plots_kpis_and_events_match_sql_on_the_files(two_runs: list[Path], tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    png = tmp_path / "png"
    r = CliRunner().invoke(
        main, ["report", *map(str, two_runs), "--out", str(out), "--png", str(png), "--job-events"]
    )
    assert r.exit_code == 0, r.stderr
    page = _Page()
    page.feed(out.read_text(encoding="utf-8"))
    assert page.fetching == []  # self-contained: nothing to fetch
    assert len(page.figures) == len(PLOTS) * 2 and all(f["svg"] == 1 for f in page.figures)
    checked = 0
    for path in two_runs:
        con = duckdb.connect(str(path), read_only=True)
        try:
            figs = {f["data-plot"]: f for f in page.figures if f["data-file"] == str(path)}
            assert sorted(figs) == sorted(p.key for p in PLOTS)
            for plot in PLOTS:
                ranges = json.loads(figs[plot.key]["data-series"])
                for col, _ in plot.series:
                    q = _RANGE_SQL.get(col, f"SELECT min({col}), max({col}) FROM factory_ts")
                    ((lo, hi),) = con.sql(q).fetchall()
                    assert ranges[col]["min"] == pytest.approx(lo, rel=1e-9, abs=1e-12), (path.name, col)
                    assert ranges[col]["max"] == pytest.approx(hi, rel=1e-9, abs=1e-12), (path.name, col)
                    checked += 1
            ((mwh, n_events),) = con.sql(
                "SELECT sum(energy_j) / 3.6e9, (SELECT count(*) FROM events WHERE kind LIKE 'job%') FROM factory_ts"
            ).fetchall()
            assert page.events[str(path)] == n_events
            col = two_runs.index(path)
            assert page.kpis["facility_mwh"][col] == f"{mwh:,.1f}"
        finally:
            con.close()
    assert checked == 2 * sum(len(p.series) for p in PLOTS)
    pngs = sorted(png.glob("*.png"))
    assert len(pngs) == len(PLOTS) * 2
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)


def test_report_bad_input_exits_2_and_writes_nothing(small_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    r = CliRunner().invoke(main, ["report", str(tmp_path / "missing.duckdb"), "--out", str(out)])
    assert r.exit_code == 2 and "no such file" in r.stderr and not out.exists()
    out.write_text("keep")
    r = CliRunner().invoke(main, ["report", str(small_run), "--out", str(out)])
    assert r.exit_code == 2 and "already exists" in r.stderr and out.read_text() == "keep"
    # Nothing but the kept output and the recording (its file and its parts' folder).
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["r.html", small_run.name, small_run.name + ".parts"]
    )
