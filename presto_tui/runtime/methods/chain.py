"""What every Metropolis-Hastings chain method shares: PowerMH, EntropyCut, MultiTryMH and a plugin's
MH family run the same way (the paper's alg. 1 and 2), sequentially or under every PreSTO rule.

A chain method says only how one MH decision goes (its `family`: the cut law, the requests a
decision makes, which proposal is the move and its score: `runtime/samplers/families.py`) and
its own parameters; the driver (`RoundDriver` for the sequential sampler and the round rules,
`StreamDriver` for the streaming rule), the events (rounds, transitions, requests), the summary
and the app's tree view are the chain machinery's, the same for all of them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

from presto_tui.runtime.core.method import Axis, Cost, Method, MethodKind
from presto_tui.runtime.core.names import PrefetchRule
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.core.randomness import decision_inputs
from presto_tui.runtime.core.spec import Naming, ParamError, number_text, rule_words
from presto_tui.runtime.session.driver import Driver
from presto_tui.runtime.session.loop import COST_POLICY_LIVE
from presto_tui.runtime.session.population import Population
from presto_tui.runtime.session.rounds import RoundDriver
from presto_tui.runtime.session.streaming import StreamDriver

# Which driver runs a prefetch rule: every rule but the streaming one runs in rounds.
DRIVERS: dict[str, type[Driver]] = {PrefetchRule.STREAM.value: StreamDriver}


class ChainMethod(Method):
    """An MH chain method: subclass it with a `family` and the method's own parameters."""

    kind: ClassVar[MethodKind] = MethodKind.CHAIN
    axis: ClassVar[Axis | None] = Axis("steps", "K")

    def describe(self, p: Mapping[str, Any]) -> str:
        return f"{super().describe(p)}, {rule_words(p)}"

    def check_exact(self, params: SamplerParams, naming: Naming) -> None:
        """Refuse a family that proposes at a temperature its states' log q is not known at.  A state holds
        log q at the run's proposal temperature (`--tau`; its block's extension is drawn at it) and at each of
        its family's `score_taus` (every request reports those too, from the same logits).  A proposal drawn
        at another temperature would be scored against the state's log q_tau: an MH ratio of the wrong
        proposal density, silently inexact (only the kit's invariance check sees it)."""
        family = self.family(params)
        if family is None:
            return
        known = (params.proposal_tau, *family.score_taus)
        for d in range(4):  # a family's temperatures may depend on its inputs (MultiTryMH draws them)
            for _, t in family.draws(decision_inputs(params.seed, 0, d)):
                if not any(math.isclose(t, k, rel_tol=1e-12) for k in known):
                    raise ParamError.about(
                        "sampler", "{sampler} {0} is not exact as written: its family proposes at temperature {1} "
                        "but a state's log q is q_tau's at {tau} {2}; propose at params.proposal_tau, or add {1} to "
                        "its family's score_taus (PowerMHFamily then scores each state at the temperature it "
                        "proposes at)", self.name, number_text(t), number_text(params.proposal_tau), naming=naming)

    def driver(self, engine: Any, params: SamplerParams, prompt_ids: Any, **kwargs: Any) -> Driver:
        cls = DRIVERS.get(params.prefetch, RoundDriver)
        return cls(engine, params, prompt_ids, **kwargs)

    def width(self, params: SamplerParams) -> int:
        """One request for the sequential sampler; under a PreSTO rule its budget (the streaming rule's
        cost and shared policies: what they typically keep live, at most the cap)."""
        if not PrefetchRule.of(params.prefetch).presto:
            return 1
        if params.prefetch == PrefetchRule.STREAM and params.budget_policy != "fill":
            return min(params.budget, COST_POLICY_LIVE)
        return params.budget

    def cost(self, params: SamplerParams) -> Cost:
        """With n new tokens, K transitions per block, blocks of B tokens, nb = n / B blocks: each block
        starts with one request of B tokens (its extension), then K transitions; a transition's proposal
        resamples the state from its cut to its end, at most b B tokens in block b (from 1).  A round
        issues `width` requests: one decision's (MultiTryMH: its tries) sequentially, at most the budget
        N (never fewer than one decision's) under a PreSTO rule, and settles at least one transition, so
        at most K rounds a block.  The streaming rule keeps at most N live; K N is what its budget
        allows over a block's K decisions (a speculative request aborted and issued again elsewhere
        counts once more there: for it the bound is its budget's, not a proof).

            requests <= nb (1 + K width),  tokens <= n + K width B nb (nb + 1) / 2
        """
        per_decision = self.family(params).requests_per_decision
        width = max(params.budget, per_decision) if PrefetchRule.of(params.prefetch).presto else per_decision
        n, K, B, nb = params.max_new_tokens, params.steps, params.block, params.n_blocks
        return Cost(nb * (1 + K * width), n + K * width * B * nb * (nb + 1) // 2)


class PopulationMethod(ChainMethod):
    """An MH chain method whose session runs several chains and answers with one of their states (parallel
    tempering's replicas, resample-move's particles): its `session` (a `runtime.session.population.Population`)
    and its members' parameters (`members`); its width and size are its members'."""

    population: ClassVar[bool] = True
    session: ClassVar[type[Population]]

    def members(self, params: SamplerParams) -> list[SamplerParams]:
        """Each member's parameters (an MH chain method's, under the session's prefetch rule)."""
        raise NotImplementedError

    def member_count(self, params: SamplerParams) -> int:
        """How many members, without building each one's parameters: a server refuses a population too large
        for it before it pays for one (`members` of 4,096 particles: 0.7 s and 7.6 MiB)."""
        return len(self.members(params))

    def member_samplers(self, params: SamplerParams) -> set[str]:
        """The methods its members run (whose own parameters its sessions read), without building them all."""
        return {m.sampler for m in self.members(params)}

    def driver(self, engine: Any, params: SamplerParams, prompt_ids: Any, **kwargs: Any) -> Any:
        return self.session(engine, params, prompt_ids, **kwargs)

    def width(self, params: SamplerParams) -> int:
        return sum(m.method.width(m) for m in self.members(params))

    def cost(self, params: SamplerParams) -> Cost:
        total = Cost(0, 0)
        for m in self.members(params):
            total = total + m.method.cost(m)
        return total
