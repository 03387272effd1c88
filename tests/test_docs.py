"""The README and docs/ say what the code does: generated blocks equal what ``bench/docs.py``
makes from the code, the commands and screens they list are the ones the CLI and the console
have, links between them resolve, and the README stays a guide of ~600 lines with its map near
the top. The run blocks' figures are compared with fresh runs only when ``TWIN_DOCS_RUNS=1``
(a few minutes); what those runs build is checked on every run."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from bench import docs as D

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))


class NoRuns(D.Runs):
    """A fact block must not run anything."""

    def __init__(self) -> None:
        super().__init__(Path("/nonexistent"), progress=False)

    def kpis(self, key: D.RunKey) -> dict[str, object]:
        raise AssertionError(f"a fact block ran {key}")


def _text(rel: str) -> str:
    return (ROOT / rel).read_text(encoding="utf-8")


# ---------------------------------------------------------------------- generated blocks


@pytest.mark.parametrize("block", [b for b in D.BLOCKS if b.kind == "fact"], ids=lambda b: b.name)
def test_fact_block_is_what_the_code_gives(block: D.Block) -> None:
    want = block.make(NoRuns()).strip("\n")
    for rel in block.files:
        assert D.body(_text(rel), block, rel) == want, f"{rel}: {block.name} is stale: python bench/docs.py"


@pytest.mark.parametrize("block", [b for b in D.BLOCKS if b.kind == "run"], ids=lambda b: b.name)
def test_run_block_states_what_its_runs_build_today(block: D.Block) -> None:
    """The first line of a run block names what each run builds (hall, chips, hours), worked out
    from today's specs without running: a built-in that grows or a chip that changes makes the
    block stale even before its figures are rerun."""
    assert block.inputs is not None
    for rel in block.files:
        first = D.body(_text(rel), block, rel).splitlines()[0]
        assert first == block.inputs(), f"{rel}: {block.name} was run on another hall: python bench/docs.py"


@pytest.mark.skipif(not os.environ.get("TWIN_DOCS_RUNS"), reason="reruns the docs' runs: TWIN_DOCS_RUNS=1")
def test_run_blocks_match_fresh_runs() -> None:
    stale = D.generate([b for b in D.BLOCKS if b.kind == "run"], check=True, progress=False)
    assert not stale, f"figures drifted from the code: {stale}; python bench/docs.py"


def test_the_generator_rewrites_only_between_its_markers(tmp_path: Path) -> None:
    block = D.Block("x", "fact", ("a.md",), lambda _: "new\nbody", "test")
    text = "head\n<!-- generated: x -->\nold\n<!-- end: x -->\ntail\n"
    assert D.replace(text, block, "new\nbody", "a.md") == (
        "head\n<!-- generated: x -->\nnew\nbody\n<!-- end: x -->\ntail\n"
    )
    for bad in ("head\n", text + "<!-- generated: x -->\n", "<!-- end: x -->\n<!-- generated: x -->\n"):
        with pytest.raises(ValueError, match=r"^a\.md: "):
            D.body(bad, block, "a.md")
    (tmp_path / "a.md").write_text(text, encoding="utf-8")
    assert D.generate([block], root=tmp_path, check=True, progress=False) == ["a.md: x"]
    assert (tmp_path / "a.md").read_text(encoding="utf-8") == text  # --check writes nothing
    D.generate([block], root=tmp_path, progress=False)
    assert D.generate([block], root=tmp_path, check=True, progress=False) == []


def test_every_block_has_its_markers_once() -> None:
    for b in D.BLOCKS:
        for rel in b.files:
            D.find(_text(rel), b, rel)


# ---------------------------------------------------------------------- facts the README states


def test_readme_lists_every_command_of_the_cli() -> None:
    from tui.cli import main

    table = _text("README.md").split("## Commands", 1)[1].split("\n## ", 1)[0]
    missing = [n for n in main.commands if not re.search(rf"^\| `twin {re.escape(n)}\b", table, re.M)]
    assert not missing, f"README's command table has no row for: {missing}"


def test_readme_names_the_console_screens_the_app_has() -> None:
    from tui.widgets.status import SCREENS

    words = "zero one two three four five six seven eight nine ten eleven twelve".split()
    tui = _text("README.md").split("## The TUI", 1)[1].split("\n## ", 1)[0]
    assert tui.lstrip().startswith(f"{words[len(SCREENS)].capitalize()} screens (`F1`–`F{len(SCREENS)}`)")
    rows = re.findall(r"^\| `(F\d+)` \| ([^|]+?) \|", tui, re.M)
    assert rows == [(k.upper(), label) for k, _, label in SCREENS]


def test_the_trainium3_power_the_docs_state_is_the_catalogs() -> None:
    tdp = D._catalog().ACCELERATORS["trainium3"].tdp_w
    for path in [README, *DOCS]:
        for m in re.finditer(r"Trainium3 (?:at|of|draws) ([\d,]+) W\b", path.read_text(encoding="utf-8")):
            assert float(m.group(1).replace(",", "")) == tdp, (
                f"{path.name}: {m.group(0)!r}, catalog {tdp:g} W"
            )


def test_the_quick_start_is_the_two_commands_ci_runs() -> None:
    readme = _text("README.md")
    quick = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert "pip install -e . && twin " in quick
    assert "pip install -e '.[test]' && pytest " in quick
    ci = [ln.strip() for ln in _text(".ci/run").splitlines() if ln.strip() and not ln.startswith("#")]
    assert ci[-1] == "pytest", "CI's last command must be the README's test command"


def test_readme_is_a_guide_with_its_map_near_the_top() -> None:
    lines = _text("README.md").splitlines()
    assert len(lines) <= 600, f"README.md has {len(lines)} lines; move depth to docs/"
    top = "\n".join(lines[:80])
    assert "## Architecture" in top
    for room in (
        "spec/",
        "physics/",
        "work/",
        "compose/",
        "storage/",
        "scenarios/",
        "tui/console/",
        "tui/cli/",
    ):
        assert room in top, f"the architecture map in the first 80 lines lacks {room}"


# ---------------------------------------------------------------------- links


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    s = re.sub(r"[`*_]", "", heading.strip().lower())
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    return {slug(h) for h in re.findall(r"^#{1,6} (.+)$", text, re.M)}


def broken_links(path: Path) -> list[str]:
    """Relative links of a Markdown file whose file or heading does not exist."""
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    bad = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"^[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists():
            bad.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(target)
    return bad


def test_the_link_check_finds_a_missing_file_and_a_missing_heading(tmp_path: Path) -> None:
    (tmp_path / "b.md").write_text("# B\n## Two words, and `code`\n", encoding="utf-8")
    a = tmp_path / "a.md"
    a.write_text(
        "[ok](b.md) [ok](b.md#two-words-and-code) [ok](#a) [web](https://x.org/y)\n"
        "# A\n[no file](c.md) [no heading](b.md#three) [no local](#b)\n```\n[in code](z.md)\n```\n",
        encoding="utf-8",
    )
    assert broken_links(a) == ["c.md", "b.md#three", "#b"]


@pytest.mark.parametrize("path", [README, ROOT / "CHANGELOG.md", *DOCS], ids=lambda p: p.name)
def test_relative_links_resolve(path: Path) -> None:
    assert not broken_links(path), f"{path.name}: broken links {broken_links(path)}"


def test_the_docs_folder_holds_the_guides_the_readme_points_to() -> None:
    names = {p.name for p in DOCS}
    assert {"model.md", "scenario-keys.md", "telemetry.md", "performance.md", "development.md"} <= names
