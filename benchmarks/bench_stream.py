"""The streaming rule's own cost, and round vs streaming spine on the synthetic cost model.

1. Scheduler overhead: real time the walker and scheduler spend (planning,
   walking, recording epochs) per walked decision, at budgets 8, 20 and 64,
   on the synthetic engine (whose decoding is cheap, so this is the overhead
   a real engine would add to every decision).
2. Speedup over sequential PowerMH in engine time on the synthetic engine's
   cost model (a step costs 1 + slope (live - 1) units): round-based spine
   against streaming with N live and with the cost policy (N its cap), at
   N = 8, 20 and 64, T = 96, next to the simulation in docs/streaming.md
   (i.i.d. uniform cuts, no content validity; its CPU numbers, slope 0.05:
   1.7x and 3.0x at N = 8).

Run: python benchmarks/bench_stream.py [--chains 8] [--slope 0.004]   (0.004: a GPU-like cost)
"""

from __future__ import annotations

import argparse
import statistics
import time

from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.engines.synthetic import SyntheticEngine, SyntheticLM
from presto_tui.runtime.session.events import DecisionWalked, RoundDone
from presto_tui.runtime.session.runner import run_session

PROMPTS = ["the cat sat on", "a dog ran under the tree", "then it was warm", "the small red home"]


def session(engine, params, prompt):
    t0, e0 = time.perf_counter(), engine.clock()
    sched = 0.0
    n = 0
    for ev in run_session(engine, params, engine.encode_prompt(prompt), prompt=prompt):
        if isinstance(ev, RoundDone):
            sched += sum(ev.sampler_s.values())
        elif isinstance(ev, DecisionWalked):
            n += 1
    return time.perf_counter() - t0, engine.clock() - e0, sched, n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chains", type=int, default=8, help="seeds per prompt")
    ap.add_argument("--slope", type=float, default=0.05, help="cost model: extra cost per live request")
    args = ap.parse_args()
    base = SamplerParams(max_new_tokens=96, steps=48)

    print("1. scheduler overhead per walked decision (real time, ms; synthetic engine, T=96, K=48; N requests kept "
          "live, the scheduler's busiest case)")
    print(f"{'N':>4}{'sched ms/decision':>20}{'total ms/decision':>20}")
    for budget in (8, 20, 64):
        per, tot = [], []
        for seed in range(2):
            for prompt in PROMPTS:
                engine = SyntheticEngine(SyntheticLM(), slope=args.slope)
                params = base.with_(prefetch="stream", budget=budget, budget_policy="fill", seed=seed)
                wall, _, sched, n = session(engine, params, prompt)
                per.append(1e3 * sched / n)
                tot.append(1e3 * wall / n)
        print(f"{budget:>4}{statistics.median(per):>20.3f}{statistics.median(tot):>20.3f}")

    print(f"\n2. speedup over sequential PowerMH in engine time (cost 1 + {args.slope} (live - 1) per step), "
          f"{len(PROMPTS)} prompts x {args.chains} seeds, T=96, K=48")
    print(f"{'rule':<22}{'N=8':>8}{'N=20':>8}{'N=64':>8}")
    rows = {"spine": dict(prefetch="spine"), "stream, N live": dict(prefetch="stream", budget_policy="fill"),
            "stream, cost (N: cap)": dict(prefetch="stream", budget_policy="cost")}
    for name, kw in rows.items():
        cells = []
        for budget in (8, 20, 64):
            ratios = []
            for seed in range(args.chains):
                for prompt in PROMPTS:
                    t = {}
                    for key, p in (("seq", base.with_(prefetch="none")), ("row", base.with_(budget=budget, **kw))):
                        engine = SyntheticEngine(SyntheticLM(), slope=args.slope)
                        t[key] = session(engine, p.with_(seed=seed), prompt)[1]
                    ratios.append(t["seq"] / t["row"])
            cells.append(f"{statistics.mean(ratios):.2f}x")
        print(f"{name:<22}" + "".join(f"{c:>8}" for c in cells))
    print("simulation (docs/streaming.md, no content validity): round spine 1.7x / 1.3x, streaming 3.0x / 3.0x")


if __name__ == "__main__":
    t0 = time.perf_counter()
    main()
    print(f"\n(total {time.perf_counter() - t0:.1f} s)")
