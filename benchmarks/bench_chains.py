"""One chain against M chains of the same prompt, on one engine, side by side in one run.

    .venv/bin/python benchmarks/bench_chains.py                      # vLLM, the embedded model
    .venv/bin/python benchmarks/bench_chains.py --backend synthetic --chains 8

For each prompt: the wall time of one chain, then of M chains at once (chain 0 of the M is the
one-chain run: the same seed, the same tokens), and the M chains' mixing diagnostics (ArviZ, as
`run --chains M` prints them).  The order alternates per prompt (1 then M, M then 1) so that a
drift in the machine's speed does not favour either.
"""

from __future__ import annotations

import argparse
import time

from presto_tui.runtime.core.params import AUTO_BUDGET, SamplerParams, budget_text
from presto_tui.runtime.engines.registry import EngineOptions, start_engine
from presto_tui.runtime.session.chains import chain_drivers
from presto_tui.runtime.session.diagnostics import chains_report
from presto_tui.runtime.session.loop import run_chains
from presto_tui.runtime.session.summary import SessionSummary

PROMPTS = ("What is 7 * 8?", "Name a planet and say one thing about it.")


def run(engine, params: SamplerParams, prompt: str, chains: int) -> tuple[float, list[SessionSummary]]:
    ids = engine.encode_prompt(prompt)
    summaries = [SessionSummary() for _ in range(chains)]
    t0 = time.perf_counter()
    for i, ev in run_chains(engine, chain_drivers(engine, params, ids, chains, prompt=prompt), concurrency=chains):
        summaries[i].update(ev)
    return time.perf_counter() - t0, summaries


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default=None, help="engine (default: vLLM where installed)")
    ap.add_argument("--chains", type=int, default=4, help="M")
    ap.add_argument("-n", type=int, default=32, help="response length")
    ap.add_argument("-K", type=int, default=24, help="transitions")
    args = ap.parse_args()
    engine = start_engine(args.backend, EngineOptions())
    params = SamplerParams(max_new_tokens=args.n, steps=args.K, budget=AUTO_BUDGET)  # as `run` samples
    rule = f"{params.prefetch} N={budget_text(params.to_dict())}"
    print(f"{engine.name} on {engine.model}: n={args.n}, K={args.K}, {rule}, 1 chain against {args.chains} at once")
    print(f"{'prompt':<44} {'1 chain s':>9} {f'{args.chains} chains s':>11} {'ratio':>6} {'=chain 0':>8}")
    for p, prompt in enumerate(PROMPTS):
        order = (1, args.chains) if p % 2 == 0 else (args.chains, 1)
        res = {m: run(engine, params, prompt, m) for m in order}
        (t1, (one,)), (tm, many) = res[1], res[args.chains]
        same = "yes" if tuple(one.tokens) == tuple(many[0].tokens) else "NO"
        print(f"{prompt[:44]:<44} {t1:>9.2f} {tm:>11.2f} {tm / t1:>5.2f}x {same:>8}")
        report = chains_report(many)
        for d in report.diagnostics:
            print(f"    block {d.block} {d.quantity:<12} R-hat {d.rhat if d.rhat is None else round(d.rhat, 3)}  "
                  f"bulk ESS {d.ess_bulk if d.ess_bulk is None else round(d.ess_bulk)}  "
                  f"tail ESS {d.ess_tail if d.ess_tail is None else round(d.ess_tail)}  "
                  f"MCSE {d.mcse if d.mcse is None else f'{d.mcse:.3g}'}")
        for w in report.warnings:
            print(f"    warning: {w}")
        v = report.vote
        print(f"    answers: {v.majority.count if v.majority else 0} of {v.total} chains agree"
              + (f" on {v.majority.answer[:60]!r}" if v.majority else ""))


if __name__ == "__main__":
    main()
