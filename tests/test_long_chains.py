"""Chains long enough to find what only long chains do: deep reject runs, many epochs, big K.

Node ids once grew as 2^depth (children at 2i+1 / 2i+2), and a run of 67 rejects in
one streaming epoch made an id no JSON writer can hold: `run -K 3000` ended in an
internal error and the trace lost its end.  Ids are now small whatever the chain does.
"""

from __future__ import annotations

import orjson
import pytest
from helpers import small_backend
from typer.testing import CliRunner

from presto_tui.cli import app
from presto_tui.logs.reader import read_trace
from presto_tui.logs.writer import TraceWriter
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.prefetch.stream import EPOCH_DECISIONS, EPOCH_NODES
from presto_tui.runtime.session.events import RoundDone, SessionEnd
from presto_tui.runtime.session.runner import run_session

# tau = 100 proposes nearly uniform suffixes and alpha = 1000 rejects almost every one of them:
# reject runs of hundreds of decisions
STUCK = dict(max_new_tokens=8, steps=3000, alpha=1000.0, tau=100.0)


def stuck_backend():
    return small_backend(vocab=30, sharpness=3.0)


def record(tmp_path, params: SamplerParams) -> tuple[list, object]:
    engine = stuck_backend()
    path = tmp_path / "t.jsonl"
    events = []
    with TraceWriter(path, command="test", backend=engine.name, model=engine.model, params=params.to_dict(),
                     pieces=engine.token_pieces) as w:
        for ev in run_session(engine, params, [1, 2]):
            w.write(ev)
            events.append(ev)
    assert not w.gaps
    return events, read_trace(path)


def max_node_id(path) -> tuple[int, int]:
    ids, depth = [0], [0]
    for line in path.read_bytes().splitlines():
        d = orjson.loads(line)
        if d["type"] == "round":
            t = d["tree"]
            ids += [r[0] for r in t["table"]] + [s[0] for s in t["steps"]] + [t["stop_node"]]
            depth += [r[1] for r in t["table"]]
    return max(ids), max(depth)


@pytest.mark.parametrize("rule,budget", [("stream", 4), ("spine", 200), ("none", 1)])
def test_long_reject_runs_keep_node_ids_small_and_the_trace_whole(tmp_path, rule, budget):
    params = SamplerParams(prefetch=rule, budget=budget, **STUCK)
    events, trace = record(tmp_path, params)
    rounds = [e for e in events if isinstance(e, RoundDone)]
    longest = max(r.k_after - r.k_before for r in rounds)
    if rule == "stream":  # reject runs longer than an epoch: it was cut into several
        assert longest == EPOCH_DECISIONS
        assert "length" in {r.tree.stop_reason for r in rounds}
    if rule == "spine":  # 200 decisions a round, most of them rejected: paths 100+ deep
        assert longest > 100
    biggest, deepest = max_node_id(trace.path)
    assert biggest <= EPOCH_NODES + max(EPOCH_DECISIONS, budget) + 1
    assert deepest <= EPOCH_DECISIONS + budget  # the walked path, and speculation past its end
    (session,) = trace.sessions
    assert session.ended and isinstance(session.events[-1], SessionEnd)
    assert session.summary().transitions == 3000
    # what the reader gives back is the chain that ran
    assert [r.tree.final_state.tokens for r in session.rounds] == [r.tree.final_state.tokens for r in rounds]


def test_stream_with_epochs_cut_short_is_still_sequential_powermh(tmp_path):
    seq = [e for e in run_session(stuck_backend(), SamplerParams(prefetch="none", **STUCK), [1, 2])]
    stream = [e for e in run_session(stuck_backend(), SamplerParams(prefetch="stream", budget=4, **STUCK), [1, 2])]
    states = lambda evs: [s.tokens for e in evs if isinstance(e, RoundDone) for s in e.tree.states_after_steps()]
    assert states(stream) == states(seq)


@pytest.mark.usefixtures("in_tmp")
def test_the_reported_command_ends_its_trace(tmp_path):
    """`presto-tui run "long run" --backend synthetic --prefetch stream -K 3000` crashed at a run of 67 rejects."""
    res = CliRunner().invoke(app, ["run", "long run", "--backend", "synthetic", "--prefetch", "stream", "-K", "3000",
                                   "--trace", "t.jsonl"])
    assert res.exit_code == 0, res.output
    assert "internal error" not in res.output
    trace = read_trace(tmp_path / "t.jsonl")
    assert trace.sessions[0].ended and not trace.warnings
    assert max_node_id(tmp_path / "t.jsonl")[0] <= EPOCH_NODES + EPOCH_DECISIONS + 1


def test_an_event_that_cannot_be_written_costs_that_event_not_the_session(tmp_path, monkeypatch):
    from presto_tui.logs import writer as writer_module

    real = writer_module.encode
    seen = {"rounds": 0}

    def flaky(ev):
        if isinstance(ev, RoundDone):
            seen["rounds"] += 1
            if seen["rounds"] == 2:
                raise TypeError("Integer exceeds 64-bit range")
        return real(ev)

    monkeypatch.setattr(writer_module, "encode", flaky)
    params = SamplerParams(prefetch="spine", max_new_tokens=8, steps=12)
    events, trace = [], None
    engine = small_backend()
    path = tmp_path / "t.jsonl"
    with TraceWriter(path, command="test", backend=engine.name, model=engine.model, params=params.to_dict(),
                     pieces=engine.token_pieces) as w:
        for ev in run_session(engine, params, [1, 2]):
            w.write(ev)
            events.append(ev)
    assert len(w.gaps) == 1 and "Integer exceeds 64-bit range" in w.gaps[0]
    trace = read_trace(path)
    (session,) = trace.sessions
    assert session.ended and isinstance(session.events[-1], SessionEnd)
    assert len(session.rounds) == len([e for e in events if isinstance(e, RoundDone)]) - 1
    assert any("RoundDone event could not be recorded" in w for w in trace.warnings)


def test_a_pass_while_a_long_extension_decodes_looks_at_the_decisions_that_ask_not_at_every_one(monkeypatch):
    """While a block's extension decodes, a decision whose cut lies past the tokens decoded so far asks for
    nothing; a scheduling pass once visited each of them (a node, a want of its prefix, a trip through the
    queue: about 1,500 nodes a look at K 1024, 20-35 ms a pass for six tempering replicas of 4,096 tokens); it
    walks past them now, and visits only the nodes that ask for something."""
    from presto_tui.runtime.prefetch.stream import speculation

    K = 512
    visits, looks = [0], [0]
    visit, wants = speculation.SpeculationTree._visit, speculation.SpeculationTree.wants

    def counting_visit(self, priority, node):
        visits[0] += 1
        return visit(self, priority, node)

    def counting_wants(self):
        looks[0] += 1
        return wants(self)

    monkeypatch.setattr(speculation.SpeculationTree, "_visit", counting_visit)
    monkeypatch.setattr(speculation.SpeculationTree, "wants", counting_wants)
    params = SamplerParams(prefetch="stream", max_new_tokens=2 * K, steps=K, seed=0)
    for _ in run_session(small_backend(vocab=7), params, [1, 2]):
        if looks[0] >= 20:
            break
    assert looks[0] >= 20 and visits[0] / looks[0] < K / 2, (visits[0], looks[0])  # (about 5 K before, K / 5 now)
