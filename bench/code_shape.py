"""The shape of the code, for before/after figures: import circles between modules, long classes
and functions, and the size of every model module.

    python bench/code_shape.py              # this checkout
    python bench/code_shape.py --root DIR   # another checkout (e.g. an exported older commit)

Everything is read with ``ast`` from the files under ``twin/``, ``storage/``, ``scenarios/``,
``tui/`` and ``bench/``; nothing is imported. An import inside a function or under ``if
TYPE_CHECKING`` counts like any other; in ``bench/`` (scripts run with their folder on
``sys.path``) ``import scale_measure`` is the sibling ``bench.scale_measure``.
``tests/test_architecture.py`` gates the import graph built here (layers and circles) and the size
limits below (``long_modules``, ``long_definitions``) over the product packages.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

# The folders read, each a package (``bench/`` is a folder of scripts).
PACKAGES = ("twin", "storage", "scenarios", "tui", "bench")
# Lower layers first: a module may import its own layer and the ones before it. Inside ``twin``
# the four rooms are layers of their own (each room's ``__init__`` says what it holds); ``twin``
# itself (its ``__init__``) sits with the lowest. ``bench`` may import anything in the product,
# and nothing in the product imports it.
ROOMS = ("twin.spec", "twin.physics", "twin.work", "twin.compose")
LAYERS = (*ROOMS, "storage", "scenarios", "tui", "bench")
PRODUCT = ("twin", "storage", "scenarios", "tui")  # the size limits' scope
SCRIPTS = ("bench",)  # folders whose modules import their siblings by bare name
CLASS_MAX_LINES = 400
FUNCTION_MAX_LINES = 60
MODULE_MAX_LINES = 500  # every product module, except a table of facts (``fact_table``)
# A module that is only a table of facts (one entry per key, each with its source) may be longer;
# its docstring's first line says so as its subject: "The scenario fact table: ...", "A table of
# facts ..." (a module that merely mentions a fact table, "models generated from the fact table",
# is not one).
FACT_TABLE = re.compile(r"^(?:the|a)\s+(?:[\w-]+\s+){0,3}?(?:fact table|table of facts)\b", re.IGNORECASE)

ROOT = Path(__file__).resolve().parent.parent


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Module name -> file, for every ``.py`` file under the packages read."""
    out: dict[str, Path] = {}
    for pkg in PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _imported(name: str, node: ast.Import | ast.ImportFrom, is_package: bool) -> list[str]:
    """The absolute module names an import statement of module ``name`` refers to (each
    candidate; the caller keeps the ones that are project modules)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level:
        package = name.split(".") if is_package else name.split(".")[:-1]
        keep = len(package) - (node.level - 1)
        if keep <= 0:
            return []
        base = ".".join(package[:keep] + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    return [base, *(f"{base}.{a.name}" for a in node.names)]


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the project modules it imports (anywhere in its body)."""
    mods = modules(root)
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for name, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        folder = name.split(".")[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                for target in _imported(name, node, is_package):
                    if (
                        folder in SCRIPTS
                        and target not in mods
                        and (isinstance(node, ast.Import) or not node.level)
                    ):
                        target = f"{folder}.{target}"  # a sibling script, by bare name
                    if target in mods and target != name:
                        graph[name].add(target)
    return graph


def circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The import circles: strongly connected components of more than one module (Tarjan,
    iterative), sorted by their first module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = set()
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.add(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        found.append(frozenset(comp))
    return sorted(found, key=lambda c: sorted(c))


def layer(module: str) -> int | None:
    """The index in ``LAYERS`` of the layer ``module`` belongs to (the longest that names it),
    or None for a module in none (a ``twin`` module outside the rooms)."""
    if module == "twin":
        return 0
    found = [i for i, name in enumerate(LAYERS) if module == name or module.startswith(name + ".")]
    return max(found, key=lambda i: len(LAYERS[i])) if found else None


def unplaced(mods: dict[str, Path] | dict[str, set[str]]) -> list[str]:
    """The modules in no layer."""
    return sorted(m for m in mods if layer(m) is None)


def upward_imports(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(module, imported module) pairs where a module imports a higher layer."""
    out = []
    for m, deps in graph.items():
        here = layer(m)
        out += [(m, d) for d in deps if here is not None and (layer(d) or 0) > here]
    return sorted(out)


def floors(graph: dict[str, set[str]], within: str) -> tuple[int, int]:
    """(import floors, arrows) among the modules under ``within``, packages' ``__init__`` left out
    (``from twin.spec import params`` is one arrow, to ``twin.spec.params``): the arrows between
    them, and the longest chain of imports counted in modules (a module importing none of them is
    floor 1, one importing only floor-1 modules floor 2, ...). Needs no circle among them."""
    packages = {m.rsplit(".", 1)[0] for m in graph if "." in m}
    sub = {
        m: {d for d in deps if d.split(".")[0] == within and d not in packages}
        for m, deps in graph.items()
        if m.split(".")[0] == within and m not in packages
    }
    floor: dict[str, int] = {}

    def up(m: str) -> int:
        if m not in floor:
            floor[m] = 0  # (a circle would read 0 here instead of looping)
            floor[m] = 1 + max((up(d) for d in sub[m]), default=0)
        return floor[m]

    return max((up(m) for m in sub), default=0), sum(len(d) for d in sub.values())


def long_definitions(root: Path = ROOT) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """(classes over CLASS_MAX_LINES, functions and methods over FUNCTION_MAX_LINES) in the product
    packages, each as
    (``module:Qualified.name``, lines from its ``class``/``def`` line to its last line)."""
    classes: list[tuple[str, int]] = []
    functions: list[tuple[str, int]] = []

    def visit(node: ast.AST, module: str, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                qual = f"{prefix}{child.name}"
                lines = (child.end_lineno or child.lineno) - child.lineno + 1
                if isinstance(child, ast.ClassDef):
                    if lines > CLASS_MAX_LINES:
                        classes.append((f"{module}:{qual}", lines))
                elif lines > FUNCTION_MAX_LINES:
                    functions.append((f"{module}:{qual}", lines))
                visit(child, module, f"{qual}.")
            else:
                visit(child, module, prefix)

    for name, path in product_modules(root).items():
        visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)), name, "")
    return classes, functions


def line_count(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def fact_table(path: Path) -> bool:
    """Whether the module at ``path`` declares itself a table of facts: the first line of its
    docstring matches ``FACT_TABLE``."""
    doc = (ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))) or "").strip()
    return bool(doc) and FACT_TABLE.match(doc.splitlines()[0]) is not None


def product_modules(root: Path = ROOT) -> dict[str, Path]:
    """The modules of the product packages (``PRODUCT``), name -> file."""
    return {m: p for m, p in modules(root).items() if m.split(".")[0] in PRODUCT}


def fact_tables(root: Path = ROOT) -> list[str]:
    """The product modules exempt from ``MODULE_MAX_LINES`` as tables of facts."""
    return sorted(m for m, p in product_modules(root).items() if fact_table(p))


def long_modules(root: Path = ROOT) -> list[tuple[str, int]]:
    """The product modules over ``MODULE_MAX_LINES`` lines that are not tables of facts, as
    (module, lines), longest first."""
    mods = product_modules(root)
    sizes = {m: line_count(p) for m, p in mods.items()}
    big = [(m, n) for m, n in sizes.items() if n > MODULE_MAX_LINES and not fact_table(mods[m])]
    return sorted(big, key=lambda x: (-x[1], x[0]))


def report(root: Path = ROOT) -> str:
    mods = modules(root)
    graph = import_graph(root)
    out: list[str] = []
    found = circles(graph)
    out.append(f"import circles: {len(found)}")
    out += [f"  [{len(c)}] {' '.join(sorted(c))}" for c in found]
    up = upward_imports(graph)
    out.append(f"imports of a higher layer ({' < '.join(LAYERS)}): {len(up)}")
    out += [f"  {m} -> {d}" for m, d in up]
    lost = unplaced(mods)
    out.append(f"modules in no layer: {len(lost)}")
    out += [f"  {m}" for m in lost]
    for pkg in PACKAGES:
        n_floors, arrows = floors(graph, pkg)
        out.append(f"{pkg}/: {n_floors} import floors, {arrows} arrows between its modules")
    classes, functions = long_definitions(root)
    out.append(f"classes over {CLASS_MAX_LINES} lines: {len(classes)}")
    out += [f"  {n:5d}  {q}" for q, n in sorted(classes, key=lambda x: (-x[1], x[0]))]
    out.append(f"functions over {FUNCTION_MAX_LINES} lines: {len(functions)}")
    out += [f"  {n:5d}  {q}" for q, n in sorted(functions, key=lambda x: (-x[1], x[0]))]
    big = long_modules(root)
    exempt = ", ".join(fact_tables(root)) or "none"
    out.append(
        f"product modules over {MODULE_MAX_LINES} lines: {len(big)} (tables of facts exempt: {exempt})"
    )
    out += [f"  {n:5d}  {m}" for m, n in big]
    model = {m: line_count(p) for m, p in mods.items() if m.split(".")[0] == "twin"}
    out.append("twin/ modules (lines):")
    out += [f"  {n:5d}  {m}" for m, n in sorted(model.items())]
    out.append(f"  {sum(model.values()):5d}  total of {len(model)} twin/ modules")
    out.append("lines per package:")
    for pkg in (*ROOMS, *PACKAGES):
        counts = [line_count(p) for m, p in mods.items() if m == pkg or m.startswith(pkg + ".")]
        out.append(f"  {sum(counts):6d}  {pkg.replace('.', '/')}/ ({len(counts)} modules)")
    out.append(f"  {sum(line_count(p) for p in mods.values()):6d}  total ({len(mods)} modules)")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=ROOT, help="checkout to measure (default: this one)")
    args = ap.parse_args(argv)
    print(report(args.root.resolve()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
