"""Sampler parameters: the values that fix a chain's law and its prefetch schedule.

Names, types, ranges, defaults and help are declared once in `runtime/core/spec.py`;
`SamplerParams` holds the values and checks how they go together.  Validation happens
before any work so that a bad value costs the person nothing but a one-line message
(`ParamError`, which names the parameter the way the person wrote it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from presto_tui.runtime.core.names import InputMode, PrefetchRule, SamplerName
from presto_tui.runtime.core.spec import (
    AUTO_BUDGET,
    BON_RANKS,
    BUDGET_POLICIES,
    LIMITS,
    PARAMS,
    SAMPLER_PARAMS,
    SPECULATE,
    Limit,
    Naming,
    ParamError,
    budget_text,
    default,
    flag,
    number_text,
)

__all__ = ["AUTO_BUDGET", "BENCH_SIZES", "BON_RANKS", "BUDGET_POLICIES", "LIMITS", "MULTITRY_TAUS",
           "PAPER_SETTINGS", "SPECULATE", "Limit", "ParamError", "SamplerParams", "budget_text", "flag",
           "number_text", "params_from", "rule_defaults"]

MULTITRY_TAUS = (0.25, 0.5, 1.0)  # candidate temperatures of MultiTryMH (paper D.4)
ROUND_BUDGET = 8  # -N for the round rules when none is given (stream's is auto)

# The paper's sizes (appendix D.4, table 6): one block of n = 1024, K = 100,
# N_pf = 20 (alpha = 4, tau = 1/alpha are the defaults).  `--paper-settings` selects them.
PAPER_SETTINGS = dict(max_new_tokens=1024, block_size=1024, steps=100, budget=20)
# `bench` and `eval` compare many configurations on every prompt; their default sizes keep a run to minutes.
BENCH_SIZES = dict(max_new_tokens=64, steps=16)


_RULE_DEFAULT: Any = None  # SamplerParams' prefetch and budget: set from the sampler and the rule


def rule_defaults(sampler: str | None, prefetch: str | None, budget: int | None) -> dict[str, Any]:
    """What an unset rule and budget are: a baseline has no prefetch rule, a chain the default
    one; the streaming rule's budget is auto (the cost policy up to AUTO_BUDGET), a round rule's
    ROUND_BUDGET."""
    chain = sampler not in SamplerName.names() or SamplerName.of(sampler).chain
    rule = prefetch if prefetch is not None else (default("prefetch") if chain else PrefetchRule.NONE.value)
    if budget is None:
        budget = AUTO_BUDGET if rule == PrefetchRule.STREAM else ROUND_BUDGET
    return {"prefetch": rule, "budget": budget}


@dataclass(frozen=True)
class SamplerParams:
    """Everything that fixes a chain's law and its prefetch schedule.

    Defaults are sized to give a first answer within about a minute on a
    2-core CPU with a small model; `PAPER_SETTINGS` are one flag away.
    """

    sampler: str = default("sampler")
    # None: the rule's default (rule_defaults): the fastest exact rule measured for a chain, none for a baseline
    prefetch: str = _RULE_DEFAULT
    inputs: str = default("inputs")
    alpha: float = default("alpha")
    tau: float | None = default("tau")  # None: 1/alpha, as in the paper (sec 2, D.4)
    max_new_tokens: int = default("max_new_tokens")  # n
    block_size: int | None = default("block_size")  # B; None: one block, B = n
    steps: int = default("steps")  # K, MH transitions per block
    # N_pf, counted in distinct requests sent to the engine (stream: the most kept live); None: the rule's default
    budget: int = _RULE_DEFAULT
    budget_policy: str = default("budget_policy")  # stream: see BUDGET_POLICIES
    speculate: str = default("speculate")  # stream: see SPECULATE (in-proposal speculation measured slower on 2 cores)
    epsilon: float = default("epsilon")
    seed: int = default("seed")
    beta: float = default("beta")  # EntropyCut's cut-law exponent (paper D.4)
    cut_mix: float = default("cut_mix")  # EntropyCut: uniform share of the cut law (reaches the first token)
    tries: int = default("tries")  # MultiTryMH's candidates per transition
    samples: int = default("samples")  # best-of-N's N
    bon_rank: str = default("bon_rank")  # best-of-N: rank by sum log q_tau (the paper's choice) or sum log p0
    particles: int = default("particles")  # PowerSMC's P
    smc_block: int = default("smc_block")  # PowerSMC: tokens per block between resampling steps (the paper's 128)
    smc_ramp: int = default("smc_ramp")  # PowerSMC: the exponent reaches alpha after this many tokens (the paper's 400)
    # Scalable Power Sampling (Ji et al. 2026; runtime/samplers/sps.py).  The paper ran K = M = 8 with chunks
    # of B = 192 of 3072 tokens (its table 4); the defaults are sized for a CPU and n = 96.
    sps_top_k: int = default("sps_top_k")  # K_t: candidate chunks per step, the most likely distinct ones drawn
    sps_draws: int | None = default("sps_draws")  # L_t: chunks drawn from q_tau per step; None: K_t
    sps_rollouts: int = default("sps_rollouts")  # M_t: rollouts per candidate
    sps_horizon: int = default("sps_horizon")  # H_t: a rollout's tokens; 0: to the end (zeta of theorem 3.1)
    sps_chunk: int = default("sps_chunk")  # B: tokens per step (1: algorithm 1, token by token)
    sps_jackknife: bool = default("sps_jackknife")  # the jackknife estimate (eq. 5), else the plug-in (eq. 4)

    def __post_init__(self) -> None:
        if self.prefetch is None or self.budget is None:
            for k, v in rule_defaults(self.sampler, self.prefetch, self.budget).items():
                object.__setattr__(self, k, v)

    @property
    def proposal_tau(self) -> float:
        return self.tau if self.tau is not None else 1.0 / self.alpha

    @property
    def block(self) -> int:
        return self.block_size if self.block_size is not None else self.max_new_tokens

    @property
    def draws(self) -> int:
        """SPS's L_t: the chunks drawn per step (--sps-draws, else --sps-top-k)."""
        return self.sps_draws if self.sps_draws is not None else self.sps_top_k

    @property
    def n_blocks(self) -> int:
        return self.max_new_tokens // self.block

    def validate(self, naming: Naming = flag) -> SamplerParams:
        """Return self, or raise ParamError naming the first bad value, each parameter named by
        `naming` (the command line's flags; the server names its fields)."""
        for p in SAMPLER_PARAMS:
            value = getattr(self, p.name)
            p.check(value, naming)
            if p.reader is not None and isinstance(value, str):
                p.read(value, naming)  # a list such as --speculate: each item checked
        about = ParamError.about
        rule = PrefetchRule.of(self.prefetch)
        if not SamplerName.of(self.sampler).chain and rule.presto:
            raise about("prefetch", "{sampler} {0} is a baseline, not an MH chain: it takes no {prefetch} rule "
                        "(use {prefetch} none)", self.sampler, naming=naming)
        if rule.presto and not rule.node_inputs and self.inputs != InputMode.DECISION:
            raise about("inputs", "{prefetch} {0} needs {inputs} decision (its requests are keyed by decision, "
                        "which is what keeps it exact)", self.prefetch, naming=naming)
        tau_limit = PARAMS["tau"].limit
        if self.tau is None and tau_limit is not None and not tau_limit.contains(self.proposal_tau):
            raise about("alpha", "{alpha} {0} makes the proposal temperature 1/alpha = {1}, outside {tau}'s range "
                        "{2}; give {tau} too", number_text(self.alpha), f"{self.proposal_tau:.4g}", tau_limit,
                        naming=naming)
        if self.max_new_tokens % self.block:
            raise about("block_size", "{block_size} {0} does not divide {max_new_tokens} {1}", self.block,
                        self.max_new_tokens, naming=naming)
        if self.sampler == SamplerName.ENTROPYCUT and self.block < 2:
            raise about("block_size", "{sampler} entropycut needs {block_size} >= 2 (it cuts between tokens)",
                        naming=naming)
        if self.sampler == SamplerName.SPS and self.sps_jackknife and self.sps_rollouts < 2:
            raise about("sps_rollouts", "{sps_jackknife} needs {sps_rollouts} >= 2 (each leave-one-out estimate "
                        "drops one rollout), got {0}; or turn {sps_jackknife} off", self.sps_rollouts, naming=naming)
        if self.sampler == SamplerName.MULTITRY and rule.presto and self.budget < self.tries:
            raise about("budget", "{budget} {0} is below {tries} {1}: a MultiTryMH decision needs all its "
                        "candidates in one call", self.budget, self.tries, naming=naming)
        return self

    def to_dict(self) -> dict:
        d = asdict(self)
        d["tau"] = self.proposal_tau
        d["block_size"] = self.block
        d["sps_draws"] = self.draws
        return d

    def with_(self, **changes) -> SamplerParams:
        return replace(self, **changes)


def params_from(values: Mapping[str, Any], preset: Mapping[str, Any] | None = None, *, paper: bool = False,
                naming: Naming = flag) -> SamplerParams:
    """SamplerParams from values as they arrived (text from a flag or a field, JSON values, or typed;
    None: not given) over `preset` (a command's own sizes) and the spec's defaults, read and checked
    on the one path every front-end uses; ParamError names a parameter as `naming` does."""
    merged = dict(preset or {})
    if paper:
        merged.update(PAPER_SETTINGS)
        if values.get("max_new_tokens") is not None and values.get("block_size") is None:
            merged["block_size"] = None  # one block of the n the person chose
    given = {p.name: values[p.name] for p in SAMPLER_PARAMS if values.get(p.name) is not None}
    for name, raw in given.items():
        merged.update(PARAMS[name].read(raw, naming))
    return SamplerParams(**merged).validate(naming)
