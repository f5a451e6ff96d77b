"""A session with a view of its own (a one-shot method's samples, particles or steps; a method's
that declares one), folded from its events (pure; no Textual here).

A method names the fold of its events for the app by import path (`Method.view_state`); `run_of`
makes one for a session's parameters.  Every fold is a `MethodRun`: it keeps the events its view
draws and says, in words, what the title, the stats panel and the answer pane show of it.  The
built-in ones: `SamplesRun` (low temperature, best-of-N: `Sample` and `Choice` events),
`SmcRun` (PowerSMC: `SmcStep` blocks, each particle's new tokens, the weights after it, the ESS,
whether it resampled and each particle's parent) and `SpsRun` (`state/sps.py`).  Nothing is
re-decided here: ranks sort the recorded scores, shares normalise the recorded log weights,
lineage follows the recorded parents.  A trace is untrusted, so an index that points nowhere ends
a walk instead of raising.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass, field
from typing import Any

from rich.text import Text

from presto_tui.api.events import Choice, Event, Sample, SessionSummary, normalised
from presto_tui.api.params import find_method
from presto_tui.views.state.evolution import clip

NO_ROUNDS = "no rounds: a one-shot session"  # what the overview and search say of one


def run_of(params: dict) -> MethodRun | None:
    """The fold of a session's events that its method's view draws (None: the MH chain's tree, or a
    method whose view cannot be loaded: then the session shows as a chain's would)."""
    m = find_method(params.get("sampler"))
    path = getattr(m, "view_state", None) if m is not None else None
    if not path:
        return None
    try:
        module, _, name = path.partition(":")
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return None
    run = cls.of(params)
    return run if isinstance(run, MethodRun) else None


def _tau(params: dict) -> str:
    tau = params.get("tau")
    return f"tau {tau:g}" if isinstance(tau, (int, float)) and not isinstance(tau, bool) else "tau ?"


@dataclass
class MethodRun:
    """A session's events as its method's view folds them (subclass it; `of` makes one)."""

    params: dict = field(default_factory=dict)
    choice: Choice | None = None
    own_events: tuple[type, ...] = ()  # its method's own event classes (`Method.events`)
    what = "sample"  # what the answer is one of, in words

    @classmethod
    def of(cls, params: dict) -> MethodRun:
        m = find_method(params.get("sampler"))
        return cls(dict(params), own_events=tuple(e.cls for e in m.events) if m is not None else ())

    def apply(self, ev: Event) -> None:
        if isinstance(ev, Choice):
            self.choice = ev

    # -- words -------------------------------------------------------------------------------
    @property
    def display(self) -> str:
        m = find_method(self.params.get("sampler"))
        return m.display if m is not None else str(self.params.get("sampler"))

    def describe(self) -> list[str]:
        """What ran, in parts: its method's own words and the temperature."""
        m = find_method(self.params.get("sampler"))
        words = m.describe(self.params) if m is not None else str(self.params.get("sampler"))
        return [words, _tau(self.params)]

    def progress(self) -> str:
        return ""

    def title_extra(self) -> list[str]:
        return []

    def legend(self) -> list[str]:
        return ["★ answer"]

    def stats_body(self, m: SessionSummary) -> Text:
        """The stats panel's lines between what ran and the answer's numbers."""
        t = Text(f"\ntime {m.wall_s:.2f} s  tokens generated {m.tokens_generated}  calls {m.calls}")
        if self.progress():
            t.append(f"\n{self.progress()}")
        return t

    def answer_title(self) -> str:
        c = self.choice
        if c is None:
            return "no answer yet: a one-shot method answers at its end"
        return clip(f"the answer: {self.what} #{c.index + 1} ({c.rule})", 200)


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
class SamplesRun(MethodRun):
    """Low temperature's one sample, best-of-N's N: the samples as they finish, and the choice."""

    rank: str = "logq"  # best-of-N's score before the choice names it: sum of log q_tau or of log p0
    samples: dict[int, Sample] = field(default_factory=dict)  # by sample index

    @classmethod
    def of(cls, params: dict) -> SamplesRun:
        run = super().of(params)
        assert isinstance(run, SamplesRun)
        run.rank = "logp" if params.get("bon_rank") == "logp" else "logq"
        return run

    def apply(self, ev: Event) -> None:
        super().apply(ev)
        if isinstance(ev, Sample):
            self.samples[ev.index] = ev

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
        """The label of the score its method selects by (the method's `score_name`: best-of-N's sum log q or
        sum log p0, a plugin's own)."""
        m = find_method(self.params.get("sampler"))
        name = getattr(m, "score_name", None)
        return name(self.params) if callable(name) else "sum log q"

    @property
    def many(self) -> bool:
        """Whether its method draws several samples (its `count_param` says how many) rather than one."""
        return self.count_param is not None

    @property
    def count_param(self) -> str | None:
        return getattr(find_method(self.params.get("sampler")), "count_param", None)

    def progress(self) -> str:
        param = self.count_param
        wanted = self.params.get(param, "?") if param is not None else 1
        return f"{len(self.samples)}/{wanted} samples"

    def legend(self) -> list[str]:
        return ["★ answer", "best first", "end: EOS, or n reached"]


@dataclass
class SmcRun(MethodRun):
    """PowerSMC's blocks as they finish: each particle's tokens, weights, ESS and lineage."""

    steps: list[Any] = field(default_factory=list)  # its `SmcStep`s (PowerSMC's own event: `own_events`)
    what = "particle"

    def apply(self, ev: Event) -> None:
        super().apply(ev)
        if isinstance(ev, self.own_events):
            self.steps.append(ev)

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
        if self.choice is None:
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

    def total_blocks(self) -> int | None:
        n, b = self.params.get("max_new_tokens"), self.params.get("smc_block")
        return -(-n // b) if isinstance(n, int) and isinstance(b, int) and b > 0 else None

    def progress(self) -> str:
        most = self.total_blocks()
        particles = self.particles or self.params.get("particles", "?")
        # at most: every particle may stop at EOS before n
        return f"block {len(self.steps)}{f' of at most {most}' if most else ''}, {particles} particles"

    def stats_body(self, m: SessionSummary) -> Text:
        t = Text(f"\ntime {m.wall_s:.2f} s  tokens generated {m.tokens_generated}  calls {m.calls}")
        resamplings = sum(st.resampled for st in self.steps)
        t.append(f"\nparticles {self.particles or self.params.get('particles', '?')}  "
                 f"{self.progress().split(',')[0]}  resamplings {resamplings}")
        if self.steps:
            t.append(f"\nlast ESS {self.steps[-1].ess:.2f} of {self.particles}")
        return t

    def title_extra(self) -> list[str]:
        resamplings = sum(st.resampled for st in self.steps)
        return [f"{resamplings} resampling{'s' if resamplings != 1 else ''}"]

    def legend(self) -> list[str]:
        return ["bar: weight share", "⟳ resampled", "←j from particle j", "✗ dropped", "∎ EOS", "★ answer"]
