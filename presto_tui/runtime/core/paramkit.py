"""The parameter kit: how one parameter is declared, read, checked and explained.

A `Param` is everything presto-tui knows of one parameter (its name, type, range or choices,
default, help, and what it applies to); `Limit` is a documented range; `ParamError` a bad value,
said in one line that names the parameter as the person wrote it.  The table of every parameter
(the core's and each method's own) is `runtime/core/spec.py`; a method declares its own `Param`s
in its module (`runtime/methods/`).
"""

from __future__ import annotations

import math
import numbers
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from enum import Enum
from typing import Any

from presto_tui.errors import InputError
from presto_tui.runtime.core.names import Choice, unknown_choice

# -- ranges ----------------------------------------------------------------------------------


SHOWN_CHARS = 40  # a message repeats at most this much of a bad value (a request body may hold megabytes)


def number_text(value: float) -> str:
    """A value as a person wrote it: -1 rather than -1.0, 1e+308 as Python writes it; a whole number
    of more than 20 digits by its length alone, so that a message never echoes 31 digits back."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int) and abs(value) >= 10**20:
        return f"a {len(str(abs(value)))}-digit number"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(value)


def raw_text(raw: object, limit: int = SHOWN_CHARS) -> str:
    """Text a person typed, as a message repeats it: quoted, cut to `limit` characters."""
    text = repr(str(raw))
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


@dataclass(frozen=True)
class Limit:
    """A documented range of a number: [lo, hi], or (lo, hi] with `lo_open`, or no upper bound
    with hi = inf; whole numbers only with `integer`.  Its text and its messages are the same
    wherever a range is checked."""

    lo: float
    hi: float
    integer: bool = False
    lo_open: bool = False

    def __str__(self) -> str:
        return f"{'(' if self.lo_open else '['}{self._bound(self.lo)}, {self._bound(self.hi)}]"

    def _bound(self, x: float) -> str:
        if not self.integer or not math.isfinite(x):  # (no upper bound reads inf, a whole number's too)
            return f"{x:g}"
        n = int(x)
        if n == 2**63 - 1:
            return "2^63-1"
        if n >= 10**6 and str(n).rstrip("0") == "1":
            return f"10^{len(str(n)) - 1}"
        return str(n)

    @property
    def where(self) -> str:
        """'in [1, 256]', or '>= 1' without an upper bound."""
        if math.isinf(self.hi):
            return f"{'>' if self.lo_open else '>='} {self._bound(self.lo)}"
        return f"in {self}"

    @property
    def kind(self) -> str:
        return "a whole number" if self.integer else "a number"

    def contains(self, value: float) -> bool:
        return (self.lo < value if self.lo_open else self.lo <= value) and value <= self.hi

    def message(self, flag: str, value: float, typed: object = None) -> str | None:
        """What is wrong with `value` (None: nothing).  `typed`: the text the person wrote, named
        in the message instead of the number it became (1e309, not inf)."""
        finite = not isinstance(value, float) or math.isfinite(value)
        if finite and self.contains(value):
            return None  # (the usual case, checked for every session: nothing is formatted)
        shown = number_text(value) if typed is None else repr(str(typed))
        if not finite:
            return f"{flag} must be a finite number {self.where}, got {shown}"
        verb = "must be" if math.isinf(self.hi) else "must lie"
        return f"{flag} {verb} {self.where}, got {shown}"

    def check(self, flag: str, value: float, typed: object = None) -> None:
        """Raise ParamError unless `value` is finite and within the range."""
        message = self.message(flag, value, typed)
        if message is not None:
            raise ParamError(message)

    def unparsable(self, flag: str, raw: str) -> str:
        """The message for text that is not a number of this kind at all."""
        return f"{flag} must be {self.kind} {self.where}, got {raw_text(raw)}"


# -- errors ----------------------------------------------------------------------------------

Naming = Callable[[str], str]  # a parameter's name -> how the person wrote it


def dashed(name: str) -> str:
    """A parameter's name as a flag, when nothing else is known of it."""
    return "--" + name.replace("_", "-")


# How a message names a parameter when its caller names no naming: the command line's flags.  The
# parameter table (`spec.py`) sets it to its own `flag`, which knows each declared flag (--rank).
default_naming: list[Naming] = [dashed]


class _Names(dict):
    """The `{name}` fields of a message template, each rendered by a naming on first use."""

    def __init__(self, naming: Naming) -> None:
        super().__init__()
        self.naming = naming

    def __missing__(self, key: str) -> str:
        return self.naming(key)


class ParamError(InputError):
    """A parameter value that cannot be sampled with; the message is one line.

    `param` is the parameter at fault (None when the message is about no single one).  A
    message written with `{name}` fields (`ParamError.about`) is said again with another
    naming by `named`: the server names its request fields, the settings dialog its labels."""

    def __init__(self, message: str, param: str | None = None, template: str | None = None,
                 values: tuple = ()) -> None:
        super().__init__(message)
        self.param = param
        self.template = template
        self.values = values

    @classmethod
    def about(cls, param: str, template: str, *values: object, naming: Naming | None = None) -> ParamError:
        """An error about `param`: `template` names parameters as {name} fields ({alpha}, {tau}) and
        values as positional fields, rendered with `naming` (the command line's flags by default)."""
        err = cls("", param, template, values)
        err.args = (err.render(naming or default_naming[0]),)
        return err

    def render(self, naming: Naming) -> str:
        if self.template is None:
            return str(self)
        return string.Formatter().vformat(self.template, self.values, _Names(naming))

    def named(self, naming: Naming) -> ParamError:
        """The same error, its parameters named by `naming`."""
        if self.template is None:
            return self
        return ParamError.about(self.param or "", self.template, *self.values, naming=naming)


# -- the parameters --------------------------------------------------------------------------


class Group(Enum):
    """What a parameter is about; a command takes whole groups (cli/params.py)."""

    METHOD = "method"  # which sampler and prefetch rule, and the rule's budget
    LAW = "law"  # what every sampler reads: the target, the response, the seed
    CHAIN = "chain"  # an MH chain's: blocks, steps, epsilon, inputs, speculation
    OWN = "own"  # one sampler's own (EntropyCut's beta, best-of-N's samples...)
    ENGINE = "engine"

    @property
    def panel(self) -> str:
        """The --help panel its flags show under."""
        return "Engine" if self is Group.ENGINE else "Sampler"


class Target(Enum):
    """Which object a value goes to."""

    SAMPLER = "sampler"  # a SamplerParams field
    ENGINE = "engine"  # an EngineOptions field (or the backend itself)


@dataclass(frozen=True)
class Param:
    """One parameter.  `help` is a sentence without its range or default: those are added
    from `limit`/`choices` and `default`/`default_text` wherever help is shown."""

    name: str
    kind: type  # int, float, str or bool
    default: Any
    help: str
    group: Group
    label: str  # short, for the settings dialog and tables
    limit: Limit | None = None
    # the names it takes: an enum of names with their help, a tuple, or a function giving (name, help) pairs
    # when they are known only at run time (the methods registered)
    choices: type[Choice] | tuple[str, ...] | Callable[[], Sequence[tuple[str, str]]] | None = None
    samplers: frozenset[str] | None = None  # the methods that read it; None: every method (but see kinds)
    kinds: frozenset[str] | None = None  # the kinds of method that read it (MethodKind values); None: every kind
    rules: frozenset[str] | None = None  # None: every prefetch rule (incl. none)
    optional: bool = False  # None is a value (tau: 1/alpha; block size: n)
    default_text: str | None = None  # how the default reads when it is not a plain value
    flag: str | None = None  # the long flag, if not --name-with-dashes; "" for none (set through another)
    short: str | None = None
    metavar: str | None = None
    field: str | None = None  # the request field, if not the name; "" for none
    aliases: tuple[str, ...] = ()  # other request fields accepted for it
    negative: str | None = None  # a bool's --no- flag
    reader: Callable[[str, str], dict[str, Any]] | None = None  # text -> values (budget: N|auto|fill:N)
    settings: bool = True  # a field of the settings dialog (sampler parameters)
    envvar: str | None = None  # the command line also reads it from this environment variable
    symbol: str | None = None  # how `stats` names a sampler's own parameter beside its name (β=4); "" value only
    extra: dict[str, Any] = dataclass_field(default_factory=dict)

    @property
    def target(self) -> Target:
        return Target.ENGINE if self.group is Group.ENGINE else Target.SAMPLER

    @property
    def cli_flag(self) -> str:
        return self.flag if self.flag is not None else "--" + self.name.replace("_", "-")

    @property
    def request_field(self) -> str:
        return self.field if self.field is not None else self.name

    @property
    def choice_items(self) -> tuple[tuple[str, str], ...] | None:
        """Its choices with their help ("" where a plain tuple gives none)."""
        if self.choices is None:
            return None
        if isinstance(self.choices, tuple):
            return tuple((c, "") for c in self.choices)
        if isinstance(self.choices, type) and issubclass(self.choices, Choice):
            return tuple((c.value, c.help) for c in self.choices)
        return tuple(self.choices())  # type: ignore[arg-type]

    @property
    def choice_names(self) -> tuple[str, ...] | None:
        items = self.choice_items
        return None if items is None else tuple(name for name, _ in items)

    def applies(self, params: Mapping[str, Any], kind: str | None = None) -> bool:
        """Whether a session with these parameters (a SamplerParams dict) reads this one; `kind`: the
        kind of its method (`spec.applies` looks it up)."""
        sampler, rule = params.get("sampler"), params.get("prefetch")
        if self.samplers is not None and sampler not in self.samplers:
            return False
        if self.kinds is not None and kind not in self.kinds:
            return False
        return self.rules is None or rule in self.rules

    # -- one validation path -----------------------------------------------------------------
    def _error(self, message: str, naming: Naming | None) -> ParamError:
        """A ParamError whose message was written with this parameter as `{name}` (values escaped)."""
        return ParamError.about(self.name, message, naming=naming)

    def read(self, raw: Any, naming: Naming | None = None) -> dict[str, Any]:
        """A value as it arrived (text from a flag or a field, or a JSON value) -> {name: value}
        (a reader may set more than one: the budget sets its policy).  ParamError names it."""
        me = "{" + self.name + "}"
        if raw is None:
            return {self.name: None}
        if isinstance(raw, Choice):
            raw = raw.value
        if self.reader is not None:
            if isinstance(raw, bool) or not isinstance(raw, (int, str)):
                raise self._error(f"{me} {self.reader_hint()}, got {_esc(raw_text(raw))}", naming)
            try:
                return self.reader("\\0", str(raw))
            except ParamError as e:
                raise self._error(_esc(str(e)).replace("\\0", me), naming) from None
        if self.kind is bool:
            if isinstance(raw, bool):
                return {self.name: raw}
            text = str(raw).strip().lower()
            if text in ("true", "1", "yes", "on"):
                return {self.name: True}
            if text in ("false", "0", "no", "off"):
                return {self.name: False}
            raise self._error(f"{me} should be true or false, got {_esc(raw_text(raw))}", naming)
        if self.kind is str:
            if not isinstance(raw, str):
                raise self._error(f"{me} should be a name, got {_esc(raw_text(raw))}", naming)
            value = raw.strip()
            if self.optional and value == "":
                return {self.name: None}
            self.check(value, naming)
            return {self.name: value}
        # a number
        limit = self.limit or Limit(-math.inf, math.inf, integer=self.kind is int)
        if isinstance(raw, str) and self.optional and raw.strip() == "":
            return {self.name: None}
        if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
            raise self._error(_esc(limit.unparsable("\0", str(raw))).replace("\0", me), naming)
        try:
            number = whole_number(raw) if limit.integer else float(raw)
        except (ValueError, OverflowError):
            raise self._error(_esc(limit.unparsable("\0", str(raw))).replace("\0", me), naming) from None
        # what the person typed where the number it became says less (1e309, not inf)
        typed = raw.strip()[:SHOWN_CHARS] if isinstance(raw, str) and isinstance(number, float) \
            and not math.isfinite(number) else None
        message = limit.message("\0", number, typed=typed)
        if message is not None:
            raise self._error(_esc(message).replace("\0", me), naming)
        return {self.name: number}

    def reader_hint(self) -> str:
        return str(self.extra.get("hint", "has a form of its own"))

    def check(self, value: Any, naming: Naming | None = None) -> None:
        """Raise ParamError unless `value` (already typed) is allowed."""
        me = "{" + self.name + "}"
        if value is None:
            if not self.optional and self.default is not None:
                raise self._error(f"{me} needs a value", naming)
            return
        wrong = self.type_message(value)
        if wrong is not None:
            raise self._error(wrong, naming)
        choices = self.choice_names
        if choices is not None and value not in choices and not self.extra.get("recorded", lambda v: None)(value):
            why = self.extra.get("missing", lambda v: None)(value)  # a choice that exists but failed to load
            if why is not None:
                raise self._error(f"{me}: {_esc(why)}", naming)
            raise self._error(_esc(unknown_choice("\0", value, choices)).replace("\0", me), naming)
        if self.limit is not None and not isinstance(value, str):
            message = self.limit.message("\0", value)
            if message is not None:
                raise self._error(_esc(message).replace("\0", me), naming)

    def type_message(self, value: Any) -> str | None:
        """What is wrong with the type of a typed value (a message template naming this parameter as
        `{name}`), None if it is of its kind: a whole-number parameter takes only whole numbers (2.5, "x"
        and True are refused, as the command line refuses them), a number a number, a name text, a switch
        a bool."""
        me = "{" + self.name + "}"
        if self.kind is bool:
            ok = isinstance(value, bool)
        elif self.kind is str:
            ok = isinstance(value, str)
        elif self.kind is int:
            ok = isinstance(value, numbers.Integral) and not isinstance(value, bool)
        elif self.kind is float:
            ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
        else:
            return None
        if ok:
            return None
        shown = number_text(value) if isinstance(value, (bool, float)) else raw_text(value)
        if self.kind in (int, float):
            limit = self.limit or Limit(-math.inf, math.inf, integer=self.kind is int)
            kind = "a whole number" if self.kind is int else "a number"
            where = f" {limit.where}" if math.isfinite(limit.lo) or math.isfinite(limit.hi) else ""
            return f"{me} must be {kind}{_esc(where)}, got {_esc(shown)}"
        return f"{me} must be {'true or false' if self.kind is bool else 'text'}, got {_esc(shown)}"

    def help_text(self, default: Any = None) -> str:
        """The help with its choices or range and its default, as --help and the docs show it."""
        text = self.help.rstrip(".")
        pairs = self.choice_items
        if pairs:
            items = [f"{name} ({help})" if help else name for name, help in pairs]
            text += ": " + (", ".join(items[:-1]) + f" or {items[-1]}" if len(items) > 1 else items[0])
        if self.limit is not None and self.reader is None:
            text += f", {self.limit.where}"
        for line in self.extra.get("left_out", lambda: ())():  # choices that exist but failed to load
            text += f"; {line.rstrip('.')}"
        shown = default if default is not None else self.default_shown
        return f"{text} [default: {shown}]." if shown != "" else text + "."

    @property
    def default_shown(self) -> str:
        if self.default_text is not None:
            return self.default_text
        if self.default is None:
            return ""
        if isinstance(self.default, bool):
            return "on" if self.default else "off"
        return number_text(self.default) if isinstance(self.default, (int, float)) else str(self.default)


def _esc(text: str) -> str:
    """Text from outside, safe inside a message template (its braces are not fields)."""
    return text.replace("{", "{{").replace("}", "}}")


def whole_number(value: int | float | str) -> int:
    """A whole number as a person or a JSON body gives it: 3, 3.0, "3" (not "3.0", not 3.5: ValueError)."""
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not (math.isfinite(value) and value.is_integer()):
            raise ValueError(value)
        return int(value)
    return int(value.strip())  # as the command line reads a whole number: "4.0" is not one
