"""`presto-tui methods`: every method installed here, and every plugin method that failed to load."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from presto_tui.cli import options as o
from presto_tui.cli.root import command


@command("methods")
@o.handled
def methods(
    json_out: Annotated[bool, typer.Option(
        "--json", help="Print JSON instead of the table: \"methods\" (each with its name, kind, budget axis, "
        "own parameters and origin) and \"problems\" (each plugin method that failed to load, and why).")] = False,
) -> None:
    """Every sampling method installed here: its name, kind, budget axis, own parameters and where it
    comes from (built-in, or the package and version that registers it); then each plugin method that
    failed to load, with its package, entry point, exception and file:line. Exit code 1 if one did."""
    from presto_tui.api.methods import method_catalog
    from presto_tui.safetext import visible

    cat = method_catalog()
    if json_out:
        print(json.dumps(cat.to_dict(), indent=2))
    else:
        rows = [("name", "kind", "budget", "own parameters", "from")]
        rows += [(m.name + (f" ({', '.join(m.aliases)})" if m.aliases else ""), m.kind, m.axis or "-",
                  ", ".join(m.params) or "-", m.origin) for m in cat.methods]
        widths = [max(len(visible(r[i], keep_newlines=False)) for r in rows) for i in range(len(rows[0]) - 1)]
        for r in rows:
            cells = [visible(c, keep_newlines=False) for c in r]
            print("  ".join(c.ljust(w) for c, w in zip(cells, widths)) + "  " + cells[-1])
        for p in cat.problems:
            print(f"left out: {visible(str(p), keep_newlines=False)}")
    if cat.problems:
        raise typer.Exit(1)
