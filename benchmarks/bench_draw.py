"""Benchmark of drawing (not a test): one large round, and scrubbing a 1,000-round replay.

1. A 64-request round (BFS with node inputs, ~129 nodes, and decision inputs with
   64 levels, an astronomically large tree unfolded lazily): time to lay it out
   and to draw every visible row with the widget's line API.
2. A 1,000-round trace replayed in the app (headless, 120x40): a round-step key
   until the screen is updated, against an unbound key (the test harness's own
   cost); the step's own work called directly (state, layout, widget updates);
   and that work plus drawing every line of every visible widget (what the
   compositor asks of the app for one frame), over 200 steps.  The same with
   a search active (its matches are marked in every round shown).

Goal: a round step, drawn, in under 50 ms of the app's own work.

    python benchmarks/bench_draw.py
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from textual.geometry import Region

from presto_tui.logs.reader import read_trace
from presto_tui.logs.writer import TraceWriter
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.core.randomness import extension_seed
from presto_tui.runtime.core.types import Request, SeqState
from presto_tui.runtime.engines.synthetic import SyntheticEngine
from presto_tui.runtime.prefetch.kernel import ChainState, build_kernel
from presto_tui.runtime.session.runner import run_session
from presto_tui.views.app import PrestoApp, replay_app
from presto_tui.views.screens.replay import ReplayScreen
from presto_tui.views.state.layout import layout
from presto_tui.views.state.reducer import AppState
from presto_tui.views.widgets.tree import RoundTreeView


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


def draw_all(screen) -> None:
    """Every line of every visible widget, as the compositor would ask for one frame."""
    for w in screen.walk_children(with_self=False):
        if w.display and w.region.area:
            w.render_lines(Region(0, 0, w.region.width, w.region.height))


async def scrub(path: Path, steps=200, query: str | None = None):
    """Median times: an unbound key (the test harness's own cost), a round step through the
    key binding, the step's own work (state, layout, widget updates) called directly, and
    that work plus drawing every visible widget."""
    app = replay_app(read_trace(path))
    async with app.run_test(size=(120, 40)) as pilot:
        if query:
            await pilot.press("slash", *query, "enter")
            await pilot.pause()
            await pilot.press("home")

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
        direct, drawn = [], []
        for _ in range(steps):
            t0 = time.perf_counter()
            app.screen.action_round(-1)
            direct.append(time.perf_counter() - t0)
        for _ in range(steps):
            await pilot.pause()
            t0 = time.perf_counter()
            app.screen.action_round(1)
            draw_all(app.screen)
            drawn.append(time.perf_counter() - t0)
        return (baseline, step, statistics.median(direct), statistics.median(drawn),
                len(app.screen.state.all_rounds()))


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
        for query in (None, "class=uncertain"):
            baseline, step, direct, drawn, n = asyncio.run(scrub(path, query=query))
            print(f"   {n} rounds{f', search /{query} active' if query else ''}, medians over 200 steps: "
                  f"key + screen update {step * 1e3:.1f} ms, of which the harness's own cost for an unbound "
                  f"key {baseline * 1e3:.1f} ms; the step's own work (state, layout, widgets) "
                  f"{direct * 1e3:.1f} ms, and with every visible widget drawn {drawn * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
