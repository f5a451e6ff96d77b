"""--chains M on the command line: `run` (JSON and text), `bench`, `stats` of a trace of chains,
and the one-line errors (on the synthetic backend)."""

from __future__ import annotations

import json

import pytest
from helpers import cli_error
from typer.testing import CliRunner

from presto_tui.cli import app
from presto_tui.logs.reader import read_trace
from presto_tui.runtime.core.randomness import chain_seed
from presto_tui.runtime.session import diagnostics

runner = CliRunner()
pytestmark = pytest.mark.usefixtures("in_tmp")


def invoke(*args):
    return runner.invoke(app, list(args))


def json_lines(res) -> list[dict]:
    assert res.exit_code == 0, res.output
    return [json.loads(ln) for ln in res.stdout.splitlines() if ln.strip()]


@pytest.mark.parametrize("prefetch", ["none", "stream"])
def test_run_chain_m_is_the_run_with_chain_ms_seed(prefetch):
    (prompt,) = json_lines(invoke("run", "the cat", "--json", "--chains", "3", "--seed", "7", "--prefetch", prefetch,
                                  "-n", "12", "-K", "10", "--no-trace"))
    assert prompt["chains"] == 3 and len(prompt["sessions"]) == 3
    for m, s in enumerate(prompt["sessions"]):
        assert (s["chain"], s["chains"], s["chain_group"]) == (m + 1, 3, prompt["chain_group"])  # from 1
        assert s["params"]["seed"] == chain_seed(7, m)
        (alone,) = json_lines(invoke("run", "the cat", "--json", "--seed", str(chain_seed(7, m)), "--prefetch",
                                     prefetch, "-n", "12", "-K", "10", "--no-trace"))
        assert alone["tokens"] == s["tokens"] and alone["answer_loglik"] == s["answer_loglik"]
        assert "chain" not in alone  # a single chain reads as it always did


def test_run_json_reports_diagnostics_and_answers_per_prompt(tmp_path):
    f = tmp_path / "p.txt"
    f.write_text("the cat\na dog ran\n")
    rows = json_lines(invoke("run", "--prompts-file", str(f), "--json", "--chains", "2", "-n", "8", "-K", "6",
                             "--no-trace"))
    assert [r["prompt"] for r in rows] == ["the cat", "a dog ran"]  # prompt order, one object each
    assert rows[0]["chain_group"] != rows[1]["chain_group"]
    for r in rows:
        quantities = {(d["quantity"], d["block"]) for d in r["diagnostics"]}
        assert quantities == {("log_target", 1), ("loglik", 1), ("confidence", 1)}  # blocks from 1
        d = next(d for d in r["diagnostics"] if d["quantity"] == "log_target")
        assert d["chains"] == 2 and d["draws"] == 6
        assert r["thresholds"] == {"rhat_max": 1.01, "ess_bulk_min": 100}
        assert any("K=6 was too short" in w for w in r["warnings"])  # 12 draws cannot give an ESS of 100
        texts = [s["text"] for s in r["sessions"]]
        assert r["answers"]["majority"] in texts and r["answers"]["total"] == 2
        assert r["answers"]["share"] == max(texts.count(t) for t in texts) / 2


def test_run_text_shows_the_chains_diagnostics_and_the_agreed_answer():
    res = invoke("run", "the cat", "--chains", "4", "-n", "12", "-K", "8", "--no-trace")
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert "4 chains (seeds from --seed 0)" in out
    for word in ("R-hat", "bulk ESS", "tail ESS", "MCSE", "log-target", "log-lik", "warning: "):
        assert word in out
    header = next(ln for ln in out.splitlines() if ln.split()[:2] == ["chain", "status"])
    assert header.split() == ["chain", "status", "tr", "acc", "log-lik", "conf"]  # none hidden by a narrow width
    assert all(f"chain {m}: " in out for m in range(1, 5))  # every chain's text, numbered from 1 as on screen


def test_a_trace_of_chains_groups_them_and_stats_reports_them(tmp_path):
    res = invoke("run", "the cat", "--chains", "3", "-n", "8", "-K", "6", "--trace", "c.jsonl", "--json")
    (live,) = json_lines(res)
    sessions = read_trace(tmp_path / "c.jsonl").sessions
    assert [(s.start.chain, s.start.chains, s.start.group) for s in sessions] == [
        (m, 3, live["chain_group"]) for m in range(3)]
    stats = invoke("stats", "c.jsonl", "--json")
    assert stats.exit_code == 0, stats.output
    (report,) = json.loads(stats.stdout)["chains"]
    assert [m["chain"] for m in report["members"]] == [1, 2, 3]  # from 1; the trace's own field from 0
    for key in ("diagnostics", "answers", "warnings", "chain_group"):
        assert report[key] == live[key]  # the trace holds what the run saw
    text = invoke("stats", "c.jsonl")
    assert f"chains {live['chain_group']}" in text.stdout and "R-hat" in text.stdout


def test_stats_of_single_chains_has_no_chain_reports():
    invoke("run", "the cat", "-n", "8", "-K", "4", "--trace", "one.jsonl")
    assert json.loads(invoke("stats", "one.jsonl", "--json").stdout)["chains"] == []


def test_bench_runs_every_row_with_its_chains():
    res = invoke("bench", "--chains", "2", "--rules", "spine,stream", "--budgets", "4", "-n", "8", "-K", "6",
                 "--limit", "2", "--throughput", "", "--json", "--no-trace", "-o", "bench.json")
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["chains"] == 2
    for row in d["rows"]:
        assert row["sessions"] == 4  # 2 prompts x 2 chains
        assert row["rhat_max"] is not None and row["ess_bulk_min"] is not None and row["prompts_warned"] == 2
        assert 0.5 <= row["agreement"] <= 1
        if row["rule"] != "none":
            assert row["same_final_state_as_sequential"] is True  # chain by chain
    seq = d["rows"][0]
    assert all(r["rhat_max"] == seq["rhat_max"] for r in d["rows"])  # PreSTO walks the very same chains


def test_bad_chains_are_one_line_errors(monkeypatch):
    assert cli_error("run", "x", "--chains", "0") == "--chains must lie in [1, 256], got 0"
    assert cli_error("run", "x", "--chains", "two") == "--chains must be a whole number in [1, 256], got 'two'"
    assert "does not combine with --workers" in cli_error("run", "x", "--chains", "2", "--workers", "2")
    monkeypatch.setattr(diagnostics, "available", lambda: False)
    assert cli_error("run", "x", "--chains", "2") == ("--chains above 1: MCMC diagnostics need arviz-stats: "
                                                       "pip install 'presto-tui[diagnostics]'")
    assert json_lines(invoke("run", "x", "--chains", "1", "--json", "-n", "4", "-K", "2", "--no-trace"))


def test_chains_each_stuck_at_its_own_state_print_inf_and_json_null_with_rhat_infinite():
    """The issue's run: after a burn-in of 50 every chain's response stays put, each at its own: R-hat
    is "inf" in the table and the warning (never a 16-digit number), null with rhat_infinite in JSON."""
    args = ("run", "What is 7 * 8?", "--chains", "3", "-K", "100", "--burn-in", "50", "--thin", "2", "--no-trace")
    (row,) = json_lines(invoke(*args, "--json"))
    stuck = [d for d in row["diagnostics"] if d["rhat_infinite"]]
    assert stuck and all(d["rhat"] is None for d in stuck)
    assert all(d["rhat"] is None or 0.9 < d["rhat"] < 1e3 for d in row["diagnostics"])
    text = invoke(*args).stdout
    assert "R-hat inf > 1.01" in text
    rows = [ln.split() for ln in text.splitlines() if ln.split()[:1] in (["log-lik"], ["conf"], ["log-likelihood"])]
    assert rows and any("inf" in r for r in rows)
    assert not any(len(w.split(".")[0].lstrip("-")) > 6 for ln in text.splitlines() for w in ln.split()
                   if w.replace(".", "").replace("-", "").isdigit())  # no 16-digit number anywhere
