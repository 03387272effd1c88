"""The import contract between the packages, read from the source with ``ast`` (nothing is
imported): the rooms of ``twin`` (``twin.spec`` < ``twin.physics`` < ``twin.work`` <
``twin.compose``) < ``storage`` < ``scenarios`` < ``tui`` < ``bench``, every ``twin`` module in a
room, no module imports a higher layer, and no import circle anywhere (``bench/`` included); and the
size gates of the product packages (no module over 500 lines unless it is a table of facts, no
class over 400, no function over 60). The graph and the sizes are the ones ``bench/code_shape.py``
reports."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from bench.code_shape import (
    CLASS_MAX_LINES,
    FUNCTION_MAX_LINES,
    LAYERS,
    MODULE_MAX_LINES,
    PACKAGES,
    PRODUCT,
    ROOMS,
    circles,
    fact_table,
    fact_tables,
    floors,
    import_graph,
    long_definitions,
    long_modules,
    modules,
    unplaced,
    upward_imports,
)


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph()


def test_every_package_module_is_read() -> None:
    mods = modules()
    assert LAYERS == (*ROOMS, "storage", "scenarios", "tui", "bench")
    assert ROOMS == ("twin.spec", "twin.physics", "twin.work", "twin.compose")
    assert {m.split(".")[0] for m in mods} == set(PACKAGES)
    # A few modules every layer has, so a wrong root or pattern cannot pass with an empty graph.
    some = {"twin.spec.params", "twin.physics.plant", "twin.work.chips", "twin.compose.sim", "storage.writer"}
    assert some | {"scenarios.spec", "tui.cli", "tui.screens.base", "bench.bench_scale"} <= set(mods)
    assert len(mods) > 60


def test_every_twin_module_lives_in_a_room() -> None:
    assert unplaced(modules()) == []


def test_each_room_says_what_it_holds_and_must_never_import() -> None:
    for room in ROOMS:
        doc = ast.get_docstring(ast.parse(modules()[room].read_text(encoding="utf-8"))) or ""
        assert "never" in doc and len(doc) > 100, room


def test_the_console_core_is_headless() -> None:
    """``tui.console`` runs without a terminal: it never imports Textual or the Textual app's
    modules."""
    ui = ("textual", "tui.app", "tui.screens", "tui.widgets")
    found = []
    for name, path in modules().items():
        if name.startswith("tui.console"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import | ast.ImportFrom):
                    names = (
                        [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                    )
                    found += [
                        (name, n) for n in names if n.split(".")[0] == "textual" or n.startswith(ui[1:])
                    ]
    assert not found, found


def test_no_module_imports_a_higher_layer(graph: dict[str, set[str]]) -> None:
    up = upward_imports(graph)
    assert not up, "imports of a higher layer: " + ", ".join(f"{m} -> {d}" for m, d in up)


def test_no_import_circle(graph: dict[str, set[str]]) -> None:
    found = sorted(" ".join(sorted(c)) for c in circles(graph))
    assert not found, f"import circle(s): {found}"


# ---------------------------------------------------------------------- the size gates
# What is still over a gate, with its size when the gates came in: the list may only shrink. A
# name not listed here over its gate fails; a listed one may not grow, and one back under its gate
# must leave the list (so the list is always the true remaining work).
STILL_OVER: dict[str, int] = {
    "scenarios.execution": 589,
    "scenarios.execution:_execute_local": 92,
    "scenarios.runner": 513,
    "scenarios.runner:Session.__init__": 62,
    "scenarios.runner:run": 61,
    "scenarios.sections": 553,
    "scenarios.spec": 1244,
    "scenarios.spec:Scenario": 421,
    "scenarios.spec:Scenario.to_plan": 61,
    "scenarios.sweep": 940,
}


def _ratchet(kind: str, over: list[tuple[str, int]]) -> None:
    listed = {k: v for k, v in STILL_OVER.items() if kind_of(k) == kind}
    new = [f"{q} {n}" for q, n in over if q not in listed]
    grew = [f"{q} {n} (was {listed[q]})" for q, n in over if q in listed and n > listed[q]]
    done = sorted(set(listed) - {q for q, _ in over})
    assert not new, f"{kind} over the gate: " + ", ".join(new)
    assert not grew, f"{kind} over the gate grew: " + ", ".join(grew)
    assert not done, f"back under the gate, remove from STILL_OVER: {done}"


def kind_of(name: str) -> str:
    """``module`` for a module name, ``definition`` for ``module:Qualified.name``."""
    return "definition" if ":" in name else "module"


def test_no_product_module_over_the_module_gate() -> None:
    _ratchet("module", long_modules())


def test_the_tables_of_facts_are_the_declared_ones() -> None:
    """The exemption is explicit: a new module claiming it shows up here and is a decision."""
    assert fact_tables() == [
        "scenarios.facts",
        "twin.spec.catalog",
        "twin.spec.params",
        "twin.spec.telemetry",
    ]


def test_no_product_class_or_function_over_its_gate() -> None:
    classes, functions = long_definitions()
    _ratchet("definition", classes + functions)


def test_the_ratchet_catches_a_new_a_grown_and_a_finished_offender(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys.modules[__name__], "STILL_OVER", {"a.b": 600, "a.c:f": 70})
    _ratchet("module", [("a.b", 600)])  # as listed
    with pytest.raises(AssertionError, match=r"module over the gate: a\.x 501"):
        _ratchet("module", [("a.b", 600), ("a.x", 501)])
    with pytest.raises(AssertionError, match=r"grew: a\.b 601"):
        _ratchet("module", [("a.b", 601)])
    with pytest.raises(AssertionError, match="remove from STILL_OVER"):
        _ratchet("definition", [])


# ---------------------------------------------------------------------- the checker itself
def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for pkg in PACKAGES:
        (tmp_path / pkg).mkdir()
        if pkg != "bench":  # a folder of scripts
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
            "twin/spec/__init__.py": "",
            "twin/spec/a.py": "import twin.spec.b\n",
            "twin/spec/b.py": "from twin.spec import c\n",
            "twin/spec/c.py": "def f():\n    from twin.spec.a import x\n",  # inside a function
            "storage/s.py": "from .t import y\nimport twin.spec.a\n",  # relative, and down a layer
            "storage/t.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from scenarios import p\n",
            "scenarios/p.py": "import os, json\n",  # not project modules
            "tui/sub/__init__.py": "from . import m\n",
            "tui/sub/m.py": "from ..sub import n\n",
            "tui/sub/n.py": "",
        },
    )
    g = import_graph(root)
    assert g["twin.spec.a"] == {"twin.spec.b"}
    assert g["twin.spec.b"] == {"twin.spec", "twin.spec.c"}
    assert g["twin.spec.c"] == {"twin.spec.a"}
    assert g["storage.s"] == {"storage.t", "twin.spec.a"}
    assert g["storage.t"] == {"scenarios", "scenarios.p"}
    assert g["scenarios.p"] == set()
    assert g["tui.sub"] == {"tui.sub.m"}
    assert g["tui.sub.m"] == {"tui.sub", "tui.sub.n"}
    assert set(circles(g)) == {
        frozenset({"twin.spec.a", "twin.spec.b", "twin.spec.c"}),
        frozenset({"tui.sub", "tui.sub.m"}),
    }
    # Down is allowed (storage.s -> twin.spec.a), up is not (storage.t -> scenarios).
    assert upward_imports(g) == [("storage.t", "scenarios"), ("storage.t", "scenarios.p")]


def _rooms_tree(tmp_path: Path, files: dict[str, str]) -> Path:
    rooms = {f"{r.replace('.', '/')}/__init__.py": "" for r in ROOMS}
    return _tree(tmp_path, {**rooms, **files})


def test_the_checker_catches_an_upward_room_import(tmp_path: Path) -> None:
    """The rooms are layers: physics may read spec, not work; work may read physics; compose
    everything in twin; no room reads storage."""
    root = _rooms_tree(
        tmp_path,
        {
            "twin/spec/params.py": "",
            "twin/physics/power.py": "from twin.spec import params\n",  # down: allowed
            "twin/physics/thermal.py": "from twin.work.chips import Load\n",  # up a room
            "twin/work/chips.py": "from twin.physics import power\n",  # down: allowed
            "twin/work/queue.py": "def f():\n    import twin.compose.hall\n",  # up, in a function
            "twin/compose/hall.py": "from twin.work import chips\nfrom twin.spec.params import x\n",
            "twin/spec/rng.py": "from storage import s\n",  # up a package
            "storage/s.py": "",
        },
    )
    g = import_graph(root)
    assert upward_imports(g) == [
        ("twin.physics.thermal", "twin.work.chips"),
        ("twin.spec.rng", "storage"),
        ("twin.spec.rng", "storage.s"),
        ("twin.work.queue", "twin.compose.hall"),
    ]
    assert circles(g) == []
    # The same tree without the upward arrows passes.
    (root / "twin/physics/thermal.py").write_text("from twin.physics.load import Load\n")
    (root / "twin/physics/load.py").write_text("")
    (root / "twin/work/queue.py").write_text("")
    (root / "twin/spec/rng.py").write_text("")
    assert upward_imports(import_graph(root)) == []


def test_the_checker_places_modules_and_reads_bench_scripts(tmp_path: Path) -> None:
    """A flat ``twin`` module is in no room; bench scripts import siblings by bare name, and a
    circle among them is one; the product importing bench is an upward import."""
    root = _rooms_tree(
        tmp_path,
        {
            "twin/flat.py": "",
            "bench/a.py": "import b\nimport numpy\nfrom twin.spec import x\n",
            "bench/b.py": "def f():\n    import c\n",
            "bench/c.py": "import a as again\n",
            "tui/app.py": "from bench import a\n",
        },
    )
    assert unplaced(modules(root)) == ["twin.flat"]
    g = import_graph(root)
    assert g["bench.a"] == {"bench.b", "twin.spec"}
    assert circles(g) == [frozenset({"bench.a", "bench.b", "bench.c"})]
    assert upward_imports(g) == [("tui.app", "bench.a")]


def test_floors_count_the_longest_chain_and_the_arrows(tmp_path: Path) -> None:
    g = {
        "twin": set(),
        "twin.spec": set(),
        "twin.spec.a": set(),
        "twin.spec.b": {"twin.spec", "twin.spec.a"},  # ``from twin.spec import a``: one arrow
        "twin.work": set(),
        "twin.work.c": {"twin.spec.b", "twin.spec.a", "storage.s"},  # storage is outside twin
        "storage.s": set(),
    }
    assert floors(g, "twin") == (3, 3)


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


def _lines(n: int, indent: str = "") -> str:
    """``n`` lines of statements at ``indent``."""
    return "".join(f"{indent}x{i} = {i}\n" for i in range(n))


def test_the_checker_measures_modules_classes_and_functions(tmp_path: Path) -> None:
    """Each gate at its limit passes and one line over fails, in every product package (not in
    ``bench/``); a method is measured inside its class, a nested function inside its function."""
    fn_at = "def ok():\n" + _lines(FUNCTION_MAX_LINES - 1, "    ")  # def line + body = the limit
    fn_over = "def long():\n" + _lines(FUNCTION_MAX_LINES, "    ")
    method_over = "class C:\n    def m(self):\n" + _lines(FUNCTION_MAX_LINES, "        ")
    nested_over = (
        "def outer():\n    def inner():\n" + _lines(FUNCTION_MAX_LINES, "        ") + "    return inner\n"
    )
    class_at = "class Ok:\n" + _lines(CLASS_MAX_LINES - 1, "    ")
    class_over = "class Big:\n" + _lines(CLASS_MAX_LINES, "    ")
    root = _tree(
        tmp_path,
        {
            "twin/spec/__init__.py": "",
            "twin/spec/at.py": _lines(MODULE_MAX_LINES),
            "twin/spec/over.py": _lines(MODULE_MAX_LINES + 1),
            "storage/f.py": fn_at + fn_over,
            "scenarios/m.py": method_over + nested_over,
            "tui/c.py": class_at,
            "tui/d.py": class_over,  # (apart: together they would pass the module gate)
            "bench/script.py": _lines(MODULE_MAX_LINES + 1) + fn_over + class_over,  # not product
        },
    )
    assert set(PRODUCT) == {"twin", "storage", "scenarios", "tui"}
    assert long_modules(root) == [("twin.spec.over", MODULE_MAX_LINES + 1)]
    classes, functions = long_definitions(root)
    assert classes == [("tui.d:Big", CLASS_MAX_LINES + 1)]
    assert sorted(functions) == [
        ("scenarios.m:C.m", FUNCTION_MAX_LINES + 1),
        ("scenarios.m:outer", FUNCTION_MAX_LINES + 3),  # def + inner's def + body + return
        ("scenarios.m:outer.inner", FUNCTION_MAX_LINES + 1),
        ("storage.f:long", FUNCTION_MAX_LINES + 1),
    ]


def test_the_checker_exempts_only_a_declared_table_of_facts(tmp_path: Path) -> None:
    body = _lines(MODULE_MAX_LINES + 1)
    root = _tree(
        tmp_path,
        {
            "scenarios/facts.py": '"""The scenario fact table: every key, defined once."""\n' + body,
            "scenarios/table.py": '"""A table of facts about chips.\n\nMore."""\n' + body,
            "scenarios/models.py": '"""Section models, generated from the scenario fact table."""\n' + body,
            "tui/later.py": '"""Screens.\n\nThe screen fact table is elsewhere."""\n' + body,  # not line 1
            "storage/plain.py": "# The scenario fact table, in a comment (no docstring)\n" + body,
        },
    )
    assert fact_table(root / "scenarios/facts.py") and fact_table(root / "scenarios/table.py")
    assert fact_tables(root) == ["scenarios.facts", "scenarios.table"]
    assert sorted(m for m, _ in long_modules(root)) == ["scenarios.models", "storage.plain", "tui.later"]
