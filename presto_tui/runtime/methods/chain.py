"""What every Metropolis-Hastings chain method shares: PowerMH, EntropyCut, MultiTryMH and a plugin's
MH family run the same way (the paper's alg. 1 and 2), sequentially or under every PreSTO rule.

A chain method says only how one MH decision goes (its `family`: the cut law, the requests a
decision makes, which proposal is the move and its score: `runtime/samplers/families.py`) and
its own parameters; the driver (`RoundDriver` for the sequential sampler and the round rules,
`StreamDriver` for the streaming rule), the events (rounds, transitions, requests), the summary
and the app's tree view are the chain machinery's, the same for all of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from presto_tui.runtime.core.method import Axis, Cost, Method, MethodKind
from presto_tui.runtime.core.names import PrefetchRule
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.core.spec import rule_words
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

    def driver(self, engine: Any, params: SamplerParams, prompt_ids: Any, **kwargs: Any) -> Driver:
        cls = DRIVERS.get(params.prefetch, RoundDriver)
        return cls(engine, params, prompt_ids, **kwargs)

    def width(self, params: SamplerParams) -> int:
        """One request for the sequential sampler; under a PreSTO rule its budget (the streaming
        rule's cost policy: what it typically keeps live, at most the cap)."""
        if not PrefetchRule.of(params.prefetch).presto:
            return 1
        if params.prefetch == PrefetchRule.STREAM and params.budget_policy == "cost":
            return min(params.budget, COST_POLICY_LIVE)
        return params.budget

    def cost(self, params: SamplerParams) -> Cost:
        """Per block: its extension and, per transition, the decision's requests (a PreSTO rule may
        also speculate up to its budget per decision), each decoding at most the block's tokens so
        far (the whole response at most)."""
        per_decision = self.family(params).requests_per_decision
        if PrefetchRule.of(params.prefetch).presto:
            per_decision *= max(1, params.budget)
        requests = params.n_blocks * (1 + params.steps * per_decision)
        return Cost(requests, requests * params.max_new_tokens)


class PopulationMethod(ChainMethod):
    """An MH chain method whose session runs several chains and answers with one of their states (parallel
    tempering's replicas, resample-move's particles): its `session` (a `runtime.session.population.Population`)
    and its members' parameters (`members`); its width and size are its members'."""

    population: ClassVar[bool] = True
    session: ClassVar[type[Population]]

    def members(self, params: SamplerParams) -> list[SamplerParams]:
        """Each member's parameters (an MH chain method's, under the session's prefetch rule)."""
        raise NotImplementedError

    def driver(self, engine: Any, params: SamplerParams, prompt_ids: Any, **kwargs: Any) -> Any:
        return self.session(engine, params, prompt_ids, **kwargs)

    def width(self, params: SamplerParams) -> int:
        return sum(m.method.width(m) for m in self.members(params))

    def cost(self, params: SamplerParams) -> Cost:
        total = Cost(0, 0)
        for m in self.members(params):
            total = total + m.method.cost(m)
        return total
