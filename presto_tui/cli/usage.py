"""Usage errors in one line, and --help a person can read.

Typer reports a usage error (an unknown option, a value that does not parse, a missing
or extra argument) in a box under the usage text.  `PrestoGroup.main` runs the commands
in click's non-standalone mode instead and turns every usage error into the line every
other failure ends in, `presto-tui: error: ...`, exit code 2: it names the option and
the bad value and says what would be right (the range or the choices).

For --help: help strings are plain text, escaped here for Rich once, so a bracket such
as `presto-tui[ray]` or `[default: 4]` reads as written; flags show no `<bool>`, and
arguments show their metavar (PROMPT, TRACE...) instead of a type.  Below NARROW columns
Typer's options table (name, short name, negative name, type, help) would cut names and
defaults and squeeze the help into a column of 20 characters: there each option's names
and type take a line and its help the lines under it, at the terminal's whole width.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from difflib import get_close_matches
from typing import Any

import typer
from rich.console import Console, ConsoleOptions, RenderResult
from rich.markup import escape
from rich.padding import Padding
from rich.text import Text

# Typer vendors click (it may not be imported on its own); these are its exception classes.
from typer._click import exceptions as click_errors
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

from presto_tui.api.params import PARAMS, unknown_choice
from presto_tui.api.params import Name as Choice
from presto_tui.cli.options import limit_of, print_error
from presto_tui.errors import EXIT_CODES

PROG = "presto-tui"
EXIT_USAGE = EXIT_CODES["input"]


class UsageLine(click_errors.UsageError):
    """A usage error whose message is already the line to print."""


# -- the line ------------------------------------------------------------------------------

def usage_line(e: click_errors.UsageError) -> str:
    """What a usage error says, as one line: what is wrong and what would be right."""
    ctx = e.ctx
    where = " ".join([PROG, *_command_names(ctx)])
    if isinstance(e, UsageLine):
        return e.message
    if isinstance(e, click_errors.NoSuchOption):
        if e.possibilities:
            return f"unknown option {e.option_name} for {where}; did you mean {e.possibilities[0]}?"
        return f"unknown option {e.option_name} for {where} (see {where} --help)"
    if isinstance(e, click_errors.MissingParameter) and e.param is not None:
        help_text = (getattr(e.param, "help", None) or "").replace("\\[", "[").split(". ")[0].rstrip(".")
        return f"{where} needs {_shown(e.param)}" + (f": {help_text[:1].lower()}{help_text[1:]}" if help_text else "")
    if isinstance(e, click_errors.BadParameter) and e.param is not None:
        return _bad_value(e.param, _raw_value(e), e.message)
    if isinstance(e, click_errors.BadOptionUsage) and ctx is not None:
        param = next((p for p in ctx.command.params if e.option_name in (*p.opts, *p.secondary_opts)), None)
        if isinstance(param, TyperOption) and param.is_flag:
            return f"{e.option_name} is a flag and takes no value"
        if param is not None:
            return f"{e.option_name} needs a value: {_expected(param)}"
    text = e.format_message().strip().splitlines()[0].rstrip(".") if e.format_message().strip() else "usage error"
    return f"{text[:1].lower()}{text[1:]} (see {where} --help)"


def _command_names(ctx: Any) -> list[str]:
    names = []
    while ctx is not None and ctx.parent is not None:
        names.append(ctx.info_name)
        ctx = ctx.parent
    return names[::-1]


def _shown(param: Any) -> str:
    """How a person writes the parameter: its long option, or an argument's metavar."""
    if isinstance(param, TyperArgument):
        return param.metavar or param.name.upper()
    long = [o for o in param.opts if o.startswith("--")]
    return (long or param.opts)[0]


def _choices(param: Any) -> tuple[str, ...] | None:
    spec = PARAMS.get(param.name)
    if spec is not None:
        return spec.choice_names
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    if isinstance(annotation, type) and issubclass(annotation, Choice):
        return annotation.names()
    return None


def _expected(param: Any) -> str:
    """What a right value of `param` looks like."""
    choices = _choices(param)
    if choices:
        return f"one of {', '.join(choices)}"
    spec = PARAMS.get(param.name)
    if spec is not None and spec.reader is not None:
        return spec.reader_hint().replace("must be ", "").replace("takes ", "")
    limit = spec.limit if spec is not None and spec.limit is not None else limit_of(param.name)
    if limit is not None:
        return f"{limit.kind} {limit.where}"
    kind = param.bare_type() if hasattr(param, "bare_type") else ""
    # a text option's metavar shows its form (S,T; NAME,...) better than "a value"
    return {"int": "a whole number", "float": "a number", "Path": "a file path"}.get(kind, param.metavar or "a value")


def _raw_value(e: click_errors.BadParameter) -> object:
    """The text that failed to convert: Typer converts with pydantic, whose error keeps it."""
    errors = getattr(e.__cause__, "errors", None)
    try:
        return errors()[0]["input"] if callable(errors) else None
    except (IndexError, KeyError, TypeError):
        return None


def _bad_value(param: Any, raw: object, message: str) -> str:
    flag = _shown(param)
    if raw is None:
        return f"{flag}: {message.rstrip('.')}; expected {_expected(param)}"
    choices = _choices(param)
    if choices:
        return unknown_choice(flag, raw, choices)
    limit = limit_of(param.name)
    if limit is not None:
        return limit.unparsable(flag, str(raw))
    return f"{flag} must be {_expected(param)}, got {str(raw)!r}"


# -- the commands ----------------------------------------------------------------------

class _Flag(TyperOption):
    """A flag: its name says it all, no `<bool>` beside it."""

    def display_type_rich(self, ctx: Any) -> str | None:
        return None


class _Argument(TyperArgument):
    """An argument shown by its metavar (PROMPT, TRACE...), in --help and the usage line."""

    def display_type_rich(self, ctx: Any) -> str | None:
        return None

    def _usage_display_name(self) -> str:
        name = self.display_name_raw
        return name if self.required else f"[{name}]"


def _readable(params: Sequence[Any]) -> None:
    for p in params:
        if p.help:
            p.help = escape(p.help)
        if isinstance(p, TyperOption) and p.is_flag:
            p.__class__ = _Flag  # same state, other display
        elif isinstance(p, TyperArgument):
            p.metavar = p.metavar or p.name.upper()
            p.__class__ = _Argument


def _readable_help_option(option: Any) -> Any:
    if isinstance(option, TyperOption) and not isinstance(option, _Flag):
        option.__class__ = _Flag
    return option


NARROW = 100  # columns below which an option's help goes under its name (a table would cut and squeeze it)
HELP_INDENT = 4


class _Stacked:
    """Typer's options or commands table at a narrow width: each row's names and type on one line,
    its help under them, indented, as wide as the terminal allows."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.rows: list[tuple[Any, ...]] = []

    def add_column(self, *args: Any, **kwargs: Any) -> None:
        pass

    def add_row(self, *cells: Any) -> None:
        self.rows.append(cells)

    @property
    def row_count(self) -> int:
        return len(self.rows)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for *names, help_cell in self.rows:
            shown = [c if isinstance(c, Text) else Text(str(c)) for c in names]
            yield Text(" ").join(c for c in shown if c.plain.strip())
            yield Padding(help_cell, (0, 0, 0, HELP_INDENT))


@contextmanager
def _stacked_tables() -> Iterator[None]:
    """Typer's help tables drawn as `_Stacked` while the help is formatted (typer is pinned to 0.29,
    whose rich_utils builds them with its module's `Table`; tests/test_finish.py checks the result)."""
    from typer import rich_utils

    table = rich_utils.Table
    rich_utils.Table = _Stacked  # type: ignore[assignment, misc]
    try:
        yield
    finally:
        rich_utils.Table = table  # type: ignore[misc]


class _ReadableHelp:
    """Help text escaped once for Rich, readable metavars, the help flag shown as a flag."""

    help: str | None
    params: list

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.help = escape(self.help) if self.help else self.help
        _readable(self.params)

    def get_help_option(self, ctx: Any) -> Any:
        return _readable_help_option(super().get_help_option(ctx))  # type: ignore[misc]


class PrestoCommand(_ReadableHelp, TyperCommand):
    """A command whose extra arguments and usage errors are reported in one line, and whose help
    at a narrow width puts every option's help under its name (`_Stacked`)."""

    def format_help(self, ctx: Any, formatter: Any) -> None:
        from typer import rich_utils

        if rich_utils._get_rich_console().width >= NARROW:
            return super().format_help(ctx, formatter)
        with _stacked_tables():
            return super().format_help(ctx, formatter)

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        # extra arguments are let through here and reported below, saying what the command takes
        ctx.allow_extra_args = True
        typed = list(args)  # (the parser consumes the list it is given)
        try:
            rest = super().parse_args(ctx, args)
        except click_errors.UsageError as e:
            e.ctx = e.ctx or ctx  # the parser leaves some without their command
            raise
        if not ctx.resilient_parsing:
            _refuse_non_finite(self.params, ctx, typed)
        if rest and not ctx.resilient_parsing:
            takes = [_shown(p) for p in self.params if isinstance(p, TyperArgument)]
            hint = f"takes {' '.join(takes)}; quote a value that has spaces" if takes else "takes no arguments"
            raise UsageLine(f"unexpected argument {rest[0]!r} for {PROG} {ctx.info_name} ({hint})", ctx)
        return rest


def _refuse_non_finite(params: Sequence[Any], ctx: Any, typed: list[str]) -> None:
    """A number option that parsed to inf or nan (1e309 overflows to inf) is refused here, naming
    the text that was typed: the range check after it could only say "inf"."""
    import math

    for p in params:
        value = ctx.params.get(p.name)
        if not isinstance(p, TyperOption) or not isinstance(value, float) or math.isfinite(value):
            continue
        raw = _typed_value(p, typed)
        limit = limit_of(p.name)
        where = f" {limit.where}" if limit is not None else ""
        shown = repr(raw) if raw is not None else str(value)
        raise UsageLine(f"{_shown(p)} must be a finite number{where}, got {shown}", ctx)


def _typed_value(param: Any, typed: list[str]) -> str | None:
    """The text given to `param` on the command line (the last time it was given), if it was."""
    raw = None
    for i, a in enumerate(typed):
        for opt in param.opts:
            if a == opt and i + 1 < len(typed):
                raw = typed[i + 1]
            elif opt.startswith("--") and a.startswith(opt + "="):
                raw = a[len(opt) + 1:]
    return raw


class PrestoGroup(_ReadableHelp, TyperGroup):
    """The `presto-tui` group: every usage error below it ends in one line and exit code 2."""

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        name = args[0]
        if self.get_command(ctx, name) is None and not name.startswith("-") and not ctx.resilient_parsing:
            commands = self.list_commands(ctx)
            close = get_close_matches(name, commands, n=1)
            raise UsageLine(f"unknown command {name!r}; did you mean {close[0]}?" if close else
                            unknown_choice("command", name, commands), ctx)
        return super().resolve_command(ctx, args)

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, windows_expand_args: bool = True, **extra: Any) -> Any:
        try:
            code = super().main(args, PROG, complete_var, standalone_mode=False,
                                windows_expand_args=windows_expand_args, **extra)
        except click_errors.NoArgsIsHelpError as e:  # `presto-tui` alone: the help (already printed by Rich)
            if e.format_message().strip():
                print(e.format_message())
            code = EXIT_USAGE
        except click_errors.UsageError as e:
            print_error(usage_line(e))
            code = EXIT_USAGE
        except click_errors.ClickException as e:
            print_error(e.format_message())
            code = e.exit_code
        except typer.Abort:
            print_error("aborted")
            code = 1
        code = code if isinstance(code, int) else 0  # a command's own return value is not an exit code
        if standalone_mode:
            sys.exit(code)
        return code
