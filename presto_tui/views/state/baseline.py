"""A baseline session as the app shows it, folded from its events (pure; no Textual here).

The paper's test-time baselines (low temperature, best-of-N, PowerSMC) have no
rounds and no tree.  Their events say everything the view draws: `Sample` (a
finished sample with its sums of log q_tau and log p0), `SmcStep` (a PowerSMC
block: each particle's new tokens, the log weights after it, the ESS, whether it
resampled and each particle's parent) and `Choice` (the answer, how it was
chosen, the scores).  `BaselineRun` keeps them and answers the views' questions:
the samples in the order of the score the answer was chosen by, each block's
weight shares, which particle descends from which, the answer's ancestors, and a
particle's text after any block.  Nothing is re-decided here: ranks sort the
recorded scores, shares normalise the recorded log weights, lineage follows the
recorded parents.  A trace is untrusted, so an index that points nowhere ends a
walk instead of raising.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from presto_tui.api.events import Choice, Event, Sample, SmcStep, normalised
from presto_tui.api.params import SamplerName
from presto_tui.views.state.sps import SpsRun, is_sps

NO_ROUNDS = "no rounds: a baseline session"  # what the overview and search say of one


def is_baseline(params: dict) -> bool:
    """Whether a session's sampler is one of the baselines (no MH chain, no rounds)."""
    name = params.get("sampler")
    return name in SamplerName.names() and not SamplerName.of(str(name)).chain


def shares(log_weights: tuple[float, ...] | list[float]) -> list[float]:
    """Each particle's share of the total weight.  A weight that is not finite in the trace
    (-inf: a particle of probability 0) gets no share; if none is finite, none has one."""
    finite = [i for i, w in enumerate(log_weights) if math.isfinite(w)]
    out = [0.0] * len(log_weights)
    if finite:
        for i, w in zip(finite, normalised([log_weights[i] for i in finite])):
            out[i] = w
    return out


@dataclass
class BaselineRun:
    """The events of one baseline session, as they arrive (live) or as a trace holds them."""

    sampler: str
    rank: str = "logq"  # best-of-N's score before the choice names it: sum of log q_tau or of log p0
    samples: dict[int, Sample] = field(default_factory=dict)  # by sample index
    steps: list[SmcStep] = field(default_factory=list)
    choice: Choice | None = None
    sps: SpsRun | None = None  # Scalable Power Sampling: its steps (state/sps.py)

    @classmethod
    def of(cls, params: dict) -> BaselineRun | None:
        if not is_baseline(params):
            return None
        return cls(str(params.get("sampler")), "logp" if params.get("bon_rank") == "logp" else "logq",
                   sps=SpsRun() if is_sps(params) else None)

    @property
    def smc(self) -> bool:
        return self.sampler == SamplerName.POWERSMC

    @property
    def display(self) -> str:
        return SamplerName.of(self.sampler).display

    def apply(self, ev: Event) -> None:
        if self.sps is not None:
            self.sps.apply(ev)
        if isinstance(ev, Sample):
            self.samples[ev.index] = ev
        elif isinstance(ev, SmcStep):
            self.steps.append(ev)
        elif isinstance(ev, Choice):
            self.choice = ev

    # -- best-of-N and low temperature -------------------------------------------------
    def score(self, s: Sample) -> float:
        """The score sample `s` was (or will be) chosen by: the choice's, once it is made."""
        c = self.choice
        if c is not None and 0 <= s.index < len(c.scores):
            return c.scores[s.index]
        return s.logp if self.rank == "logp" else s.logq

    def ranked(self) -> list[Sample]:
        """The samples best first (ties: the lower index first, as best-of-N breaks them); a score
        that is not a number goes last."""
        def key(s: Sample) -> tuple[float, int]:
            v = self.score(s)
            return (-v if not math.isnan(v) else math.inf, s.index)
        return sorted(self.samples.values(), key=key)

    @property
    def score_name(self) -> str:
        return "sum log p0" if self.rank == "logp" and self.sampler == SamplerName.BESTOFN else "sum log q"

    # -- PowerSMC ---------------------------------------------------------------------------
    @property
    def particles(self) -> int:
        return max((len(st.tokens) for st in self.steps), default=0)

    def shares(self, step: int) -> list[float]:
        return shares(self.steps[step].log_weights)

    def parent(self, step: int, i: int) -> int | None:
        """The particle of block `step - 1` that particle i continued in block `step` (None: the
        first block, or an index the trace does not hold)."""
        if step <= 0 or step > len(self.steps):
            return None
        parents = self.steps[step - 1].parents
        return parents[i] if 0 <= i < len(parents) else None

    def resampled_into(self, step: int) -> bool:
        """Whether the particles of block `step` were drawn by resampling after the block before."""
        return 0 < step <= len(self.steps) and self.steps[step - 1].resampled

    def copies(self, step: int) -> list[int]:
        """How many particles of the next block each particle of block `step` became (1 each
        without resampling; 0: it was dropped)."""
        st = self.steps[step]
        out = [0] * len(st.tokens)
        for j in st.parents:
            if 0 <= j < len(out):
                out[j] += 1
        return out

    def tokens_at(self, step: int, i: int) -> tuple[int, ...]:
        """Particle i's generated tokens after block `step`: its ancestors' blocks, then its own."""
        parts: list[tuple[int, ...]] = []
        s = step
        while 0 <= s < len(self.steps) and 0 <= i < len(self.steps[s].tokens):
            parts.append(self.steps[s].tokens[i])
            j = self.parent(s, i)
            if j is None:
                break
            s, i = s - 1, j
        return tuple(t for part in reversed(parts) for t in part)

    def stopped(self, step: int, i: int) -> bool:
        """The particle grew nothing in this block: it had stopped at EOS before."""
        toks = self.steps[step].tokens
        return 0 <= i < len(toks) and not toks[i]

    def answer_line(self) -> dict[int, int]:
        """block -> the particle on the answer's line of descent in it (empty before the choice).

        The choice names a particle after the last block, which a final resampling may have
        renumbered: each step back goes through that block's parents (the identity where it did
        not resample)."""
        line: dict[int, int] = {}
        if self.choice is None or not self.smc:
            return line
        cur = self.choice.index
        for s in range(len(self.steps) - 1, -1, -1):
            parents = self.steps[s].parents
            if not 0 <= cur < len(parents):
                break
            cur = parents[cur]
            line[s] = cur
        return line

    def chosen_text_step(self) -> tuple[int, int] | None:
        """The (block, particle) cell that holds the answer's text."""
        line = self.answer_line()
        if not line:
            return None
        last = len(self.steps) - 1
        return (last, line[last]) if last in line else None
