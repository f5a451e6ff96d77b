"""The command line: options, one-line errors with exit code 2, JSON summaries."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from presto_tui import __version__
from presto_tui.cli import app

runner = CliRunner()
pytestmark = pytest.mark.usefixtures("in_tmp")


def invoke(*args):
    return runner.invoke(app, list(args))


def test_version_and_help():
    assert invoke("--version").stdout.strip() == f"presto-tui {__version__}"
    res = invoke("run", "--help")
    assert res.exit_code == 0
    for opt in ("--prefetch", "--inputs", "--alpha", "--tau", "--max-new-tokens", "--block-size",
                "--steps", "--budget", "--epsilon", "--seed", "--backend", "--json",
                "--prompts-file", "--paper-settings"):
        assert opt in res.stdout


def test_the_defaults_are_the_fastest_exact_setting_measured():
    """The streaming rule with the shared policy up to 64 live requests, speculating the next block's
    extension (README: why); a round rule's budget stays 8."""
    d = json.loads(invoke("run", "the cat", "--json", "-n", "16", "-K", "10").stdout)
    p = d["params"]
    assert (p["prefetch"], p["budget"], p["budget_policy"], p["speculate"]) == ("stream", 64, "shared",
                                                                            "proposal,block,extension")
    assert d["calls"] is None and d["transitions"] == 10 and d["transitions_per_s"] > 0
    spine = json.loads(invoke("run", "the cat", "--json", "-n", "16", "-K", "10", "--prefetch", "spine").stdout)
    assert spine["params"]["budget"] == 8 and spine["tokens"] == d["tokens"]


def test_run_json_summary_has_the_documented_fields():
    res = invoke("run", "the cat", "--json", "--backend", "synthetic", "-n", "16", "-K", "10", "--prefetch", "spine")
    assert res.exit_code == 0, res.output
    (line,) = [ln for ln in res.stdout.splitlines() if ln.strip()]
    d = json.loads(line)
    for key in ("text", "tokens", "calls", "transitions", "transitions_per_call", "time_per_call_s",
                "acceptance_rate", "eps_certain_share", "params"):
        assert key in d
    assert d["transitions"] == 10 and len(d["tokens"]) == 16
    assert d["transitions_per_call"] == pytest.approx(10 / d["calls"])
    assert d["params"]["prefetch"] == "spine" and d["params"]["tau"] == 0.25


def test_prefetch_none_and_spine_agree_on_the_final_tokens():
    a = json.loads(invoke("run", "a dog", "--json", "--prefetch", "none", "--seed", "5").stdout)
    b = json.loads(invoke("run", "a dog", "--json", "--prefetch", "spine", "--seed", "5").stdout)
    assert a["tokens"] == b["tokens"] and a["calls"] == 24 and b["calls"] < a["calls"]


def test_prompts_file_gives_one_object_per_prompt(tmp_path):
    f = tmp_path / "p.txt"
    f.write_text("# comment\nthe cat\n\na dog ran\n")
    res = invoke("run", "--prompts-file", str(f), "--json", "-K", "4", "-n", "8")
    assert res.exit_code == 0, res.output
    rows = [json.loads(ln) for ln in res.stdout.splitlines() if ln.strip()]
    assert [r["prompt"] for r in rows] == ["the cat", "a dog ran"]


def test_text_output_shows_summary():
    res = invoke("run", "the cat", "-K", "6", "-n", "12", "--prefetch", "spine")
    assert res.exit_code == 0
    assert "transitions per call" in res.stdout and "acceptance rate" in res.stdout
    res = invoke("run", "the cat", "-K", "6", "-n", "12")  # streaming: no calls, a rate per second
    assert "time per transition" in res.stdout and "transitions per call" not in res.stdout


@pytest.mark.parametrize("inputs", ["node", "decision"])
def test_the_setting_line_names_the_inputs_once(inputs):
    """The method's words already say 'node inputs' for a node-input rule; the line said it twice."""
    res = invoke("run", "the cat", "-K", "2", "-n", "8", "--prefetch", "bfs", "--inputs", inputs)
    assert res.exit_code == 0, res.output
    line = next(x for x in res.stdout.splitlines() if x.startswith("PowerMH, PreSTO bfs"))
    assert line.count(f"{inputs} inputs") == 1, line


@pytest.mark.parametrize("args,needle", [
    (["--alpha", "0"], "--alpha must lie in (0, 1000], got 0"),
    (["--budget", "0"], "--budget must lie in [1, 4096], got 0"),
    (["--steps", "0"], "--steps must lie in [1, 10^6], got 0"),
    (["-n", "10", "-B", "3"], "does not divide"),
    (["--prefetch", "dfs"], "unknown --prefetch 'dfs'"),
    (["--prefetch", "spine", "--inputs", "node"], "needs --inputs decision"),
    (["--backend", "nope"], "unknown --backend 'nope'; choose one of vllm, transformers, synthetic"),
])
def test_bad_values_give_one_line_and_exit_2(args, needle):
    res = invoke("run", "x", *args)
    assert res.exit_code == 2
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0] and lines[0].startswith("presto-tui: error:")


def test_missing_prompt_and_bad_files(tmp_path):
    assert invoke("run").exit_code == 2
    res = invoke("run", "--prompts-file", str(tmp_path / "missing.txt"))
    assert res.exit_code == 2 and "no such prompts file" in res.stderr
    bad = tmp_path / "clf.json"
    bad.write_text("{not json")
    res = invoke("run", "x", "--prefetch", "predictive", "--classifier", str(bad))
    assert res.exit_code == 2 and "not JSON" in res.stderr


def test_paper_settings_are_one_flag_away():
    res = invoke("run", "x", "--paper-settings", "--json", "-n", "8", "-K", "3")
    d = json.loads(res.stdout)
    assert d["params"]["budget"] == 20 and d["params"]["block_size"] == 8 and d["params"]["steps"] == 3


def test_missing_model_is_one_line_and_exit_2(tmp_path):
    res = invoke("run", "x", "--backend", "transformers", "--model", str(tmp_path / "nope.gguf"))
    assert res.exit_code == 2
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert lines[-1].startswith("presto-tui: error:") and "no such model file or folder" in lines[-1]


def test_bench_in_node_input_mode_runs_every_table():
    """`bench --inputs node` benches the paper's allocations; the rules that take decision
    inputs only (the reference, stream in the throughput table) run on those."""
    res = invoke("bench", "--backend", "synthetic", "--inputs", "node", "--rules", "bfs,predictive",
                 "--budgets", "4", "-n", "8", "-K", "4", "--limit", "2", "--throughput", "1,2", "--json",
                 "--no-trace", "-o", "bench.json")
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    inputs = {row["rule"]: row["inputs"] for row in d["rows"]}
    assert inputs == {"none": "decision", "bfs": "node", "predictive": "node"}
    rows = d["throughput"]["rows"]
    assert [(r["concurrency"], r["label"]) for r in rows] == [(c, f"powermh {rule}") for c in (1, 2)
                                                              for rule in ("seq", "stream 4")]
    assert d["throughput"]["rules"] == ["stream"]
    for r in rows:  # side by side with the sequential sampler batched across the same chains, and exact
        assert r["prompts_per_min"] > 0 and r["transitions_per_s"] > 0 and r["critical_path"]["time_s"] > 0
        assert (r["x_seq"] == 1.0) if r["rule"] == "none" else (r["same_final_state_as_sequential"] is True)
    assert rows[2]["x_c1"] == pytest.approx(rows[2]["prompts_per_min"] / rows[0]["prompts_per_min"])


def test_the_throughput_table_has_work_for_every_chain_at_every_level():
    """Fewer prompts than chains at once: the prompts are taken again with the next seeds."""
    from presto_tui.cli.bench import throughput_jobs

    assert throughput_jobs(["a", "b"], [1, 3]) == [("a", 0), ("b", 0), ("a", 1)]
    assert throughput_jobs(["a", "b", "c"], [1, 2]) == [("a", 0), ("b", 0), ("c", 0)]
    res = invoke("bench", "--backend", "synthetic", "--rules", "stream", "--budgets", "auto", "-n", "8", "-K", "4",
                 "--limit", "2", "--throughput", "1,3", "--json", "--no-trace", "-o", "bench.json")
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)["throughput"]["rows"]
    assert {r["prompts"] for r in rows} == {3} and all(r["same_final_state_as_sequential"] for r in rows[1::2])
