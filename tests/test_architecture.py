"""The package shows its pipeline: imports only go down the stages, with no cycles.

Every ``import`` of a ``solver`` module counts, at module level or inside a function
(a function-local import cannot hide a cycle), including ``TYPE_CHECKING`` blocks.
"""

from __future__ import annotations

import ast
from pathlib import Path

SOLVER = Path(__file__).resolve().parent.parent / "solver"
STAGES = ["common", "catalog", "rfq", "physics", "optimize", "analysis", "report", "batch", "cli"]
"""Bottom to top: a module may import its own stage or one listed before it."""


def module_name(path: Path) -> str:
    parts = path.relative_to(SOLVER.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(SOLVER.rglob("*.py"))}


def imports_of(path: Path, known: set[str]) -> set[str]:
    """The ``solver`` modules ``path`` imports (``from solver.x import y`` counts
    ``solver.x.y`` when that is a module, else ``solver.x``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                if sub in known:
                    found.add(sub)
                elif node.module in known:
                    found.add(node.module)
        elif isinstance(node, ast.ImportFrom) and node.level:
            raise AssertionError(f"{path}: relative import; write the full solver.* path")
    return found


def graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {name: imports_of(path, known) - {name} for name, path in mods.items()}


def stage(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in STAGES else None


def test_every_module_lives_in_a_stage():
    loose = [m for m in modules() if m != "solver" and stage(m) is None]
    assert loose == []


def test_imports_point_down_the_pipeline():
    upward = [f"{src} -> {dst}" for src, dsts in graph().items() for dst in dsts
              if stage(src) and stage(dst) and STAGES.index(stage(dst)) > STAGES.index(stage(src))]
    assert upward == []


def find_cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every back edge of a depth-first walk, as the cycle it closes."""
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1 on the current path, 2 done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append([*path[path.index(nxt):], nxt])
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for start in sorted(edges):
        if start not in state:
            visit(start, [start])
    return cycles


def test_no_import_cycles():
    assert find_cycles(graph()) == []


def test_the_guards_can_fail():
    """A planted two-module cycle and an upward arrow are reported."""
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []
    assert imports_of(SOLVER / "optimize" / "solve.py", set(modules()))  # it sees imports


def test_no_function_local_solver_imports_below_the_cli():
    """Below the CLI every ``solver`` import is at module level, where the graph above sees
    it plainly (the CLI defers its command modules so ``procure --version`` starts fast)."""
    local = []
    for name, path in modules().items():
        if stage(name) == "cli":
            continue
        tree = ast.parse(path.read_text())
        top = {id(node) for node in tree.body}
        local += [f"{name}:{node.lineno}" for node in ast.walk(tree)
                  if isinstance(node, ast.ImportFrom | ast.Import) and id(node) not in top
                  and any((getattr(node, "module", None) or a.name).startswith("solver")
                          for a in node.names)]
    assert local == []
