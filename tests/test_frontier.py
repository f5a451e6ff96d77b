"""`eval --frontier`: the Pareto front and the reading at equal quality on hand-made points, pi_alpha of
the enumerable model against tests/oracle.py, the distance and its bootstrap interval recomputed from
the trace, the frontier end to end on the synthetic engine with every method, and bad specs in one line."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import oracle
import pytest
from helpers import error_line
from typer.testing import CliRunner

from presto_tui.api.engine import EngineOptions, exact_power_law, not_enumerable, start_engine
from presto_tui.cli import app
from presto_tui.eval.frontier import MEASURES, distance, dominance, exact_floor, pareto, time_at
from presto_tui.logs.reader import read_trace
from presto_tui.runtime.session.events import SessionEnd

runner = CliRunner()
V, N, ALPHA = 2, 3, 4.0
SPEC = "lowtemp; bon@2,4; smc@2,4; sps@2,4; powermh@1,2,4; powermh+stream@1,2,4"
GROUPS = ["lowtemp", "bon", "smc", "sps", "powermh", "powermh+stream"]
SEEDS, PROMPTS = 60, 2
pytestmark = pytest.mark.usefixtures("in_tmp")


# -- fronts on hand-made points -----------------------------------------------------------------

def test_the_pareto_front_keeps_what_nothing_beats_in_both_time_and_quality():
    pts = [(1.0, 0.5), (2.0, 0.4), (2.0, 0.6), (3.0, 0.3), (0.5, 0.9), (4.0, 0.3), (0.5, 0.95)]
    # lower is better (a distance): (2, 0.6) loses to (1, 0.5); (4, 0.3) to (3, 0.3); (0.5, 0.95) to (0.5, 0.9)
    assert pareto(pts, higher=False) == [4, 0, 1, 3]
    # higher is better: (0.5, 0.95) beats every other point
    assert pareto(pts, higher=True) == [6]
    assert pareto([(1.0, 1.0), (1.0, 1.0)], higher=True) == [0, 1]  # equal points dominate neither
    assert pareto([], higher=True) == []


def test_time_at_a_quality_is_read_along_the_front_in_log_time():
    front = [(1.0, 0.5), (4.0, 0.3), (16.0, 0.1)]  # a distance: falling with time
    assert time_at(front, 0.5, higher=False) == (1.0, "exact")
    assert time_at(front, 0.3, higher=False) == (4.0, "exact")
    t, how = time_at(front, 0.4, higher=False)  # halfway between in quality: the geometric mean in time
    assert how == "interpolated" and t == pytest.approx(2.0)
    assert time_at(front, 0.6, higher=False) == (1.0, "at most")  # the fastest point is better already
    assert time_at(front, 0.05, higher=False) == (None, "not reached")
    t, how = time_at([(1.0, -2.0), (9.0, -1.0)], -1.75, higher=True)
    assert how == "interpolated" and t == pytest.approx(9 ** 0.25)


def test_the_sentence_walks_the_joint_front_and_names_the_dominated():
    rows = [{"label": label, "group": g, "time_per_prompt_s": t, "tv": q} for label, g, t, q in [
        ("a", "lowtemp", 0.1, 0.5), ("b@1", "smc", 0.2, 0.3), ("b@2", "smc", 0.4, 0.2), ("c@1", "bon", 0.3, 0.6),
        ("d@1", "powermh", 0.8, 0.1), ("d@2", "powermh", 1.6, 0.05)]]
    front, sentence = dominance(rows, MEASURES["tv"])
    assert front == ["a", "b@1", "b@2", "d@1", "d@2"]
    assert sentence.startswith("Fastest to best on the joint front of total variation to pi_alpha against time: "
                               "lowtemp at 0.1 s (0.500); then smc from 0.2 s to 0.4 s (0.300 to 0.200); then "
                               "powermh from 0.8 s to 1.6 s (0.100 to 0.050).")
    assert sentence.endswith("bon is dominated at every time measured.")


def test_the_fronts_are_read_at_equal_tokens_or_engine_steps_as_at_equal_time():
    """A method cheap in time but costly in tokens (many requests decoded side by side) holds the time front
    and loses the tokens front: the cost axis is what the fronts, the sentences and the readings are read at."""
    from presto_tui.eval.frontier import COSTS, method_fronts

    rows = [{"label": label, "group": g, "time_per_prompt_s": t, "tokens_per_prompt": k, "steps_per_prompt": n,
             "tv": q} for label, g, t, k, n, q in [
        ("p@4", "wide", 0.2, 400, 10, 0.1), ("p@8", "wide", 0.4, 800, 20, 0.05),
        ("c@4", "narrow", 0.5, 40, 50, 0.2), ("c@16", "narrow", 2.0, 160, 200, 0.05)]]
    front, sentence = dominance(rows, MEASURES["tv"], COSTS["time"])
    assert front == ["p@4", "p@8"] and sentence.endswith("narrow is dominated at every time measured.")
    front, sentence = dominance(rows, MEASURES["tv"], COSTS["tokens"])
    assert front == ["c@4", "c@16"] and sentence.startswith(
        "Cheapest to best on the joint front of total variation to pi_alpha against decoded tokens: narrow from 40 "
        "tokens to 160 tokens (0.200 to 0.050).") and sentence.endswith("wide is dominated at every token count "
                                                                         "measured.")
    assert dominance(rows, MEASURES["tv"], COSTS["steps"])[0] == ["p@4", "p@8"]
    assert method_fronts(rows, MEASURES["tv"], COSTS["tokens"])["wide"] == [0, 1]


def test_a_second_axis_is_a_setting_of_each_entry_and_the_results_read_again_at_another_axis(enumerable):
    from presto_tui.api.params import SamplerParams
    from presto_tui.eval.frontier import COSTS, analyse, parse_spec
    from presto_tui.eval.frontier_report import read_again

    points = parse_spec("ppt+stream:r=2@2,4; ppt+stream:r=4@2; rm:p=3:block_size=1@1", SamplerParams(max_new_tokens=3))
    assert [(p.group, p.label, p.budget) for p in points] == [
        ("ppt+stream:r=2", "ppt+stream:r=2@2", 2), ("ppt+stream:r=2", "ppt+stream:r=2@4", 4),
        ("ppt+stream:r=4", "ppt+stream:r=4@2", 2), ("rm:p=3:block_size=1", "rm:p=3:block_size=1@1", 1)]
    assert [p.method.params.pt_replicas for p in points[:3]] == [2, 2, 4] and points[0].method.params.steps == 2
    assert (points[3].method.params.particles, points[3].method.params.block) == (3, 1)
    folder, _ = enumerable
    res = json.loads((folder / "res.json").read_text())
    assert res["axis"] == "time" and all(r["steps_per_prompt"] > 0 for r in res["points"])
    again = read_again(res, "tokens")
    fresh = analyse(res["points"], parse_spec(res["frontier"], SamplerParams(**res["shared_params"])), ["tv"],
                    COSTS["tokens"])
    assert again["axis"] == "tokens" and again["joint_front"] == fresh["joint_front"]
    assert "against decoded tokens" in again["summary"][0] and "fewer decoded tokens" in again["summary"][1]
    assert read_again(res, "time")["joint_front"] == res["joint_front"]


# -- the exact law ------------------------------------------------------------------------------

def test_pi_alpha_of_the_enumerable_model_is_the_oracles():
    engine = start_engine("synthetic", EngineOptions(synthetic_vocab=3, synthetic_sharpness=1.0))
    assert engine.eos_id is None and not_enumerable(engine, 5) is None
    prompt = (2, 1)
    law = exact_power_law(engine, prompt, 5, ALPHA)
    R = list(itertools.product(range(3), repeat=5))
    w = np.array([ALPHA * oracle.suffix_logprobs(engine.lm, prompt, y, 1.0)[1] for y in R])
    pi = np.exp(w - w.max())
    assert [law.index(y) for y in R] == list(range(len(R)))
    assert law.probs == pytest.approx(pi / pi.sum(), abs=1e-12)
    assert "EOS" in not_enumerable(start_engine("synthetic", EngineOptions()), 2)
    assert "too many" in not_enumerable(engine, 40)


# -- end to end ---------------------------------------------------------------------------------

def run_frontier(*args: str):
    return runner.invoke(app, ["eval", "--backend", "synthetic", "--limit", str(PROMPTS), "-n", str(N),
                               "--alpha", str(ALPHA), "--smc-block", "1", "--sps-chunk", "1", "--sps-top-k", str(V),
                               "--sps-draws", "4", "--figures", "png", "-o", "res.json", "--trace", "t.jsonl",
                               *args])


@pytest.fixture(scope="module")
def enumerable(tmp_path_factory):
    cwd = Path.cwd()
    folder = tmp_path_factory.mktemp("frontier")
    import os

    os.chdir(folder)
    try:
        res = run_frontier("--synthetic-vocab", str(V), "--synthetic-sharpness", "1", "--frontier", SPEC,
                           "--frontier-seeds", str(SEEDS))
    finally:
        os.chdir(cwd)
    assert res.exit_code == 0, res.output
    return folder, res


def test_every_method_is_on_the_frontier_and_every_session_in_the_trace(enumerable):
    folder, res = enumerable
    out = json.loads((folder / "res.json").read_text())
    assert out["enumerable"] and out["measures"] == ["tv"] and out["seeds"] == SEEDS
    assert [r["group"] for r in out["points"]] == ["lowtemp", "bon", "bon", "smc", "smc", "sps", "sps",
                                                   *["powermh"] * 3, *["powermh+stream"] * 3]
    assert set(out["fronts"]["tv"]) == set(GROUPS)
    for r in out["points"]:
        assert r["done"] == PROMPTS * SEEDS and r["failed"] == 0 and r["prompts"] == PROMPTS
        assert r["tv_low"] <= r["tv"] <= r["tv_high"] and 0 < r["tv_floor"] < 1
        assert r["time_per_prompt_s"] > 0 and r["tokens_per_prompt"] >= N
    trace = read_trace(folder / "t.jsonl")
    assert len(trace.sessions) == PROMPTS * SEEDS * len(out["points"])
    # prompts and their seeds in turn, the points of each one after another
    labels = [r["params"] for r in out["points"]]
    assert [_point_of(s.start.params, labels) for s in trace.sessions[:len(labels)]] == list(range(len(labels)))
    assert len({s.start.params["seed"] for s in trace.sessions[:len(labels)]}) == 1
    assert (folder / out["figure"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (speedup,) = out["speedups"]
    assert (speedup["sequential"], speedup["presto"]) == ("powermh", "powermh+stream")
    # decision inputs: the same answers at the same K, so the same distance, and only the time differs
    seq = [r for r in out["points"] if r["group"] == "powermh"]
    pre = [r for r in out["points"] if r["group"] == "powermh+stream"]
    assert [(r["tv"], r["tv_low"], r["tv_high"]) for r in seq] == [(r["tv"], r["tv_low"], r["tv_high"]) for r in pre]
    assert all(m["how"] == "exact" for m in speedup["matched"])
    for m in speedup["matched"]:
        if m["how"] == "exact":
            twin = next(p for s, p in zip(seq, pre) if s["label"] == m["at"])
            assert m["speedup"] == pytest.approx(m["sequential_s"] / twin["time_per_prompt_s"])
    assert any(x["group"] == "sps" for x in out["landing"])
    text = res.stdout
    assert "Fastest to best on the joint front" in text and "needs" in text and "Where sps lands" in text


def _point_of(params: dict, points: list[dict]) -> int:
    same = [i for i, p in enumerate(points) if all(params[k] == v for k, v in p.items() if k != "seed")]
    assert len(same) == 1
    return same[0]


def test_the_distance_and_its_interval_recomputed_from_the_trace(enumerable):
    """Per point: the answers' law over each prompt's seeds from the trace, pi_alpha from the oracle, their
    total variation averaged over the prompts; the bootstrap by resampling sessions (index draws, not the
    multinomial the command uses): the bias-corrected estimate and the basic interval; the floor as the
    estimate of exact draws from pi_alpha."""
    folder, _ = enumerable
    out = json.loads((folder / "res.json").read_text())
    trace = read_trace(folder / "t.jsonl")
    params = [r["params"] for r in out["points"]]
    from presto_tui.runtime.engines.synthetic import SyntheticLM

    lm = SyntheticLM(vocab_size=V, sharpness=1.0, eos_id=None)
    R = list(itertools.product(range(V), repeat=N))
    answers: dict[tuple[int, tuple], list[int]] = {}
    laws = {}
    for s in trace.sessions:
        end = s.events[-1]
        assert isinstance(end, SessionEnd) and end.reason == "done"
        prompt = tuple(s.start.prompt_ids)
        if prompt not in laws:
            w = np.array([ALPHA * oracle.suffix_logprobs(lm, prompt, y, 1.0)[1] for y in R])
            laws[prompt] = np.exp(w - w.max()) / np.exp(w - w.max()).sum()
        answers.setdefault((_point_of(s.start.params, params), prompt), []).append(R.index(tuple(end.tokens)))
    rng = np.random.default_rng(7)

    def tv(draws, pi):
        return 0.5 * np.abs(np.bincount(draws, minlength=len(pi)) / len(draws) - pi).sum()

    def estimate(samples, B):
        """[(draws, pi)] -> (corrected, low, high, plug-in)"""
        plugin = np.mean([tv(a, pi) for a, pi in samples])
        boot = np.mean([[tv(a[rng.integers(0, len(a), len(a))], pi) for _ in range(B)] for a, pi in samples], axis=0)
        return (max(0.0, 2 * plugin - boot.mean()), max(0.0, 2 * plugin - np.quantile(boot, 0.975)),
                max(0.0, 2 * plugin - np.quantile(boot, 0.025)), plugin)

    floors = {p: np.mean([estimate([(rng.choice(len(pi), SEEDS, p=pi), pi)], 300)[0] for _ in range(300)])
              for p, pi in laws.items()}
    for j, r in enumerate(out["points"]):
        mine = [(np.array(a), laws[p]) for (k, p), a in answers.items() if k == j]
        assert len(mine) == PROMPTS and all(len(a) == SEEDS for a, _ in mine)
        corrected, low, high, plugin = estimate(mine, 4000)
        assert r["tv_plugin"] == pytest.approx(plugin, abs=1e-12)
        assert r["tv"] == pytest.approx(corrected, abs=0.004)
        assert r["tv_low"] == pytest.approx(low, abs=0.012) and r["tv_high"] == pytest.approx(high, abs=0.012)
        assert r["tv_floor"] == pytest.approx(np.mean(list(floors.values())), abs=0.01)


def test_the_bias_correction_takes_off_most_of_the_finite_draws_bias_and_the_interval_covers():
    """A law p at a known distance from pi over 30 outcomes, 200 draws at a time: the plug-in overstates the
    distance; the corrected estimate is much nearer on average, and the basic interval covers the truth."""
    rng = np.random.default_rng(3)
    pi = rng.dirichlet(np.ones(30))
    p = 0.7 * pi + 0.3 * rng.dirichlet(np.ones(30))
    truth = 0.5 * np.abs(p - pi).sum()
    runs = [distance([(rng.multinomial(200, p), pi)], rng, 1000) for _ in range(300)]
    plugin_bias = np.mean([d.plugin for d in runs]) - truth
    corrected_bias = np.mean([d.tv for d in runs]) - truth
    assert plugin_bias > 0.05 and abs(corrected_bias) < plugin_bias / 3
    assert np.mean([d.low <= truth <= d.high for d in runs]) >= 0.88
    # an exact sampler: the correction takes off less where the truth is 0 (a distance cannot go below), but
    # a good part of the plug-in's level for the same draws
    assert exact_floor(pi, 200, rng) < 0.7 * np.mean([distance([(rng.multinomial(200, pi), pi)], rng).plugin
                                                       for _ in range(50)])


def test_on_a_model_that_cannot_be_enumerated_it_reads_likelihood_and_accuracy(tmp_path):
    res = run_frontier("--frontier", "lowtemp; bon@2; powermh@1,2; powermh+stream@1,2", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert not out["enumerable"] and "EOS" in out["not_enumerable"] and out["seeds"] == 1
    assert out["measures"] == ["loglik", "confidence", "accuracy"] and out["primary"] == "loglik"
    for r in out["points"]:
        assert "tv" not in r and r["graded"] == PROMPTS and r["accuracy_low"] <= r["accuracy"] <= r["accuracy_high"]
    assert out["speedups"][0]["measure"] == "loglik"
    assert set(out["dominance"]) == {"loglik", "confidence", "accuracy"}


# -- bad input ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("args", "message"), [
    (["--frontier", " ; "], "--frontier needs at least one method"),
    (["--frontier", "nosuch@2"], "unknown method"),
    (["--frontier", "lowtemp@2"], "lowtemp draws one sample and has no budget"),
    (["--frontier", "bon@"], "after @ come the values of N"),
    (["--frontier", "powermh@2,x"], "after @ come the values of K"),
    (["--frontier", "smc:4@2,8"], "smc:4 sets P already"),
    (["--frontier", "powermh@2,2"], "a value of K is listed twice"),
    (["--frontier", "powermh@0"], "must lie in"),
    (["--frontier", "powermh@2; powermh@4"], "powermh is listed twice"),
    (["--frontier", "bon@2,4; bestofn@4"], "bestofn@4 and bon@4 are the same settings"),
    (["--frontier", "lowtemp", "--methods", "lowtemp"], "give it instead of --methods"),
    (["--frontier", "lowtemp", "--tost", "a,b"], "takes no --tost"),
    (["--frontier", "lowtemp", "--concurrency", "2"], "one session at a time"),
    (["--frontier", "lowtemp", "--frontier-seeds", "0"], "--frontier-seeds must"),
    (["--frontier-seeds", "3"], "--frontier-seeds goes with --frontier"),
    (["--frontier-axis", "tokens"], "--frontier-axis goes with --frontier"),
    (["--frontier", "lowtemp", "--frontier-axis", "money"], "--frontier-axis"),
    (["--frontier", "smc:p=4@2,8"], "smc:p=4 sets P already"),
    (["--frontier", "ppt:r=0@2"], "--pt-replicas must lie in"),
    (["--frontier", "ppt:q=3@2"], "PPT has no parameter 'q'"),
    (["--frontier", "lowtemp", "--synthetic-vocab", "3", "-n", "40"], "too many to enumerate"),
])
def test_a_bad_frontier_is_one_line_and_exit_2(args, message):
    res = run_frontier(*args)
    assert message in error_line(res)
    assert not Path("res.json").exists()
