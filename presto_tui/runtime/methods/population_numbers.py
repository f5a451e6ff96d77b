"""What a population's records say about it, folded once for every surface (`run`, `stats`, `--json`, the
app, the API's DataFrames): parallel tempering's ladder (`LadderNumbers`, from its `pt_step` records) and
a sequential Monte Carlo session's history (`SmcNumbers`, from PowerSMC's `smc_step` and resample-move's
`rm_step` records and the final `choice`).

The ladder (levels from the lowest exponent, from 0; pairs named by their lower level):

- per pair, the swaps proposed and accepted and the mean of the swap probabilities A proposed (a less
  noisy estimate of the pair's acceptance than the accepted share: Syed, Bouchard-Côté, Deligiannidis and
  Doucet 2022, "Non-reversible parallel tempering: a scalable highly parallel MCMC scheme", JRSS B 84(2),
  estimate each pair's rejection rate r_i by the mean of 1 - A);
- the global communication barrier Lambda = sum of the pairs' rejection rates (their Lambda estimate on the
  ladder run).  Each rejection rate is at most 1, so Lambda saturates at R - 1 on a ladder with a pair that
  (almost) never swaps (mean A < SATURATED_A): there it is a lower bound (`barrier_is_lower_bound`,
  `saturated_pairs`);
- per pair its length (`swap_length`), which does not saturate: a swap's log ratio X between exact draws
  of two levels has E[e^X] = 1, so where X is Gaussian its mean is -Var(X)/2 and the pair's mean swap
  probability is E[min(1, e^X)] = 2 Phi(-sd(X)/2) = erfc(l/2), with l = sd(X)/sqrt(2), to first order
  (alpha_{i+1} - alpha_i) times the standard deviation of log p0 there: the pair's thermodynamic length
  (where pairs swap often, 1 - A ~ l / sqrt(pi): Syed et al.'s rejection rate is its small-gap limit, up
  to that constant).  l = 2 erfcinv(mean A) reads it back from the measured mean A; unlike 1 - A it
  keeps growing as a pair stops swapping, and it adds up along the ladder (the total length L does not
  depend on where the exponents sit), so L / l* more pairs give each a mean A of TARGET_A
  (`suggested_replicas`: 1 + L / l*, l* = 2 erfcinv(TARGET_A)).  The adaptive ladder's update spaces
  the exponents at equal length (`ppt.adapted`);
- the index process: after each record, which level each state (named by the level it started at)
  is at, and the round trips (a state that went from the hottest level to the coldest and back).

The pairs' numbers, the index process and the round trips are those of one ladder: the fold starts again
whenever the records' exponents change (an adaptive ladder's warm-up ladders are counted apart, in
`earlier_ladders` and `earlier_barriers`, not pooled with the frozen one); the levels' MH transitions
count every ladder's (they are the members' work).

The SMC history, per block: the ESS of the weights before resampling (and its share of the particles),
whether it resampled, the parents' number of distinct particles (the unique ancestors that survived it)
and the number of distinct first-block particles the population still descends from (its lineages: the
genealogy's width; 1 means every particle shares one ancestor).  And the evidence estimate

    log Z = sum over the blocks that resampled of log mean_i w_i  +  log mean_i w_i (the final weights)

with w_i each particle's weight since the last resampling (a block's `log_mean_weight` is therefore
cumulative since the last resampling: its own factor, `log_z_increment`, is its log mean w less the
block before's where that block did not resample, and `log_z_running`, their running sum, is the
evidence of the block's intermediate target; PowerSMC's completion to p0^alpha after a step that
resampled and left every copy dead is in the final weights alone, in no block's row): the standard SMC
estimate of the normalizing constant Z = sum_x p0(x)^alpha of the final target (Del Moral 2004; unbiased
for Z, not for log Z, with adaptive resampling too), here over responses of n tokens (EOS-stopped ones
too for PowerSMC).  A resample-move session started from given states (the law-test kit) weighs no first
extension: its log Z is not Z's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist
from typing import Any

# A pair whose mean swap probability is below this barely communicates: its rejection rate (at most 1) no
# longer measures its local barrier (Syed et al.'s r_i ~ lambda_i holds for small gaps only; a pair that
# never swaps can hide any barrier), so Lambda is a lower bound there.
SATURATED_A = 0.05
# The mean swap probability a suggested ladder aims each pair at: the geometric middle of the classical
# working range [0.15, 0.6] (the paper's Qwen3 ladders read 0.18-0.37).
TARGET_A = 0.3
# A mean A below this reads as this (a length of 6.9, the most a pair reads).  Not a bound either way: with
# few proposals the mean of a skewed A mostly reads below its expectation, so a pair at the floor can be
# shorter (on the embedded model, prompts whose three pairs all read the floor at R = 4, L 20.4, read L
# 10.4 at R = 12), and a pair that truly never swaps is longer.
A_FLOOR = 1e-6


def swap_length(mean_a: float) -> float:
    """A pair's length l from its mean swap probability: the l with erfc(l / 2) = mean A (see the module
    docstring; 0 for a pair that always swaps, 1.47 at A = 0.3, 6.9 at A_FLOOR and below)."""
    a = min(1.0, max(A_FLOOR, mean_a))
    return max(0.0, -math.sqrt(2.0) * NormalDist().inv_cdf(a / 2.0))


TARGET_LENGTH = swap_length(TARGET_A)


def log_mean_exp(xs: Sequence[float]) -> float:
    """log of the mean of exp(x) over `xs`, without overflow (-inf for none or all -inf; NaN where a weight is
    NaN: a weight that is not a number makes no evidence, it is not weight 0)."""
    if not xs:
        return -math.inf
    if any(math.isnan(x) for x in xs):
        return math.nan
    finite = list(xs)
    m = max(finite)
    if m == -math.inf:
        return -math.inf
    if m == math.inf:
        return math.inf
    return m + math.log(math.fsum(math.exp(x - m) for x in finite) / len(xs))


class LadderNumbers:
    """Parallel tempering's ladder diagnostics, folded from its records (see the module docstring).  Any
    object with a `pt_step` record's fields folds (`update`)."""

    def __init__(self) -> None:
        self.exponents: tuple[float, ...] = ()  # the ladder folded: its numbers are this ladder's alone
        self.proposed: list[int] = []  # per pair
        self.accepted: list[int] = []
        self.sum_a: list[float] = []  # per pair: the sum of the swap probabilities A proposed
        self.transitions: list[int] = []  # per level: MH transitions (every ladder's: the members' work)
        self.moves_accepted: list[int] = []
        self.index: list[tuple[int, ...]] = []  # per record: each state's level (by the level it started at)
        self._at_barrier: list[bool] = []  # per record: a barrier's (not the end's, which repeats the last)
        self.round_trips = 0
        self.barriers = 0
        self._phase: list[int] = []  # per state: 1 once at the hottest level, 2 once at the coldest after that
        self.earlier_ladders = 0  # ladders folded before this one (an adaptive ladder's warm-up), ...
        self.earlier_barriers = 0  # ... and their barriers, left out of the pairs' numbers
        self.earlier_swaps: list[list[int]] = []  # ... and per pair [proposed, accepted] over them (at one R)

    def update(self, ev: Any) -> None:
        R = len(ev.exponents)
        if tuple(ev.exponents) != self.exponents:  # a new ladder (R, or the exponents at one R): start again
            if self.exponents:
                self.earlier_ladders += 1
                self.earlier_barriers += self.barriers
                if len(self.earlier_swaps) != len(self.proposed):
                    self.earlier_swaps = [[0, 0] for _ in self.proposed]
                for tally, n, a in zip(self.earlier_swaps, self.proposed, self.accepted):
                    tally[0] += n
                    tally[1] += a
            if len(self.exponents) != R:  # (the levels' MH transitions carry over a change of exponents)
                self.transitions, self.moves_accepted = [0] * R, [0] * R
            self.exponents = tuple(ev.exponents)
            self.proposed, self.accepted, self.sum_a = [0] * max(0, R - 1), [0] * max(0, R - 1), [0.0] * max(0, R - 1)
            self.index, self._at_barrier, self.round_trips, self.barriers = [], [], 0, 0
            self._phase = [1 if h == 0 else 0 for h in range(R)]
        self.barriers += not ev.final
        for i, A, ok in zip(ev.pairs, ev.accept_probs, ev.swapped):
            if 0 <= i < R - 1:
                self.proposed[i] += 1
                self.accepted[i] += ok
                self.sum_a[i] += A
        for r in range(min(R, len(ev.transitions), len(ev.accepted))):
            self.transitions[r] += ev.transitions[r]
            self.moves_accepted[r] += ev.accepted[r]
        level = [0] * R
        for lv, h in enumerate(ev.holders):
            if 0 <= h < R:
                level[h] = lv
        self.index.append(tuple(level))
        self._at_barrier.append(not ev.final)
        if R > 1:  # a round trip (Syed et al.): a state goes from the hottest level to the coldest and back
            hot, cold = ev.holders[0], ev.holders[R - 1]
            if 0 <= cold < R and self._phase[cold] == 1:
                self._phase[cold] = 2
            if 0 <= hot < R:
                self.round_trips += self._phase[hot] == 2
                self._phase[hot] = 1

    # -- per pair --------------------------------------------------------------------------------
    def mean_accept(self) -> list[float | None]:
        """Per pair (from the lowest): the mean swap probability A of the swaps proposed (None: none was)."""
        return [s / n if n else None for s, n in zip(self.sum_a, self.proposed)]

    def accepted_share(self) -> list[float | None]:
        return [a / n if n else None for a, n in zip(self.accepted, self.proposed)]

    def label(self, i: int) -> str:
        """Pair i as the app's grid names it, the higher replica first: '4-3 (alpha 4/2.52)'."""
        e = self.exponents
        return f"{i + 2}-{i + 1} (alpha {e[i + 1]:.3g}/{e[i]:.3g})"

    # -- the ladder --------------------------------------------------------------------------------
    @property
    def barrier(self) -> float | None:
        """Lambda: the sum of the pairs' rejection rates (mean of 1 - A); None until every pair proposed."""
        means = self.mean_accept()
        if not means or any(m is None for m in means):
            return None
        return math.fsum(1.0 - m for m in means if m is not None)

    def lengths(self) -> list[float | None]:
        """Per pair (from the lowest): its length l = 2 erfcinv(mean A) (`swap_length`; None: never proposed)."""
        return [None if m is None else swap_length(m) for m in self.mean_accept()]

    @property
    def length(self) -> float | None:
        """L: the pairs' lengths summed (the ladder's thermodynamic length); None until every pair proposed."""
        ls = self.lengths()
        if not ls or any(x is None for x in ls):
            return None
        return math.fsum(x for x in ls if x is not None)

    @property
    def suggested_replicas(self) -> int | None:
        """The replicas that put each pair at a mean A of about TARGET_A: 1 + L / l* (at least 2); None without
        L.  Rough where a pair reads the floor (`floored_pairs`)."""
        L = self.length
        return None if L is None else max(2, 1 + math.ceil(L / TARGET_LENGTH - 1e-9))

    def floored_pairs(self) -> list[int]:
        """The pairs (from the lowest) whose mean A is below A_FLOOR: their length reads as the floor's 6.9."""
        return [i for i, m in enumerate(self.mean_accept()) if m is not None and m < A_FLOOR]

    def saturated_pairs(self) -> list[int]:
        """The pairs (from the lowest) whose mean swap probability is below SATURATED_A: their rejection rate
        is near its bound 1, and Lambda does not measure their barrier (their length still does)."""
        return [i for i, m in enumerate(self.mean_accept()) if m is not None and m < SATURATED_A]

    @property
    def barrier_is_lower_bound(self) -> bool:
        """Whether Lambda only bounds the barrier from below: a pair barely swaps."""
        return bool(self.saturated_pairs())

    def alpha_level_share(self) -> list[float]:
        """Per state (by the replica it started at, from the lowest): the share of the barriers after which it
        held the alpha level (the end's record, a repeat of the last barrier's, left out)."""
        top = len(self.exponents) - 1
        held = [levels for levels, b in zip(self.index, self._at_barrier) if b]
        if not held:
            return []
        return [sum(levels[j] == top for levels in held) / len(held) for j in range(len(self.exponents))]

    def to_dict(self) -> dict[str, Any]:
        """The --json `ladder`: like every list of the JSON, `pairs` and `alpha_share_by_state` run from the
        lowest exponent up (index order; each pair carries its label, '2-1' first); `run` and `stats` print
        them top-down.  (The round trips and barriers are the method's own fields beside it.)"""
        if len(self.exponents) < 2:
            return {}
        e = self.exponents
        pairs = [{"pair": [i + 2, i + 1], "label": self.label(i), "exponents": [e[i + 1], e[i]], "proposed": n,
                  "accepted": a, "accepted_share": s, "mean_accept_prob": m,
                  "rejection_rate": None if m is None else 1.0 - m, "length": ln}
                 for i, (n, a, s, m, ln) in enumerate(zip(self.proposed, self.accepted, self.accepted_share(),
                                                           self.mean_accept(), self.lengths()))]
        return {"ladder": {"pairs": pairs, "barrier": self.barrier,
                           "barrier_is_lower_bound": self.barrier_is_lower_bound,
                           "saturated_pairs": [f"{i + 2}-{i + 1}" for i in self.saturated_pairs()],
                           "length": self.length, "suggested_replicas": self.suggested_replicas,
                           "floored_pairs": [f"{i + 2}-{i + 1}" for i in self.floored_pairs()],
                           "alpha_share_by_state": self.alpha_level_share(),
                           "earlier_ladders": self.earlier_ladders, "earlier_barriers": self.earlier_barriers}}

    def rows(self) -> list[tuple[str, str]]:
        """What `run` and `stats` print: each pair top-down with its mean A, then Lambda and what it implies."""
        if len(self.exponents) < 2:
            return []
        out = []
        for i in reversed(range(len(self.proposed))):
            m = self.mean_accept()[i]
            mean = "not proposed" if m is None else f"mean A {m:.2f} over {self.proposed[i]}"
            out.append((f"swap {self.label(i)}", f"{mean}, accepted {self.accepted[i]}/{self.proposed[i]}"))
        share = self.alpha_level_share()
        if share:  # the index process, summed up: how long each state held the alpha level
            out.append(("alpha replica held by (share of barriers)", "  ".join(
                f"state s{j + 1} {share[j]:.2f}" for j in reversed(range(len(share))))))
        out.append(("barrier Lambda (Syed et al.)", self._barrier_words()))
        out.append(("length L (sum of 2 erfcinv(A))", self._length_words()))
        out.append(("round trips", str(self.round_trips)))
        if self.earlier_ladders:  # an adaptive ladder's warm-up: its ladders are not pooled with this one
            out.append(("earlier ladders (left out)", f"{self.earlier_ladders}, {self.earlier_barriers} barriers"))
        return out

    def _barrier_words(self) -> str:
        lam = self.barrier
        if lam is None:
            return "- (a pair never proposed)"
        stuck = self.saturated_pairs()
        if not stuck:
            return f"{lam:.2f}"
        where = ", ".join(f"{i + 2}-{i + 1}" for i in reversed(stuck))
        return (f">= {lam:.2f}: pair{'s' if len(stuck) > 1 else ''} {where} rarely swap{'' if len(stuck) > 1 else 's'} "
                f"(mean A < {SATURATED_A:g}), where a rejection rate stops measuring the barrier; L does not")

    def _length_words(self) -> str:
        L, R = self.length, len(self.exponents)
        if L is None:
            return "- (a pair never proposed)"
        words = f"{L:.2f}: {self.suggested_replicas} replicas give each pair a mean A near {TARGET_A:g} ({R} ran)"
        long = [i for i, x in enumerate(self.lengths()) if x is not None and x > 2 * TARGET_LENGTH]
        if long and (self.suggested_replicas or 0) > R:
            e = self.exponents
            words += "; the longest gap" + ("s: " if len(long) > 1 else ": ") + "; ".join(
                f"alpha {e[i]:.3g} to {e[i + 1]:.3g}" for i in reversed(long))
        floored = self.floored_pairs()
        if floored:
            where = ", ".join(f"{i + 2}-{i + 1}" for i in reversed(floored))
            words += (f"; pair{'s' if len(floored) > 1 else ''} {where} read the floor (mean A < {A_FLOOR:g}: "
                      f"{swap_length(A_FLOOR):.1f} each), so L is rough")
        return words


class SmcNumbers:
    """A sequential Monte Carlo session's history and evidence (see the module docstring): fold its block
    records (`step`) and its final weights (`final`, the `choice`'s scores)."""

    def __init__(self) -> None:
        self.blocks: list[dict[str, Any]] = []
        self._log_z_resampled = 0.0  # sum of log mean w over the blocks that resampled
        self._roots: list[int] = []  # per particle: the first block's particle it descends from
        self.final_log_w: tuple[float, ...] | None = None
        self._since: float | None = None  # log mean w at the block before, None after a resampling (or none)
        self._running = 0.0

    def step(self, ev: Any) -> None:
        P = len(ev.log_weights)
        if len(self._roots) != P:
            self._roots = list(range(P))
        lme = log_mean_exp(ev.log_weights)
        # the block's incremental evidence log sum_i W_{b-1}^i w_b^i: the weights accumulate since the last
        # resampling, so it is this block's log mean w less the block before's (all of it after a resampling)
        inc = lme if self._since is None else lme - self._since
        self._running += inc
        self._since = None if ev.resampled else lme
        if ev.resampled:
            self._log_z_resampled += lme
            self._roots = [self._roots[j] for j in ev.parents]
        row = {"block": ev.step + 1, "t": ev.t, "ess": ev.ess, "ess_share": ev.ess / P if P else None,
               "resampled": ev.resampled, "unique_ancestors": len(set(ev.parents)) if ev.resampled else P,
               "lineages": len(set(self._roots)), "log_mean_weight": lme, "log_z_increment": inc,
               "log_z_running": self._running}
        moved = getattr(ev, "accepted", None)
        if moved is not None:
            row["moves_accepted"] = sum(moved)
        self.blocks.append(row)

    def final(self, log_w: Sequence[float]) -> None:
        self.final_log_w = tuple(log_w)

    @property
    def log_z(self) -> float | None:
        """The evidence estimate log Z (None until the final weights are in)."""
        if self.final_log_w is None or not self.blocks:
            return None
        return self._log_z_resampled + log_mean_exp(self.final_log_w)

    def to_dict(self) -> dict[str, Any]:
        if not self.blocks:
            return {}
        return {"log_z": self.log_z, "ess_history": [b["ess"] for b in self.blocks],
                "resampled_history": [b["resampled"] for b in self.blocks],
                "unique_ancestors": [b["unique_ancestors"] for b in self.blocks],
                "lineages": [b["lineages"] for b in self.blocks]}

    def rows(self) -> list[tuple[str, str]]:
        if not self.blocks:
            return []
        lz = self.log_z
        ess = " ".join(f"{b['ess']:.1f}{'*' if b['resampled'] else ''}" for b in self.blocks)
        return [("log Z (evidence of p0^alpha)", "-" if lz is None else f"{lz:.3f}"),
                ("ESS per block (* resampled)", ess),
                ("unique ancestors / lineages", " ".join(f"{b['unique_ancestors']}/{b['lineages']}"
                                                         for b in self.blocks))]


def ladder_of(info: Any) -> LadderNumbers | None:
    """A session's ladder diagnostics (its summary's `info`), None for a session that is not tempering's."""
    ladder = getattr(info, "ladder", None)
    return ladder if isinstance(ladder, LadderNumbers) else None


def smc_of(info: Any) -> SmcNumbers | None:
    """A session's SMC history and log Z (PowerSMC's, resample-move's), None for another method's session."""
    smc = getattr(info, "smc", None)
    return smc if isinstance(smc, SmcNumbers) else None
