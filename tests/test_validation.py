"""The validation table's quick subset (``bench/validation.py --fast``): every fast case runs the
product and must land within its tolerance of the published figure. A case the table marks with
a known gap is expected to fail (strictly: once the model closes the gap, this test says so until
the mark is removed). A case added to the table with ``fast = True`` is tested here as it is."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench import validation as V

FAST = [c for c in V.CASES if c.fast]


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[V.Runner]:
    yield V.Runner(Path(tmp_path_factory.mktemp("validation")), progress=False)


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            c, id=c.name, marks=[pytest.mark.xfail(strict=True, reason=c.known_gap)] if c.known_gap else []
        )
        for c in FAST
    ],
)
def test_fast_case_matches_its_published_figure(case: V.Case, runner: V.Runner) -> None:
    out = V.evaluate(case, runner)
    assert not out.problem, out.problem
    assert out.twin is not None and math.isfinite(out.twin)
    pub = case.published
    assert out.passed, (
        f"{case.name}: twin {out.twin:{case.fmt}} vs published {pub.text(case.fmt)} {pub.unit} "
        f"(tolerance {case.tolerance.text(case.fmt)}; {pub.source})"
    )


def _case(lo: float, hi: float, tol: float, relative: bool) -> V.Case:
    return V.Case(
        name="t",
        what="",
        published=V.Published(lo, hi, "-", "hand"),
        tolerance=V.Tolerance(tol, relative, "hand"),
        runs=(),
        read=lambda: 0.0,
        how="",
    )


def test_judge_measures_the_distance_to_the_nearest_published_bound() -> None:
    # A point, relative tolerance: 1.12 vs 1.0 is +12 %, outside ±10 %, inside ±15 %.
    assert V.judge(_case(1.0, 1.0, 0.10, True), 1.12) == (pytest.approx(0.12), False)
    assert V.judge(_case(1.0, 1.0, 0.15, True), 1.12)[1]
    # A range: inside it the error is 0; below it the distance to the lower bound.
    assert V.judge(_case(1.2, 2.3, 0.0, True), 1.45) == (0.0, True)
    assert V.judge(_case(1.2, 2.3, 0.10, True), 1.0) == (pytest.approx(-0.2 / 1.2), False)
    assert V.judge(_case(1.2, 2.3, 0.10, True), 2.5) == (pytest.approx(0.2 / 2.3), True)
    # Absolute tolerance on a one-sided claim (> 0.90): 0.89 misses by 0.01.
    assert V.judge(_case(0.90, math.inf, 0.02, False), 0.89) == (pytest.approx(-0.01), True)
    assert not V.judge(_case(0.90, math.inf, 0.0, False), 0.89)[1]
    assert V.judge(_case(0.90, math.inf, 0.0, False), 5.0) == (0.0, True)


def test_every_case_states_its_source_tolerance_and_reading() -> None:
    names = [c.name for c in V.CASES]
    assert len(names) == len(set(names))
    for c in V.CASES:
        assert c.published.lo <= c.published.hi, c.name
        assert c.published.source and c.tolerance.reason and c.how, c.name
        assert c.tolerance.value >= 0 and c.runs, c.name


def test_an_unknown_case_name_is_one_line_and_exit_code_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert V.main(["--only", "no-such-case"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no-such-case" in err and V.CASES[0].name in err
