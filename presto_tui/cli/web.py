"""`presto-tui web`: the app in a browser, `chat` or `replay` served by textual-serve (presto_tui/web.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from typer._click import exceptions as click_errors

from presto_tui.cli import chat, traces
from presto_tui.cli import options as o
from presto_tui.cli.root import app
from presto_tui.cli.usage import PROG, PrestoCommand, UsageLine, usage_line
from presto_tui.errors import InputError
from presto_tui.safetext import visible
from presto_tui.web import DEFAULT_HOST, DEFAULT_PORT, check_address, check_public_url, serve

SERVER = "Server"
SERVED = ("chat", "replay")


class WebCommand(PrestoCommand):
    """`web` takes the served command's options after `--`; one given before it is pointed there."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click_errors.NoSuchOption as e:
            served = {opt for name in SERVED for p in _command(ctx, name).params
                      for opt in (*p.opts, *p.secondary_opts)}
            if e.option_name not in served:
                raise  # a misspelt option of web's own
            raise UsageLine(f"{e.option_name} is an option of the served app: put it after --, e.g. "
                            f"{PROG} web -- {e.option_name} ...", ctx) from None


@app.command("web", cls=WebCommand)
@o.handled
def web(
    ctx: typer.Context,
    app_args: Annotated[list[str] | None, typer.Argument(
        metavar="-- [OPTION...]", show_default=False,
        help="Options of presto-tui chat, or with --replay of presto-tui replay (more traces, --play, --compare), "
        "after --.")] = None,
    replay: Annotated[Path | None, typer.Option(
        "--replay", metavar="TRACE", show_default=False,
        help="Serve presto-tui replay TRACE instead of chat.")] = None,
    host: Annotated[str, typer.Option(
        "--host", metavar="HOST", rich_help_panel=SERVER,
        help="Address to listen on; 0.0.0.0 lets other machines in (anyone who reaches it runs the app).",
    )] = DEFAULT_HOST,
    # (named apart from serve's `port`, which also takes 0, so that a value that does not parse is
    # reported with this command's own range, by check_address)
    web_port: Annotated[int, typer.Option(
        "--port", metavar="N", rich_help_panel=SERVER, help="Port to listen on, 1-65535.")] = DEFAULT_PORT,
    public_url: Annotated[str | None, typer.Option(
        "--public-url", metavar="URL", rich_help_panel=SERVER, show_default=False,
        help="The URL browsers reach the server at, behind a proxy or with --host 0.0.0.0 "
        "[default: http://HOST:PORT].")] = None,
) -> None:
    """Serve the app to a web browser: chat (or replay) in a browser tab, through textual-serve.

    Prints the URL to open. Each browser tab runs its own app process with the options
    given after --, checked here before the server starts. With chat, each tab records
    its own trace: sessions/<time>-chat.jsonl, or with --trace PATH the first tab PATH and
    later ones PATH-2, PATH-3, ... Ctrl-C stops the server, ending every tab's running
    session as cancelled in its trace. Listens on 127.0.0.1 only unless --host says
    otherwise. Needs pip install 'presto-tui[web]'.

    Examples:

      presto-tui web              # chat on vLLM at http://127.0.0.1:8000

      presto-tui web --port 8080 -- --backend synthetic -n 32

      presto-tui web --replay sessions/example.jsonl
    """
    argv = list(app_args or [])
    if replay is not None:
        name, argv = "replay", [str(replay), *argv]
        title = f"{PROG} replay {visible(replay.name, keep_newlines=False)}"
    else:
        name, title = "chat", f"{PROG} chat"
    # the checks the served command makes before its app starts, made once here so that a bad option
    # is one line on this terminal rather than a failure in every browser tab
    flags = _parsed(ctx, name, argv)
    if name == "chat":
        chat.checked(flags)
    else:
        traces.replay_checked(flags["traces"], flags["compare"], flags.get("on_bad_lines", "error"))
    url = check_public_url(public_url) if public_url is not None else None
    check_address(host, web_port)
    from presto_tui.cli.serve import LOOPBACK

    if host not in LOOPBACK:  # textual-serve has no authentication of its own
        print(f"presto-tui: warning: listening on {visible(host, keep_newlines=False)}: anyone who reaches this "
              "port can run the app (and sample on this machine); put it behind an authenticating proxy",
              file=o.term())
    root = [flag for flag, on in (("--debug", o.DEBUG["on"]), ("--verbose", o.VERBOSE["on"])) if on]
    serve([*root, name, *argv], host=host, port=web_port, public_url=url, title=title, debug=o.DEBUG["on"])
    print("presto-tui: server stopped", file=o.term())


def _parsed(ctx: typer.Context, name: str, argv: list[str]) -> dict[str, Any]:
    """The served command's options, parsed and type-checked by that command itself."""
    try:
        return _command(ctx, name).make_context(name, list(argv), parent=ctx.parent).params
    except click_errors.UsageError as e:
        raise InputError(usage_line(e)) from None


def _command(ctx: Any, name: str) -> Any:
    """A command of the `presto-tui` group `web` belongs to."""
    return ctx.parent.command.get_command(ctx.parent, name)
