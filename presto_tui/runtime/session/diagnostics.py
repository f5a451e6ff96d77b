"""MCMC diagnostics of the chains of one prompt, computed by ArviZ (arviz-stats), not by hand.

A power-sampling run of one chain for a fixed K never asks whether the chain has
mixed.  With M chains of a prompt (`--chains M`, `chains.py`) every transition's
state is a draw (`Transition`: the log-target alpha log p0(x), the
length-normalised log-likelihood and the confidence of paper eqs. 21-22), and
per block and quantity ArviZ gives the rank-normalised split R-hat, the bulk and
tail effective sample sizes (tail: the 5% and 95% quantiles) and the Monte
Carlo standard error of the mean, over the M chains' draws: by default every
transition of each (`Selection()`, burn-in 0: the chains start from the block's
extension, and a start far from pi_alpha is what R-hat is there to show); with
`--burn-in B` the first B transitions of each block are dropped from the
diagnostics as warm-up, and with `--thin T` every T-th of the rest is kept.  The
report says which (`Selection.words`).  The answers the chains agree on are their
final states, which the burn-in never drops (B < K).

For a view of one block's mixing: `autocorrelation` (per chain, by lag) and
`running_rhat` (R-hat over the first n draws of every chain, as n grows), pure
functions of a (chains, draws) array, ArviZ's computations.

The usual thresholds: an R-hat above 1.01 or a bulk ESS below 100 means the
draws do not yet describe pi_alpha, so K was too short; `warnings` says so.
The log-target is the MH target, over the whole state (every state of a block
has the same length); the log-likelihood and the confidence are those of the
response the state gives (up to its first EOS: `metrics.response_scores`), and
undefined where a response is empty, so their diagnostics are too.

A block after the first starts from each chain's own earlier blocks: the chains
then target different conditional laws, R-hat compares unlike things, and no
warning is drawn from such a block (`shared`: the blocks whose chains all start
from the same tokens; the first always does).

arviz-stats is an optional dependency (`pip install 'presto-tui[diagnostics]'`),
imported only here and only when diagnostics are computed; without it a report
holds the answers and says what is missing.
"""

from __future__ import annotations

import importlib.util
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from presto_tui.errors import InputError
from presto_tui.runtime.core import registry
from presto_tui.runtime.session.answers import Vote, vote
from presto_tui.runtime.session.summary import SessionSummary

RHAT_MAX = 1.01  # rank-normalised split R-hat above this: the chains disagree
ESS_MIN = 100  # bulk ESS below this: too few effective draws
TAIL_PROB = (0.05, 0.95)  # tail ESS: the smaller of the 5% and 95% quantiles' ESS
MIN_DRAWS = 4  # ArviZ's least per chain
QUANTITIES = {"log_target": "log-target", "loglik": "log-likelihood", "confidence": "confidence"}
WARN_ON = ("log_target", "loglik")  # the quantities whose mixing decides the warning
MISSING = "MCMC diagnostics need arviz-stats: pip install 'presto-tui[diagnostics]'"
THRESHOLDS = f"R-hat <= {RHAT_MAX}, bulk ESS >= {ESS_MIN}"
STUCK = "no chain varied within itself, and the chains differ: no mixing at all"  # what an infinite R-hat means


@dataclass(frozen=True)
class Selection:
    """Which transitions of each block are draws for the diagnostics: the first `burn_in` dropped
    (warm-up), then every `thin`-th kept (counted from the first kept)."""

    burn_in: int = 0
    thin: int = 1

    def keeps(self, k: int) -> bool:
        """Whether transition k (from 0 in its block) is a draw."""
        return k >= self.burn_in and (k - self.burn_in) % self.thin == 0

    @property
    def words(self) -> str:
        """What the report says it read: the choice is always said, the default too."""
        kept = "every transition" if self.thin == 1 else f"one transition in {self.thin}"
        return (f"burn-in {self.burn_in} (none dropped)" if self.burn_in == 0 else
                f"burn-in {self.burn_in} (the first {self.burn_in} of each block dropped)") + \
            f", thin {self.thin} ({kept} kept)"

    def to_dict(self) -> dict:
        return {"burn_in": self.burn_in, "thin": self.thin}


ALL = Selection()


def warmed(selection: Selection, params: Sequence[Mapping[str, Any]]) -> Selection:
    """`selection`, its burn-in raised to cover a method's own warm-up (`Method.warmup_transitions`: tempering's
    adaptive ladder tunes its exponents in the first `pt_warmup` transitions, a chain that is not yet the frozen
    ladder's exact one), so that its draws are warm-up in the diagnostics; within one block (the default), as the
    burn-in counts per block (at most K - 1: the block's last draw is always kept)."""
    methods = [registry.find(p.get("sampler")) for p in params]
    warm = [w for p, m in zip(params, methods) if m is not None and (w := m.warmup_transitions(p))
            and int(p.get("block_size") or 0) == int(p.get("max_new_tokens") or -1)]
    if not warm:
        return selection
    steps = min(int(p.get("steps") or 1) for p in params)
    return replace(selection, burn_in=max(selection.burn_in, min(max(warm), steps - 1)))


def available() -> bool:
    """Whether the diagnostics' library (arviz-stats) is installed."""
    return importlib.util.find_spec("arviz_stats") is not None


def require() -> None:
    """Refuse, in one line, a run whose diagnostics could not be computed (before any engine starts)."""
    if not available():
        raise InputError(f"--chains above 1: {MISSING}")


@dataclass(frozen=True)
class Diagnostic:
    """One quantity of one block over the chains.  None: undefined (fewer than 2 chains for R-hat,
    fewer than MIN_DRAWS draws per chain, or draws that never vary); an R-hat of inf: chains that
    never vary within themselves but differ from each other (`stuck`): the tables print "inf", the
    warning says what it means, the running R-hat plot leaves it out and says so, and JSON writes
    null with `rhat_infinite` true (`to_dict`)."""

    quantity: str
    block: int  # from 1, as every table and JSON counts blocks (docs/numbering.md)
    chains: int
    draws: int  # per chain: the shortest chain's (a cancelled chain cuts the others to its length)
    mean: float | None
    rhat: float | None
    ess_bulk: float | None
    ess_tail: float | None
    mcse: float | None

    def problems(self) -> list[str]:
        """What fails the thresholds (empty: nothing, or nothing that can be said)."""
        out = []
        if self.rhat is not None and math.isinf(self.rhat):
            out.append(f"R-hat inf > {RHAT_MAX} ({STUCK})")
        elif self.rhat is not None and self.rhat > RHAT_MAX:
            out.append(f"R-hat {self.rhat:.3f} > {RHAT_MAX}")
        if self.ess_bulk is not None and self.ess_bulk < ESS_MIN:
            out.append(f"bulk ESS {self.ess_bulk:.0f} < {ESS_MIN}")
        return out

    def to_dict(self) -> dict:
        """As JSON says it: an infinite R-hat is null with `rhat_infinite` true (JSON has no inf); a
        null R-hat with `rhat_infinite` false is an undefined one."""
        d = asdict(self)
        d["rhat"] = None if self.rhat is None or math.isinf(self.rhat) else self.rhat
        d["rhat_infinite"] = self.rhat is not None and math.isinf(self.rhat)
        return d


def _number(x) -> float | None:
    v = float(x)
    return v if math.isfinite(v) else None


def stuck(draws: np.ndarray) -> bool:
    """Whether no chain varies within the halves ArviZ's split R-hat cuts it into (each half-chain holds
    one value): the within-chain variance is zero, so R-hat is infinite where the values differ."""
    a = np.asarray(draws, dtype=float)
    half = a.shape[1] // 2
    halves = np.vstack((a[:, :half], a[:, a.shape[1] - half:]))
    return bool(half) and bool(np.all(halves == halves[:, :1]))


def diagnose(draws: np.ndarray, quantity: str = "log_target", block: int = 1) -> Diagnostic:
    """ArviZ's diagnostics of `draws`, shape (chains, draws per chain), of `block` (from 1)."""
    from arviz_stats.base import array_stats as az

    a = np.asarray(draws, dtype=float)
    m, k = a.shape
    if k < MIN_DRAWS or not np.isfinite(a).all():
        return Diagnostic(quantity, block, m, k, _number(a.mean()) if a.size else None, None, None, None, None)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # draws that never vary: undefined, said as None
        constant = bool(np.all(a == a.flat[0]))
        # chains that never vary within themselves but differ: no mixing at all, R-hat is infinite (ArviZ
        # divides by a within-chain variance that rounding leaves at 1e-33 rather than 0: 9e15, not inf)
        rhat = None if constant or m < 2 else math.inf if stuck(a) else float(az.rhat(a))
        if rhat is not None and not math.isfinite(rhat):
            rhat = math.inf
        bulk = None if constant else _number(az.ess(a, method="bulk"))
        tail = None if constant else _number(az.ess(a, method="tail", prob=TAIL_PROB))
        mcse = None if constant else _number(az.mcse(a, method="mean"))
    return Diagnostic(quantity, block, m, k, float(a.mean()), rhat, bulk, tail, mcse)


@dataclass(frozen=True)
class ChainsReport:
    """A prompt's M chains: per block and quantity their diagnostics, the answer they agree on,
    and warnings for a person."""

    group: str
    prompt: str
    chains: int
    steps: int  # K
    elapsed_s: float  # the longest chain's engine time (they start together when the concurrency covers them)
    diagnostics: tuple[Diagnostic, ...]
    shared: tuple[int, ...]  # blocks (from 1) whose chains all start from the same tokens
    vote: Vote
    warnings: tuple[str, ...]
    selection: Selection = ALL

    def to_dict(self) -> dict:
        return {"chain_group": self.group, "prompt": self.prompt, "chains": self.chains, "steps": self.steps,
                "elapsed_s": self.elapsed_s, **self.selection.to_dict(),
                "diagnostics": [d.to_dict() for d in self.diagnostics],
                "shared_blocks": list(self.shared), "thresholds": {"rhat_max": RHAT_MAX, "ess_bulk_min": ESS_MIN},
                "warnings": list(self.warnings), "answers": self.vote.to_dict()}


def draws_of(summaries: Sequence[SessionSummary], block: int, quantity: str,
             selection: Selection = ALL) -> np.ndarray:
    """(chains, draws) of `quantity` in `block` (the trace's index, from 0: the summaries' transitions
    are its records), the transitions `selection` keeps, every chain cut to the shortest."""
    series = [[getattr(t, quantity) for t in s.draws if t.block == block and selection.keeps(t.k)] for s in summaries]
    k = min((len(x) for x in series), default=0)
    return np.array([x[:k] for x in series], dtype=float).reshape(len(series), k)


def autocorrelation(draws: np.ndarray, max_lag: int | None = None) -> np.ndarray:
    """Each chain's autocorrelation by lag 0..max_lag (ArviZ's, by FFT), shape (chains, lags); a chain
    that never varies has none (NaN from lag 1 on, 1 at lag 0)."""
    from arviz_stats.base import array_stats as az

    a = np.asarray(draws, dtype=float)
    m, k = a.shape
    lags = k if max_lag is None else min(k, max_lag + 1)
    if k == 0:
        return np.zeros((m, 0))
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out = np.asarray(az.autocorr(a, axis=-1), dtype=float)[:, :lags]
    flat = np.all(a == a[:, :1], axis=1)
    out[flat, 0], out[flat, 1:] = 1.0, np.nan
    return out


def running_rhat(draws: np.ndarray, points: int = 50) -> list[tuple[int, float | None]]:
    """(n, R-hat over the first n draws of every chain) at up to `points` n from MIN_DRAWS to all the
    draws, evenly spread: how the chains' agreement grew.  None where it is undefined (draws that
    never vary); inf where the chains never vary within themselves but differ."""
    a = np.asarray(draws, dtype=float)
    m, k = a.shape
    if m < 2 or k < MIN_DRAWS:
        return []
    ns = sorted({int(round(x)) for x in np.linspace(MIN_DRAWS, k, num=min(points, k - MIN_DRAWS + 1))})
    return [(n, diagnose(a[:, :n]).rhat) for n in ns]


def datatree(groups: dict[str, dict[str, np.ndarray]], dims: dict[str, list[str]], coords: dict[str, list],
             attrs: dict[str, object]):
    """ArviZ's DataTree of `groups` (posterior, sample_stats, warmup_posterior, ...: each variable's
    leading dims chain and draw, then `dims`), by arviz-base's `from_dict` (logs/draws.py writes it)."""
    from arviz_base import from_dict

    with warnings.catch_warnings():  # (a short warm-up has fewer draws than chains: its dims are still right)
        warnings.simplefilter("ignore", UserWarning)
        return from_dict(groups, dims=dims, coords=coords, save_warmup="warmup_posterior" in groups,
                         attrs={"/": attrs})


def chains_report(summaries: Sequence[SessionSummary], selection: Selection = ALL) -> ChainsReport:
    """The report on one prompt's chains (`summaries` in chain order), their answers grouped by text;
    the diagnostics over the transitions `selection` keeps."""
    first = summaries[0]
    selection = warmed(selection, [s.params for s in summaries])
    # (a one-shot method has no K; a population's members make K a block)
    steps = int(first.params.get("steps", 0)) if not first.one_shot or first.population else 0
    blocks = sorted({t.block for s in summaries for t in s.draws})  # the trace's indices, from 0
    # what the report hands a person or a program counts blocks from 1 (docs/numbering.md)
    shared = tuple(b + 1 for b in blocks if len({s.block_prefixes.get(b) for s in summaries}) == 1)
    diags: list[Diagnostic] = []
    notes: list[str] = []
    if available():
        for b in blocks:
            diags += [diagnose(draws_of(summaries, b, q, selection), q, b + 1) for q in QUANTITIES]
        ended = all(s.status != "running" for s in summaries)  # (a trace cut inside a chain: as far as it goes)
        notes = _warnings(diags, shared, len(blocks) > 1, steps, selection, ended, cut_short(summaries))
    else:
        notes = [MISSING]
    return ChainsReport(first.group, first.prompt, len(summaries), steps, max(s.elapsed_s for s in summaries),
                        tuple(diags), shared, vote([s.text for s in summaries]), tuple(notes), selection)


# how a chain ended short of its K transitions, in words (a chain cancelled midway says nothing about K)
CUT_SHORT = {"cancelled": "cancelled", "error": "ended by an error", "damaged": "damaged (trace lines skipped)"}


def cut_short(summaries: Sequence[SessionSummary]) -> str:
    """Which chains ended short of their K transitions and after how many, in words ("" for none):
    "chain 2 cancelled after 9 transitions", "chains 1-3 cancelled after 1310, 1309, 1311 transitions"."""
    cut = [(m, s) for m, s in enumerate(summaries, 1) if s.status in CUT_SHORT]
    if not cut:
        return ""
    out = []
    for how in dict.fromkeys(CUT_SHORT[s.status] for _, s in cut):
        mine = [(m, s) for m, s in cut if CUT_SHORT[s.status] == how]
        which = "every chain" if len(mine) == len(summaries) > 1 else \
            f"chain{'s' if len(mine) > 1 else ''} {', '.join(str(m) for m, _ in mine)}"
        counts = ", ".join(str(s.transitions) for _, s in mine)
        out.append(f"{which} {how} after {counts} transition{'' if counts == '1' else 's'}")
    return "; ".join(out)


def _warnings(diags: list[Diagnostic], shared: tuple[int, ...], blocks: bool, steps: int,
              selection: Selection = ALL, ended: bool = True, cut: str = "") -> list[str]:
    """What fails the thresholds, per shared block.  While a chain still runs (`ended` False) the
    draws are the first ones only: the warning says how things stand so far, and blames K only
    once the chains have made all their transitions; where a chain ended short of them (`cut`: it
    was cancelled, failed or its trace is damaged) the warning says so and blames nothing."""
    out = []
    # the draws of chains cut short (after how many transitions) say nothing about whether K was enough
    verdict = (f"{cut} (of K={steps} a block): the draws so far, no verdict on K" if cut else
               f"K={steps} was too short for the chains to mix (run more steps, -K; thresholds {THRESHOLDS})")
    for b in shared:
        mine = [d for d in diags if d.block == b and d.quantity in WARN_ON]
        where = f"block {b}: " if blocks else ""
        if mine and all(d.draws < MIN_DRAWS for d in mine):
            kept = "" if selection == ALL else f" after {selection.words}"
            out.append(f"{where}{mine[0].draws} draw(s) per chain{kept}: too few for diagnostics "
                       f"(at least {MIN_DRAWS})")
            continue
        if mine and all(d.ess_bulk is None for d in mine):
            out.append(f"{where}the log-target never varied: the chains did not move, so nothing says they "
                       f"mixed; {cut} (of K={steps} a block)" if ended and cut else
                       f"{where}the log-target never varied: the chains did not move, so nothing says they "
                       f"mixed; K={steps} was too short (run more steps, -K)" if ended else
                       f"{where}the log-target has not varied so far: the chains have not moved yet "
                       f"({mine[0].draws} of K={steps} transitions)")
            continue
        # the worst over the quantities that mix or not
        rhats = [d.rhat for d in mine if d.rhat is not None]
        esses = [d.ess_bulk for d in mine if d.ess_bulk is not None]
        worst = Diagnostic("", b, mine[0].chains, mine[0].draws, None, max(rhats, default=None),
                           min(esses, default=None), None, None)
        if worst.problems() and ended:
            out.append(f"{where}{', '.join(worst.problems())} over {worst.chains} chains x {worst.draws} transitions: "
                       f"{verdict}")
        elif worst.problems():
            out.append(f"{where}{', '.join(worst.problems())} over {worst.chains} chains x {worst.draws} transitions "
                       f"so far (of K={steps}): not mixed yet (thresholds {THRESHOLDS})")
    return out


def chain_groups(summaries: Sequence[SessionSummary]) -> list[list[SessionSummary]]:
    """The groups of `--chains M` among `summaries` (M >= 2), in order of first appearance, each in
    chain order."""
    groups: dict[str, list[SessionSummary]] = {}
    for s in summaries:
        if s.chains > 1 and s.group:
            groups.setdefault(s.group, []).append(s)
    return [sorted(g, key=lambda s: s.chain) for g in groups.values()]
