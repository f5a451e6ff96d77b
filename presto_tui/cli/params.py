"""Each command's shared options, made from the parameter specification (runtime/core/spec.py).

A command declares the groups of parameters it takes (`@takes(Group.LAW, Group.ENGINE, ...)`)
and writes only its own options in its signature; `takes` adds one option per parameter of
those groups, with the spec's flag, help, range and default, so no two commands can drift.

Every value arrives as the text the person typed (typer does not convert it) and is read
by the spec on the one validation path the server, the settings dialog and lm-eval use too
(`params_from`, `EngineOptions.from_values`): `--alpha 1e309` says "got 1e309".
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Annotated, Any

import typer

from presto_tui.api.params import SPEC, Group, Param

METAVAR = {int: "<int>", float: "<float>", str: "<text>"}


def option(p: Param, *, default_text: str | None = None, help: str | None = None) -> Any:
    """`p` as a typer option (an Annotated type); None (its default) means "not given".  `help`: the
    command's own sentence for it, completed as every parameter's is, with its range and its default."""
    text = (p if help is None else dataclasses.replace(p, help=help)).help_text(default_text)
    if p.kind is bool:
        decls = [f"{p.cli_flag}/{p.negative}"] if p.negative else [p.cli_flag]
        info = typer.Option(*decls, rich_help_panel=p.group.panel, show_default=False, help=text)
        return Annotated[bool | None, info]
    decls = [p.cli_flag] + ([p.short] if p.short else [])
    info = typer.Option(*decls, metavar=p.metavar or METAVAR[p.kind], rich_help_panel=p.group.panel,
                        show_default=False, help=text, envvar=p.envvar)
    return Annotated[str | None, info]


def takes(*groups: Group, without: Iterable[str] = (), defaults: Mapping[str, Any] | None = None,
          help: Mapping[str, str] | None = None) -> Callable[[Callable], Callable]:
    """Give a command an option for every parameter of `groups` (but `without`); `defaults` are the
    command's own defaults (shown in --help; the command applies them as its preset), `help` its
    own wording for a parameter.  The values reach the command in `ctx.params`."""
    skip = set(without)
    chosen = [p for p in SPEC if p.group in groups and p.name not in skip and p.cli_flag]
    shown = {k: str(v) for k, v in (defaults or {}).items()}

    def wrap(fn: Callable) -> Callable:
        own = inspect.signature(fn, eval_str=True)
        names = {p.name for p in chosen}
        clash = names & set(own.parameters)
        assert not clash, f"{fn.__name__} declares {clash} itself: they come from the spec"
        extra = [inspect.Parameter(p.name, inspect.Parameter.KEYWORD_ONLY, default=None,
                                   annotation=option(p, default_text=shown.get(p.name),
                                                     help=(help or {}).get(p.name)))
                 for p in chosen]
        params = list(own.parameters.values())
        # the command's own options first, then the spec's; keyword-only after positional-or-keyword
        ordered = [q.replace(kind=inspect.Parameter.KEYWORD_ONLY) for q in params] + extra
        signature = own.replace(parameters=ordered)

        @functools.wraps(fn)
        def command(*args: Any, **kwargs: Any) -> Any:
            for name in names:
                kwargs.pop(name, None)  # in ctx.params, read there through the spec
            return fn(*args, **kwargs)

        command.__signature__ = signature  # type: ignore[attr-defined]
        command.__annotations__ = {q.name: q.annotation for q in ordered}
        command.__takes__ = tuple(p.name for p in chosen)  # type: ignore[attr-defined]
        return command

    return wrap
