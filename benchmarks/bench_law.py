"""The law tables of the population methods (not a test): total variation to pi_alpha on the enumerable
model as their budgets grow, beside the noise floor of as many exact draws and one PowerMH chain at the
same K, all from the public law-test kit (`presto_tui.testing.check_law`).

Each row answers `--sessions` prompts from the prompt (seeds 0..S-1), so every row's estimate has the
same noise; the floor is where an exact sampler with S draws would sit.

    python benchmarks/bench_law.py [--sessions 1500] [-n 3] [--alpha 4]
"""

from __future__ import annotations

import argparse
import time

from presto_tui import Params, testing


def rows(n: int, alpha: float) -> list[tuple[str, dict]]:
    base = dict(prefetch="none", alpha=alpha, max_new_tokens=n)
    out: list[tuple[str, dict]] = []
    for k in (1, 2, 4, 8):
        out.append((f"powermh K={k}", dict(base, sampler="powermh", steps=k)))
    for r in (2, 4):
        for k in (1, 2, 4, 8):
            out.append((f"ppt R={r} K={k}", dict(base, sampler="ppt", pt_replicas=r, pt_swap_every=1, steps=k)))
    for p in (1, 4, 16):
        out.append((f"powersmc P={p} (block 1)", dict(base, sampler="powersmc", particles=p, smc_block=1)))
        for k in (1, 2):  # (K = 0, PowerSMC grown block by block, is refused: steps >= 1)
            out.append((f"resample-move P={p} K={k} (block 1)",
                        dict(base, sampler="resample-move", particles=p, block_size=1, steps=k)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=1500)
    ap.add_argument("-n", type=int, default=3, help="response length (3 tokens of a 3-token model: 27 responses)")
    ap.add_argument("--alpha", type=float, default=4.0)
    args = ap.parse_args()
    print(f"enumerable model (vocabulary 3, sharpness 1), n = {args.n}, alpha = {args.alpha:g}, "
          f"{args.sessions} sessions a row\n")
    print(f"| {'method':<34} | TV [95%]                 | floor  | verdict | s    |")
    print(f"| {'-' * 34} | ------------------------ | ------ | ------- | ---- |")
    for label, kw in rows(args.n, args.alpha):
        t0 = time.perf_counter()
        try:
            params = Params(**kw)
        except ValueError as e:  # a setting the method refuses: say so, keep the table going
            print(f"| {label:<34} | refused: {e}")
            continue
        r = testing.check_law(params, sessions=args.sessions, assert_=False)
        verdict = "noise" if r.within_noise else "away"
        print(f"| {label:<34} | {r.tv:.4f} [{r.low:.4f}, {r.high:.4f}] | {r.floor:.4f} | {verdict:<7} | "
              f"{time.perf_counter() - t0:4.0f} |", flush=True)


if __name__ == "__main__":
    main()
