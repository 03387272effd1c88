"""The work modules' structure: the work phases import the state slices, never the hall that
composes them, so there is no import cycle among them; and none reaches into another object's
private fields."""

from __future__ import annotations

import ast
from pathlib import Path

WORK_DIR = Path(__file__).resolve().parent.parent / "twin" / "work"
WORK = (
    "arrivals",
    "chips",
    "cluster",
    "jobs",
    "joblog",
    "outages",
    "queueing",
    "routing",
    "scheduler",
    "services",
    "serving",
    "workload",
    "workstate",
)


def _tree(name: str) -> ast.Module:
    return ast.parse((WORK_DIR / f"{name}.py").read_text())


def _imports(name: str) -> set[str]:
    """The ``twin.work`` modules ``name`` imports (type-only imports included)."""
    out: set[str] = set()
    for node in ast.walk(_tree(name)):
        if isinstance(node, ast.Import):
            out |= {a.name.removeprefix("twin.work.") for a in node.names if a.name.startswith("twin.work.")}
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "twin.work":
                out |= {a.name for a in node.names}
            elif node.module.startswith("twin.work."):
                out.add(node.module.removeprefix("twin.work."))
    return out


def test_the_work_modules_import_no_cycle_and_only_the_drivers_import_the_hall() -> None:
    graph = {m: _imports(m) & set(WORK) for m in WORK}
    assert not any("cluster" in deps for deps in graph.values())
    done: set[str] = set()

    def visit(m: str, path: tuple[str, ...]) -> None:
        assert m not in path, f"import cycle: {' -> '.join((*path, m))}"
        if m in done:
            return
        for d in graph[m]:
            visit(d, (*path, m))
        done.add(m)

    for m in WORK:
        visit(m, ())


def test_no_work_module_touches_another_objects_private_fields() -> None:
    for m in WORK:
        for node in ast.walk(_tree(m)):
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                owner = node.value
                assert isinstance(owner, ast.Name) and owner.id in ("self", "cls"), (
                    f"twin/work/{m}.py:{node.lineno} reaches into .{node.attr}"
                )
