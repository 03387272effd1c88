"""The import contract between the packages, read from the source with ``ast`` (nothing is
imported): ``twin`` < ``storage`` < ``scenarios`` < ``tui``, no module imports a higher layer, and
no import circle. The graph is the one ``bench/code_shape.py`` reports."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.code_shape import LAYERS, circles, import_graph, modules, upward_imports


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph()


def test_every_package_module_is_read() -> None:
    mods = modules()
    assert {m.split(".")[0] for m in mods} == set(LAYERS)
    # A few modules every layer has, so a wrong root or pattern cannot pass with an empty graph.
    assert {"twin.sim", "storage.writer", "scenarios.spec", "tui.cli", "tui.screens.base"} <= set(mods)
    assert len(mods) > 60


def test_no_module_imports_a_higher_layer(graph: dict[str, set[str]]) -> None:
    up = upward_imports(graph)
    assert not up, "imports of a higher layer: " + ", ".join(f"{m} -> {d}" for m, d in up)


def test_no_import_circle(graph: dict[str, set[str]]) -> None:
    found = sorted(" ".join(sorted(c)) for c in circles(graph))
    assert not found, f"import circle(s): {found}"


# ---------------------------------------------------------------------- the checker itself
def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for pkg in LAYERS:
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return tmp_path


def test_the_checker_sees_every_form_of_import(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "twin/a.py": "import twin.b\n",
            "twin/b.py": "from twin import c\n",
            "twin/c.py": "def f():\n    from twin.a import x\n",  # inside a function
            "storage/s.py": "from .t import y\nimport twin.a\n",  # relative, and down a layer
            "storage/t.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from scenarios import p\n",
            "scenarios/p.py": "import os, json\n",  # not project modules
            "tui/sub/__init__.py": "from . import m\n",
            "tui/sub/m.py": "from ..sub import n\n",
            "tui/sub/n.py": "",
        },
    )
    g = import_graph(root)
    assert g["twin.a"] == {"twin.b"}
    assert g["twin.b"] == {"twin", "twin.c"}
    assert g["twin.c"] == {"twin.a"}
    assert g["storage.s"] == {"storage.t", "twin.a"}
    assert g["storage.t"] == {"scenarios", "scenarios.p"}
    assert g["scenarios.p"] == set()
    assert g["tui.sub"] == {"tui.sub.m"}
    assert g["tui.sub.m"] == {"tui.sub", "tui.sub.n"}
    assert set(circles(g)) == {frozenset({"twin.a", "twin.b", "twin.c"}), frozenset({"tui.sub", "tui.sub.m"})}
    # Down is allowed (storage.s -> twin.a), up is not (storage.t -> scenarios).
    assert upward_imports(g) == [("storage.t", "scenarios"), ("storage.t", "scenarios.p")]


def test_circles_agree_with_a_brute_force_reachability(graph: dict[str, set[str]]) -> None:
    """Two modules are in one circle exactly when each reaches the other."""
    g = graph

    def reach(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for d in g[todo.pop()]:
                if d not in seen:
                    seen.add(d)
                    todo.append(d)
        return seen

    r = {m: reach(m) for m in g}
    brute = {frozenset({m, *(d for d in r[m] if m in r[d])}) for m in g if m in r[m]}
    assert set(circles(g)) == brute
