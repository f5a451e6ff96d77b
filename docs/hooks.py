"""mkdocs hooks for the docs site (mkdocs.yml): nothing here is part of presto-tui itself.

- `<!-- parameter-table -->` in a page becomes the table of every parameter, made from the
  parameter specification (presto_tui/runtime/core/spec.py) when the site is built, so the
  page can never disagree with the code;
- a link that leaves the docs folder (to a source file of the repository) becomes the path
  as code: the site has no copy of the sources, and tests/test_docs.py checks that every
  such path exists.
"""

from __future__ import annotations

import re

LINK = re.compile(r"\[([^\]]+)\]\((\.\./[^)\s]+)\)")


def parameter_table() -> str:
    from presto_tui.api.params import SPEC

    rows = ["| parameter | flag | request field | range or choices | default | applies to | what it is |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    for p in SPEC:
        flag = f"`{p.cli_flag}`" + (f", `{p.short}`" if p.short else "") if p.cli_flag else "(through --budget)"
        field = f"`{p.request_field}`" if p.request_field and p.group.value != "engine" else "-"
        if p.choice_names is not None:
            allowed = ", ".join(p.choice_names)
        elif p.reader is not None:
            allowed = str(p.extra.get("hint", "")).replace("must be ", "").replace("takes ", "")
        else:
            allowed = p.limit.where if p.limit is not None else p.kind.__name__
        where = []
        if p.samplers is not None:
            where.append(", ".join(sorted(p.samplers)))
        if p.rules is not None:
            where.append("rules " + ", ".join(sorted(p.rules)))
        applies = "; ".join(where) if where else ("every backend that takes it" if p.group.value == "engine"
                                                  else "every sampler")
        what = p.help.replace("|", "/")
        rows.append(f"| `{p.name}` | {flag} | {field} | {allowed} | {p.default_shown or '-'} | {applies} | {what} |")
    return "\n".join(rows)


def on_page_markdown(markdown: str, page, config, files) -> str:
    markdown = markdown.replace("<!-- parameter-table -->", parameter_table())
    return LINK.sub(lambda m: f"{m.group(1)} (`{m.group(2).lstrip('./')}`)", markdown)
