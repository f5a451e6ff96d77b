"""The critical path (runtime/session/critpath.py): where a chain's time went, by cause.

On the synthetic engine the clock is virtual and exact, so the parts must add up to the chain's
time to the float's precision, and the irreducible part must be the dependency limit: the path
decodes exactly the answer's n tokens.
"""

from __future__ import annotations

import pytest
from helpers import small_backend
from typer.testing import CliRunner

from presto_tui.cli import app
from presto_tui.logs.reader import read_trace
from presto_tui.logs.writer import TraceWriter
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.engines.synthetic import SyntheticEngine, SyntheticLM
from presto_tui.runtime.prefetch.stream.decisions import Want
from presto_tui.runtime.prefetch.stream.refusals import Refusals
from presto_tui.runtime.session.critpath import (
    BLOCK_END,
    BUDGET,
    CAUSES,
    EXTENSION,
    IRREDUCIBLE,
    RANKED,
    REUSED,
    ROUND,
    UNSPECULATED,
    WIDTH,
    critical_path,
)
from presto_tui.runtime.session.runner import run_session
from presto_tui.runtime.session.summary import summarize

runner = CliRunner()

CONFIGS = {
    "sequential": dict(prefetch="none"),
    "spine": dict(prefetch="spine", budget=8),
    "bfs": dict(prefetch="bfs", budget=8),
    "bfs-node": dict(prefetch="bfs", inputs="node", budget=8),
    "stream": dict(prefetch="stream", budget=8),  # the default: the extension overlapped
    "stream-waited": dict(prefetch="stream", budget=8, speculate="proposal,block"),
    "stream-auto": dict(prefetch="stream", budget=64),
    "stream-cost": dict(prefetch="stream", budget=64, budget_policy="cost"),
    "stream-fill": dict(prefetch="stream", budget=3, budget_policy="fill", speculate="none"),
    "stream-proposal": dict(prefetch="stream", budget=20, speculate="proposal,block"),
    "stream-blocks": dict(prefetch="stream", budget=8, block_size=8, steps=5),
    "multitry": dict(prefetch="stream", sampler="multitry", budget=8),
    "multitry-spine": dict(prefetch="spine", sampler="multitry", budget=8),
}


def session(config: str, slope: float = 0.05, seed: int = 0, n: int = 32, K: int = 10):
    engine = SyntheticEngine(SyntheticLM(vocab_size=7, seed=2, sharpness=1.2), slope=slope)
    params = SamplerParams(max_new_tokens=n, steps=K, seed=seed).with_(**CONFIGS[config])
    return list(run_session(engine, params, [1, 2], prompt="p"))


@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("seed", (0, 1))
def test_the_parts_add_up_to_the_time_and_the_limit_is_the_irreducible_part(config, seed):
    events = session(config, seed=seed)
    cp, s = critical_path(events), summarize(events)
    assert cp is not None and cp.check(1e-9)
    assert cp.time_s == pytest.approx(s.engine_time_s, rel=1e-12)  # the last decision: the session's time
    assert cp.path_tokens == cp.limit_steps == 32 and cp.limit_steps == s.limits.steps
    beyond = sum(v for c, v in cp.parts.items() if c != IRREDUCIBLE)
    assert beyond == pytest.approx(cp.time_s - cp.limit_s, abs=1e-9)
    assert set(cp.parts) == set(CAUSES) and cp.parts[IRREDUCIBLE] == pytest.approx(32 * 0.01)


def test_what_each_rule_loses_shows_where_it_should():
    """A sequential chain never decodes two requests at once (no width at any cost); at a batch that costs
    what one request costs nothing is lost to width; a round rule waits for its round, the streaming rule
    never; the extension holds back the first proposals of every rule that waits for it, and of none
    where it is overlapped; a block's decisions wait for the block before it to end."""
    seq = critical_path(session("sequential"))
    assert seq.parts[WIDTH] == pytest.approx(0.0, abs=1e-12) and seq.parts[UNSPECULATED] > 0.5 * seq.time_s
    for config in ("spine", "stream-waited", "stream"):
        free = critical_path(session(config, slope=0.0))
        assert free.parts[WIDTH] == pytest.approx(0.0, abs=1e-9)
        assert (free.parts[EXTENSION] > 0) == (config != "stream")
        assert critical_path(session(config)).parts[WIDTH] > 0
    assert sum(critical_path(session("stream-blocks", seed=s)).parts[BLOCK_END] for s in range(3)) > 0
    rounds = [critical_path(session("bfs-node", seed=s, K=20)).parts[ROUND] for s in range(4)]
    assert max(rounds) > 0  # the paper's BFS: a round's longest request is often one the walk does not use
    assert all(critical_path(session("stream", seed=s)).parts[ROUND] == 0.0 for s in range(4))


def test_a_full_budget_and_the_cost_rule_are_told_apart_from_no_speculation():
    """fill:3 with speculation past the walker's state: what it saw and had no slot for waited on the
    budget; the cost policy, where width is dear, keeps fewer live than its cap and what it left out waited
    ranked below them; neither exists without a policy that refuses anything (a sequential chain)."""
    budget = [critical_path(session("stream-fill", seed=s)) for s in range(3)]
    assert sum(cp.parts[BUDGET] for cp in budget) > 0 and all(cp.parts[RANKED] == 0 for cp in budget)
    ranked = [critical_path(session("stream", slope=0.5, seed=s, n=48, K=16)) for s in range(3)]
    assert sum(cp.parts[RANKED] for cp in ranked) > 0
    seq = critical_path(session("sequential"))
    assert seq.parts[BUDGET] == seq.parts[RANKED] == 0


def test_a_trace_holds_the_critical_path_and_old_traces_have_none(tmp_path):
    path = tmp_path / "t.jsonl"
    backend = small_backend()
    events = []
    with TraceWriter(path, command="test", backend=backend.name, model=backend.model,
                     params=SamplerParams().to_dict(), pieces=backend.token_pieces) as w:
        for config in ("stream-blocks", "spine"):
            for ev in run_session(backend, SamplerParams(max_new_tokens=24, steps=6).with_(**CONFIGS[config]),
                                  [1, 2], prompt="p"):
                w.write(ev)
                events.append(ev)
    live = [critical_path(events[:len(events) // 2 + 1]), critical_path(events)]
    read = [s.summary().critical_path for s in read_trace(path).sessions]
    assert read[1] == live[1] and read[0] is not None and read[0].check(1e-9)
    res = runner.invoke(app, ["stats", "--critical-path", str(path)])
    assert res.exit_code == 0, res.output
    assert "critical path per session" in res.output and "spine N=8" in res.output
    # one numbering with `stats` (traces and sessions from 1), and the limit column's share named for what it
    # is: the dependency limit over the path's time, not stats' lim% (the binding limit over the session's time)
    lines = res.output.splitlines()
    assert "[1] t.jsonl" in res.output and "[0]" not in res.output
    header = next(ln.split() for ln in lines if ln.split()[:2] == ["id", "prompt"])
    assert "dep%" in header and "lim%" not in header
    row = next(ln.split() for ln in lines if ln.split()[:1] == ["[1]#2"])
    cp = read[1]
    assert row[header.index("dep%")] == f"{100 * cp.limit_s / cp.time_s:.0f}"  # ("time s" and "spine N=8": 2 words)
    assert "dep%: limit as a share of the time (stats' lim% is another number" in " ".join(res.output.split())
    printed = runner.invoke(app, ["stats", str(path)]).output
    assert "[1]#2" in printed and "lim%: the binding limit" in " ".join(printed.split())
    old = runner.invoke(app, ["stats", "--critical-path", "tests/data/stream.jsonl"])
    assert old.exit_code == 2 and "Traceback" not in old.output
    assert "holds what the critical path needs" in old.stderr and len(old.stderr.strip().splitlines()) == 1


def test_a_chain_from_a_given_state_has_no_critical_path():
    from presto_tui.runtime.core.types import SeqState
    from presto_tui.runtime.session.loop import make_driver, run_chains

    engine = small_backend()
    params = SamplerParams(prefetch="stream", max_new_tokens=6, steps=4)
    state = SeqState.tokens_only((1, 2), (1, 2, 3, 1, 2, 3))
    driver = make_driver(engine, params, (1, 2), state=state)
    events = [ev for _, ev in run_chains(engine, [driver])]
    assert summarize(events).transitions == 4 and critical_path(events) is None


def test_refusals_count_how_long_a_want_waited_and_why():
    r = Refusals()
    a, b = Want(1, 3, (1, 2, 3)), Want(2, 4, (1, 2, 3, 4))
    r.passed(1.0, [(a, "budget"), (b, "ranked")], k=0)
    r.passed(3.0, [(a, "ranked")], k=0)  # a still refused, now by the cost rule; b no longer seen
    assert r.issued(a, 4.5) == {"budget": 2.0, "ranked": 1.5}
    assert r.issued(b, 9.0) == {"ranked": 2.0}  # refused from 1.0 until the pass at 3.0
    assert r.issued(a, 9.0) == {}  # forgotten once issued


# -- an oracle scheduler reaches the limit, and its critical path is all irreducible --------------

class OraclePolicy:
    """Knows the chain's trajectory (the sequential sampler's, which every exact rule walks) and asks for
    each request it will use the moment every token of that request's prefix exists: the dependency limit's
    schedule (limit.py), on the streaming rule's own driver."""

    cap = 1 << 20

    def __init__(self, wants, decoded):
        self.wants = wants  # block -> [(want, [(writer key, last position it must have made)])]
        self.decoded = decoded
        self.asked: set = set()

    def plan(self, block):
        from presto_tui.runtime.prefetch.stream import Plan

        b = block.decisions.block
        ready = []
        for want, needs in self.wants.get(b, []):
            g = block.book.get(want)
            if (b, want) in self.asked or (g is not None and not g.wanting):
                continue
            if all(self._made(block, key, upto) for key, upto in needs):
                ready.append(want)
                self.asked.add((b, want))
        return Plan(tuple(ready), (), (), expanded=True)

    def _made(self, block, key, upto: int) -> bool:
        """Has the request `key` ((block, want or "ext"), its first position) made its token at `upto`?"""
        (b, kind), cut = key
        if b < block.decisions.block:
            return True  # a block before this one: it has ended
        if kind == "ext":
            g = block.pending
            if g is None:
                return True  # the block's extension has arrived
            return len(self.decoded(g)) >= upto - cut + 1
        g = block.book.get(kind)
        if g is None:
            return (b, kind) in self.asked  # asked and since forgotten: finished
        return g.finished or (g.live and len(self.decoded(g)) >= upto - cut + 1)


def oracle_wants(params, prompt):
    """Per block, each want the chain will use, and where each token of its prefix comes from."""
    from helpers import trajectory

    from presto_tui.runtime.core.randomness import decision_inputs
    from presto_tui.runtime.prefetch.stream import Want

    _, trees = trajectory(small_backend(), params.with_(prefetch="none"), prompt)
    wants: dict = {}
    source: list = []  # per position: (writer key, its first position)
    k = 0
    for b in range(params.n_blocks):
        block_trees = [t for t in trees[k:k + params.steps]]
        k += params.steps
        L, T = block_trees[0].root.T - params.block, block_trees[0].root.T
        source = source[:L] + [((b, "ext"), L)] * (T - L)
        out = wants.setdefault(b, [])
        for d, t in enumerate(block_trees):
            dec = t.decisions[t.steps[0].decision]
            assert dec.cut == min(int(decision_inputs(params.seed, b, d).cut_u * T), T - 1)
            want = Want(d, dec.cut, tuple(t.root.tokens[:dec.cut]))
            out.append((want, _needs(source, dec.cut)))
            if t.steps[0].accepted:
                source = source[:dec.cut] + [((b, want), dec.cut)] * (T - dec.cut)
        if b + 1 < params.n_blocks:  # the next block's extension, asked for by the whole final state
            final = block_trees[-1].states_after_steps()[-1]
            out.append((Want(params.steps, T, tuple(final.tokens)), _needs(source, T)))
    return wants


def _needs(source, cut):
    """The writers of positions before `cut`, each with the last of those positions it makes."""
    last: dict = {}
    for p, (key, first) in enumerate(source[:cut]):
        last[(key, first)] = p
    return [((key, first), p) for (key, first), p in last.items()]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("blocks", ("one", "three"))
def test_an_oracle_scheduler_reaches_the_limit_and_its_path_is_all_irreducible(seed, blocks):
    """One block: the oracle reaches the limit exactly and nothing of its path is lost.  Several blocks:
    the streaming rule asks for a block's decisions only once the block before it has ended, where the
    limit starts each as soon as its prefix exists (a cut before the block's first token needs nothing
    of the block before's last decisions); what the oracle loses is that alone (`block end`)."""
    from presto_tui.runtime.session.loop import run_chains
    from presto_tui.runtime.session.streaming import StreamDriver

    size = dict(max_new_tokens=12, steps=5) if blocks == "one" else dict(max_new_tokens=18, block_size=6, steps=4)
    params = SamplerParams(prefetch="stream", budget_policy="fill", speculate="proposal,block,extension", seed=seed,
                           **size)
    engine = SyntheticEngine(small_backend().lm, step_s=0.01, slope=0.0)  # a batch costs one request
    driver = StreamDriver(engine, params, (1, 2))
    driver.policy = OraclePolicy(oracle_wants(params, (1, 2)), driver._decoded)
    events = [ev for _, ev in run_chains(engine, [driver])]
    s, cp = summarize(events), critical_path(events)
    assert s.status == "done" and s.transitions == params.steps * params.n_blocks
    assert cp is not None and cp.check(1e-9) and cp.limit_steps == params.max_new_tokens
    lost = {c: v for c, v in cp.parts.items() if abs(v) > 1e-9 and c != IRREDUCIBLE}
    if blocks == "one":
        assert cp.time_s == pytest.approx(cp.limit_s, abs=1e-9)  # the oracle reaches the limit ...
        assert lost == {}  # ... and all of its path is irreducible
    else:
        assert set(lost) <= {BLOCK_END, REUSED} and cp.time_s > cp.limit_s


def test_the_cost_policy_goes_as_wide_as_the_step_cost_makes_the_path_shortest():
    """(a + b N)(S + C / N) is least at N = sqrt((C / S) a / b): a CPU's cost (b/a = 0.05) keeps about 18
    live, a GPU's (b/a = 0.004) the cap, a free batch the cap; with m chains on the engine each request
    slows all of them, and each keeps 1 / sqrt(m) as many; never beyond the cap, never below one."""
    from presto_tui.runtime.prefetch.stream import CostPolicy
    from presto_tui.runtime.prefetch.stream.shared import Load

    def width(a, b, chains=1, cap=64):
        return CostPolicy(cap, lambda: Load(a, b, chains=chains)).width()

    kappa = CostPolicy.KAPPA
    assert width(1.0, 0.05) == round((kappa / 0.05) ** 0.5) == 18 and width(1.0, 0.004) == 63
    assert width(1.0, 0.0) == width(1.0, 0.001) == 64 and width(1.0, 0.05, cap=8) == 8
    assert width(1.0, 0.05, chains=4) == 9 and width(1.0, 0.004, chains=4) == 32
    assert width(1.0, 100.0) == 1


def test_the_cost_policy_keeps_more_live_where_width_is_cheap():
    cheap, dear = (summarize(session("stream-auto", slope=slope, n=48, K=16)).mean_live for slope in (0.004, 0.2))
    assert cheap > 1.5 * dear
