"""Benchmark of drawing (not a test): one large round, and scrubbing a 1,000-round replay.

1. A 64-request round (BFS with node inputs, ~129 nodes, and decision inputs with
   64 levels, an astronomically large tree unfolded lazily): time to lay it out
   and to draw every visible row with the widget's line API.
2. A 1,000-round trace replayed in the app (headless, 120x40): a round-step key
   until the screen is updated, against an unbound key (the test harness's own
   cost), and the step's own work called directly, over 200 steps.

Goal: a round drawn in under 50 ms.

    python benchmarks/bench_draw.py
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from presto_tui.logs.reader import read_trace
from presto_tui.logs.writer import TraceWriter
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.core.randomness import extension_seed
from presto_tui.runtime.core.types import Request, SeqState
from presto_tui.runtime.engines.synthetic import SyntheticEngine
from presto_tui.runtime.prefetch.kernel import ChainState, build_kernel
from presto_tui.runtime.session.runner import run_session
from presto_tui.views.app import PrestoApp, replay_app
from presto_tui.views.layout import layout
from presto_tui.views.replay import ReplayScreen
from presto_tui.views.state import AppState
from presto_tui.views.widgets import RoundTreeView


def big_round(backend, params):
    (prop,) = backend.generate([Request((1, 2), params.block, extension_seed(params.seed, 0), params.proposal_tau)])
    chain = ChainState(SeqState((1, 2)).extended(prop), 0)
    return build_kernel(params).step(backend, chain)[1]


async def draw_round(tree, reps=20):
    app = PrestoApp(ReplayScreen(AppState()))
    async with app.run_test(size=(120, 40)) as pilot:
        view = app.screen.query_one("#tree", RoundTreeView)
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            view.show(tree)
            for y in range(view.size.height):
                view.render_line(y)
            times.append(time.perf_counter() - t0)
            await pilot.pause()
        return statistics.median(times), len(view.lay.rows), view.lay.total


async def scrub(path: Path, steps=200):
    """Median times: an unbound key (the test harness's own cost), a round step through the
    key binding, and the step's own work (state, layout, widget updates) called directly."""
    app = replay_app(read_trace(path))
    async with app.run_test(size=(120, 40)) as pilot:

        async def timed_keys(key):
            times = []
            for _ in range(steps):
                t0 = time.perf_counter()
                await pilot.press(key)
                await pilot.pause()
                times.append(time.perf_counter() - t0)
            return statistics.median(times)

        baseline = await timed_keys("x")
        step = await timed_keys("right_square_bracket")
        direct = []
        for _ in range(steps):
            t0 = time.perf_counter()
            app.screen.action_round(-1)
            direct.append(time.perf_counter() - t0)
        return baseline, step, statistics.median(direct), len(app.screen.state.all_rounds())


def main() -> None:
    backend = SyntheticEngine()
    print("1. one round with 64 requests (T=128), layout + drawing every visible row")
    for rule, inputs in (("bfs", "node"), ("predictive", "node"), ("spine", "decision"), ("bfs", "decision")):
        params = SamplerParams(prefetch=rule, inputs=inputs, budget=64, max_new_tokens=128, steps=200)
        tree = big_round(backend, params)
        t0 = time.perf_counter()
        layout(tree)
        t_layout = time.perf_counter() - t0
        med, rows, total = asyncio.run(draw_round(tree))
        print(f"   {rule}/{inputs:<8} nodes {total:>22,}  rows drawn {rows:>4}  "
              f"layout {t_layout * 1e3:6.1f} ms  show+draw {med * 1e3:6.1f} ms")
    print("2. scrubbing a 1,000-round replay")
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "big.jsonl"
        params = SamplerParams(max_new_tokens=96, steps=100, budget=8, prefetch="bfs", inputs="node")
        with TraceWriter(path, command="bench", backend=backend.name, model=backend.model,
                         params=params.to_dict(), pieces=backend.token_pieces) as w:
            rounds = seed = 0
            while rounds < 1000:
                for ev in run_session(backend, params.with_(seed=seed), backend.encode_prompt("the cat")):
                    w.write(ev)
                    rounds += type(ev).__name__ == "RoundDone"
                seed += 1
        baseline, step, direct, n = asyncio.run(scrub(path))
        print(f"   {n} rounds, medians over 200 steps: key + screen update {step * 1e3:.1f} ms, of which "
              f"the harness's own cost for an unbound key {baseline * 1e3:.1f} ms; the step's own work "
              f"(state, layout, widgets) {direct * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
