"""The `presto-tui` group: the Typer app, its root options and how a command registers on it."""

from __future__ import annotations

from typing import Annotated

import typer

from presto_tui import __version__
from presto_tui.cli import options
from presto_tui.cli.usage import PrestoCommand, PrestoGroup

app = typer.Typer(
    cls=PrestoGroup,
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="rich",
    help="Run, watch and replay exact PreSTO power sampling of LLMs.\n\n"
    "PreSTO prefetches future Metropolis-Hastings proposals of PowerMH in one batched "
    "model call and walks them with the unchanged MH rule, so the chain keeps its law "
    "while needing several times fewer sequential model calls.",
)


def _version(value: bool) -> None:
    if value:
        print(f"presto-tui {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show the traceback of a failure.")] = False,
    verbose: Annotated[bool, typer.Option(
        "--verbose", help="Show the engine's own log and warnings on the terminal (else they go to a "
        "log file beside the traces).")] = False,
) -> None:
    options.DEBUG["on"] = debug
    options.VERBOSE["on"] = verbose


def command(name: str | None = None):
    """Register a command on `app` (one-line usage errors, readable help: cli/usage.py)."""
    return app.command(name, cls=PrestoCommand)
