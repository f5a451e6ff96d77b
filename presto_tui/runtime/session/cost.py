"""What an engine step costs, learned online from the steps themselves.

The engine loop times every step with the number of requests it had live and
the number it took since the step before.  A step with n live requests, s of
them new, costs about a + b n + p s: on a CPU the batch's compute grows with n
(a step with 20 requests costs about twice one with one, b/a about 0.05); on a
GPU a decode step costs nearly the same at 1 and 256 requests (b/a near 0);
and a request the engine has just taken first computes its prompt and prefix
(a real engine recomputes every token after the last cached block of the
prefix: vLLM on a CPU caches whole blocks of 32), once, in the step that takes
it: p.  Left out of the fit, p hides in a (with several chains on an engine
about as many requests start in every step, whatever n is), and width looks
cheaper than it is.  `StepCost` keeps a mean step time per (n, s), with old
steps fading (the machine's load drifts), and fits the plane by weighted least
squares, leaving out what the steps seen so far cannot tell apart.

Its uses: the streaming rule's policies ask it what a step costs and what one
more live request adds to every step (its decode, and its start spread over
its life: `slot`); the dependency limit (`limit.py`) turns decode steps into
seconds with the single-request step time a + b; the compute limit uses the
best measured throughput, max over the n seen of n / (mean step time at n).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FADE = 0.98  # weight kept by a (n, s) mean at each new sample of that (n, s)
TURNOVER_FADE = 0.995  # weight kept by the request and step counts behind `turnover` at each step
PRIOR_SLOPE = 0.05  # b/a before two different batch sizes were seen (the CPU's, the cautious one)
MAX_CELLS = 2048  # (n, s) means kept at most; beyond, the lightest are dropped


@dataclass(frozen=True)
class CostEstimate:
    a: float  # fixed cost of a step
    b: float  # cost per live request
    steps: int  # steps measured
    best_n: int  # the live count with the best measured throughput
    best_rate: float  # its requests per unit time (tokens per second on a real engine)
    p: float = 0.0  # cost of a request's start (its prefill), in the step that takes it
    turnover: float = 0.0  # requests taken per live request and step: one over a request's mean life in steps

    @property
    def slot(self) -> float:
        """What one more live request adds to every step: its decode, and its start spread over its life."""
        return self.b + self.p * self.turnover


class StepCost:
    def __init__(self) -> None:
        self._mean: dict[tuple[int, int], float] = {}  # (live, new) -> mean step time
        self._weight: dict[tuple[int, int], float] = {}
        self.steps = 0
        self._fit: tuple[float, float, float] | None = None
        self._taken = 0.0  # requests taken, faded
        self._held = 0.0  # live requests summed over steps, faded
        self._live_total = 0  # live requests summed over every step

    def record(self, live: int, seconds: float, new: int = 0) -> None:
        """A step with `live` requests, `new` of them taken since the step before, took `seconds`."""
        if live <= 0 or seconds <= 0:
            return
        new = max(0, min(new, live))
        key = (live, new)
        w = self._weight.get(key, 0.0) * FADE
        m = self._mean.get(key, 0.0)
        self._mean[key] = (m * w + seconds) / (w + 1.0)
        self._weight[key] = w + 1.0
        self._taken = self._taken * TURNOVER_FADE + new
        self._held = self._held * TURNOVER_FADE + live
        self._live_total += live
        self.steps += 1
        self._fit = None
        if len(self._mean) > MAX_CELLS:
            for k in sorted(self._weight, key=self._weight.__getitem__)[: len(self._mean) - MAX_CELLS // 2]:
                del self._mean[k], self._weight[k]

    def line(self) -> tuple[float, float]:
        """(a, b) of the fit (a decode step with n live requests: a + b n); (1, PRIOR_SLOPE) before any step."""
        a, b, _ = self.plane()
        return a, b

    def plane(self) -> tuple[float, float, float]:
        """(a, b, p): a step with n live requests, s of them new, costs a + b n + p s."""
        if self._fit is None:
            self._fit = self._solve()
        return self._fit

    @property
    def mean_live(self) -> float | None:
        """Live requests per step, over every step measured."""
        return self._live_total / self.steps if self.steps else None

    @property
    def turnover(self) -> float:
        """Requests taken per live request and step lately (one over a request's mean life in steps)."""
        return self._taken / self._held if self._held > 0 else 0.0

    def _solve(self) -> tuple[float, float, float]:
        if not self._mean:
            return 1.0, PRIOR_SLOPE, 0.0
        keys = list(self._mean)
        w = np.array([self._weight[k] for k in keys])
        n = np.array([float(k[0]) for k in keys])
        s = np.array([float(k[1]) for k in keys])
        t = np.array([self._mean[k] for k in keys])
        by_n = len({k[0] for k in keys}) > 1
        cols = ["b", "p"] if by_n else ["p"]
        while True:  # (an intercept alone always fits)
            fit = _wls(w, t, {"b": n, "p": s}, cols)
            if fit is None:  # what the cells cannot tell apart is left out: p first
                cols = cols[:-1]
                continue
            negative = [c for c in cols if fit[c] < 0]  # a cost is never negative: that column is 0
            if not negative:
                break
            cols = [c for c in cols if c not in negative]
        a, b, p = fit["a"], fit.get("b", 0.0), fit.get("p", 0.0)
        mean_t = float(np.average(t, weights=w))
        if not by_n:  # one batch size seen: the prior slope through that point
            n0 = float(n[0])
            a, b = a / (1 + PRIOR_SLOPE * n0), PRIOR_SLOPE * a / (1 + PRIOR_SLOPE * n0)
        a = max(a, 1e-3 * mean_t)  # a step never costs nothing
        return a, b, p

    def estimate(self) -> CostEstimate | None:
        if not self._mean:
            return None
        a, b, p = self.plane()
        per_n: dict[int, tuple[float, float]] = {}  # n -> (weighted time, weight), every s together
        for (n, _), m in self._mean.items():
            tw, ww = per_n.get(n, (0.0, 0.0))
            per_n[n] = (tw + m * self._weight[(n, _)], ww + self._weight[(n, _)])
        best_n, best_rate = max(((n, n * ww / tw) for n, (tw, ww) in per_n.items()), key=lambda nr: nr[1])
        return CostEstimate(a, b, self.steps, best_n, best_rate, p, self.turnover)


def _wls(w: np.ndarray, t: np.ndarray, xs: dict[str, np.ndarray], cols: list[str]) -> dict[str, float] | None:
    """Weighted least squares of t on an intercept and the columns `cols` of `xs`; None where the cells
    seen cannot tell those columns apart (too few distinct values, or one a multiple of another)."""
    X = np.column_stack([np.ones_like(t)] + [xs[c] for c in cols])
    if X.shape[0] < X.shape[1]:
        return None
    sw = np.sqrt(w)[:, None]
    Xw, tw = X * sw, t * sw[:, 0]
    beta, _, _, singular = np.linalg.lstsq(Xw, tw, rcond=None)
    # the rank from the singular values lstsq computed anyway (matrix_rank's test, without a second SVD)
    if int((singular > 1e-9 * max(1.0, float(np.abs(Xw).max()))).sum()) < X.shape[1]:
        return None
    return {"a": float(beta[0]), **{c: float(v) for c, v in zip(cols, beta[1:])}}
