"""Scalable Power Sampling (Ji, Tutunov, Zimmer, Bou Ammar 2026, arXiv 2601.21590) on the engine loop.

The paper's algorithm 2 (appendix B; algorithm 1 is its chunk of one token), one step per chunk of
`sps_chunk` tokens until n tokens or EOS:

1. draws: L_t chunks from q_tau after the prefix (line 4);
2. candidates: the K_t most likely distinct chunks among them under p0 (line 5);
3. rollouts: M_t continuations of each candidate from q_tau, to the end of the response or
   `sps_horizon` tokens (line 7), all of them one batch of requests (they share the prefix: the
   engine's prefix cache serves it), and from their log p0 and log q_tau the estimate of the
   chunk's conditional under pi_alpha, the jackknife's by default (lines 8-15; the maths is in
   `runtime/samplers/sps.py`);
4. the chunk drawn from it with one keyed uniform (line 16), appended (line 17).

A candidate with no future (its chunk ends at EOS or at the n-th token) has zeta = 1 and no
rollouts, so the last chunk is drawn from p0^alpha over the candidates (eq. 16); a step with one
candidate takes it without rollouts.

Where this differs from the paper, and why:
- The paper draws chunks and rollouts from p0 (zeta as eq. 3 writes it); here both come from
  q_tau (`--tau`, 1/alpha by default as for every baseline) and each rollout carries the
  importance weight p0^alpha / q_tau, which is eq. 3 exactly at `--tau 1`.  The low-temperature
  proposal is what the other baselines sample from, and its weights vary less.
- A draw decodes to the end of the response (or the chunk plus the horizon), not one chunk: the
  draws that began with the chunk drawn are draws from q_tau after the new prefix, so they are
  the next step's first draws (each stays independent of the rollouts the choice was made
  with), and only the rest are drawn again.  With one candidate and one draw per step
  (`--sps-top-k 1`) no rollout is needed and the session is low temperature's request itself,
  token for token.

Seeds (docs/randomness.md): draw i of step s is `sample_seed(seed, s, i)` (so step 0's draw 0 is
low temperature's sample), rollout r of candidate k is `rollout_seed(seed, s, k, r)`, and the
chunk is drawn with `pick_uniform(seed, s)`.
"""

from __future__ import annotations

import math

from presto_tui.runtime.core.randomness import pick_uniform, rollout_seed, sample_seed
from presto_tui.runtime.core.types import Proposal, Request
from presto_tui.runtime.samplers import sps
from presto_tui.runtime.session.driver import RoundTag, SessionDriver, Tag
from presto_tui.runtime.session.events import Choice, Event, InFlight, ModelCall, SpsStep
from presto_tui.runtime.session.metrics import response_scores
from presto_tui.words import count

DRAWS, ROLLOUTS = 0, 1  # the two calls of a step (a ModelCall's `round`)


def part(p: Proposal, start: int, end: int | None = None) -> Proposal:
    """Tokens start..end of a proposal with their values."""
    return Proposal(p.tokens[start:end], p.logq[start:end], p.logp[start:end], p.entropy[start:end],
                    tuple(a[start:end] for a in p.logq_at))


class SpsDriver(SessionDriver):
    """Scalable Power Sampling (see the module docstring)."""

    def begin(self) -> None:
        self.t = 0  # tokens generated
        self.step = 0
        self.pool: list[Proposal] = []  # draws after the current prefix, each from q_tau
        self.reused = 0
        self.candidates: list[Proposal] = []  # this step's candidate chunks
        self._pending: list[Proposal | None] = []
        self._requests: list[Request] = []
        self._phase = DRAWS
        self._call_t0 = self._step_t0 = 0.0
        self._take_steps()

    # -- sizes -------------------------------------------------------------------------------
    @property
    def remaining(self) -> int:
        return self.params.max_new_tokens - self.t

    def chunk_len(self, tokens: tuple[int, ...]) -> int:
        """The chunk a draw's tokens begin with: `sps_chunk` tokens (fewer at the end), up to its EOS."""
        n = min(self.params.sps_chunk, self.remaining, len(tokens))
        eos = self.engine.eos_id
        if eos is not None and eos in tokens[:n]:
            return tokens.index(eos) + 1
        return n

    def complete(self, tokens: tuple[int, ...]) -> bool:
        """Whether a draw holds a whole chunk (a continuation cut short by the horizon may not)."""
        n = self.chunk_len(tokens)
        eos = self.engine.eos_id
        return n > 0 and (n == min(self.params.sps_chunk, self.remaining) or tokens[n - 1] == eos)

    def ends(self, chunk: tuple[int, ...]) -> bool:
        """The response ends with this chunk: at its EOS, or at the n-th token."""
        eos = self.engine.eos_id
        return (eos is not None and eos in chunk) or self.t + len(chunk) >= self.params.max_new_tokens

    def horizon(self, left: int) -> int:
        """A request's tokens when `left` remain: all of them, or the horizon's."""
        H = self.params.sps_horizon
        return left if H == 0 else min(H, left)

    # -- the requests ------------------------------------------------------------------------
    def _submit_all(self, requests: list[Request], phase: int) -> None:
        self._phase, self._requests = phase, requests
        self._pending = [None] * len(requests)
        self._call_t0 = self.clock()
        self._submit.extend((RoundTag(i), r) for i, r in enumerate(requests))

    def on_delivered(self, tag: Tag, handle: int, proposal: Proposal) -> None:
        assert isinstance(tag, RoundTag)
        self._pending[tag.position] = proposal

    def progress_event(self) -> Event | None:
        decoded = sum(self.engine.progress(h) for h in self._owned)
        decoded += sum(len(p.tokens) for p in self._pending if p is not None)
        return InFlight(len(self._requests), decoded, sum(r.n_new for r in self._requests))

    def _call_done(self) -> list[Proposal] | None:
        """The call in flight's proposals once all are back (None: it is still decoding)."""
        if not self._pending or any(p is None for p in self._pending):
            return None
        props: list[Proposal] = self._pending  # type: ignore[assignment]
        tokens = sum(len(p.tokens) for p in props)
        self._out.append(ModelCall(self.step, self._phase, "propose", len(props), tokens,
                                   self.clock() - self._call_t0))
        self._pending, self._requests = [], []
        return props

    # -- a step ------------------------------------------------------------------------------
    def _take_steps(self) -> None:
        """Take steps until one waits for the engine or the response ends.  A step that needs no
        call (its draws kept from the step before and one candidate, or only candidates that end
        the response) is decided at once, so many can follow one another here: a loop, not a
        recursion."""
        while True:
            self._step_t0 = self.clock()
            if len(self.pool) < self.params.draws:
                self._draw()
                return
            if self._choose_candidates() or self._decide([]):
                return

    def _draw(self) -> None:
        """Top the draws up to L_t (the continuations kept from the last step come first)."""
        p, L = self.params, self.params.draws
        prefix = self.state.prefix(self.state.T)
        n_new = self.remaining if p.sps_horizon == 0 else min(self.remaining, p.sps_chunk + p.sps_horizon)
        self._submit_all([Request(prefix, n_new, sample_seed(p.seed, self.step, i), p.proposal_tau, stop_eos=True)
                          for i in range(len(self.pool), L)], DRAWS)

    def advance_session(self) -> None:
        props = self._call_done()
        if props is None:
            return
        if self._phase == DRAWS:
            self.pool.extend(props)
            if self._choose_candidates() or self._decide([]):
                return
        elif self._decide(props):
            return
        self._take_steps()

    def _choose_candidates(self) -> bool:
        """The step's candidates; their rollouts submitted (True) unless none needs any."""
        p = self.params
        chunks = [part(d, 0, self.chunk_len(d.tokens)) for d in self.pool]
        top = sps.top_candidates([(c.tokens, math.fsum(c.logp)) for c in chunks], p.sps_top_k)
        self.candidates = [chunks[i] for i in top]
        if len(self.candidates) == 1:
            return False
        requests = []
        prefix = self.state.prefix(self.state.T)
        for k, c in enumerate(self.candidates):
            if self.ends(c.tokens):
                continue
            left = self.remaining - len(c.tokens)
            requests += [Request(prefix + c.tokens, self.horizon(left), rollout_seed(p.seed, self.step, k, r),
                                 p.proposal_tau, stop_eos=True) for r in range(p.sps_rollouts)]
        if not requests:  # the last chunk: every candidate ends the response (eq. 16)
            return False
        self._submit_all(requests, ROLLOUTS)
        return True

    def _decide(self, rollouts: list[Proposal]) -> bool:
        """Estimate, draw the chunk and append it; True if the response ended with it."""
        p = self.params
        M = p.sps_rollouts
        log_w: list[tuple[float, ...]] = []
        it = iter(rollouts)
        for c in self.candidates:
            if self.ends(c.tokens) or len(self.candidates) == 1:
                log_w.append(())
            else:
                log_w.append(tuple(sps.log_weight(p.alpha, r.logp, r.logq) for r in (next(it) for _ in range(M))))
        log_p0 = [math.fsum(c.logp) for c in self.candidates]
        est = sps.estimate(p.alpha, log_p0, log_w, bool(p.sps_jackknife))
        u = pick_uniform(p.seed, self.step)
        j = sps.pick(est.probs, u)
        chunk = self.candidates[j]
        self._out.append(SpsStep(self.step, self.t, tuple(c.tokens for c in self.candidates), tuple(log_p0),
                                 tuple(log_w), est.log_zeta, est.plain, est.jackknife, est.probs, j, u,
                                 len(self.pool), self.reused, self.clock() - self._step_t0))
        done = self.ends(chunk.tokens)
        self.state = self.state.extended(chunk)
        self.t += len(chunk.tokens)
        if done:
            self._finish()
            return True
        # the draws that began with this chunk go on after it: draws for the next step
        n = len(chunk.tokens)
        kept = [part(d, n) for d in self.pool if d.tokens[:n] == chunk.tokens]
        self.pool = [d for d in kept if self.complete(d.tokens)][:p.draws]
        self.reused = len(self.pool)
        self.step += 1
        return False

    def _finish(self) -> None:
        s = self.state
        # eqs. 21-22 of the response a person gets: up to and excluding EOS, as for every method
        loglik, confidence = response_scores(s.tokens, s.logp, s.entropy, self.engine.eos_id)
        self._out.append(Choice(0, f"the path of {count(self.step + 1, 'step')}, each chunk drawn from its estimate",
                                (), loglik, confidence))
        self._end("done")
