"""The shape of the code, for before/after figures: import circles between modules, long classes
and functions, and the size of every model module.

    python bench/code_shape.py              # this checkout
    python bench/code_shape.py --root DIR   # another checkout (e.g. an exported older commit)

Everything is read with ``ast`` from the files under ``twin/``, ``storage/``, ``scenarios/`` and
``tui/``; nothing is imported. An import inside a function or under ``if TYPE_CHECKING`` counts
like any other. ``tests/test_architecture.py`` gates the import graph built here (layers and
circles); the size limits below are reported, not enforced.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

# Lower layers first: a module may import its own layer and the ones before it.
LAYERS = ("twin", "storage", "scenarios", "tui")
CLASS_MAX_LINES = 400
FUNCTION_MAX_LINES = 60
MODEL_MODULE_MAX_LINES = 500  # modules of twin/

ROOT = Path(__file__).resolve().parent.parent


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Module name -> file, for every ``.py`` file under the layers' packages."""
    out: dict[str, Path] = {}
    for pkg in LAYERS:
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
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                for target in _imported(name, node, is_package):
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


def layer(module: str) -> int:
    return LAYERS.index(module.split(".")[0])


def upward_imports(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(module, imported module) pairs where a module imports a higher layer."""
    return sorted((m, d) for m, deps in graph.items() for d in deps if layer(d) > layer(m))


def long_definitions(root: Path = ROOT) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """(classes over CLASS_MAX_LINES, functions and methods over FUNCTION_MAX_LINES), each as
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

    for name, path in modules(root).items():
        visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)), name, "")
    return classes, functions


def line_count(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


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
    classes, functions = long_definitions(root)
    out.append(f"classes over {CLASS_MAX_LINES} lines: {len(classes)}")
    out += [f"  {n:5d}  {q}" for q, n in sorted(classes, key=lambda x: (-x[1], x[0]))]
    out.append(f"functions over {FUNCTION_MAX_LINES} lines: {len(functions)}")
    out += [f"  {n:5d}  {q}" for q, n in sorted(functions, key=lambda x: (-x[1], x[0]))]
    model = {m: line_count(p) for m, p in mods.items() if m.split(".")[0] == "twin"}
    big = sorted(((n, m) for m, n in model.items() if n > MODEL_MODULE_MAX_LINES), reverse=True)
    out.append(f"twin/ modules over {MODEL_MODULE_MAX_LINES} lines: {len(big)}")
    out += [f"  {n:5d}  {m}" for n, m in big]
    out.append("twin/ modules (lines):")
    out += [f"  {n:5d}  {m}" for m, n in sorted(model.items())]
    out.append(f"  {sum(model.values()):5d}  total of {len(model)} twin/ modules")
    out.append("lines per package:")
    for pkg in LAYERS:
        counts = [line_count(p) for m, p in mods.items() if m.split(".")[0] == pkg]
        out.append(f"  {sum(counts):6d}  {pkg}/ ({len(counts)} modules)")
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
