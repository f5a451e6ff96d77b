"""Benchmark: how fast a 1,000-round trace opens (not a test).

Records a trace on the synthetic backend (sessions of K=100 transitions, T=96,
BFS with N=8 and node inputs, until it holds the asked number of rounds), then times `read_trace`, which parses and
validates every line, and `presto-tui stats`' summary over it.

    python benchmarks/bench_traces.py [--rounds 1000]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from presto_tui.logs.reader import read_trace
from presto_tui.logs.stats import pooled_groups, session_rows
from presto_tui.logs.writer import TraceWriter
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.engines.synthetic import SyntheticEngine
from presto_tui.runtime.session.runner import run_session


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=1000)
    ap.add_argument("--budget", type=int, default=8)
    args = ap.parse_args()
    backend = SyntheticEngine()
    params = SamplerParams(max_new_tokens=96, steps=100, budget=args.budget, prefetch="bfs", inputs="node")
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "big.jsonl"
        t0 = time.perf_counter()
        with TraceWriter(path, command="bench", backend=backend.name, model=backend.model,
                         params=params.to_dict(), pieces=backend.token_pieces) as w:
            rounds = sessions = 0
            while rounds < args.rounds:
                for ev in run_session(backend, params.with_(seed=sessions), backend.encode_prompt("the cat")):
                    w.write(ev)
                    rounds += type(ev).__name__ == "RoundDone"
                sessions += 1
        t_write = time.perf_counter() - t0
        size = path.stat().st_size
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            trace = read_trace(path)
            times.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        pooled_groups(session_rows([trace]))
        t_stats = time.perf_counter() - t0
    print(f"trace: {rounds} rounds in {sessions} sessions, {size / 2**20:.1f} MiB, recorded in {t_write:.1f} s")
    print(f"read_trace (parse + validate every line): best {min(times) * 1e3:.0f} ms, "
          f"worst {max(times) * 1e3:.0f} ms over 3 reads")
    print(f"stats over all sessions: {t_stats * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
