"""What the one-shot methods share: their kind, their numbers (`OneShotInfo`: samples finished, how the
answer was chosen), and the session that draws N samples at temperature tau and answers with one
(`SamplesDriver`: low temperature's one sample, best-of-N's N; the paper's appendix E.8).

A one-shot method that draws N independent samples and answers with one of them is its sampling plan
(`count_param`: the parameter that says N) and its selection alone (`select`: the samples -> the
`Selection`, the index chosen, its rule in words and one score per sample): best-of-N keeps the highest
sum of log q_tau, minimum-Bayes-risk or self-consistency the sample that agrees most with the others.

None targets p0^alpha exactly with finitely many samples: low temperature and best-of-N sharpen
every conditional separately.  Their samples stop at EOS (E.8), up to n tokens.  Sample i has the
seed `sample_seed(seed, 0, i)`, so best-of-N's sample 0 is low temperature's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Selection:
    """What a one-shot method's `select` answers: the sample chosen (its index), how it was chosen in
    words (the trace's `Choice.rule`, shown by `run` and the views) and one score per sample, higher
    better (what the views rank the samples by, labelled by the method's `score_label`)."""

    index: int
    rule: str
    scores: tuple[float, ...]


def best_by(scores: Sequence[float], rule: str) -> Selection:
    """The sample with the highest score (ties: the first), as a `Selection`."""
    best = max(range(len(scores)), key=lambda i: (scores[i], -i))
    return Selection(best, rule, tuple(scores))


class OneShotMethod(Method):
    """A method that draws its answer without MH decisions (see `MethodKind.ONE_SHOT`).

    By default a session draws `sample_count(params)` independent samples at temperature tau (each up
    to n tokens, stopping at EOS; sample i with the seed `sample_seed(seed, 0, i)`) and answers with the
    one `select` picks: a selection method (best-of-N, minimum-Bayes-risk, self-consistency, a reranker)
    declares `count_param` and `select` and nothing else of its session.  A method that samples
    otherwise (particles, chunks) overrides `driver`, `width` and `cost`."""

    kind: ClassVar[MethodKind] = MethodKind.ONE_SHOT
    view_state: ClassVar[str | None] = "presto_tui.views.state.baseline:SamplesRun"
    view: ClassVar[str | None] = "presto_tui.views.widgets.baseline:SampleTable"
    # the parameter that says how many samples a session draws (None: one); the views show "3/8 samples" by it
    count_param: ClassVar[str | None] = None
    # how the views and `run` label the score `select` ranks the samples by
    score_label: ClassVar[str] = "sum log q"

    def info(self) -> MethodInfo:
        return OneShotInfo()

    def sample_count(self, params: SamplerParams | Mapping[str, Any]) -> int:
        """How many samples a session draws (`count_param`'s value; 1 without one)."""
        if self.count_param is None:
            return 1
        value: Any = params.get(self.count_param) if isinstance(params, Mapping) else getattr(params, self.count_param)
        return int(value)

    def score_name(self, params: Mapping[str, Any]) -> str:
        """The label of its score for a session with `params` (a params dict): `score_label` by default."""
        return self.score_label

    def select(self, samples: Sequence[Sample], params: SamplerParams, eos_id: int | None) -> Selection:
        """The answer among a session's `samples` (in sample order; each a `Sample`: its tokens, EOS
        included where it ended there, `cut_at_eos` gives its response; the sums of log q_tau and log p0
        over them; eqs. 21-22 of its response): by default the highest sum of log q_tau."""
        if len(samples) == 1:
            return Selection(0, "the only sample", (samples[0].logq,))
        return best_by([s.logq for s in samples], f"highest sum of log q_tau of {len(samples)}")

    def driver(self, engine: Any, params: SamplerParams, prompt_ids: Any, **kwargs: Any) -> Any:
        return SamplesDriver(engine, params, prompt_ids, method=self, **kwargs)

    def width(self, params: SamplerParams) -> int:
        return self.sample_count(params)

    def cost(self, params: SamplerParams) -> Cost:
        return samples_cost(params, self.sample_count(params))


class SamplesDriver(BatchDriver):
    """A selection method's session: its method's `sample_count` samples at temperature tau, submitted
    together, and the one its `select` picks as the answer.  (Without a method, as API 2.0 made it:
    `count` samples, the highest sum of log q_tau kept, or of log p0 with `rank="logp"`.)"""

    def __init__(self, *args: Any, method: OneShotMethod | None = None, count: int = 1, rank: str = "logq",
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.method = method if method is not None else _Ranked(rank)
        self.count = method.sample_count(self.params) if method is not None else count
        self.samples: dict[int, Sample] = {}

    def begin(self) -> None:
        n = self.count
        self.submit([(i, self.request((), self.params.max_new_tokens, sample_seed(self.params.seed, 0, i)))
                     for i in range(n)], n)

    def delivered_one(self, i: int, proposal: Proposal) -> None:
        self.samples[i] = sample_event(i, proposal, self.clock(), self.engine.eos_id)
        self.emit(self.samples[i])

    def advance_session(self) -> None:
        if not self.batch_done():
            return
        self.emit(self.call_event(0))
        samples = [self.samples[i] for i in range(self.count)]
        sel = self.method.select(samples, self.params, self.engine.eos_id)
        if not (isinstance(sel, Selection) and 0 <= sel.index < len(samples) and len(sel.scores) == len(samples)):
            raise TypeError(f"method {self.method.name!r}: select must answer a Selection of one of its "
                            f"{len(samples)} samples with one score each, got {sel!r}")
        chosen = samples[sel.index]
        self.emit(Choice(sel.index, sel.rule, tuple(float(x) for x in sel.scores), chosen.loglik, chosen.confidence))
        proposal = self.pending[sel.index]
        assert proposal is not None
        self.state = SeqState(self.prompt_ids).extended(proposal)
        self.end("done")


class _Ranked(OneShotMethod):
    """The selection of a `SamplesDriver` made without a method: by the sum of log q_tau or of log p0."""

    name, display, help = "ranked", "ranked samples", "the highest sum of log q_tau or log p0"

    def __init__(self, rank: str) -> None:
        self.rank = rank

    def select(self, samples: Sequence[Sample], params: SamplerParams, eos_id: int | None) -> Selection:
        if len(samples) == 1 or self.rank != "logp":
            return super().select(samples, params, eos_id)
        return best_by([s.logp for s in samples], f"highest sum of log p0 of {len(samples)}")


def samples_cost(params: SamplerParams, count: int) -> Cost:
    """The most a session of `count` samples of up to n tokens may cost: `count` requests, `count * n` tokens."""
    return Cost(count, count * params.max_new_tokens)
