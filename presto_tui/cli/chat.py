"""`presto-tui chat`: the interactive app on a live engine."""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import Annotated, Any

import typer

from presto_tui.api.params import SAMPLER_PARAMS, BackendName, Group, flag, load_classifier, of_group
from presto_tui.cli import options as o
from presto_tui.cli.params import takes
from presto_tui.cli.root import command
from presto_tui.logs.writer import open_trace
from presto_tui.safetext import visible


def checked(flags: dict[str, Any]):
    """What chat runs with, every value checked before any engine starts (`web` checks with this too)."""
    params = o.sampler_params(flags)
    per_prompt = o.chain_count(flags.get("chains"))
    clf = load_classifier(flags.get("classifier"))
    name, engine_opts = o.engine_options(flags)
    return params, per_prompt, clf, name, engine_opts, o.trace_path(flags, "chat")


@command()
@o.handled
@takes(Group.METHOD, Group.LAW, Group.CHAIN, Group.OWN, Group.ENGINE)
def chat(
    ctx: typer.Context,
    chains: o.Chains = None, paper_settings: o.PaperSettings = False, classifier: o.Classifier = None,
    trace: o.TracePath = None, no_trace: o.NoTrace = False,
    connect: Annotated[str | None, typer.Option(
        "--connect", metavar="URL", show_default=False,
        help="Sample on a presto-tui serve at URL (e.g. http://127.0.0.1:8000) instead of a local engine, with "
        "the server's sampler defaults under the sampler flags given here; the tree, inspector and stats come "
        "from its event stream, and the trace is also written here.")] = None,
    api_key: Annotated[str | None, typer.Option(
        "--api-key", metavar="KEY", envvar="PRESTO_TUI_API_KEY", show_default=False,
        help="The server's API key, for --connect (also $PRESTO_TUI_API_KEY).")] = None,
) -> None:
    """Chat with a model and watch every PreSTO round as a live tree.

    Type a prompt; each prefetch round appears as a binary tree (accept child above,
    reject child below), coloured and marked by epsilon class, with the realized path
    marked. Select nodes with the arrow keys or the mouse to inspect their MH ratio and
    the text they propose. ? shows every key. Starts on vLLM with the embedded
    SmolLM2-135M unless --backend/--model say otherwise.

    Examples:

      presto-tui chat

      presto-tui chat --backend synthetic        # no model needed

      presto-tui chat --chains 4                 # 4 chains a prompt; m shows them

      presto-tui chat --connect http://127.0.0.1:8000   # on a presto-tui serve
    """
    flags = ctx.params
    if connect is not None:
        remote(ctx, connect, api_key, o.chain_count(chains))
        return
    params, per_prompt, clf, name, engine_opts, path = checked(flags)
    from presto_tui.api.engine import start_engine
    from presto_tui.api.sessions import ChatSession

    def factory(model_name):  # the settings screen can change the model between prompts
        return start_engine(name, replace(engine_opts, model=model_name))

    session = ChatSession(engine_factory=factory, model=engine_opts.model, classifier=clf,
                          trace_opener=lambda engine, p: open_trace(path, "chat", engine, p))
    from presto_tui.views.app import chat_app

    drawing_on = sys.__stderr__
    if not BackendName.of(name).builtin_model:
        # a real engine starts inside the app: its libraries' output goes to its log, and Textual,
        # which draws on stderr, is given the terminal itself
        o.divert_engine_output()
        setattr(sys, "__stderr__", o.term())  # noqa: B010 - Textual draws on sys.__stderr__
    try:
        code = o.run_app(chat_app(session, params, backend=name, model=engine_opts.model, chains=per_prompt))
    finally:
        setattr(sys, "__stderr__", drawing_on)  # noqa: B010
        session.close()
    if session.trace is not None:
        print(f"presto-tui: trace written to {visible(str(session.trace.path))}", file=o.term())
    o.exit_with(code)


def remote(ctx: typer.Context, url: str, api_key: str | None, chains: int) -> None:
    """The app with its worker on a server: prompts go there, events come back (serve/client.py).
    The sampler starts from the server's defaults (its flags); the flags given here win."""
    from presto_tui.errors import InputError

    given = lambda name: getattr(ctx.get_parameter_source(name), "name", "") == "COMMANDLINE"
    engine_flags = [k for k in ("classifier", *(p.name for p in of_group(Group.ENGINE))) if given(k)]
    if engine_flags:
        raise InputError(f"{flag(engine_flags[0])} does not apply with --connect: the server chose "
                         "its engine and model when it started")
    path = o.trace_path(ctx.params, "chat")
    try:
        from presto_tui.serve.client import RemoteChatSession
    except ImportError as e:
        raise InputError(f"--connect needs httpx: pip install 'presto-tui[serve]' ({e.name} is missing)") from None
    session = RemoteChatSession(url, api_key=api_key,
                                trace_opener=lambda engine, p: open_trace(path, "chat", engine, p))
    mine = {k: v for k in (*(p.name for p in SAMPLER_PARAMS), "paper_settings") if given(k) and
            (v := ctx.params.get(k)) is not None}
    params = o.sampler_params({**session.server_flags(), **mine}, one_sampler=False)
    from presto_tui.views.app import chat_app

    try:
        code = o.run_app(chat_app(session, params, backend="remote", model=None, chains=chains,
                                  subtitle=f"presto-tui serve at {visible(session.url, keep_newlines=False)} "
                                  "(connecting)"))
    finally:
        session.close()
    if session.trace is not None:
        print(f"presto-tui: trace written to {visible(str(session.trace.path))}", file=o.term())
    o.exit_with(code)
