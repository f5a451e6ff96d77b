"""The repository's references stay inside it, and its docs' links resolve.

A reader of the repository must be able to follow every reference it makes: no text file cites
the design note the project began with (it is not in the repository) or a path outside the
repository (a `..` that climbs out of it, an absolute path of some machine), every relative link
in docs/*.md and README.md points to a file (and heading) that exists, and every docs page a
comment or docstring names exists.  The checks are plain functions, shown below to catch what
they look for.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TEXT_SUFFIXES = {".py", ".md", ".toml", ".sh", ".tcss", ".txt", ".yml", ".yaml", ".cfg", ".ini"}
# Absolute paths every machine has, which scripts and tests may name: a shebang's /usr/bin/env,
# /dev/null, unwritable places under /proc, a hostile fixture's file:///etc.
SYSTEM_ROOTS = {"usr", "bin", "dev", "proc", "etc", "sys"}
# Not files at all: the routes of presto-tui serve's HTTP API (/v1/completions, /v1/presto/events).
ROUTE_ROOTS = {"v1"}
OLD_NOTE = "DESIGN" + ".md"  # spelled apart so that this file does not cite it either
UP = ".." + "/"

# An absolute path: a slash that starts a path (not inside a word, a URL or a relative path),
# then at least two components.
ABSOLUTE = re.compile(r"(?<![\w.~:/\\-])/([A-Za-z][\w.-]*)/[\w.-]")
WINDOWS = re.compile(r"(?<![\w])[A-Za-z]:\\[\w.-]")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
REF_LINK = re.compile(r"^\s*\[[^\]]+\]:\s*(\S+)", re.MULTILINE)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
DOCS_NAMED = re.compile(r"\bdocs/([\w.-]+\.md)(?:#([\w-]+))?")


def repository_files() -> list[Path]:
    """The files of the working tree that git tracks or would track (not the ignored ones)."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                             capture_output=True, check=True).stdout.decode()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the repository's own files cannot be told from others")
    return sorted({ROOT / p for p in out.split("\0") if p and (ROOT / p).is_file()})


def is_text(path: Path) -> bool:
    if path.suffix in TEXT_SUFFIXES:
        return True
    if path.suffix:
        return False
    with open(path, "rb") as f:  # an executable script without a suffix (.ci/run)
        return f.read(2) == b"#!"


def text_files() -> list[Path]:
    return [p for p in repository_files() if is_text(p)]


def markdown_blanked(text: str) -> str:
    """Markdown with code blocks and code spans blanked out (line numbers kept): links and
    headings are what remains."""
    text = re.sub(r"^```.*?^```", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.DOTALL | re.MULTILINE)
    return re.sub(r"`[^`\n]*`", lambda m: " " * len(m.group(0)), text)


def link_targets(text: str) -> list[tuple[int, str]]:
    """(line number, target) of every inline and reference link outside code."""
    plain = markdown_blanked(text)
    found = [(m.start(1), m.group(1)) for m in LINK.finditer(plain)]
    found += [(m.start(1), m.group(1)) for m in REF_LINK.finditer(plain)]
    return sorted((plain.count("\n", 0, at) + 1, target) for at, target in found)


def inside(path: Path) -> bool:
    return path.resolve().is_relative_to(ROOT)


def outside_references(path: Path, text: str) -> list[str]:
    """Every reference in `text` (the content of `path`) to something outside the repository."""
    problems = []
    climbs_ok: set[int] = set()  # lines whose '..' are all inside links that stay in the repository
    if path.suffix == ".md":
        for line, target in link_targets(text):
            if UP in target:
                if inside(path.parent / target.split("#")[0]):
                    climbs_ok.add(line)
                else:
                    problems.append(f"{line}: link {target!r} leads outside the repository")
    for n, line in enumerate(text.splitlines(), 1):
        where = f"{n}: "
        if OLD_NOTE in line:
            problems.append(where + f"cites {OLD_NOTE}, which is not in the repository")
        if UP in line and n not in climbs_ok:
            problems.append(where + f"names a path relative to somewhere else ({UP!r}): {line.strip()[:80]}")
        for m in ABSOLUTE.finditer(line):
            if m.group(1) not in SYSTEM_ROOTS | ROUTE_ROOTS:
                problems.append(where + f"names an absolute path of a machine: {line.strip()[:80]}")
        if WINDOWS.search(line):
            problems.append(where + f"names an absolute Windows path: {line.strip()[:80]}")
    return problems


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    out: set[str] = set()
    seen: dict[str, int] = {}
    for m in re.finditer(r"^#{1,6}\s+(.+?)\s*#*\s*$", markdown_blanked_headings(text), flags=re.MULTILINE):
        s = slug(m.group(1))
        out.add(s if s not in seen else f"{s}-{seen[s]}")
        seen[s] = seen.get(s, 0) + 1
    return out


def markdown_blanked_headings(text: str) -> str:
    """Markdown with fenced code blocks blanked (a '#' there is a comment, not a heading)."""
    return re.sub(r"^```.*?^```", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.DOTALL | re.MULTILINE)


def broken_links(path: Path, text: str) -> list[str]:
    """Every relative link of the Markdown file `path` whose file or heading does not exist."""
    problems = []
    for line, target in link_targets(text):
        if SCHEME.match(target):
            continue  # a web address: not a file of the repository
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part) if file_part else path
        if not inside(dest) or not dest.exists():
            problems.append(f"{line}: link {target!r}: no such file in the repository")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text(encoding="utf-8")):
            problems.append(f"{line}: link {target!r}: {dest.name} has no heading with that anchor")
    return problems


def missing_docs(text: str) -> list[str]:
    """`docs/<page>.md` (and `#anchor`) named in `text` that does not exist."""
    problems = []
    for m in DOCS_NAMED.finditer(text):
        page = ROOT / "docs" / m.group(1)
        line = text.count("\n", 0, m.start()) + 1
        if not page.is_file():
            problems.append(f"{line}: names {m.group(0)}, which does not exist")
        elif m.group(2) and m.group(2) not in anchors(page.read_text(encoding="utf-8")):
            problems.append(f"{line}: names {m.group(0)}: no heading with that anchor")
    return problems


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


# -- the repository --------------------------------------------------------------------------

def test_no_text_file_refers_outside_the_repository():
    files = text_files()
    assert any(p.suffix == ".md" for p in files) and any(p.suffix == ".py" for p in files)
    problems = [f"{rel(p)}:{msg}" for p in files for msg in outside_references(p, p.read_text(encoding="utf-8"))]
    assert not problems, "\n".join(problems)


def test_every_relative_link_of_the_docs_and_the_readme_resolves():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    assert len(pages) > 2
    problems = [f"{rel(p)}:{msg}" for p in pages for msg in broken_links(p, p.read_text(encoding="utf-8"))]
    assert not problems, "\n".join(problems)


def test_every_docs_page_named_in_a_file_exists():
    problems = [f"{rel(p)}:{msg}" for p in text_files() for msg in missing_docs(p.read_text(encoding="utf-8"))]
    assert not problems, "\n".join(problems)


def test_the_design_index_lists_every_design_page_and_the_site_every_page():
    index = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    listed = {t for _, t in link_targets(index)}
    design = {"architecture.md", "randomness.md", "streaming.md", "trace-format.md", "extending.md"}
    assert design <= listed, f"docs/design.md does not list {sorted(design - listed)}"
    site = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    assert pages and all(f": {page}" in site for page in pages), "mkdocs.yml's nav misses a page"


# -- the checks catch what they look for ---------------------------------------------------------

@pytest.mark.parametrize("line", [
    "see " + OLD_NOTE + " sec 7",
    "the paper is in " + UP + "shared/paper.md",
    "written to /" + "home/someone/trace.jsonl",
    "python /" + "work/main/x.py",
    "'/" + "Users/me/presto'",
    "C:" + "\\Users\\me",
])
def test_a_reference_outside_is_caught(line):
    assert outside_references(ROOT / "x.py", line + "\n")


@pytest.mark.parametrize("line", [
    "#!/usr/bin/env bash",
    "cmd >/dev/null 2>&1",
    "out = '/proc/presto-tui.jsonl'",
    "see https://example.org/a/b and presto_tui/data/prompts.txt",
    "cached under ~/.cache/presto-tui; a ratio n/16 or w_J / W",
    "[link=file:///etc]x[/link]",
])
def test_what_every_machine_has_is_not_a_reference_outside(line):
    assert outside_references(ROOT / "x.py", line + "\n") == []


def test_markdown_links_may_climb_only_within_the_repository():
    page = ROOT / "docs" / "page.md"
    assert outside_references(page, "[code](" + UP + "presto_tui/errors.py)\n") == []
    assert outside_references(page, "[other](" + UP + UP + "elsewhere/notes.md)\n")
    assert outside_references(page, "text that climbs " + UP + "here\n")  # outside a link


def test_a_broken_link_or_anchor_is_caught():
    page = ROOT / "docs" / "design.md"
    assert broken_links(page, "[a](architecture.md)\n[b](#design-notes)\n") == []
    assert broken_links(page, "[a](no-such-page.md)\n")
    assert broken_links(page, "[a](architecture.md#no-such-heading)\n")
    assert broken_links(page, "[a](" + UP + UP + "outside.md)\n")
    assert broken_links(page, "`[not a link](nowhere.md)`\n") == []  # code is not a link
    docs = "docs" + "/"  # spelled apart: the repository-wide check reads this file too
    assert missing_docs("see " + docs + "no-such-page.md") and missing_docs(docs + "architecture.md#nowhere")
    assert missing_docs("see " + docs + "architecture.md#the-one-engine-loop") == []


def test_anchors_are_githubs():
    text = "# Design notes\n## 1. A sampler family\n## `header`\n```\n# not a heading\n```\n## Design notes\n"
    assert anchors(text) == {"design-notes", "1-a-sampler-family", "header", "design-notes-1"}


# -- the library's docs: every public name explained, the example notebook runs ------------------

def test_every_public_name_of_the_api_has_a_docstring():
    """A missing docstring would be a hole in the generated API reference (docs/reference/api.md) and in
    `help()`: every name of `presto_tui.__all__` and of the public modules it names."""
    import importlib
    import inspect

    import presto_tui

    missing = []
    names = [(f"presto_tui.{n}", getattr(presto_tui, n)) for n in presto_tui.__all__ if n != "API_VERSION"]
    for module in ("events", "testing", "plugin"):
        mod = importlib.import_module(f"presto_tui.{module}")
        assert mod.__doc__, f"presto_tui.{module} has no docstring"
        names += [(f"presto_tui.{module}.{n}", getattr(mod, n)) for n in mod.__all__]
    for where, obj in names:
        if (inspect.isclass(obj) or inspect.isfunction(obj) or inspect.ismodule(obj)) and not inspect.getdoc(obj):
            missing.append(where)
    assert not missing, "no docstring: " + ", ".join(missing)


def test_the_top_level_namespace_is_the_api_and_small_enough_to_learn():
    """`presto_tui.__all__` is what a user needs and all the version promises: an engine, parameters,
    sample and stream, sessions, traces, the errors, the method registry and the law-test kit; no name
    leaks from an import (`annotations`, `Any`), and every name resolves."""
    import presto_tui

    names = presto_tui.__all__
    assert 25 <= len(names) <= 35, len(names)
    assert {"annotations", "Any", "TYPE_CHECKING", "importlib"}.isdisjoint(names)
    for name in names:
        assert getattr(presto_tui, name) is not None
    namespace: dict = {}
    exec("from presto_tui import *", namespace)
    assert set(namespace) - {"__builtins__"} == set(names)


@pytest.mark.slow
@pytest.mark.usefixtures("in_tmp")
def test_the_example_notebook_runs(tmp_path):
    """docs/examples/quickstart.ipynb, executed cell by cell as a reader would (nbclient)."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    notebook = nbformat.read(ROOT / "docs" / "examples" / "quickstart.ipynb", as_version=4)
    nbclient.NotebookClient(notebook, timeout=180, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for c in notebook.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    assert any("DataTree" in str(o.get("data", {}).get("text/plain", "")) for o in outputs)
