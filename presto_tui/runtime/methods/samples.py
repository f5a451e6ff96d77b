"""What the one-shot methods share: their kind, their numbers (`OneShotInfo`: samples finished, how the
answer was chosen), and the session that draws N samples at temperature tau and answers with one
(`SamplesDriver`: low temperature's one sample, best-of-N's N; the paper's appendix E.8).

None targets p0^alpha exactly with finitely many samples: low temperature and best-of-N sharpen
every conditional separately.  Their samples stop at EOS (E.8), up to n tokens.  Sample i has the
seed `sample_seed(seed, 0, i)`, so best-of-N's sample 0 is low temperature's.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

from presto_tui.runtime.core.method import Cost, Method, MethodInfo, MethodKind
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.core.randomness import sample_seed
from presto_tui.runtime.core.types import Proposal, SeqState
from presto_tui.runtime.session.batch import BatchDriver, sample_event
from presto_tui.runtime.session.events import Choice, Sample


class OneShotInfo(MethodInfo):
    """A one-shot session's own numbers: samples finished, and how its answer was chosen."""

    def __init__(self) -> None:
        self.samples = 0
        self.choice = ""

    def update(self, ev: object) -> None:
        if isinstance(ev, Sample):
            self.samples += 1
        elif isinstance(ev, Choice):
            self.choice = ev.rule

    def to_dict(self) -> dict[str, Any]:
        return {**({"samples": self.samples} if self.samples else {}), **({"choice": self.choice} if self.choice
                                                                           else {})}

    def rows(self) -> list[tuple[str, str]]:
        return [("chosen", self.choice)] if self.choice else []

    def drawn(self) -> str:
        return str(self.samples)


class OneShotMethod(Method):
    """A method that draws its answer without MH decisions (see `MethodKind.ONE_SHOT`)."""

    kind: ClassVar[MethodKind] = MethodKind.ONE_SHOT
    view_state: ClassVar[str | None] = "presto_tui.views.state.baseline:SamplesRun"
    view: ClassVar[str | None] = "presto_tui.views.widgets.baseline:SampleTable"

    def info(self) -> MethodInfo:
        return OneShotInfo()


class SamplesDriver(BatchDriver):
    """`count` samples at temperature tau, the best kept (by the sum of log q_tau, the paper's choice,
    or of log p0: `rank`); one sample is low temperature."""

    def __init__(self, *args: Any, count: int, rank: str = "logq", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.count, self.rank = count, rank

    def begin(self) -> None:
        n = self.count
        self.submit([(i, self.request((), self.params.max_new_tokens, sample_seed(self.params.seed, 0, i)))
                     for i in range(n)], n)

    def delivered_one(self, i: int, proposal: Proposal) -> None:
        self._out.append(sample_event(i, proposal, self.clock(), self.engine.eos_id))

    def advance_session(self) -> None:
        if not self.batch_done():
            return
        self._out.append(self.call_event(0))
        props: list[Proposal] = self.pending  # type: ignore[assignment]
        scores: tuple[float, ...]
        if len(props) == 1:
            best, rule, scores = 0, "the only sample", (math.fsum(props[0].logq),)
        else:
            by_p = self.rank == "logp"
            scores = tuple(math.fsum(p.logp if by_p else p.logq) for p in props)
            best = max(range(len(props)), key=lambda i: (scores[i], -i))  # ties: the first
            rule = f"highest sum of log {'p0' if by_p else 'q_tau'} of {len(props)}"
        chosen = sample_event(best, props[best], 0.0, self.engine.eos_id)
        self._out.append(Choice(best, rule, scores, chosen.loglik, chosen.confidence))
        self.state = SeqState(self.prompt_ids).extended(props[best])
        self._end("done")


def samples_cost(params: SamplerParams, count: int) -> Cost:
    return Cost(count, count * params.max_new_tokens)
