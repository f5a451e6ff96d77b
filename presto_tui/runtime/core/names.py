"""The fixed names a person chooses from: prefetch rules, input modes, engines.

Each list is an Enum whose members are the names typed on the command line (a
`StrEnum`: a member equals its name) and carry their short help and what code asks
of a name.  The CLI's choices and help, parameter validation, `bench`'s labels, the
summary and the views read these lists; nothing else spells them.  The samplers are
not a fixed list: each is a `Method` in the registry (`core/registry.py`), so a plugin
can add one.
"""

from __future__ import annotations

from collections.abc import Iterable
from difflib import get_close_matches
from enum import StrEnum
from typing import Self


class Choice(StrEnum):
    """A name a person types, with its short help.  Members are written `NAME = "name", ...`:
    the first item is the name, the rest go to the subclass's `__init__`."""

    help: str

    def __new__(cls, name: str, *_info: object) -> Self:
        member = str.__new__(cls, name)
        member._value_ = name
        return member

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(m.value for m in cls)

    @classmethod
    def of(cls, name: str) -> Self:
        """The member named `name` (ValueError if there is none)."""
        return cls(name)


# how alike a typed name and a choice must be to suggest it ('strem' and 'stream', not 'dfs' and 'bfs')
NEAR_MISS = 0.75


def unknown_choice(flag: str, value: object, choices: tuple[str, ...] | list[str],
                   also: Iterable[str] = ()) -> str:
    """The one message for a name that is not among the choices (the CLI's parser and
    `SamplerParams.validate` both say it this way), with its near miss where there is one, as an
    unknown option's message has; `also`: other names a choice answers to (aliases), looked at
    for the near miss but not listed."""
    close = get_close_matches(str(value), [*choices, *also], n=1, cutoff=NEAR_MISS)
    return f"unknown {flag} {str(value)!r}; " + (f"did you mean {close[0]}? " if close else "") + \
        f"choose one of {', '.join(choices)}"


def unknown_name(what: str, name: object, known: Iterable[str], otherwise: str = "") -> str:
    """The one message for a key nobody declared (a request field, a parameter in a dict, a model
    argument), too many to list: its near miss where there is one, else `otherwise`."""
    close = get_close_matches(str(name), sorted(known), n=1)
    return f"unknown {what} {str(name)[:60]!r}" + (f"; did you mean {close[0]!r}?" if close else otherwise)


class PrefetchRule(Choice):
    """`--prefetch`: NONE is the sequential sampler; every other rule is PreSTO's."""

    node_inputs: bool  # has a variant where every tree node draws its own randomness (--inputs node)

    def __init__(self, name: str, help: str, node_inputs: bool = False) -> None:
        self.help, self.node_inputs = help, node_inputs

    NONE = "none", "the sequential sampler, one model call per transition"
    BFS = "bfs", "the paper's breadth-first allocation", True
    PREDICTIVE = "predictive", "the paper's allocation by predicted epsilon class", True
    SPINE = "spine", "one request per future decision from the round's root"
    STREAM = "stream", "continuous speculation, no rounds"

    @property
    def presto(self) -> bool:
        return self is not PrefetchRule.NONE

    @classmethod
    def presto_names(cls) -> tuple[str, ...]:
        return tuple(r.value for r in cls if r.presto)


class InputMode(Choice):
    """`--inputs`: how the random inputs of a decision are keyed."""

    def __init__(self, name: str, help: str) -> None:
        self.help = help

    DECISION = "decision", "keyed by decision, so PreSTO reproduces the sequential sampler token for token"
    NODE = "node", "every tree node draws its own, as in the paper; bfs and predictive only"


class BackendName(Choice):
    """`--backend`: the engines, each with what it can do.  Code asks an engine's capabilities,
    never its name (`tests/test_spec.py` greps for name comparisons)."""

    virtual_clock: bool  # its clock is a cost model, not seconds: times are "engine clock"
    builtin_model: bool  # it is its own model: --model means nothing to it
    thread_control: bool  # --threads sets its CPU threads
    flags: frozenset[str]  # the engine parameters (runtime/core/spec.py) it takes

    def __init__(self, name: str, help: str, virtual_clock: bool, builtin_model: bool, thread_control: bool,
                 flags: tuple[str, ...]) -> None:
        self.help, self.virtual_clock, self.builtin_model = help, virtual_clock, builtin_model
        self.thread_control, self.flags = thread_control, frozenset(flags)

    @property
    def time_unit(self) -> str:
        """What its times are measured in, for a results file and a table's legend."""
        return "engine clock (virtual: the engine's cost model)" if self.virtual_clock else "seconds"

    VLLM = ("vllm", "default where installed", False, False, True,
            ("model", "chat_template", "dtype", "threads", "max_model_len", "gpu_memory_utilization",
             "tensor_parallel_size", "pipeline_parallel_size", "distributed_executor_backend", "enforce_eager",
             "kv_cache_gib"))
    TRANSFORMERS = ("transformers", "exact float32 reference", False, False, True,
                    ("model", "chat_template", "dtype", "threads"))
    SYNTHETIC = ("synthetic", "tiny deterministic model for tests and demos", True, True, False,
                 ("synthetic_cost", "synthetic_prefill", "synthetic_vocab", "synthetic_sharpness"))
