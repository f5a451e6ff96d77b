"""Sampler parameters, their defaults and their validation.

Validation happens before any work so that a bad flag costs the user nothing
but a one-line message (see `ParamError`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

SAMPLERS = ("powermh", "entropycut", "multitry")
MULTITRY_TAUS = (0.25, 0.5, 1.0)  # candidate temperatures of MultiTryMH (paper D.4)
PREFETCH_RULES = ("none", "bfs", "predictive", "spine")
INPUT_MODES = ("decision", "node")

# The paper's sizes (appendix D.4, table 6): one block of n = 1024, K = 100,
# N_pf = 20 (alpha = 4, tau = 1/alpha are the defaults).  `--paper-settings` selects them.
PAPER_SETTINGS = dict(max_new_tokens=1024, block_size=1024, steps=100, budget=20)


class ParamError(ValueError):
    """A parameter value that cannot be sampled with; the message is one line."""


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
    budget: int = 8  # N_pf, counted in distinct requests sent to the engine
    epsilon: float = 0.01
    seed: int = 0
    beta: float = 4.0  # EntropyCut's cut-law exponent (paper D.4)
    cut_mix: float = 0.1  # EntropyCut: uniform share of the cut law (reaches the first token)
    tries: int = 4  # MultiTryMH's candidates per transition

    @property
    def requests_per_decision(self) -> int:
        return self.tries if self.sampler == "multitry" else 1

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
        """Return self, or raise ParamError naming the first bad value."""
        if self.sampler not in SAMPLERS:
            raise ParamError(f"unknown sampler {self.sampler!r}; choose one of {', '.join(SAMPLERS)}")
        if self.prefetch not in PREFETCH_RULES:
            raise ParamError(
                f"unknown prefetch rule {self.prefetch!r}; choose one of {', '.join(PREFETCH_RULES)}"
            )
        if self.inputs not in INPUT_MODES:
            raise ParamError(f"unknown inputs mode {self.inputs!r}; choose one of {', '.join(INPUT_MODES)}")
        if self.prefetch == "spine" and self.inputs != "decision":
            raise ParamError("--prefetch spine needs --inputs decision (its requests are shared per decision)")
        if not self.alpha > 0:
            raise ParamError(f"--alpha must be > 0, got {self.alpha}")
        if self.tau is not None and not self.tau > 0:
            raise ParamError(f"--tau must be > 0, got {self.tau}")
        if self.max_new_tokens < 1:
            raise ParamError(f"--max-new-tokens must be >= 1, got {self.max_new_tokens}")
        if self.block < 1:
            raise ParamError(f"--block-size must be >= 1, got {self.block}")
        if self.max_new_tokens % self.block:
            raise ParamError(
                f"--block-size {self.block} does not divide --max-new-tokens {self.max_new_tokens}"
            )
        if self.steps < 1:
            raise ParamError(f"--steps must be >= 1, got {self.steps}")
        if self.budget < 1:
            raise ParamError(f"--budget must be >= 1, got {self.budget}")
        if not 0 <= self.epsilon <= 0.5:  # the paper's range; epsilon only sets the certainty classes
            raise ParamError(f"--epsilon must lie in [0, 0.5], got {self.epsilon}")
        if self.sampler == "entropycut" and self.block < 2:
            raise ParamError("--sampler entropycut needs --block-size >= 2 (it cuts between tokens)")
        if self.sampler == "multitry":
            if self.tries < 1:
                raise ParamError(f"--tries must be >= 1, got {self.tries}")
            if self.prefetch != "none" and self.budget < self.tries:
                raise ParamError(f"--budget {self.budget} is below --tries {self.tries}: a MultiTryMH "
                                 "decision needs all its candidates in one call")
        if not 0 <= self.cut_mix <= 1:
            raise ParamError(f"--cut-mix must lie in [0, 1], got {self.cut_mix}")
        if not self.beta >= 0:
            raise ParamError(f"--beta must be >= 0, got {self.beta}")
        if self.seed < 0:
            raise ParamError(f"--seed must be >= 0, got {self.seed}")
        return self

    def to_dict(self) -> dict:
        d = asdict(self)
        d["tau"] = self.proposal_tau
        d["block_size"] = self.block
        return d

    def with_(self, **changes) -> SamplerParams:
        return replace(self, **changes)
