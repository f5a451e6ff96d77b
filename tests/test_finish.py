"""What a researcher tripped on outside the app's screens: spans of eqs. 21-22, output paths, the
streaming rule's calls, help text, damaged traces, burn-in and thinning, every chain's draws."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from presto_tui.cli import app

DATA = Path(__file__).parent / "data"

runner = CliRunner()
pytestmark = pytest.mark.usefixtures("in_tmp")


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def run_json(*args) -> list[dict]:
    res = invoke("run", *args, "--json", "--no-trace")
    assert res.exit_code == 0, res.output
    return [json.loads(ln) for ln in res.stdout.splitlines() if ln.strip()]


# -- the streaming rule makes no calls ----------------------------------------------------------------

def test_run_json_says_null_for_the_streaming_rules_calls_and_numbers_per_call():
    (stream,) = run_json("the cat", "-n", "16", "-K", "6", "--prefetch", "stream")
    assert stream["transitions"] == 6
    assert stream["calls"] is None and stream["transitions_per_call"] is None and stream["time_per_call_s"] is None
    (spine,) = run_json("the cat", "-n", "16", "-K", "6", "--prefetch", "spine")
    assert spine["calls"] > 0 and spine["transitions_per_call"] == pytest.approx(6 / spine["calls"])


# -- help a person can read ---------------------------------------------------------------------------

def _commands():
    import typer

    return typer.main.get_command(app).commands


@pytest.mark.parametrize("name", sorted(_commands()))
def test_help_at_80_columns_keeps_every_example_on_its_line_and_shows_no_markdown(name):
    import inspect

    res = runner.invoke(app, [name, "--help"], env={"COLUMNS": "80"}, terminal_width=80)
    assert res.exit_code == 0, res.output
    assert "`" not in res.stdout  # Rich does not render Markdown's backticks: they would show raw
    shown = [ln.strip() for ln in res.stdout.splitlines()]
    examples = [ln.strip() for ln in inspect.cleandoc(_commands()[name].callback.__doc__ or "").splitlines()
                if ln.startswith("  ") and ln.strip()]
    assert all(ex in shown for ex in examples), [ex for ex in examples if ex not in shown]


@pytest.mark.parametrize("name", sorted(_commands()))
def test_help_at_80_columns_shows_every_option_name_and_default_whole_and_its_help_at_full_width(name):
    """At 80 columns Typer's options table cut names (`--gpu-memory-utiliz…`) and defaults
    (`proposal,block,ex…`) and squeezed the help into 20 characters (`chat --help`: 430 lines): each
    option's names take a line of their own and its help the lines under it."""
    res = runner.invoke(app, [name, "--help"], env={"COLUMNS": "80"}, terminal_width=80)
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert "…" not in out and max(len(ln) for ln in out.splitlines()) <= 80
    words = out.split()
    command = _commands()[name]
    for p in command.params:
        for opt in (o for o in (*p.opts, *p.secondary_opts) if o.startswith("-")):  # (arguments show a metavar)
            assert opt in words or any(w.startswith(opt + ",") for w in words), (name, opt)  # never cut
    flat = " ".join(ln.strip("│ ") for ln in out.splitlines())
    for p in command.params:
        default = getattr(p, "show_default", None)
        if isinstance(default, str) and default:
            assert f"[default: {default}]" in " ".join(flat.split()), (name, p.name)
    helps = [ln for ln in out.splitlines() if ln.startswith("│     ")]  # an option's help, under its name
    assert not helps or max(len(ln.rstrip("│ ")) for ln in helps) > 60  # the terminal's width, not 20 columns
    if name == "chat":
        assert len(out.splitlines()) < 250
    if name == "run":
        assert "proposal,block,extension" in flat and "--gpu-memory-utilization" in words


# -- eqs. 21-22 of the response a person gets, for every method ----------------------------------------

def _sessions(prompt: str, seed: int, *samplers: str, **sizes):
    from presto_tui.runtime.core.params import SamplerParams
    from presto_tui.runtime.engines.synthetic import SyntheticEngine
    from presto_tui.runtime.session.runner import run_session

    engine = SyntheticEngine()
    out = {}
    for sampler in samplers:
        p = SamplerParams(sampler=sampler, prefetch="none", alpha=2.0, max_new_tokens=8, steps=6, seed=seed,
                          **sizes).validate()
        out[sampler] = list(run_session(engine, p, list(engine.encode_prompt(prompt, ()))))
    return engine, out


def test_an_answer_is_scored_over_its_response_up_to_eos_whatever_method_gave_it():
    import math

    from presto_tui.runtime.core.types import cut_at_eos
    from presto_tui.runtime.session.events import RoundDone, Sample
    from presto_tui.runtime.session.summary import summarize

    # "mat", seed 4: low temperature stops after EOS at 3 tokens, the chain's state runs on to 8
    engine, ev = _sessions("mat", 4, "lowtemp", "powermh", "bestofn", "powersmc", samples=2, particles=2, smc_block=4)
    s = {k: summarize(v) for k, v in ev.items()}
    response = cut_at_eos(s["powermh"].tokens, engine.eos_id)
    assert 0 < len(response) < len(s["powermh"].tokens) and cut_at_eos(s["lowtemp"].tokens, engine.eos_id) == response
    final = [e for e in ev["powermh"] if isinstance(e, RoundDone)][-1].tree.final_state
    n = len(response)  # recomputed from the chain's own per-token values, over the response alone
    assert s["powermh"].answer_loglik == pytest.approx(math.fsum(final.logp[:n]) / n, abs=1e-12)
    assert s["powermh"].answer_confidence == pytest.approx(-math.fsum(final.entropy[:n]) / n, abs=1e-12)
    for k in ("lowtemp", "bestofn", "powersmc"):
        if cut_at_eos(s[k].tokens, engine.eos_id) == response:  # the same text: the same numbers
            assert s[k].answer_loglik == pytest.approx(s["powermh"].answer_loglik, abs=1e-12), k
            assert s[k].answer_confidence == pytest.approx(s["powermh"].answer_confidence, abs=1e-12), k
    (sample,) = [e for e in ev["lowtemp"] if isinstance(e, Sample)]
    assert sample.tokens[-1] == engine.eos_id and sample.loglik == s["lowtemp"].answer_loglik
    # "a dog ran", seed 0: both answers are empty; an empty response has no eqs. 21-22 (null), for both
    engine, ev = _sessions("a dog ran", 0, "lowtemp", "powermh")
    s = {k: summarize(v) for k, v in ev.items()}
    assert all(cut_at_eos(x.tokens, engine.eos_id) == () for x in s.values())
    assert all(x.answer_loglik is None and x.answer_confidence is None for x in s.values())
    assert all(x.to_dict()["answer_loglik"] is None for x in s.values())


def test_eval_compares_the_same_span_for_every_method(tmp_path):
    """An answer both methods give alike gets one log-likelihood and confidence in eval's results:
    low temperature's empty answer was scored over its EOS, the chain's over all n tokens."""
    prompts = ["a dog ran", "mat", "a dog ran", "mat", "a dog ran"]
    (tmp_path / "t.jsonl").write_text("".join(json.dumps({"prompt": p, "answer": "x", "id": f"i{i}"}) + "\n"
                                              for i, p in enumerate(prompts)))
    res = invoke("eval", "t.jsonl", "--methods", "lowtemp,powermh", "--alpha", "2", "-n", "8", "-K", "6", "--json",
                 "--figures", "none", "--no-trace")
    assert res.exit_code == 0, res.output
    items = json.loads(res.stdout)["items"]
    alike = [it["results"] for it in items if it["results"]["lowtemp"]["text"] == it["results"]["powermh"]["text"]]
    assert alike  # (item i3: both empty)
    for r in alike:
        for stat in ("loglik", "confidence"):
            a, b = r["lowtemp"][stat], r["powermh"][stat]
            assert (a is None and b is None) if r["lowtemp"]["text"] == "" else a == pytest.approx(b, abs=1e-12)


# -- burn-in and thinning; the chains screen's series ------------------------------------------------

def _transitions(trace_path):
    from presto_tui.logs.reader import read_trace
    from presto_tui.runtime.session.events import Transition

    trace = read_trace(trace_path)
    return [[e for e in s.events if isinstance(e, Transition)] for s in sorted(trace.sessions,
                                                                                   key=lambda s: s.start.chain)]


def test_burn_in_and_thin_choose_the_diagnostics_draws_and_the_output_says_so(tmp_path):
    import numpy as np
    from arviz_stats.base import array_stats as az

    args = ["the cat", "-n", "12", "-K", "16", "--chains", "3", "--prefetch", "none"]
    res = invoke("run", *args, "--burn-in", "4", "--thin", "3", "--json", "--trace", "t.jsonl")
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert (report["burn_in"], report["thin"]) == (4, 3)
    d = next(x for x in report["diagnostics"] if x["quantity"] == "log_target")
    kept = [4, 7, 10, 13]  # transitions 4.. of each block, every 3rd
    assert d["draws"] == len(kept)
    draws = np.array([[t.log_target for t in chain if t.k in kept] for chain in _transitions(tmp_path / "t.jsonl")])
    if d["rhat"] is not None:  # ArviZ on exactly those draws, recomputed here
        assert d["rhat"] == pytest.approx(float(az.rhat(draws)), rel=1e-9)
    assert d["mean"] == pytest.approx(draws.mean(), rel=1e-12)
    text = invoke("run", *args, "--burn-in", "4", "--thin", "3", "--no-trace").stdout
    assert "burn-in 4 (the first 4 of each block dropped), thin 3 (one transition in 3 kept)" in text.replace("\n", "")
    default = invoke("run", *args, "--no-trace").stdout  # the default is said too
    assert "burn-in 0 (none dropped), thin 1 (every transition kept)" in default.replace("\n", "")
    stats = json.loads(invoke("stats", "t.jsonl", "--burn-in", "4", "--thin", "3", "--json").stdout)
    assert stats["chains"][0]["diagnostics"] == report["diagnostics"]  # the same draws from the trace
    assert (stats["chains"][0]["burn_in"], stats["chains"][0]["thin"]) == (4, 3)


@pytest.mark.parametrize("args,line", [
    (["run", "x", "-K", "8", "--chains", "2", "--burn-in", "8"], "--burn-in must be below K (-K 8)"),
    (["run", "x", "--burn-in", "-1"], "--burn-in must lie in [0, 10^6], got -1"),
    (["stats", "t.jsonl", "--thin", "0"], "--thin must lie in [1, 10^6], got 0"),
    (["bench", "-K", "4", "--burn-in", "5"], "--burn-in must be below K (-K 4)"),
    (["eval", "-K", "4", "--burn-in", "4"], "--burn-in must be below K (-K 4)"),
    # a trace's chains: refused as `run` refuses it (it exited 0 with a warning), naming whose K
    (["stats", str(DATA / "chains.jsonl"), "--burn-in", "200"],
     f"--burn-in must be below K (K=40 in {DATA / 'chains.jsonl'}, session 1): it drops transitions of each block"),
])
def test_a_burn_in_that_leaves_no_draw_is_refused_in_one_line(args, line, no_engine):
    res = invoke(*args)
    assert res.exit_code == 2 and line in res.stderr and len(res.stderr.splitlines()) == 1, res.output


def test_bench_and_eval_diagnose_their_chains_over_the_draws_asked_for(tmp_path):
    res = invoke("bench", "--limit", "1", "-n", "8", "-K", "8", "--rules", "spine", "--budgets", "4", "--chains", "2",
                 "--burn-in", "2", "--thin", "2", "--json", "--no-trace", "-o", "b.json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["diagnostics_draws"] == {"burn_in": 2, "thin": 2}
    (tmp_path / "t.jsonl").write_text(json.dumps({"prompt": "the cat", "answer": "x"}) + "\n")
    res = invoke("eval", "t.jsonl", "--methods", "powermh", "--chains", "2", "-n", "8", "-K", "8", "--burn-in", "2",
                 "--thin", "2", "--json", "--figures", "none", "--no-trace")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["diagnostics_draws"] == {"burn_in": 2, "thin": 2}
    (diag,) = [d for d in out["items"][0]["results"]["powermh"]["diagnostics"] if d["quantity"] == "log_target"]
    assert diag["draws"] == 3  # transitions 2, 4, 6 of 0..7


def test_autocorrelation_and_running_rhat_are_arviz_on_the_draws_given():
    import numpy as np
    from arviz_stats.base import array_stats as az

    from presto_tui.runtime.session.diagnostics import MIN_DRAWS, autocorrelation, diagnose, running_rhat

    rng = np.random.default_rng(0)
    x = np.cumsum(rng.normal(size=(3, 60)), axis=1) * 0.1 + rng.normal(size=(3, 60))
    acf = autocorrelation(x, max_lag=10)
    assert acf.shape == (3, 11) and np.allclose(acf[:, 0], 1.0)
    c = x[1] - x[1].mean()  # lag 5 of chain 1, by hand
    assert acf[1, 5] == pytest.approx(np.dot(c[:-5], c[5:]) / np.dot(c, c), rel=1e-9)
    flat = autocorrelation(np.array([[2.0] * 8, list(range(8))], dtype=float))
    assert flat[0, 0] == 1.0 and np.isnan(flat[0, 1:]).all() and np.isfinite(flat[1]).all()
    run = running_rhat(x, points=12)
    ns = [n for n, _ in run]
    assert ns[0] == MIN_DRAWS and ns[-1] == 60 and ns == sorted(set(ns)) and len(ns) <= 12
    assert run[-1][1] == pytest.approx(diagnose(x).rhat) == pytest.approx(float(az.rhat(x)))
    assert run[3][1] == pytest.approx(float(az.rhat(x[:, :ns[3]])))
    assert running_rhat(x[:1]) == [] and running_rhat(x[:, :3]) == []  # one chain, too few draws


# -- every chain's draws in one export --------------------------------------------------------------------

READ_WITH_ARVIZ_ALONE = """
import json, sys
sys.modules["presto_tui"] = None  # readable without presto-tui: nothing of it may be imported
import arviz_base, numpy as np
from arviz_stats import rhat
dt = arviz_base.convert_to_datatree(sys.argv[1])
post = dt["posterior"]
r = rhat(dt, group="posterior", var_names=["log_target"])
print(json.dumps({"groups": sorted(dt.children), "dims": dict(post.sizes), "chains": post["chain"].values.tolist(),
                  "log_target": post["log_target"].values.tolist(),
                  "accepted": dt["sample_stats"]["accepted"].values.tolist(),
                  "warmup": dict(dt["warmup_posterior"].sizes) if "warmup_posterior" in dt.children else None,
                  "prompt_text": [str(x) for x in dt["constant_data"]["prompt_text"].values],
                  "rhat": np.asarray(r["log_target"]).tolist(), "attrs": {k: str(v) for k, v in dt.attrs.items()}}))
"""


def test_run_writes_every_chains_draws_as_a_tidy_csv_and_arviz_netcdf(tmp_path):
    import csv
    import io
    import subprocess
    import sys

    from presto_tui.logs.reader import read_trace
    from presto_tui.runtime.session.events import RoundDone

    args = ["the cat", "-n", "12", "-K", "10", "--chains", "3", "--burn-in", "2", "--prefetch", "spine"]
    res = invoke("run", *args, "--json", "--trace", "t.jsonl", "--draws", "out/d.csv", "--draws", "out/d.nc")
    assert res.exit_code == 0, res.output
    assert "draws written to out/d.csv, out/d.nc" in res.stderr
    report = json.loads(res.stdout)
    table = list(csv.DictReader(io.StringIO((tmp_path / "out" / "d.csv").read_text())))
    assert list(table[0]) == ["prompt", "group", "chain", "block", "transition", "accepted", "log_target", "loglik",
                              "confidence", "state", "kept"]
    assert len(table) == 3 * 10 and {r["accepted"] for r in table} <= {"true", "false"}
    assert [r["kept"] for r in table if r["chain"] == "1"] == ["false"] * 2 + ["true"] * 8  # chains from 1
    # every state id names one distinct state of the trace's own round trees, shared across chains
    trace = read_trace(tmp_path / "t.jsonl")
    tokens_of = {}
    for s in trace.sessions:
        for rd in (e for e in s.events if isinstance(e, RoundDone)):
            for i, st in enumerate(rd.tree.states_after_steps()):
                tokens_of[(s.start.chain, rd.k_before + i + 1)] = st.tokens
    ids = {}
    for r in table:
        assert ids.setdefault(tokens_of[(int(r["chain"]) - 1, int(r["transition"]))], r["state"]) == r["state"]
    assert len(set(ids.values())) == len(ids)
    # the NetCDF, read back by ArviZ with nothing of presto-tui
    out = subprocess.run([sys.executable, "-c", READ_WITH_ARVIZ_ALONE, str(tmp_path / "out" / "d.nc")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert {"posterior", "sample_stats", "warmup_posterior", "constant_data"} <= set(got["groups"])
    assert got["dims"] == {"chain": 3, "draw": 8, "prompt": 1, "block": 1} and got["warmup"]["draw"] == 2
    assert got["chains"] == [1, 2, 3]  # the chains as the CSV and every screen number them
    kept = [[float(r["log_target"]) for r in table if r["chain"] == str(m) and r["kept"] == "true"] for m in (1, 2, 3)]
    flat = [d[0][0] for chain in got["log_target"] for d in chain]
    assert flat == pytest.approx([x for chain in kept for x in chain], rel=1e-12)
    (printed,) = [d for d in report["diagnostics"] if d["quantity"] == "log_target"]
    if printed["rhat"] is not None:  # the R-hat presto-tui printed is the one ArviZ computes from the file
        assert got["rhat"][0][0] == pytest.approx(printed["rhat"], rel=1e-9)
    assert got["prompt_text"] == ["the cat"] and got["attrs"]["burn_in"] == "2"
    # `stats` writes the same table from the trace, through the same function
    res = invoke("stats", "t.jsonl", "--burn-in", "2", "--draws", "again.csv")
    assert res.exit_code == 0, res.output
    assert (tmp_path / "again.csv").read_text() == (tmp_path / "out" / "d.csv").read_text()


def test_draws_paths_are_checked_before_any_engine(no_engine):
    res = invoke("run", "x", "--draws", "d.parquet")
    assert res.exit_code == 2 and "--draws d.parquet: name a .csv (tidy table) or .nc (ArviZ's NetCDF) file" \
        in res.stderr
    res = invoke("run", "x", "--draws", "a-folder/")
    assert res.exit_code == 2


def test_one_is_said_in_the_singular_and_a_number_keeps_its_unit():
    """"1 chains", "1 more tokens", "path of 1 steps", and "compute 1.05⏎s" where a narrow panel
    wrapped between a number and its unit."""
    import re

    from presto_tui.logs.reader import read_trace
    from presto_tui.views.state.evolution import evolution_text
    from presto_tui.views.widgets.stats import limit_line
    from presto_tui.words import count

    assert (count(1, "chain"), count(3, "chain"), count(0, "state")) == ("1 chain", "3 chains", "0 states")
    one_after = evolution_text(None, [5, 6, 0, 7], lambda ids: [f"<{i}>" for i in ids], eos_id=0).plain
    assert "[EOS; 2 more tokens in the state]" in one_after
    assert "[EOS; 1 more token in the state]" in evolution_text(None, [5, 0], lambda ids: ["x"] * len(ids),
                                                                  eos_id=0).plain
    (sps,) = run_json("the cat", "--sampler", "sps", "-n", "8", "--sps-chunk", "8")
    assert sps["choice"].startswith("the path of 1 step, ")
    res = invoke("run", "the cat", "-n", "12", "-K", "6", "--prefetch", "spine", "--trace", "one.jsonl")
    assert res.exit_code == 0, res.output
    line = limit_line(read_trace("one.jsonl").sessions[0].summary()).plain
    assert "compute" in line and not re.search(r"\d s\b", line)  # "1.05s": no space to wrap at
