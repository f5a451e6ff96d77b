"""What an engine step costs, learned online from the steps themselves.

The engine loop times every step with the number of requests it had live.  A
step with n live requests costs about a + b n: on a CPU the batch's compute
grows with n (a step with 20 requests costs about twice one with one, b/a
about 0.05); on a GPU a decode step costs nearly the same at 1 and 256
requests (b/a near 0).  `StepCost` keeps per-n means, with old steps fading
(the machine's load drifts), and fits the line by weighted least squares.

Its uses: the streaming rule's `CostPolicy` asks it how wide a batch makes the
chain's critical path shortest; the dependency limit (`limit.py`) turns decode
steps into seconds with the single-request step time a + b; the compute limit
uses the best measured throughput, max over the n seen of n / (mean step time
at n).
"""

from __future__ import annotations

from dataclasses import dataclass

FADE = 0.98  # weight kept by a per-n mean at each new sample of that n
PRIOR_SLOPE = 0.05  # b/a before two different batch sizes were seen (the CPU's, the cautious one)


@dataclass(frozen=True)
class CostEstimate:
    a: float  # fixed cost of a step
    b: float  # cost per live request
    steps: int  # steps measured
    best_n: int  # the live count with the best measured throughput
    best_rate: float  # its requests per unit time (tokens per second on a real engine)


class StepCost:
    def __init__(self) -> None:
        self._mean: dict[int, float] = {}
        self._weight: dict[int, float] = {}
        self.steps = 0
        self._fit: tuple[float, float] | None = None

    def record(self, live: int, seconds: float) -> None:
        if live <= 0 or seconds <= 0:
            return
        w = self._weight.get(live, 0.0) * FADE
        m = self._mean.get(live, 0.0)
        self._mean[live] = (m * w + seconds) / (w + 1.0)
        self._weight[live] = w + 1.0
        self.steps += 1
        self._fit = None

    def line(self) -> tuple[float, float]:
        """(a, b) of the weighted least-squares line through the per-n means; (1, PRIOR_SLOPE) before any step."""
        if self._fit is None:
            self._fit = self._solve()
        return self._fit

    def _solve(self) -> tuple[float, float]:
        if not self._mean:
            return 1.0, PRIOR_SLOPE
        if len(self._mean) == 1:
            ((n, t),) = self._mean.items()
            a = t / (1 + PRIOR_SLOPE * n)
            return a, PRIOR_SLOPE * a
        W = sum(self._weight.values())
        xs = {n: float(n) for n in self._mean}
        mx = sum(self._weight[n] * xs[n] for n in self._mean) / W
        my = sum(self._weight[n] * t for n, t in self._mean.items()) / W
        sxx = sum(self._weight[n] * (xs[n] - mx) ** 2 for n in self._mean)
        sxy = sum(self._weight[n] * (xs[n] - mx) * (t - my) for n, t in self._mean.items())
        b = max(0.0, sxy / sxx) if sxx > 0 else 0.0
        a = max(my - b * mx, 1e-3 * my)  # a step never costs nothing
        return a, b

    def estimate(self) -> CostEstimate | None:
        if not self._mean:
            return None
        a, b = self.line()
        best_n, best_rate = max(((n, n / t) for n, t in self._mean.items()), key=lambda nr: nr[1])
        return CostEstimate(a, b, self.steps, best_n, best_rate)
