"""Benchmark of the sampling core on the synthetic backend (not a test).

Prints, side by side from one run:
1. the sampler's own time per round (planning the tree, scoring, walking),
   excluding the model call, at budgets 8, 20 and 64;
2. mean MH transitions per model call of every traversal rule at equal
   budgets, in both input modes, over the same prompts and seeds.

Absolute times drift on shared machines; compare rows of one run.

    python benchmarks/bench_core.py [--seeds 4] [--horizon 128] [--steps 100]
"""

from __future__ import annotations

import argparse
import statistics
import time

from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.engines.synthetic import SyntheticEngine, SyntheticLM
from presto_tui.runtime.session.events import RoundDone
from presto_tui.runtime.session.runner import run_session
from presto_tui.runtime.session.summary import summarize

PROMPTS = ["the cat sat on", "a dog ran under the tree", "then it was warm", "the small red home"]
CONFIGS = [("bfs", "decision"), ("predictive", "decision"), ("spine", "decision"),
           ("bfs", "node"), ("predictive", "node")]


def run(backend, params, prompt):
    events = list(run_session(backend, params, backend.encode_prompt(prompt), prompt=prompt))
    return events, summarize(events)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--horizon", type=int, default=128)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--sharpness", type=float, default=2.0,
                    help="synthetic logit scale; 2.0 gives acceptance near 0.3 and ~95%% eps-certain decisions")
    args = ap.parse_args()
    backend = SyntheticEngine(SyntheticLM(sharpness=args.sharpness))
    base = SamplerParams(max_new_tokens=args.horizon, steps=args.steps)
    print(f"synthetic backend {backend.model}, T={args.horizon}, K={args.steps}, "
          f"{len(PROMPTS)} prompts x {args.seeds} seeds, alpha={base.alpha}")

    print("\n1. sampler time per round, excluding the model call (ms, median over rounds)")
    print(f"{'rule':<22}{'N':>4}{'plan':>9}{'finish':>9}{'total':>9}{'tr/round':>10}")
    for budget in (8, 20, 64):
        for rule, inputs in CONFIGS:
            params = base.with_(prefetch=rule, inputs=inputs, budget=budget, seed=0)
            phases: dict[str, list[float]] = {"plan": [], "finish": []}
            trs = []
            for prompt in PROMPTS[:2]:
                events, _ = run(backend, params, prompt)
                for ev in events:
                    if isinstance(ev, RoundDone):
                        for k in phases:
                            phases[k].append(ev.sampler_s[k] * 1e3)
                        trs.append(ev.tree.transitions)
            med = {k: statistics.median(v) for k, v in phases.items()}
            print(f"{rule + '/' + inputs:<22}{budget:>4}{med['plan']:>9.3f}{med['finish']:>9.3f}"
                  f"{sum(med.values()):>9.3f}{statistics.mean(trs):>10.2f}")

    print("\n2. mean MH transitions per model call (same prompts and seeds)")
    budgets = (8, 12, 20, 64)
    print(f"{'rule':<22}" + "".join(f"{'N=' + str(b):>9}" for b in budgets) + f"{'acc.rate':>10}")
    for rule, inputs in [("none", "decision")] + CONFIGS:
        row = []
        for budget in budgets:
            tpc, acc = [], []
            for seed in range(args.seeds):
                for prompt in PROMPTS:
                    params = base.with_(prefetch=rule, inputs=inputs, budget=budget, seed=seed)
                    _, s = run(backend, params, prompt)
                    tpc.append(s.transitions_per_call)
                    acc.append(s.acceptance_rate)
            row.append(statistics.mean(tpc))
            if rule == "none":  # the sequential chain has no budget
                break
        label = "none (sequential)" if rule == "none" else f"{rule}/{inputs}"
        cells = "".join(f"{v:>9.2f}" for v in row) if rule != "none" else f"{row[0]:>9.2f}" + " " * 27
        print(f"{label:<22}{cells}{statistics.mean(acc):>10.3f}")


if __name__ == "__main__":
    t0 = time.perf_counter()
    main()
    print(f"\n(total {time.perf_counter() - t0:.1f} s)")
