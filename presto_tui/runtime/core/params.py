"""Sampler parameters, their defaults and their validation.

Validation happens before any work so that a bad flag costs the user nothing
but a one-line message (see `ParamError`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

from presto_tui.errors import InputError

SAMPLERS = ("powermh", "entropycut", "multitry")
MULTITRY_TAUS = (0.25, 0.5, 1.0)  # candidate temperatures of MultiTryMH (paper D.4)
PREFETCH_RULES = ("none", "bfs", "predictive", "spine", "stream")
INPUT_MODES = ("decision", "node")
# The streaming rule's budget: `cost` keeps a request live only while it pays for its share of
# every engine step (N is a cap); `fill` keeps N requests live whatever they cost.
BUDGET_POLICIES = ("cost", "fill")
AUTO_BUDGET = 64  # `-N auto`: the cost policy with this cap
# What the streaming rule may speculate beyond the walker's state: `proposal` (requests cut inside
# a proposal still decoding) and `block` (the next block's extension); `none` for neither.
SPECULATE = ("proposal", "block")

# The paper's sizes (appendix D.4, table 6): one block of n = 1024, K = 100,
# N_pf = 20 (alpha = 4, tau = 1/alpha are the defaults).  `--paper-settings` selects them.
PAPER_SETTINGS = dict(max_new_tokens=1024, block_size=1024, steps=100, budget=20)
# `bench` compares many configurations on every prompt; its default sizes keep a run to minutes.
BENCH_SIZES = dict(max_new_tokens=64, steps=16)


class ParamError(InputError):
    """A parameter value that cannot be sampled with; the message is one line."""


# Every numeric parameter's documented range (inclusive); values must also be finite.
LIMITS: dict[str, tuple[float, float]] = {
    "alpha": (0.0, 1000.0),  # and > 0
    "tau": (1e-4, 100.0),
    "max_new_tokens": (1, 65536),
    "block_size": (1, 65536),
    "steps": (1, 1_000_000),
    "budget": (1, 4096),
    "epsilon": (0.0, 0.5),  # the paper's range: epsilon only sets the certainty classes
    "seed": (0, 2**63 - 1),
    "beta": (0.0, 64.0),
    "cut_mix": (0.0, 1.0),
    "tries": (1, 64),
}


@dataclass(frozen=True)
class SamplerParams:
    """Everything that fixes a chain's law and its prefetch schedule.

    Defaults are sized to give a first answer within about a minute on a
    2-core CPU with a small model; `PAPER_SETTINGS` are one flag away.
    """

    sampler: str = "powermh"
    prefetch: str = "spine"
    inputs: str = "decision"
    alpha: float = 4.0
    tau: float | None = None  # None: 1/alpha, as in the paper (sec 2, D.4)
    max_new_tokens: int = 96  # n
    block_size: int | None = None  # B; None: one block, B = n
    steps: int = 24  # K, MH transitions per block
    budget: int = 8  # N_pf, counted in distinct requests sent to the engine (stream: the most kept live)
    budget_policy: str = "cost"  # stream: see BUDGET_POLICIES
    speculate: str = "proposal,block"  # stream: see SPECULATE
    epsilon: float = 0.01
    seed: int = 0
    beta: float = 4.0  # EntropyCut's cut-law exponent (paper D.4)
    cut_mix: float = 0.1  # EntropyCut: uniform share of the cut law (reaches the first token)
    tries: int = 4  # MultiTryMH's candidates per transition

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
                raise ParamError(f"unknown --{name} {value!r}; choose one of {', '.join(choices)}")
        if self.budget_policy not in BUDGET_POLICIES:
            raise ParamError(f"unknown budget policy {self.budget_policy!r}; "
                             f"choose one of {', '.join(BUDGET_POLICIES)}")
        if self.speculate != "none" and any(s not in SPECULATE for s in self.speculate.split(",")):
            raise ParamError(f"--speculate takes none or a comma list of {', '.join(SPECULATE)}, "
                             f"got {self.speculate!r}")
        if self.prefetch in ("spine", "stream") and self.inputs != "decision":
            raise ParamError(f"--prefetch {self.prefetch} needs --inputs decision (its requests are keyed by "
                             "decision, which is what keeps it exact)")
        for name, (lo, hi) in LIMITS.items():
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, float) and not math.isfinite(value):
                raise ParamError(f"--{name.replace('_', '-')} must be a finite number, got {value}")
            if not lo <= value <= hi:
                raise ParamError(f"--{name.replace('_', '-')} must lie in [{lo:g}, {hi:g}], got {value}")
        if self.alpha <= 0:
            raise ParamError(f"--alpha must be > 0, got {self.alpha}")
        if self.max_new_tokens % self.block:
            raise ParamError(f"--block-size {self.block} does not divide --max-new-tokens {self.max_new_tokens}")
        if self.sampler == "entropycut" and self.block < 2:
            raise ParamError("--sampler entropycut needs --block-size >= 2 (it cuts between tokens)")
        if self.sampler == "multitry" and self.prefetch != "none" and self.budget < self.tries:
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
