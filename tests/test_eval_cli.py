"""`presto-tui eval` and `stats --compare` end to end on the synthetic model: the results, the trace,
the figures, Ctrl-C, bad input in one line, peak KV-pool use, and the answers' eqs. 21-22."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from helpers import error_line
from typer.testing import CliRunner

from presto_tui.cli import app
from presto_tui.logs.reader import read_trace
from presto_tui.runtime.session.events import SessionEnd

runner = CliRunner()
# words the synthetic model writes; an item is right when its pattern is found in the answer
TASKS = [("the cat", "cat|dog"), ("a dog ran", "sat"), ("the tree", "mat|tree"), ("small red home", "warm"),
         ("it was warm", "the"), ("then it slept", "a"), ("the mat", "ran|on"), ("a big dog", "red")]
METHODS = "powermh,powermh+spine,powermh+bfs/node"
pytestmark = pytest.mark.usefixtures("in_tmp")


def task_file(tmp_path: Path, tasks=TASKS) -> Path:
    p = tmp_path / "tasks.jsonl"
    p.write_text("".join(json.dumps({"prompt": q, "answer": a, "grader": "regex"}) + "\n" for q, a in tasks))
    return p


def run_eval(tmp_path: Path, *args: str):
    """eval of TASKS with METHODS; results to res.json and the trace to t.jsonl unless `args` say otherwise."""
    own = [*(["-o", "res.json"] if "-o" not in args else []),
           *(["--trace", "t.jsonl"] if "--no-trace" not in args else [])]
    return runner.invoke(app, ["eval", str(task_file(tmp_path)), "--methods", METHODS, "-n", "8", "-K", "4", *own,
                               *args])


def test_every_method_answers_every_item_and_is_graded_from_its_answer(tmp_path):
    res = run_eval(tmp_path, "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out == json.loads(Path("res.json").read_text())
    labels = METHODS.split(",")
    assert [m["label"] for m in out["methods"]] == labels
    trace = read_trace("t.jsonl")
    assert len(trace.sessions) == len(TASKS) * len(labels)
    # items in turn, the methods of an item one after another
    assert [s.start.prompt for s in trace.sessions] == [q for q, _ in TASKS for _ in labels]
    texts = {(s.start.session_id): s.events[-1].text for s in trace.sessions if isinstance(s.events[-1], SessionEnd)}
    for j, m in enumerate(out["methods"]):
        right = 0
        for item, (_, pattern) in zip(out["items"], TASKS):
            r = item["results"][labels[j]]
            found = re.search(pattern, texts[r["session_id"]]) is not None  # graded again from the trace
            assert r["correct"] is found and r["status"] == "done"
            right += found
        assert (m["correct"], m["graded"]) == (right, len(TASKS))
        assert m["accuracy_low"] <= m["accuracy"] == right / len(TASKS) <= m["accuracy_high"]
        assert m["transitions"] == 4 and m["kv_peak"] is None  # the synthetic engine has no KV pool
    spine, bfs = out["equivalence"]
    assert (spine["first"], spine["second"], spine["identical"]) == ("powermh", "powermh+spine", True)
    assert [t["verdict"] for t in spine["tests"]] == ["identical", "identical"]
    assert bfs["second"] == "powermh+bfs/node" and not bfs["identical"]  # node inputs: another chain, same law
    # (an item whose answer is empty on either side has no eqs. 21-22: left out, and counted)
    assert all(t["pairs"] + t["undefined"] == len(TASKS) and t["p_eq"] is not None for t in bfs["tests"])
    assert out["figures"]["accuracy"] == "res-accuracy.png"  # beside the results
    assert Path("res-accuracy.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert out["figures"]["kv"] is None and "no KV pool" in out["figures"]["kv_missing"]


def test_each_item_has_its_own_seed_and_every_method_of_an_item_shares_it(tmp_path):
    from presto_tui.eval.runner import item_seed

    assert run_eval(tmp_path, "--seed", "7").exit_code == 0
    seeds: dict[str, set] = {}
    for s in read_trace("t.jsonl").sessions:
        seeds.setdefault(s.start.prompt, set()).add(s.start.params["seed"])
    assert all(len(v) == 1 for v in seeds.values())  # matched by prompt and seed
    assert len({v.pop() for v in seeds.values()}) == len(TASKS)  # independent draws across items
    assert item_seed(7, "3") == item_seed(7, "3") != item_seed(8, "3")  # from the seed and the id alone


def test_the_answers_likelihood_and_confidence_are_eqs_21_and_22_under_p0(tmp_path):
    """Rescored here from the synthetic model's own next-token distributions, token by token, over the
    terminal response of every method: the MH chains' terminal state, the baselines' chosen sample or
    particle and SPS's path, each up to and excluding its first EOS (an empty response has neither: null)."""
    import numpy as np

    from presto_tui.runtime.engines.synthetic import SyntheticLM

    res = runner.invoke(app, ["eval", str(task_file(tmp_path)), "--methods",
                              "lowtemp,bon:4,smc:4,sps:2,powermh,powermh+stream", "-n", "12", "-K", "4", "--smc-block",
                              "4", "--sps-chunk", "4", "--limit", "3", "-o", "res.json", "--trace", "t.jsonl"])
    assert res.exit_code == 0, res.output
    lm = SyntheticLM()
    out = json.loads(Path("res.json").read_text())
    empty = 0
    for s in read_trace("t.jsonl").sessions:
        ctx, logp, ent = list(s.start.prompt_ids), [], []
        tokens = list(s.events[-1].tokens)
        for tok in tokens[:tokens.index(lm.eos_id)] if lm.eos_id in tokens else tokens:
            lp = lm.log_probs(ctx, 1.0)[0]
            logp.append(lp[tok])
            ent.append(-(np.exp(lp) * lp).sum())
            ctx.append(tok)
        item = next(it for it in out["items"] if it["prompt"] == s.start.prompt)
        r = next(r for r in item["results"].values() if r["session_id"] == s.start.session_id)
        if not logp:
            empty += 1
            assert r["loglik"] is None and r["confidence"] is None and r["text"] == ""
            continue
        assert r["loglik"] == pytest.approx(np.mean(logp), abs=1e-9)
        assert r["confidence"] == pytest.approx(-np.mean(ent), abs=1e-9)
    assert empty < len(read_trace("t.jsonl").sessions)


def test_tables_answers_and_plots_print_in_the_terminal(tmp_path):
    # into a folder that does not exist yet: made before the figures go in it
    res = run_eval(tmp_path, "--tost", "powermh+spine,powermh+bfs/node", "--figures", "svg", "-o", "out/res.json")
    assert res.exit_code == 0, res.output
    text = res.stdout
    for needle in ("accuracy [95%]", "answers per item", "paired TOST", "identical: the same tokens",
                   "accuracy (95% interval) against time per prompt", "no KV-pool figure"):
        assert needle in text, needle
    asked = re.search(r"^ *powermh\+spine / powermh\+bfs/node +loglik .*\n.* confidence ", text, re.MULTILINE)
    assert asked  # the pair asked for, both statistics
    assert Path("out/res-accuracy.svg").read_text().lstrip().startswith("<?xml")
    assert "results written to out/res.json, figure to out/res-accuracy.svg, trace to t.jsonl" in res.stderr


def test_the_tables_at_80_columns_never_cut_a_methods_name(tmp_path):
    """`powermh+stream` wrapped as `powermh+stre` / `am` in an 80-column terminal: a method's name stays
    whole (the pair of a TOST row on two lines), and the columns the results file holds give way."""
    import io

    from rich.console import Console

    from presto_tui.eval.report import render

    res = run_eval(tmp_path, "--tost", "powermh+spine,powermh+bfs/node")
    assert res.exit_code == 0, res.output
    out = io.StringIO()
    render(Console(width=80, file=out), json.loads(Path("res.json").read_text()))
    lines = out.getvalue().splitlines()
    assert max(len(ln) for ln in lines) <= 80
    words = out.getvalue().split()
    for label in METHODS.split(","):
        assert words.count(label) >= 2, label  # whole in the methods table and the answers per item
    assert "powermh+bfs/node" in words and "(kv: in the results file)" in " ".join(words)


@pytest.mark.parametrize("lines, needle", [
    (['{"prompt": "x", "answer": "y"}', '{"prompt": "x"}'], 'tasks.jsonl:2: missing "answer"'),
    (['{"prompt": "x", "answer": "y", "grader": "number"}'], "tasks.jsonl:1: answer 'y' is not a number"),
])
def test_a_bad_task_line_is_one_line_and_exit_2(tmp_path, lines, needle):
    p = tmp_path / "tasks.jsonl"
    p.write_text("\n".join(lines) + "\n")
    res = runner.invoke(app, ["eval", str(p), "--methods", "powermh"])
    assert needle in error_line(res)
    assert not Path("sessions").exists()  # refused before anything started or was written


@pytest.mark.parametrize("args, needle", [
    (["--methods", "powermh,greedy"], "--methods: unknown method 'greedy'"),
    (["--methods", "powermh+spine/node"], "--prefetch spine needs --inputs decision"),
    (["--methods", "powermh", "--tost", "powermh,bon:4"], "--tost: 'bon:4' is not among --methods"),
    (["--methods", "powermh,powermh+spine", "--tost", "powermh"], "--tost takes two methods as A,B"),
    (["--figures", "gif"], "unknown --figures 'gif'; choose one of png, svg, none"),
    (["--grader", "fuzzy"], "unknown --grader 'fuzzy'"),
    (["--code-timeout", "0"], "--code-timeout must lie in [0.1, 3600], got 0"),
    (["--limit", "0"], "--limit must be >= 1, got 0"),
    (["builtin:poems"], "unknown built-in task set 'poems'"),
])
def test_bad_options_are_one_line_and_exit_2(args, needle):
    res = runner.invoke(app, ["eval", *args])
    assert needle in error_line(res)


@pytest.mark.parametrize("flag,spec,typed,near", [
    ("--methods", "powermh,lowtmp", "lowtmp", "lowtemp"),
    ("--frontier", "powermh@2,4; lowtmp@2", "lowtmp", "lowtemp"),
    ("--methods", "smcc:4", "smcc", "smc"),  # (an alias)
])
def test_an_unknown_method_is_suggested_once_and_every_choice_listed_once(flag, spec, typed, near):
    line = error_line(runner.invoke(app, ["eval", flag, spec]))
    assert line.startswith(f"{flag}: unknown method {typed!r}; did you mean {near}? choose one of ")
    assert line.count("did you mean") == 1
    listed = line.split("choose one of ", 1)[1].split(", ")
    assert len(listed) == len(set(listed)) and {"lowtemp", "sps", "resample-move"} <= set(listed)


def test_ctrl_c_keeps_what_finished(tmp_path, monkeypatch):
    from presto_tui.eval import graders

    calls = {"n": 0}
    grade = graders.RegexGrader.grade

    def interrupted_third_time(self, *args):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return grade(self, *args)

    monkeypatch.setattr(graders.RegexGrader, "grade", interrupted_third_time)
    res = run_eval(tmp_path, "--json", "-C", "2")
    assert res.exit_code == 130 and "interrupted" in res.stderr
    out = json.loads(Path("res.json").read_text())
    assert out["interrupted"]
    finished = [r for it in out["items"] for r in it["results"].values()]
    assert len(finished) == 2 and all(r["status"] == "done" for r in finished)
    trace = read_trace("t.jsonl")  # readable, every session ended: the open one as cancelled
    ends = [s.events[-1] for s in trace.sessions]
    assert all(isinstance(e, SessionEnd) for e in ends) and "cancelled" in {e.reason for e in ends}


def test_an_engine_failure_keeps_what_finished_and_ends_in_one_line(tmp_path, monkeypatch):
    from presto_tui.runtime.engines.synthetic import SyntheticEngine

    step, calls = SyntheticEngine.step, {"n": 0}

    def failing_step(self):
        calls["n"] += 1
        if calls["n"] == 60:
            raise RuntimeError("device lost")
        return step(self)

    monkeypatch.setattr(SyntheticEngine, "step", failing_step)
    res = run_eval(tmp_path)
    lines = res.stderr.strip().splitlines()
    assert res.exit_code == 1 and lines[-1] == "presto-tui: error: RuntimeError: device lost"
    assert lines[-3].startswith("presto-tui: results written to res.json")  # before the error, not lost
    assert lines[-2] == "presto-tui: continue this run with --resume res.runlog"
    out = json.loads(Path("res.json").read_text())
    assert out["failure"] == "RuntimeError: device lost"
    statuses = [r["status"] for it in out["items"] for r in it["results"].values()]
    assert statuses.count("done") >= 1 and statuses[-1] == "error"  # the session it hit ended with its error
    ends = [s.events[-1] for s in read_trace("t.jsonl").sessions]
    assert all(type(e).__name__ in ("SessionEnd", "SessionError") for e in ends)


def test_peak_kv_pool_use_is_the_largest_while_each_session_ran():
    """An engine whose pool holds one block per live request: a session's peak is the most requests
    live while it ran (its own with one session at a time; with others beside it, theirs too)."""
    from presto_tui.api.params import parse_methods
    from presto_tui.eval.runner import run_local
    from presto_tui.eval.tasks import Item
    from presto_tui.runtime.core.params import SamplerParams
    from presto_tui.runtime.engines.synthetic import SyntheticEngine

    class PoolEngine(SyntheticEngine):
        blocks = 100

        def __init__(self):
            super().__init__()
            self.peak = self.now = 0.0

        def step(self):
            self.now = self.live / self.blocks  # in use while this step ran
            self.peak = max(self.peak, self.now)
            return super().step()

        def kv_peak(self):
            peak, self.peak = self.peak, self.now
            return peak

    items = [Item(str(i), q, "x", "regex") for i, (q, _) in enumerate(TASKS[:3])]
    methods = parse_methods("powermh,powermh+spine:4,powermh+spine:6", SamplerParams(prefetch="none", max_new_tokens=8,
                                                                                     steps=6))
    alone = run_local(PoolEngine(), items, methods)
    for (_, j), o in alone.outcomes.items():
        assert o.kv_peak == {0: 0.01, 1: 0.04, 2: 0.06}[j]
    together = run_local(PoolEngine(), items, methods, concurrency=3)
    assert max(o.kv_peak for o in together.outcomes.values()) > 0.06  # sessions beside each other share the pool


def test_stats_compare_pairs_two_runs_by_prompt_and_seed(tmp_path):
    assert run_eval(tmp_path, "-o", "r.json").exit_code == 0
    res = runner.invoke(app, ["stats", "--compare", "t.jsonl@powermh", "t.jsonl@powermh+bfs/node", "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["pairs"] == len(TASKS) and d["a"]["method"] == "PowerMH, sequential" and not d["identical"]
    assert [t["statistic"] for t in d["tests"]] == ["loglik", "confidence", "acceptance", "time_s"]
    assert d["params_differ"] == {"inputs": ["decision", "node"], "prefetch": ["none", "bfs"]}
    ev = json.loads(Path("r.json").read_text())["equivalence"][1]
    for mine, theirs in zip(d["tests"], ev["tests"]):  # the same test eval ran on the same pairs
        assert mine["p_eq"] == pytest.approx(theirs["p_eq"]) and mine["mean_diff"] == pytest.approx(theirs["mean_diff"])
    same = json.loads(runner.invoke(app, ["stats", "--compare", "t.jsonl@powermh", "t.jsonl@powermh+spine",
                                          "--json"]).stdout)
    assert same["identical"] and [t["verdict"] for t in same["tests"][:2]] == ["identical", "identical"]
    assert same["speedup"] == pytest.approx(same["tests"][3]["mean_first"] / same["tests"][3]["mean_second"])
    text = runner.invoke(app, ["stats", "--compare", "t.jsonl@powermh", "t.jsonl@powermh+spine"]).stdout
    assert re.search(r"loglik .* identical", text) and "ratio of means, eq. 20" in text


def test_stats_compare_leaves_out_what_has_no_match(tmp_path):
    assert runner.invoke(app, ["eval", str(task_file(tmp_path)), "--methods", "powermh", "-n", "8", "-K", "4",
                               "--trace", "a.jsonl", "--figures", "none"]).exit_code == 0
    assert runner.invoke(app, ["eval", str(task_file(tmp_path, TASKS[:5])), "--methods", "powermh+stream", "-n",
                               "8", "-K", "4", "--trace", "b.jsonl", "--figures", "none"]).exit_code == 0
    d = json.loads(runner.invoke(app, ["stats", "--compare", "a.jsonl", "b.jsonl", "--json"]).stdout)
    assert (d["pairs"], d["a"]["unmatched"], d["b"]["unmatched"]) == (5, 3, 0)
    assert d["identical"]


@pytest.mark.parametrize("args, needle", [
    (["t.jsonl"], "--compare takes two traces, A and B"),
    (["t.jsonl", "t.jsonl"], "sessions of 3 methods"),
    (["t.jsonl@powermh", "t.jsonl@entropycut"], "no session matches"),
    (["t.jsonl@powermh", "t.jsonl@powermh:3"], "powermh+RULE:3"),
    (["t.jsonl@powermh", "missing.jsonl"], "missing.jsonl: no such trace file"),
])
def test_stats_compare_refuses_in_one_line(tmp_path, args, needle):
    assert run_eval(tmp_path, "--limit", "2", "--figures", "none").exit_code == 0
    res = runner.invoke(app, ["stats", "--compare", *args])
    assert needle in error_line(res)


@pytest.mark.slow
@pytest.mark.ray
def test_over_ray_workers_every_item_gets_the_answers_one_engine_gives(tmp_path):
    pytest.importorskip("ray")
    args = ["--limit", "4", "--figures", "none", "--no-trace", "--json", "-o"]
    local = json.loads(run_eval(tmp_path, *args, "local.json").stdout)
    res = run_eval(tmp_path, *args, "remote.json", "--workers", "2")
    assert res.exit_code == 0, res.output
    remote = json.loads(res.stdout)
    for a, b in zip(local["items"], remote["items"]):
        assert {k: (r["text"], r["correct"], r["loglik"]) for k, r in a["results"].items()} == \
               {k: (r["text"], r["correct"], r["loglik"]) for k, r in b["results"].items()}
    assert not math.isnan(remote["methods"][0]["time_per_prompt_s"])


def test_chains_vote_grades_the_answer_most_chains_agree_on(tmp_path):
    """--chains 4: every (item, method) runs 4 chains (in the trace as groups of 4), each graded. Then the
    majority of each item's chains is made its right answer: --vote grades every item right, while chain 0
    alone is wrong wherever it was outvoted."""
    prompts = ["the cat", "a dog ran", "the tree", "small red home", "it was warm", "then it slept"]
    common = ["--methods", "powermh+stream", "-n", "4", "-K", "4", "--chains", "4", "--figures", "none"]

    def tasks(name: str, answers: dict) -> str:  # ids: an item keeps its seed in both task files
        path = tmp_path / name
        path.write_text("".join(json.dumps({"id": q, "prompt": q, "answer": a, "grader": "exact"}) + "\n"
                                for q, a in answers.items()))
        return str(path)

    res = runner.invoke(app, ["eval", tasks("first.jsonl", {q: "x" for q in prompts}), *common,
                              "-o", "first.json", "--trace", "t.jsonl"])
    assert res.exit_code == 0, res.output
    first = json.loads((tmp_path / "first.json").read_text())
    starts = [s.start for s in read_trace(tmp_path / "t.jsonl").sessions]
    assert len(starts) == 4 * len(prompts) and {s.chains for s in starts} == {4}
    majority, outvoted = {}, 0
    for item in first["items"]:
        texts = [c["text"] for c in item["results"]["powermh+stream"]["chains"]]
        top = max(texts, key=lambda t: (texts.count(t), -texts.index(t)))
        if texts.count(top) > 1 and top.strip():
            majority[item["prompt"]] = top
            outvoted += texts[0] != top
    assert majority and outvoted, "the synthetic model gave no item a majority that outvotes chain 0"
    exact = tasks("exact.jsonl", majority)
    voted = runner.invoke(app, ["eval", exact, *common, "--vote", "-o", "vote.json", "--no-trace"])
    alone = runner.invoke(app, ["eval", exact, *common, "-o", "alone.json", "--no-trace"])
    assert voted.exit_code == alone.exit_code == 0, voted.output + alone.output
    (v,), (a,) = (json.loads((tmp_path / f).read_text())["methods"] for f in ("vote.json", "alone.json"))
    assert v["correct"] == len(majority) and a["correct"] == len(majority) - outvoted
    assert 0.25 < v["agreement"] <= 1.0 and v["chain_accuracy"] < 1.0
    # the vote scores the pair; every chain keeps its own grade (chain 0's is not replaced)
    assert v["chain_accuracy"] == a["chain_accuracy"]


def test_vote_needs_chains():
    res = runner.invoke(app, ["eval", "--vote", "--backend", "synthetic"])
    assert res.exit_code == 2 and "--vote grades the answer several chains agree on" in res.output
