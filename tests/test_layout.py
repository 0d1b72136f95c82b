"""The engine's layout keeps the promises a newcomer relies on: no import cycle (type-only imports
included, in the simulations too), no module over 400 lines nor function over 60, and the core
loading nothing heavy.

The layers themselves are import-linter's contracts (pyproject.toml, run by `make lint`); these
checks are what it cannot say.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ENGINE = Path(__file__).resolve().parent.parent / "engine"
SIMULATIONS = ENGINE.parent / "simulations"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def _module_name(path: Path) -> str:
    parts = path.relative_to(ENGINE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules(package: Path = ENGINE) -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(package.rglob("*.py"))}


def _imported(tree: ast.Module, module: str, is_package: bool, known: set[str]) -> Iterator[str]:
    """The modules of `known` that `module` imports, at any depth of its code (TYPE_CHECKING
    included). `from package import name` is an import of the submodule when `name` is one."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".") if is_package else module.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if sub in known:
                    yield sub
                elif base in known:
                    yield base


def import_graph(package: Path = ENGINE) -> dict[str, set[str]]:
    modules = _modules(package)
    known = set(modules)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        is_package = path.name == "__init__.py"
        graph[name] = {m for m in _imported(tree, name, is_package, known) if m != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_cycle_finder_sees_a_cycle_through_three_modules() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_the_import_walker_reads_type_only_and_submodule_imports() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "from engine.store import db\n"
        "if TYPE_CHECKING:\n"
        "    from engine.fallback.chain import Chain\n"
    )
    known = {"engine.store", "engine.store.db", "engine.fallback.chain", "engine.x"}
    found = set(_imported(ast.parse(source), "engine.x", False, known))
    assert found == {"engine.store.db", "engine.fallback.chain"}


def test_no_import_cycle_in_the_engine() -> None:
    assert cycles(import_graph()) == []


def test_no_import_cycle_in_the_simulations() -> None:
    # The fakes, the what-if and the demo; import-linter's contract keeps the three apart.
    graph = import_graph(SIMULATIONS)
    assert {"simulations.fakes.pages", "simulations.whatif.scenario"} <= set(graph)
    assert cycles(graph) == []


def test_no_engine_module_is_over_400_lines() -> None:
    long = {
        name: n
        for name, path in _modules().items()
        if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def test_no_engine_function_is_over_60_lines() -> None:
    long = {}
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                if lines > MAX_FUNCTION_LINES:
                    long[f"{name}.{node.name}"] = lines
    assert long == {}


HEAVY = ("aiohttp", "duckdb", "pyarrow", "redis", "httpx", "pandas")


def _loaded_by(module: str) -> set[str]:
    probe = (
        f"import sys, {module}\n"
        f"print(' '.join(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r}))))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(done.stdout.split())


@pytest.mark.parametrize("module", ["engine.core.money", "engine.core.errors", "engine.core"])
def test_the_core_loads_no_client_database_or_dataframe(module: str) -> None:
    assert _loaded_by(module) == set()


def test_the_chain_loads_no_database() -> None:
    assert _loaded_by("engine.fallback.chain") & {"duckdb", "pyarrow", "pandas"} == set()
