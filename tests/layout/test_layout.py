"""The layout says how the parts depend on each other: no import cycle between the top-level
packages and modules of ``falcon_gpu``, and docs/ARCHITECTURE.md names each one.

Every import counts, the lazy ones inside functions and those under ``TYPE_CHECKING`` too: a
cycle that only types close is still two parts that cannot be understood (or moved) apart.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "falcon_gpu"


def _parts() -> list[str]:
    """The top-level packages (``agent``) and modules (``cli``) of falcon_gpu."""
    found = [p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()]
    found += [p.stem for p in PACKAGE.glob("*.py") if p.stem not in ("__init__", "__main__")]
    return sorted(found)


def _part_of(path: Path) -> str:
    return path.relative_to(PACKAGE).parts[0].removesuffix(".py")


def _imported(tree: ast.AST, parts: set[str]) -> Iterator[str]:
    """The parts a module's imports name (``from falcon_gpu import x``: x, where x is a part)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = (
                [node.module] if node.module != "falcon_gpu" else [f"falcon_gpu.{a.name}" for a in node.names]
            )
        else:
            continue
        for name in names:
            dotted = name.split(".")
            if dotted[0] == "falcon_gpu" and len(dotted) > 1 and dotted[1] in parts:
                yield dotted[1]


def import_graph(package: Path = PACKAGE) -> dict[str, dict[str, str]]:
    """part -> {part it imports: one file that does}."""
    parts = set(_parts())
    graph: dict[str, dict[str, str]] = {part: {} for part in parts}
    for path in sorted(package.rglob("*.py")):
        if _part_of(path) not in parts:
            continue
        source = _part_of(path)
        for target in _imported(ast.parse(path.read_text(), str(path)), parts):
            if target != source:
                graph[source].setdefault(target, str(path.relative_to(ROOT)))
    return graph


def cycles(graph: dict[str, dict[str, str]]) -> list[list[str]]:
    """Each strongly connected group of more than one part (Tarjan), as a sorted list."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_no_import_cycle_between_the_top_level_parts() -> None:
    graph = import_graph()
    found = cycles(graph)
    where = [f"{a} -> {b} ({graph[a][b]})" for group in found for a in group for b in group if b in graph[a]]
    assert found == [], "import cycles between packages:\n  " + "\n  ".join(where)


def test_the_check_sees_a_cycle_a_lazy_import_closes(tmp_path: Path) -> None:
    """The checker itself: a cycle closed only inside a function is still one."""
    graph = {"a": {"b": "a.py"}, "b": {"c": "b.py"}, "c": {"a": "c.py"}, "d": {"a": "d.py"}}
    assert cycles(graph) == [["a", "b", "c"]]
    tree = ast.parse("def f():\n    from falcon_gpu.b import x\nif TYPE_CHECKING:\n    import falcon_gpu.c\n")
    assert sorted(_imported(tree, {"b", "c"})) == ["b", "c"]


def test_architecture_names_every_package_and_module() -> None:
    """The ownership table of docs/ARCHITECTURE.md has a row for each top-level part."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    table = text.split("## Who owns what", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`([a-z_]+)(?:/|\.py)`", table))
    assert set(_parts()) - named == set()
