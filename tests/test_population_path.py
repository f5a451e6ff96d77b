"""A population's critical path (runtime/session/critpath.py): its phases between barriers, the member that
set each phase's pace, how long the others waited for it, and its slowest member's own path through them.

On the synthetic engine the clock is virtual and exact: the parts add up to the population's time to the
float's precision, and each member's path through a phase to the time from the phase's start to its arrival.
"""

from __future__ import annotations

import json

import pytest
from helpers import small_backend
from typer.testing import CliRunner

from presto_tui.cli import app
from presto_tui.logs.reader import read_trace
from presto_tui.logs.writer import TraceWriter
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.engines.synthetic import SyntheticEngine, SyntheticLM
from presto_tui.runtime.methods import ppt, resample_move
from presto_tui.runtime.session.critpath import BARRIER, CAUSES, IRREDUCIBLE, WIDTH
from presto_tui.runtime.session.events import BarrierMet, EngineCost
from presto_tui.runtime.session.runner import run_session
from presto_tui.runtime.session.summary import summarize

runner = CliRunner()

RULES = {"none": dict(prefetch="none"), "bfs": dict(prefetch="bfs", budget=8),
         "stream": dict(prefetch="stream", budget=8)}
POPULATIONS = {"ppt": dict(sampler="ppt"), "rm": dict(sampler="resample-move", particles=4)}


def params(population: str, rule: str, seed: int = 0, **kw) -> SamplerParams:
    # two blocks: resample-move has a barrier inside the response, tempering's swaps span a block's end
    return SamplerParams(max_new_tokens=24, block_size=12, steps=4, seed=seed).with_(
        **{**POPULATIONS[population], **RULES[rule], **kw})


def run(p: SamplerParams) -> list:
    engine = SyntheticEngine(SyntheticLM(vocab_size=7, seed=2, sharpness=1.2), slope=0.05)
    return list(run_session(engine, p, [1, 2], prompt="p"))


@pytest.mark.parametrize("population", sorted(POPULATIONS))
@pytest.mark.parametrize("rule", sorted(RULES))
def test_the_parts_add_up_to_the_population_time_and_each_member_path_to_its_arrival(population, rule):
    events = run(params(population, rule))
    s = summarize(events)
    cp = s.critical_path
    phases = [ev for ev in events if isinstance(ev, BarrierMet)]
    cost = next(ev for ev in events if isinstance(ev, EngineCost))
    assert cp is not None and cp.check(1e-9) and set(cp.parts) == set(CAUSES)
    assert cp.time_s == pytest.approx(phases[-1].end, abs=1e-12) and phases[-1].final
    assert len(phases) == len(cp.phases) == s.calls  # a phase per model call of the population
    assert cp.parts[IRREDUCIBLE] == pytest.approx(cp.path_tokens * (cost.a + cost.b))
    for before, ph in zip([None, *phases], phases):
        assert ph.start == (0.0 if before is None else before.end)  # phases follow each other
        assert ph.paths is not None and len(ph.paths) == len(ph.arrived)
        for arrived, path in zip(ph.arrived, ph.paths):
            assert ph.start <= arrived <= ph.end
            assert sum(path.values()) == pytest.approx(arrived - ph.start, abs=1e-9)
    for ph, met in zip(cp.phases, phases):  # the pace is the last to arrive: it waited for none, every other for it
        assert ph.waits[ph.pace] == 0 and min(ph.waits) >= 0
        assert sum(ph.pace_parts.values()) == pytest.approx(met.arrived[ph.pace] - ph.start, abs=1e-9)
        assert ph.pace_parts[IRREDUCIBLE] == pytest.approx(met.tokens[ph.pace] * (cost.a + cost.b))
    # the path follows the member longest at work; it waited at the barriers for the phases' pace
    work = [sum(ph.arrived[i] - ph.start for ph in phases) for i in range(len(phases[0].arrived))]
    assert cp.member == work.index(max(work))
    assert cp.parts[BARRIER] == pytest.approx(sum(ph.waits[cp.member] for ph in cp.phases), abs=1e-12)


@pytest.mark.parametrize("rule", sorted(RULES))
def test_a_lone_replica_s_path_is_its_chain_s(rule):
    """Tempering with one replica has no barrier: its one phase is its chain, and the phase's walk must say
    of it exactly what the chain's critical path says."""
    p = params("ppt", rule, pt_replicas=1)
    pop, chain = summarize(run(p)), summarize(run(ppt.member_params(p, 0)))
    assert pop.tokens == chain.tokens  # (the same chain)
    a, b = pop.critical_path, chain.critical_path
    assert a is not None and b is not None and a.phases and a.parts[BARRIER] == 0 and a.idle_s == 0
    assert a.time_s == pytest.approx(b.time_s, abs=1e-12) and a.path_tokens == b.path_tokens
    assert a.parts == pytest.approx(b.parts, abs=1e-9)


def test_one_particle_waits_for_none_and_several_wait_for_the_slowest():
    one = summarize(run(params("rm", "none", particles=1))).critical_path
    assert one is not None and one.check(1e-9) and one.idle_s == 0 and one.parts[BARRIER] == 0
    lone_chain = summarize(run(resample_move.member_params(params("rm", "none", particles=1), 0))).critical_path
    assert lone_chain is not None and one.time_s == pytest.approx(lone_chain.time_s, abs=1e-12)
    many = summarize(run(params("rm", "none"))).critical_path
    assert many is not None and many.idle_s > 0 and 0 < (many.idle_share or 0) < 1
    # the barrier at the second block's start: the particles' extensions are alike (one request each), their
    # moves are not; the phase after it is paced by the particle whose moves took longest
    assert any(ph.idle_s > 0 for ph in many.phases)


def test_a_population_trace_holds_its_critical_path_and_stats_shows_its_barriers(tmp_path):
    path = tmp_path / "t.jsonl"
    backend = small_backend()
    events = []
    with TraceWriter(path, command="test", backend=backend.name, model=backend.model,
                     params=SamplerParams().to_dict(), pieces=backend.token_pieces) as w:
        for ev in run_session(backend, params("ppt", "stream"), [1, 2], prompt="p"):
            w.write(ev)
            events.append(ev)
    live = summarize(events).critical_path
    read = read_trace(path).sessions[0].summary().critical_path
    assert live is not None and read == live
    res = runner.invoke(app, ["stats", "--critical-path", str(path)], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "populations' barriers" in res.output and "barrier" in res.output.split("critical path per session")[1]
    js = runner.invoke(app, ["stats", "--critical-path", "--json", str(path)])
    d = json.loads(js.stdout)["sessions"][0]["critical_path"]
    assert d["member"] == live.member + 1 and len(d["phases"]) == len(live.phases)  # members from 1
    assert d["parts"][BARRIER] == pytest.approx(live.parts[BARRIER]) and d["idle_share"] == pytest.approx(
        live.idle_share)
    # a trace without the population's barrier lines has no critical path; a damaged one names its line
    lines = path.read_text().splitlines()
    (tmp_path / "old.jsonl").write_text("\n".join(ln for ln in lines if '"type":"barrier"' not in ln) + "\n")
    assert read_trace(tmp_path / "old.jsonl").sessions[0].summary().critical_path is None
    bad = [ln.replace('"arrived":[', '"arrived":[1e9,', 1) if '"type":"barrier"' in ln else ln for ln in lines]
    (tmp_path / "bad.jsonl").write_text("\n".join(bad) + "\n")
    res = runner.invoke(app, ["stats", "--critical-path", str(tmp_path / "bad.jsonl")])
    first = next(i for i, ln in enumerate(lines, 1) if '"type":"barrier"' in ln)
    assert res.exit_code != 0 and f":{first}" in res.stderr and "arrived" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_bench_shows_a_population_s_critical_path_with_its_barrier_wait(tmp_path):
    res = runner.invoke(app, ["bench", "--backend", "synthetic", "--samplers", "ppt", "--rules", "stream",
                              "--budgets", "8", "-n", "8", "-K", "2", "--limit", "1", "--json", "--no-trace",
                              "-o", str(tmp_path / "bench.json")])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)["rows"]
    assert {r["rule"] for r in rows} == {"none", "stream"}
    for r in rows:
        cp = r["critical_path"]
        assert cp is not None and BARRIER in cp["parts"] and 0 <= cp["idle_share"] < 1
        assert sum(cp["parts"].values()) == pytest.approx(cp["time_s"])
        assert cp["parts"][WIDTH] + cp["parts"][IRREDUCIBLE] > 0


# -- a member waiting at a barrier speculates on where the barrier likely leaves its state as it is ----------

def test_a_replica_guesses_that_its_next_barrier_keeps_its_state_where_it_is_in_no_pair_or_swaps_were_rare():
    from presto_tui.runtime.methods.ppt import PptDriver
    from presto_tui.runtime.session.loop import make_driver

    driver = make_driver(small_backend(), params("ppt", "stream", pt_swap_every=1), [1, 2])
    assert isinstance(driver, PptDriver)
    driver.start()
    R = len(driver.members)
    assert R == 4 and driver.pairs(2) == [1]  # the even/odd scheme: at the second barrier only levels 2-3
    driver.crossed = 1
    driver._kept = [[0, 1]] * R  # every replica's state was swapped at the first barrier
    assert [driver.keeps(i) for i in range(R)] == [True, False, False, True]
    driver._kept = [[1, 1]] * R
    assert all(driver.keeps(i) for i in range(R))
    driver.crossed = 0  # the first barrier: pairs 1-2 and 3-4, nothing known yet
    driver._kept = [[0, 0]] * R
    assert not any(driver.keeps(i) for i in range(R))


def test_a_waiting_replica_speculates_on_and_its_chain_is_the_same(monkeypatch):
    """Replicas in no pair of their next barrier plan requests while they wait there (resample-move's
    particles, whose resampling hands most another's state, do not); every member walks the same chain
    as when none speculates while waiting."""
    from presto_tui.runtime.methods.ppt import PptDriver
    from presto_tui.runtime.session.streaming import StreamDriver

    planned_held: list[bool] = []
    original = StreamDriver._schedule

    def watch(self):
        planned_held.append(self.held)
        return original(self)

    monkeypatch.setattr(StreamDriver, "_schedule", watch)

    def ends(p):
        planned_held.clear()
        return [ev.tokens for ev in run(p) if type(ev).__name__ == "PtStep"], any(planned_held)

    p = params("ppt", "stream", pt_swap_every=1)
    states, speculated = ends(p)
    assert speculated
    assert not ends(params("rm", "stream", rm_ess=1.0))[1]
    monkeypatch.setattr(PptDriver, "keeps", lambda self, i: False)
    states_idle, speculated_idle = ends(p)
    assert not speculated_idle and states == states_idle


def test_a_population_from_given_states_has_no_critical_path():
    """The law-test kit starts members from given states (no extension of their own): no path, as for a chain."""
    from presto_tui.runtime.core.types import SeqState
    from presto_tui.runtime.session.loop import make_driver, run_chains

    engine = small_backend()
    p = SamplerParams(sampler="ppt", prefetch="stream", max_new_tokens=6, steps=4, pt_swap_every=2, pt_replicas=2)
    state = SeqState.tokens_only((1, 2), (1, 2, 3, 1, 2, 3))
    events = [ev for _, ev in run_chains(engine, [make_driver(engine, p, (1, 2), state=state)])]
    phases = [ev for ev in events if isinstance(ev, BarrierMet)]
    assert phases and all(ph.paths is None for ph in phases) and summarize(events).critical_path is None
