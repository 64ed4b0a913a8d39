"""The layers of the package (docs/ARCHITECTURE.md): no import cycle between modules, no
import that runs up the layers, no module past 400 lines.

Every ``import`` of an inferlab module counts, at module level or inside a function (a
lazy import is still a dependency); imports under ``if TYPE_CHECKING:`` do not run and do
not count.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "inferlab"

#: Lowest first. A module may import from its own layer and the layers below it. The
#: foundation is the root package's small modules (errors, units, checks, number formats,
#: the Dask helper) and the presentation toolkit every result type renders with.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("foundation", ("errors", "unit_registry", "units", "disk_cache", "memo", "checks", "precision", "cluster",
                    "results", "plots")),
    ("specs", ("specs",)),
    ("calibration", ("calibration",)),
    ("core", ("core",)),
    ("techniques", ("techniques",)),
    ("engines", ("engines",)),
    ("inputs", ("inputs",)),
    ("phases", ("phases",)),
    ("serving", ("serving",)),
    ("economics", ("economics",)),
    ("modalities", ("modalities",)),
    ("planning", ("planning",)),
    ("fleet", ("fleet",)),
    ("tools", ("calc", "explore")),
    ("validation", ("validation",)),
    ("fitting", ("fitting",)),
    ("cli", ("cli",)),
]
MAX_LINES = 400


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node.test)


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The inferlab modules ``name`` imports (the deepest module each import names)."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if _type_checking(child):
                continue
            if isinstance(child, ast.Import):
                found.update(a.name for a in child.names if a.name.startswith("inferlab"))
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package[:len(package) - child.level + 1] + ([child.module] if child.module else [])
                    target = ".".join(base)
                elif (child.module or "").startswith("inferlab"):
                    target = child.module
                else:
                    continue
                for alias in child.names:
                    sub = f"{target}.{alias.name}"
                    found.add(sub if sub in modules else target)
            visit(child)

    visit(ast.parse(path.read_text()))
    found.discard(name)
    return {m for m in found if m in modules and m != "inferlab" and not name.startswith(m + ".")}


def _layer(module: str) -> int:
    top = module.split(".")[1]
    for rank, (_, packages) in enumerate(LAYERS):
        if top in packages:
            return rank
    raise AssertionError(f"{module} is in no layer: add its package to LAYERS and docs/ARCHITECTURE.md")


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def test_every_module_is_in_a_layer(graph):
    for name in graph:
        if name != "inferlab":
            _layer(name)


def test_no_import_runs_up_the_layers(graph):
    upward = sorted(f"{a} ({LAYERS[_layer(a)][0]}) imports {b} ({LAYERS[_layer(b)][0]})"
                    for a, targets in graph.items() if a != "inferlab"
                    for b in targets if _layer(b) > _layer(a))
    assert not upward, "\n".join(upward)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def test_no_import_cycle(graph):
    cycles = _cycles(graph)
    assert not cycles, "\n".join(" <-> ".join(group) for group in cycles)


def test_the_cycle_check_finds_a_cycle():
    """Hand-made graph: a -> b -> c -> a is one cycle; d -> a is not part of it."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_past_400_lines():
    long = sorted(f"{p.relative_to(SRC)}: {n} lines" for p in PACKAGE.rglob("*.py")
                  if (n := len(p.read_text().splitlines())) > MAX_LINES)
    assert not long, "\n".join(long)


def test_moved_modules_keep_their_old_import_paths():
    """A module moved into its layer is still importable by its old path, as the same module
    (scripts written against ``inferlab.estimate`` or ``inferlab.serving.workload`` run)."""
    import importlib

    import inferlab
    from inferlab import _MOVED

    for old, new in _MOVED.items():
        assert importlib.import_module(old) is importlib.import_module(new), old
        assert importlib.import_module(new).__spec__.name == new  # its relative imports still resolve
    from inferlab.calc import evaluate
    from inferlab.estimate import deployment, estimate

    assert estimate is inferlab.estimate and callable(deployment) and callable(evaluate)
    assert callable(inferlab.serve) and callable(inferlab.sweep)  # the functions, not the old modules
