"""Regenerate the fixed traces under tests/data (run by hand; the tests read the files).

    python tests/make_fixtures.py             # all of them
    python tests/make_fixtures.py research    # only research.jsonl
    python tests/make_fixtures.py populations # only populations.jsonl
"""

from __future__ import annotations

from pathlib import Path

from presto_tui.logs.writer import TraceWriter
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.engines.synthetic import SyntheticEngine
from presto_tui.runtime.session.runner import run_session

DATA = Path(__file__).parent / "data"
HOSTILE = "[bold red]boom[/] \x1b[2J\x1b]0;pwned\x07 \x9b31m [link=file:///etc]x[/link]"


class HostileBackend(SyntheticEngine):
    """Token pieces that try markup, ANSI escapes and terminal control codes."""

    def token_pieces(self, ids):
        return [HOSTILE if t == 3 else piece for t, piece in zip(ids, super().token_pieces(ids))]


def record(path: Path, backend, sessions) -> None:
    path.unlink(missing_ok=True)
    with TraceWriter(path, command="fixture", backend=backend.name, model=backend.model,
                     params=sessions[0][1].to_dict(), pieces=backend.token_pieces) as w:
        for prompt, params in sessions:
            for ev in run_session(backend, params, backend.encode_prompt(prompt), prompt=prompt):
                w.write(ev)


def main() -> None:
    DATA.mkdir(exist_ok=True)
    b = SyntheticEngine()
    record(DATA / "replay.jsonl", b, [
        ("the cat sat on", SamplerParams(max_new_tokens=32, steps=16, budget=8, seed=1)),
        ("a dog ran", SamplerParams(prefetch="bfs", inputs="node", max_new_tokens=32, steps=12,
                                    budget=8, seed=2)),
    ])
    record(DATA / "hostile.jsonl", HostileBackend(), [
        (HOSTILE, SamplerParams(max_new_tokens=24, steps=6, budget=4, seed=0)),
    ])
    # The app's colour test: the first round's realized path crosses all four classes
    # (certain accept, certain reject, uncertain, and it stops at a deferred node); the
    # second session streams (epochs, no model calls: rates per second).
    record(DATA / "classes.jsonl", b, [
        ("the cat", SamplerParams(prefetch="bfs", inputs="node", max_new_tokens=24, steps=12, budget=8, seed=7)),
        ("a dog", SamplerParams(prefetch="stream", max_new_tokens=24, steps=8, budget=4, seed=3)),
    ])
    record_stream(b)
    record_chains(b)
    record_baselines(b)
    record_research(b)
    record_populations(b)


def record_populations(b) -> None:
    """Tempering (four replicas, swaps every 2 transitions, streamed) and resample-move (four particles,
    three blocks, resampling when the ESS falls below 0.9 P: after the first two blocks): the replica and
    particle grids and a member's chain opened from them."""
    record(DATA / "populations.jsonl", b, [
        ("the cat", SamplerParams(sampler="ppt", max_new_tokens=16, steps=8, seed=1, pt_swap_every=2)),
        ("the cat", SamplerParams(sampler="resample-move", particles=4, max_new_tokens=12, block_size=4, steps=3,
                                  seed=5, rm_ess=0.9)),
    ])


def record_research(b) -> None:
    """Three samplers on one prompt, with per-token values and transition events (schema 1.2): the
    comparison, the per-token view and the chain's history."""
    record(DATA / "research.jsonl", b, [
        ("the cat", SamplerParams(max_new_tokens=24, steps=8, budget=8, seed=1)),
        ("the cat", SamplerParams(sampler="entropycut", prefetch="bfs", inputs="node", max_new_tokens=24,
                                  steps=8, budget=8, seed=2)),
        ("the cat", SamplerParams(sampler="multitry", max_new_tokens=24, steps=8, budget=8, seed=3)),
    ])


def record_stream(b) -> None:
    """A streaming session where several decisions are often walked in one engine step: epochs
    that last no engine time at all (the overview's rates must not divide by them)."""
    record(DATA / "stream.jsonl", b, [
        ("the cat sat", SamplerParams(prefetch="stream", max_new_tokens=32, steps=40, budget=20, seed=2)),
    ])


def record_chains(b) -> None:
    """Four chains of one prompt run at once (--chains 4): their lines interleave, each names its session."""
    from presto_tui.runtime.session.chains import chain_drivers
    from presto_tui.runtime.session.loop import run_chains

    path = DATA / "chains.jsonl"
    path.unlink(missing_ok=True)
    params = SamplerParams(max_new_tokens=16, steps=40, budget=8, seed=4)
    prompt = "the cat sat"
    with TraceWriter(path, command="fixture", backend=b.name, model=b.model, params=params.to_dict(),
                     pieces=b.token_pieces) as w:
        sids: dict[int, str] = {}
        for i, ev in run_chains(b, chain_drivers(b, params, b.encode_prompt(prompt), 4, prompt=prompt),
                                concurrency=4):
            sids.setdefault(i, getattr(ev, "session_id", ""))
            w.write(ev, sids[i])


def record_baselines(b) -> None:
    """The baselines' views: an MH session first (the timeline crosses from rounds to baseline
    sessions), then best-of-N with samples that stop at EOS and one that runs to n, and PowerSMC
    whose weights resample twice (lineage, dropped particles) and whose answer stops at EOS."""
    record(DATA / "baselines.jsonl", b, [
        ("the cat sat", SamplerParams(max_new_tokens=16, steps=6, budget=4, seed=1)),
        ("the cat", SamplerParams(sampler="bestofn", prefetch="none", samples=6, max_new_tokens=48, seed=0)),
        ("the cat", SamplerParams(sampler="powersmc", prefetch="none", particles=6, smc_block=6, smc_ramp=24,
                                  max_new_tokens=30, seed=3)),
    ])


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["research"]:
        record_research(SyntheticEngine())
    elif sys.argv[1:] == ["populations"]:
        record_populations(SyntheticEngine())
    else:
        main()
