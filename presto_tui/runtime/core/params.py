"""Sampler parameters, their defaults and their validation.

Validation happens before any work so that a bad flag costs the user nothing
but a one-line message (see `ParamError`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from presto_tui.errors import InputError
from presto_tui.runtime.core.names import InputMode, PrefetchRule, SamplerName, unknown_choice

# The registry's names as strings (runtime/core/names.py holds the lists and their help).
SAMPLERS = SamplerName.names()
PREFETCH_RULES = PrefetchRule.names()
INPUT_MODES = InputMode.names()
MULTITRY_TAUS = (0.25, 0.5, 1.0)  # candidate temperatures of MultiTryMH (paper D.4)
# The streaming rule's budget: `cost` keeps a request live only while it pays for its share of
# every engine step (N is a cap); `fill` keeps N requests live whatever they cost.
BUDGET_POLICIES = ("cost", "fill")
AUTO_BUDGET = 64  # `-N auto`: the cost policy with this cap


def budget_text(p: Mapping[str, Any]) -> str:
    """The budget as `-N` writes it, from a params dict: auto, a cap (the streaming rule's cost
    policy), fill:N (it keeps N live); N for the round rules."""
    b = p.get("budget")
    if p.get("prefetch") == "stream":
        if p.get("budget_policy") == "fill":
            return f"fill:{b}"
        if b == AUTO_BUDGET:
            return "auto"
    return str(b)
# What the streaming rule may speculate beyond the walker's state: `proposal` (requests cut inside
# a proposal still decoding), `block` (the next block's extension) and `extension` (a block's first
# proposals while its own extension decodes); `none` for none of them.
SPECULATE = ("proposal", "block", "extension")

# The paper's sizes (appendix D.4, table 6): one block of n = 1024, K = 100,
# N_pf = 20 (alpha = 4, tau = 1/alpha are the defaults).  `--paper-settings` selects them.
PAPER_SETTINGS = dict(max_new_tokens=1024, block_size=1024, steps=100, budget=20)
# `bench` compares many configurations on every prompt; its default sizes keep a run to minutes.
BENCH_SIZES = dict(max_new_tokens=64, steps=16)


class ParamError(InputError):
    """A parameter value that cannot be sampled with; the message is one line."""


@dataclass(frozen=True)
class Limit:
    """A documented range of a number: [lo, hi], or (lo, hi] with `lo_open`, or no upper
    bound with hi = inf; whole numbers only with `integer`.  Its text and its messages are
    the same wherever a range is checked (sampler parameters here, the CLI's own numbers,
    a value that did not parse)."""

    lo: float
    hi: float
    integer: bool = False
    lo_open: bool = False

    def __str__(self) -> str:
        return f"{'(' if self.lo_open else '['}{self._bound(self.lo)}, {self._bound(self.hi)}]"

    def _bound(self, x: float) -> str:
        if not self.integer:
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

    def check(self, flag: str, value: float) -> None:
        """Raise ParamError unless `value` is finite and within the range."""
        if isinstance(value, float) and not math.isfinite(value):
            raise ParamError(f"{flag} must be a finite number {self.where}, got {number_text(value)}")
        if not self.contains(value):
            verb = "must be" if math.isinf(self.hi) else "must lie"
            raise ParamError(f"{flag} {verb} {self.where}, got {number_text(value)}")

    def unparsable(self, flag: str, raw: str) -> str:
        """The message for text that is not a number of this kind at all."""
        return f"{flag} must be {self.kind} {self.where}, got {raw!r}"


def number_text(value: float) -> str:
    """A value as a person wrote it: -1 rather than -1.0, 1e+308 as Python writes it."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(value)


# Every numeric parameter's documented range; values must also be finite.
LIMITS: dict[str, Limit] = {
    "alpha": Limit(0, 1000, lo_open=True),
    "tau": Limit(1e-4, 100),
    "max_new_tokens": Limit(1, 65536, integer=True),
    "block_size": Limit(1, 65536, integer=True),
    "steps": Limit(1, 1_000_000, integer=True),
    "budget": Limit(1, 4096, integer=True),
    "epsilon": Limit(0, 0.5),  # the paper's range: epsilon only sets the certainty classes
    "seed": Limit(0, 2**63 - 1, integer=True),
    "beta": Limit(0, 64),
    "cut_mix": Limit(0, 1),
    "tries": Limit(1, 64, integer=True),
    "samples": Limit(1, 4096, integer=True),
    "particles": Limit(1, 4096, integer=True),
    "smc_block": Limit(1, 65536, integer=True),
    "smc_ramp": Limit(0, 65536, integer=True),
}
BON_RANKS = ("logq", "logp")  # best-of-N keeps the highest sum of log q_tau (the paper's) or of log p0


def flag(name: str) -> str:
    """The command-line flag of a parameter name."""
    return "--" + name.replace("_", "-")


@dataclass(frozen=True)
class SamplerParams:
    """Everything that fixes a chain's law and its prefetch schedule.

    Defaults are sized to give a first answer within about a minute on a
    2-core CPU with a small model; `PAPER_SETTINGS` are one flag away.
    """

    sampler: str = SamplerName.POWERMH.value
    # the fastest exact rule measured (README: bench on CPU); the CLI gives it -N auto unless -N is given
    prefetch: str = PrefetchRule.STREAM.value
    inputs: str = InputMode.DECISION.value
    alpha: float = 4.0
    tau: float | None = None  # None: 1/alpha, as in the paper (sec 2, D.4)
    max_new_tokens: int = 96  # n
    block_size: int | None = None  # B; None: one block, B = n
    steps: int = 24  # K, MH transitions per block
    budget: int = 8  # N_pf, counted in distinct requests sent to the engine (stream: the most kept live)
    budget_policy: str = "cost"  # stream: see BUDGET_POLICIES
    speculate: str = "proposal,block,extension"  # stream: see SPECULATE
    epsilon: float = 0.01
    seed: int = 0
    beta: float = 4.0  # EntropyCut's cut-law exponent (paper D.4)
    cut_mix: float = 0.1  # EntropyCut: uniform share of the cut law (reaches the first token)
    tries: int = 4  # MultiTryMH's candidates per transition
    samples: int = 8  # best-of-N's N
    bon_rank: str = "logq"  # best-of-N: rank by sum log q_tau (the paper's choice) or sum log p0
    particles: int = 8  # PowerSMC's P
    smc_block: int = 128  # PowerSMC: tokens per block between resampling steps (the paper's 128)
    smc_ramp: int = 400  # PowerSMC: the exponent reaches alpha after this many tokens (the paper's 400)

    @property
    def proposal_tau(self) -> float:
        return self.tau if self.tau is not None else 1.0 / self.alpha

    @property
    def block(self) -> int:
        return self.block_size if self.block_size is not None else self.max_new_tokens

    @property
    def n_blocks(self) -> int:
        return self.max_new_tokens // self.block

    def validate(self) -> SamplerParams:
        """Return self, or raise ParamError naming the first bad value (every range in LIMITS)."""
        for name, choices in (("sampler", SAMPLERS), ("prefetch", PREFETCH_RULES), ("inputs", INPUT_MODES)):
            value = getattr(self, name)
            if value not in choices:
                raise ParamError(unknown_choice(flag(name), value, choices))
        if self.bon_rank not in BON_RANKS:
            raise ParamError(unknown_choice("--rank", self.bon_rank, BON_RANKS))
        if self.budget_policy not in BUDGET_POLICIES:
            raise ParamError(unknown_choice("budget policy", self.budget_policy, BUDGET_POLICIES))
        if self.speculate != "none" and any(s not in SPECULATE for s in self.speculate.split(",")):
            raise ParamError(f"--speculate takes none or a comma list of {', '.join(SPECULATE)}, "
                             f"got {self.speculate!r}")
        rule = PrefetchRule.of(self.prefetch)
        if not SamplerName.of(self.sampler).chain and rule.presto:
            raise ParamError(f"--sampler {self.sampler} is a baseline, not an MH chain: it takes no --prefetch "
                             "rule (use --prefetch none)")
        if rule.presto and not rule.node_inputs and self.inputs != InputMode.DECISION:
            raise ParamError(f"--prefetch {self.prefetch} needs --inputs decision (its requests are keyed by "
                             "decision, which is what keeps it exact)")
        for name, limit in LIMITS.items():
            value = getattr(self, name)
            if value is not None:
                limit.check(flag(name), value)
        if self.max_new_tokens % self.block:
            raise ParamError(f"--block-size {self.block} does not divide --max-new-tokens {self.max_new_tokens}")
        if self.sampler == SamplerName.ENTROPYCUT and self.block < 2:
            raise ParamError("--sampler entropycut needs --block-size >= 2 (it cuts between tokens)")
        if self.sampler == SamplerName.MULTITRY and rule.presto and self.budget < self.tries:
            raise ParamError(f"--budget {self.budget} is below --tries {self.tries}: a MultiTryMH "
                             "decision needs all its candidates in one call")
        return self

    def to_dict(self) -> dict:
        d = asdict(self)
        d["tau"] = self.proposal_tau
        d["block_size"] = self.block
        return d

    def with_(self, **changes) -> SamplerParams:
        return replace(self, **changes)
