"""`--sampler sps` through the commands on the synthetic backend: run, stats, replay, bench and eval
(serve and lm-eval: tests/test_serve.py and tests/test_lmeval.py; the app: tests/test_sps_views.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from presto_tui.cli import app
from presto_tui.logs.reader import read_trace
from presto_tui.runtime.methods.sps import SpsStep
from presto_tui.runtime.session.events import SessionEnd

runner = CliRunner()
SPS = ["--sampler", "sps", "--sps-chunk", "4", "--sps-rollouts", "2", "--sps-top-k", "3", "--sps-draws", "5"]
pytestmark = pytest.mark.usefixtures("in_tmp")


def invoke(*args: str):
    return runner.invoke(app, list(args))


def test_run_records_the_steps_and_says_what_ran():
    res = invoke("run", "the cat", "--json", "-n", "12", *SPS, "--no-sps-jackknife", "--trace", "t.jsonl")
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    p = d["params"]
    assert (p["sampler"], p["prefetch"], p["sps_chunk"], p["sps_rollouts"], p["sps_jackknife"]) == \
        ("sps", "none", 4, 2, False)
    (s,) = read_trace(Path("t.jsonl")).sessions
    steps = [e for e in s.events if isinstance(e, SpsStep)]
    assert d["sps_steps"] == len(steps) >= 1 and d["rollouts"] == sum(len(r) for st in steps for r in st.log_weights)
    assert all(st.jackknife == () and st.probs == st.plain for st in steps)  # --no-sps-jackknife
    assert d["tokens"] == list(s.events[-1].tokens) and d["answer_loglik"] is not None
    text = invoke("run", "the cat", "-n", "12", *SPS, "--no-trace")
    assert text.exit_code == 0 and "Scalable Power Sampling K=3 of L=5 draws, M=2, B=4" in text.stdout
    assert "steps / rollouts" in text.stdout


@pytest.mark.parametrize(("args", "line"), [
    (["--sps-rollouts", "1"], "--sps-jackknife needs --sps-rollouts >= 2 (each leave-one-out estimate drops one "
                              "rollout), got 1; or turn --sps-jackknife off"),
    (["--sps-top-k", "0"], "--sps-top-k must lie in [1, 256], got 0"),
    (["--sps-horizon", "-1"], "--sps-horizon must lie in [0, 65536], got -1"),
    (["--sps-chunk", "x"], "--sps-chunk must be a whole number in [1, 65536], got 'x'"),
    (["--prefetch", "spine"], "--sampler sps is a one-shot sampler, not an MH chain: it takes no --prefetch rule "
                              "(use --prefetch none)"),
])
def test_bad_sps_values_are_one_line_and_exit_2(args, line):
    res = invoke("run", "x", "--sampler", "sps", *args)
    assert res.exit_code == 2 and res.stderr.strip() == f"presto-tui: error: {line}"


def test_stats_pools_sps_sessions_on_their_own_parameters_and_replay_opens_them(monkeypatch):
    for seed, rollouts in ((1, "2"), (2, "2"), (3, "3")):
        res = invoke("run", "the cat", "-n", "12", *SPS, "--sps-rollouts", rollouts, "--seed", str(seed),
                     "--trace", f"t{seed}.jsonl")
        assert res.exit_code == 0, res.output
    traces = [f"t{s}.jsonl" for s in (1, 2, 3)]
    res = invoke("stats", *traces, "--json")
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert all(r["one_shot"] and r["rule"] == "one-shot" for r in d["sessions"])
    assert d["sessions"][0]["comparable"]["sps_rollouts"] == 2 and "steps" not in d["sessions"][0]["comparable"]
    assert [g["sessions"] for g in d["pooled"]] == [2, 1]  # M = 2 pooled over seeds, M = 3 apart
    table = runner.invoke(app, ["stats", *traces], env={"COLUMNS": "200"}).stdout
    assert "Scalable Power Sampling K=3 of L=5 draws, M=2, B=4" in table
    assert "Scalable Power Sampling K=3 of L=5 draws, M=3, B=4" in table
    ran = []
    monkeypatch.setattr("presto_tui.views.app.PrestoApp.run", lambda self: ran.append(self))
    res = invoke("replay", "t1.jsonl")
    assert res.exit_code == 0, res.output
    (shown,) = ran
    assert shown._first.state.sessions[0].method_run.steps  # the replay screen holds its steps


def test_bench_runs_sps_once_beside_the_chains():
    res = invoke("bench", "--samplers", "powermh,sps", "--rules", "spine", "--budgets", "4", "-n", "8", "-K", "4",
                 "--limit", "1", *SPS[2:], "-o", "b.json", "--trace", "b.jsonl")
    assert res.exit_code == 0, res.output
    sessions = read_trace(Path("b.jsonl")).sessions
    sps = [s for s in sessions if s.start.params["sampler"] == "sps"]
    assert len(sps) == 1 and any(isinstance(e, SpsStep) for e in sps[0].events)
    assert isinstance(sps[0].events[-1], SessionEnd)
    doc = json.loads(Path("b.json").read_text())
    assert "sps" in json.dumps(doc)


def test_eval_runs_sps_with_its_rollouts_from_the_method():
    tasks = Path("tasks.jsonl")
    tasks.write_text("".join(json.dumps({"prompt": p, "answer": a}) + "\n" for p, a in (("the cat", "sat"),
                                                                                         ("a dog", "ran"))))
    res = invoke("eval", str(tasks), "--methods", "lowtemp,sps:3", "-n", "8", "--sps-chunk", "4", "-o", "r.json",
                 "--trace", "e.jsonl")
    assert res.exit_code == 0, res.output
    sps = [s for s in read_trace(Path("e.jsonl")).sessions if s.start.params["sampler"] == "sps"]
    assert len(sps) == 2 and all(s.start.params["sps_rollouts"] == 3 for s in sps)
    out = json.loads(Path("r.json").read_text())
    assert {"lowtemp", "sps:3"} <= set(json.dumps(out["methods"]).replace('"', " ").split())
