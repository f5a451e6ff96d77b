"""No import circles among the streaming rule's modules, counting every import: at module level, under
`TYPE_CHECKING` and inside functions (a circle hidden in any of them still ties the parts together)."""

from __future__ import annotations

import ast
from pathlib import Path

import presto_tui.runtime.prefetch.stream as stream

PACKAGE = "presto_tui.runtime.prefetch.stream"


def module_name(path: Path, package: str) -> str:
    return package if path.stem == "__init__" else f"{package}.{path.stem}"


def imports(path: Path, package: str) -> set[str]:
    """Every name under `package` that the file imports, wherever the import stands (`from pkg import
    module` counts both pkg and pkg.module)."""
    here = module_name(path, package)
    base = here if path.stem == "__init__" else here.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            parent = node.module or ""
            if node.level:  # relative: from this module's package up
                parts = base.split(".")[: len(base.split(".")) - node.level + 1]
                parent = ".".join(parts + ([parent] if parent else []))
            out.update([parent] + [f"{parent}.{a.name}" for a in node.names])
    return out


def graph(root: Path, package: str) -> dict[str, set[str]]:
    """Module -> the modules of the package it imports."""
    files = sorted(root.glob("*.py"))
    known = {module_name(p, package) for p in files}
    return {module_name(p, package): (imports(p, package) & known) - {module_name(p, package)} for p in files}


def circles(g: dict[str, set[str]]) -> list[list[str]]:
    """Every elementary circle, each once, starting from its smallest member."""
    found = []
    for start in sorted(g):
        stack = [(start, [start])]
        while stack:
            node, path = stack.pop()
            for nxt in sorted(g.get(node, ())):
                if nxt == start:
                    found.append(path + [start])
                elif nxt not in path and nxt > start:
                    stack.append((nxt, path + [nxt]))
    return found


def test_the_finder_sees_type_only_function_level_and_relative_imports(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import B\n")
    (pkg / "b.py").write_text("def f():\n    from pkg import c\n")
    (pkg / "c.py").write_text("from .a import A\nimport os\n")
    (pkg / "d.py").write_text("import pkg.a\n")
    g = graph(pkg, "pkg")
    assert g["pkg.d"] == {"pkg.a"} and g["pkg.c"] == {"pkg.a"}  # `import pkg.a` names pkg.a only
    assert circles(g) == [["pkg.a", "pkg.b", "pkg.c", "pkg.a"]]


def test_the_stream_package_has_no_import_circle():
    g = graph(Path(stream.__file__).parent, PACKAGE)
    assert f"{PACKAGE}.block" in g and f"{PACKAGE}.policy" in g and len(g) >= 8
    assert circles(g) == []
