"""Facts about the code anyone can check: no import circles, no backend compared by name.

The import-linter contracts in pyproject.toml hold the layers (front-ends import the public API
and the trace reader only; no front-end imports another or the command line); these tests hold
what a contract cannot say.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "presto_tui"


def cycles(imports: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of a graph (module -> the modules it imports): its strongly connected
    components of more than one module, or of one that imports itself (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(imports.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in imports.get(v, ()):
                found.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for v in sorted(imports):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return found


def test_the_cycle_finder_finds_a_circle_and_nothing_else():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    assert cycles({"a": {"a"}}) == [["a"]]


def test_no_module_of_presto_tui_imports_itself_round_a_circle():
    """Every import counts: at module level, inside a function, and under TYPE_CHECKING (grimp reads
    them all)."""
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("presto_tui", include_external_packages=False)
    imports = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    found = cycles(imports)
    assert not found, "import circles: " + "; ".join(" <-> ".join(c) for c in found)


def test_no_backend_name_is_compared_outside_the_engine_registry():
    """Code asks an engine's capabilities (BackendName: virtual clock, model built in, thread control,
    the flags it takes), never its name."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "presto_tui"
    names = "|".join(("synthetic", "vllm", "transformers", "remote"))
    pattern = re.compile(rf"""(==|!=)\s*["']({names})["']|["']({names})["']\s*(==|!=)|in \(["']({names})""")
    allowed = {root / "runtime/engines/registry.py", root / "runtime/core/names.py"}
    found = [f"{path.relative_to(root)}:{n}: {line.strip()}"
             for path in root.rglob("*.py") if path not in allowed
             for n, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]
    assert not found, "\n".join(found)




def name_comparison(names: str) -> re.Pattern:
    """A comparison against one of `names` (an alternation): `== "x"`, `"x" !=`, `in ("x", ...)`."""
    return re.compile(rf"""(==|!=)\s*["']({names})["']|["']({names})["']\s*(==|!=)|\bin [(\[{{]["']({names})["']""")


def test_no_sampler_name_is_compared_outside_its_method():
    """Code asks a method what it is and what it needs (`runtime/core/method.py`: its kind, axis,
    width, cost, events, view), never its name: a method's name is spelled in its own module (and
    the registry's list of built-in modules) only, so a plugin's method is treated as a built-in one."""
    from presto_tui.runtime.core import registry

    compared = name_comparison("|".join(n for m in registry.methods() for n in (m.name, *m.aliases)))
    members = re.compile(r"\bSamplerName\b|\bSamplerKind\b")  # the old closed list of names, retired
    allowed = {*(ROOT / "runtime/methods").rglob("*.py"), ROOT / "runtime/core/registry.py"}
    found = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
             for path in ROOT.rglob("*.py") if path not in allowed
             for n, line in enumerate(path.read_text().splitlines(), 1)
             if compared.search(line) or members.search(line)]
    assert not found, "\n".join(found)


def test_the_name_check_sees_a_comparison_where_one_is_written():
    """The pattern above is not vacuous: it matches the comparisons it is meant to forbid."""
    compared = name_comparison("powermh|bestofn")
    for line in ('if p.sampler == "bestofn":', "x = 'powermh' != s", 'if s in ("powermh", "x"):'):
        assert compared.search(line), line
    assert not compared.search('DEFAULT = "powermh"')
