"""The `presto-tui` command line.

Machine-readable output goes to stdout, progress and errors to stderr.  Heavy
modules are imported inside commands so that `presto-tui --help` is instant.
Every command ends the same way on failure: one line `presto-tui: error: ...`,
exit code 2 for bad input or a bad trace, 1 for an engine or internal failure,
130 for Ctrl-C (`options.handled`).
"""

from __future__ import annotations

from presto_tui.cli import usage
from presto_tui.cli.root import app, command

__all__ = ["app", "command", "main"]

# Commands register themselves on `app`; the interactive ones first in --help.
from presto_tui.cli import bench, chat, eval, lmeval, methods, run, serve, traces, web  # noqa: F401


def main() -> None:
    from presto_tui.serve.allocator import restart_for_serving

    restart_for_serving()  # `serve` runs on the C allocator (serve/allocator.py): the process starts again once
    app(prog_name=usage.PROG)
