"""A browser tab's process for `presto-tui web` (web.py is the server): `python -m presto_tui.webtab
<command> ...` runs the command line with its screen drawn for textual-serve.  Nothing imports this
module; it is an entry point, like `presto_tui.__main__`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def keep_stdout_for_the_browser() -> None:
    """In a tab's process, file descriptor 1 carries the screen to the server as framed packets:
    a stray write there (an engine's log line, a library's print) would corrupt the stream.  The
    driver keeps a private copy of it (it writes to `sys.__stdout__`), and descriptor 1 itself
    goes where stderr goes (the engine log, or the server, which shows it when the tab ends)."""
    wire = os.dup(1)
    os.dup2(2, 1)
    sys.__stdout__ = os.fdopen(wire, "w", buffering=1)  # type: ignore[misc]  # read by Textual's WebDriver


TAB_DRIVER = "presto_tui.views.web_driver:TabDriver"


def own_trace(argv: list[str]) -> list[str]:
    """`argv` with a trace of this tab's own: every tab runs with the same `--trace PATH`, and a
    trace is never overwritten, so once an earlier tab has written PATH this one records to the
    first free PATH-2, PATH-3, ... (as default trace names are numbered)."""
    for i, arg in enumerate(argv):
        if arg == "--trace" and i + 1 < len(argv):
            return [*argv[:i + 1], _free(argv[i + 1]), *argv[i + 2:]]
        if arg.startswith("--trace="):
            return [*argv[:i], f"--trace={_free(arg.split('=', 1)[1])}", *argv[i + 1:]]
    return argv


def _free(name: str) -> str:
    path, n = Path(name), 1
    while path.exists() or path.is_symlink():
        n += 1
        path = Path(name).with_name(f"{Path(name).stem}-{n}{Path(name).suffix}")
    return str(path)


def main() -> None:
    """A browser tab's process: the named command, drawn for textual-serve."""
    keep_stdout_for_the_browser()
    # textual-serve names Textual's WebDriver; ours also quits when the server is gone (read by
    # Textual when it is first imported, which is after this)
    os.environ["TEXTUAL_DRIVER"] = TAB_DRIVER
    from presto_tui.cli import main as cli_main

    sys.argv = ["presto-tui", *own_trace(sys.argv[1:])]
    cli_main()




if __name__ == "__main__":
    main()
