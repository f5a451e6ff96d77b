"""The public Python API (`import presto_tui`) against the commands built on it.

What a notebook gets must be what `presto-tui run` and `stats` print for the same prompts and
seeds: the same chains, the same numbers from the trace, the same chains' diagnostics from the
ArviZ object.  All on the synthetic engine (exact, fast).
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest
from helpers import cli_error
from typer.testing import CliRunner

import presto_tui
from presto_tui.cli import app

pytestmark = pytest.mark.usefixtures("in_tmp")
runner = CliRunner()
PROMPTS = ["the cat", "a dog ran"]


def run_cli(*args: str) -> list[dict]:
    res = runner.invoke(app, ["run", *args, "--json"])
    assert res.exit_code == 0, res.output
    return [json.loads(ln) for ln in res.stdout.splitlines() if ln.strip()]


def cli_json(*args: str) -> dict:
    res = runner.invoke(app, list(args))
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


@pytest.fixture
def engine():
    return presto_tui.Engine(backend="synthetic")


def test_sample_gives_what_run_gives(engine, tmp_path):
    (tmp_path / "p.txt").write_text("\n".join(PROMPTS) + "\n")
    params = {"max_new_tokens": 16, "steps": 12, "seed": 5, "prefetch": "spine", "budget": 4}
    results = presto_tui.sample(engine, PROMPTS, params)
    printed = run_cli("--prompts-file", "p.txt", "-n", "16", "-K", "12", "--seed", "5", "--prefetch", "spine",
                      "--budget", "4", "--no-trace")
    assert [r.prompt for r in results] == PROMPTS
    assert [list(r.tokens) for r in results] == [p["tokens"] for p in printed]
    assert [r.text for r in results] == [p["text"] for p in printed]
    assert [r.chains[0].summary.transitions for r in results] == [p["transitions"] for p in printed] == [12, 12]
    assert all(r.status == "done" and r.trace is None for r in results)


def test_a_bad_parameter_is_the_same_sentence_from_python_and_the_command_line(engine):
    with pytest.raises(presto_tui.ParamError) as err:
        presto_tui.sample(engine, "the cat", {"alpha": 0})
    assert str(err.value) == "alpha must lie in (0, 1000], got 0"
    assert cli_error("run", "the cat", "--alpha", "0", "--no-trace") == "--alpha must lie in (0, 1000], got 0"
    with pytest.raises(presto_tui.ParamError, match=r"^unknown parameter 'alfa'; did you mean 'alpha'\?$"):
        presto_tui.sample(engine, "the cat", {"alfa": 2})  # not the default alpha, silently


@pytest.fixture
def chains_trace(engine):
    """Three chains of each prompt through the API, with a trace."""
    results = presto_tui.sample(engine, PROMPTS, presto_tui.Params(max_new_tokens=16, steps=30, seed=2), chains=3,
                                trace="t.jsonl")
    assert all(r.trace is not None and r.trace.name == "t.jsonl" for r in results)
    return results


def test_the_traces_dataframes_hold_what_stats_prints(chains_trace):
    pd = pytest.importorskip("pandas")
    data = presto_tui.read_trace("t.jsonl")
    printed = cli_json("stats", "t.jsonl", "--json")["sessions"]
    frame = data.sessions
    assert list(frame["session"]) == list(range(1, len(printed) + 1))
    for column in ("prompt", "text", "status", "transitions", "acceptance_rate", "wall_s"):
        assert list(frame[column]) == [s[column] for s in printed], column
    assert sorted(frame["chain"]) == [1, 1, 2, 2, 3, 3]  # counted from 1, as stats counts them
    # every transition once, in its session: the counts and the acceptance rate again
    per = data.transitions.groupby("session").agg(n=("transition", "size"), rate=("accepted", "mean"),
                                                  first=("transition", "min"), last=("transition", "max"))
    assert list(per["n"]) == [s["transitions"] for s in printed]
    assert list(per["rate"]) == pytest.approx([s["acceptance_rate"] for s in printed])
    assert set(per["first"]) == {1} and list(per["last"]) == list(per["n"])
    # the rounds walk every transition: their sums are the sessions' counts
    walked = data.rounds.groupby("session")["transitions"].sum()
    assert list(walked) == [s["transitions"] for s in printed]
    assert isinstance(data.nodes, pd.DataFrame) and data.nodes["on_path"].any()


def test_the_arviz_object_gives_the_chains_diagnostics_that_stats_and_sample_report(chains_trace):
    arviz_stats = pytest.importorskip("arviz_stats")
    data = presto_tui.read_trace("t.jsonl")
    printed = cli_json("stats", "t.jsonl", "--json")["chains"]
    assert len(data.chain_groups()) == len(printed) == len(PROMPTS)
    for p, (result, report) in enumerate(zip(chains_trace, printed), start=1):
        idata = data.chains(p)
        assert idata.posterior.sizes["chain"] == 3 and idata.posterior.sizes["draw"] == 30
        assert idata.attrs["groups"] == report["chain_group"]
        for d in report["diagnostics"]:
            values = idata.posterior[d["quantity"]]
            if d["rhat"] is None:  # (the chains never left one state: no R-hat)
                continue
            assert float(arviz_stats.rhat(values)) == pytest.approx(d["rhat"], rel=1e-9), d["quantity"]
            assert float(arviz_stats.ess(values, method="bulk")) == pytest.approx(d["ess_bulk"], rel=1e-9)
        lt = next(d for d in result.diagnostics.diagnostics if d.quantity == "log_target")
        assert float(arviz_stats.rhat(idata.posterior["log_target"])) == pytest.approx(lt.rhat, rel=1e-9)
    with pytest.raises(presto_tui.InputError, match=r"no chain group 3 \(it has 2, from 1\)"):
        data.chains(3)


def test_the_arviz_object_is_the_draws_export_at_that_prompt(chains_trace):
    pytest.importorskip("h5netcdf")
    from arviz_base import convert_to_datatree

    res = runner.invoke(app, ["stats", "t.jsonl", "--draws", "d.nc"])
    assert res.exit_code == 0, res.output
    exported = convert_to_datatree("d.nc")
    for p in (1, 2):
        here = presto_tui.read_trace("t.jsonl").chains(p).posterior["log_target"].values
        there = exported.posterior["log_target"].sel(prompt=p, block=1).values
        assert (here == there).all()


def test_chains_cut_at_different_transitions_give_arviz_the_r_hat_stats_printed_and_one_prompt_number(engine):
    """A prompt of three chains cancelled midway (each cut at its own transition), between a prompt run
    to its end, a baseline and a single chain, in one trace: every chain of a prompt is cut to the
    shortest in `stats` and in the export alike, so ArviZ on the file gives the R-hat `stats` printed
    (no NaN inside a prompt's draws); prompts are numbered alike in the CSV, the NetCDF file and
    `read_trace(...).chains(p)`, a prompt without draws keeping its number."""
    pytest.importorskip("h5netcdf")
    import csv

    import arviz_stats
    import numpy as np
    from arviz_base import convert_to_datatree

    from presto_tui import events
    from presto_tui.logs.writer import TraceWriter

    small = {"max_new_tokens": 16, "steps": 30, "seed": 2}
    rt = engine.runtime
    with TraceWriter("t.jsonl", command="api", backend=rt.name, model=rt.model, params=presto_tui.Params().to_dict(),
                     pieces=rt.token_pieces) as w:
        presto_tui.sample(engine, "the cat", small, chains=3, trace=w)  # prompt 1

        seen = []  # prompt 2: cancelled after 150 transitions (polled before every engine step: deterministic)
        for _, event in presto_tui.stream(engine, "a dog ran", {**small, "steps": 5000}, chains=3, trace=w,
                                          cancel=lambda: len(seen) >= 150):
            if isinstance(event, events.Transition):
                seen.append(event)
        presto_tui.sample(engine, "hello", {**small, "sampler": "lowtemp"}, trace=w)  # prompt 3: no draws
        presto_tui.sample(engine, "one chain", small, trace=w)  # prompt 4
    sessions = presto_tui.read_trace("t.jsonl").sessions
    cut = sessions[sessions["prompt"] == "a dog ran"]
    assert set(cut["status"]) == {"cancelled"}
    lengths = list(cut["transitions"])
    assert len(set(lengths)) > 1 and min(lengths) >= 4  # cut at different transitions
    printed = cli_json("stats", "t.jsonl", "--json")["chains"]
    (mine,) = [r for r in printed if r["prompt"] == "a dog ran"]
    lt = next(d for d in mine["diagnostics"] if d["quantity"] == "log_target")
    assert lt["draws"] == min(lengths) and lt["rhat"] is not None
    res = runner.invoke(app, ["stats", "t.jsonl", "--draws", "d.nc", "--draws", "d.csv"])
    assert res.exit_code == 0, res.output
    dt = convert_to_datatree("d.nc")
    assert list(dt.posterior["prompt"].values) == [1, 2, 4]  # prompt 3 (the baseline) has no draws
    assert list(dt.posterior["draw"].values)[:2] == [1, 2] and list(dt.posterior["chain"].values) == [1, 2, 3]
    here = dt.posterior["log_target"].sel(prompt=2, block=1)
    n = int(dt.constant_data["draws"].sel(prompt=2, block=1))
    assert n == min(lengths) and not np.isnan(here.isel(draw=slice(0, n)).values).any()
    assert float(arviz_stats.rhat(here.isel(draw=slice(0, n)))) == pytest.approx(lt["rhat"], rel=1e-9)
    assert float(arviz_stats.rhat(here.dropna("draw"))) == pytest.approx(lt["rhat"], rel=1e-9)
    assert dt.sample_stats["accepted"].dtype == bool
    with open("d.csv", newline="") as f:
        table = list(csv.DictReader(f))
    assert {r["prompt"] for r in table} == {"1", "2", "4"}
    kept = [sum(r["kept"] == "true" for r in table if r["prompt"] == "2" and r["chain"] == str(m)) for m in (1, 2, 3)]
    assert kept == [min(lengths)] * 3  # the rows the diagnostics read: every chain cut to the shortest
    assert sum(r["prompt"] == "2" for r in table) == sum(lengths)  # and every transition is there
    data = presto_tui.read_trace("t.jsonl")
    assert [len(g) for g in data.chain_groups()] == [3, 3, 1, 1]
    alone = data.chains(4).posterior["log_target"].values
    assert int(dt.constant_data["chains"].sel(prompt=4)) == 1  # its other chains are NaN in the file
    there = dt.posterior["log_target"].sel(prompt=4, block=1).dropna("chain", how="all").dropna("draw")
    assert alone.shape == (1, 30) and (alone == there.values).all()
    with pytest.raises(presto_tui.InputError, match="chain group 3 has no draws"):
        data.chains(3)
    assert float(arviz_stats.rhat(data.chains(2).posterior["log_target"])) == pytest.approx(lt["rhat"], rel=1e-9)


def test_one_numbering_from_1_in_the_api_its_json_and_the_dataframes(engine, tmp_path):
    """Chains, sessions and the answers' chains count from 1 in Python, in `--json` and in the
    DataFrames alike (`ChainResult.chain` and `summary.chain` counted from 0 while the DataFrame's
    `chain` counted from 1); the trace's own `chain` field stays an index from 0."""
    (result,) = presto_tui.sample(engine, "the cat", {"max_new_tokens": 12, "steps": 6}, chains=3, trace="n.jsonl")
    assert [c.chain for c in result.chains] == [1, 2, 3]
    assert [c.summary.chain for c in result.chains] == [1, 2, 3] and result.chains[2].to_dict()["chain"] == 3
    assert all(1 <= m <= 3 for g in result.diagnostics.vote.groups for m in g.chains)
    frame = presto_tui.read_trace("n.jsonl").sessions
    printed = cli_json("stats", "n.jsonl", "--json")
    assert list(frame["chain"]) == [s["chain"] for s in printed["sessions"]] == [1, 2, 3]
    assert [m["chain"] for m in printed["chains"][0]["members"]] == [1, 2, 3]
    assert [json.loads(ln).get("chain") for ln in Path("n.jsonl").read_text().splitlines()
            if '"session_start"' in ln] == [0, 1, 2]  # the schema's index, documented as such
    numbers = {n for n, _ in presto_tui.stream(engine, ["a", "b"], {"max_new_tokens": 8, "steps": 2}, chains=2)}
    assert numbers == {1, 2, 3, 4}


def test_the_dataframes_columns_have_their_types_missing_values_included(engine):
    """The nodes' `parent`, `decision` and `cut` were float64 (a root has none: NaN) and a streaming
    session's `calls` object; whole numbers are integers, nullable where a value may be missing, truth
    values bool, in empty frames too."""
    pd = pytest.importorskip("pandas")
    presto_tui.sample(engine, ["the cat", "a dog"], {"max_new_tokens": 8, "steps": 4, "prefetch": "stream"},
                      trace="s.jsonl")
    data = presto_tui.read_trace("s.jsonl")
    nodes, sessions, transitions = data.nodes, data.sessions, data.transitions
    for column in ("parent", "decision", "cut"):
        assert nodes[column].dtype == pd.Int64Dtype(), column
    assert nodes["accept_child"].dtype == pd.BooleanDtype() and nodes["on_path"].dtype == bool
    root = nodes[nodes["node"] == 0].iloc[0]
    assert root["parent"] is pd.NA and root["accept_child"] is pd.NA
    assert sessions["calls"].dtype == pd.Int64Dtype() and sessions["calls"].isna().all()  # streaming: no calls
    assert transitions["accepted"].dtype == bool and transitions["first_diff"].dtype == "int64"
    presto_tui.sample(engine, "x", {"max_new_tokens": 8, "sampler": "lowtemp"}, trace="b.jsonl")
    empty = presto_tui.read_trace("b.jsonl").transitions
    assert empty.empty and empty["transition"].dtype == "int64" and empty["accepted"].dtype == bool


def test_events_stream_as_they_happen_and_a_session_cancels(engine):
    from presto_tui import events

    kinds: dict[str, int] = {}
    for index, event in presto_tui.stream(engine, "the cat", {"steps": 6, "max_new_tokens": 12}):
        assert index == 1  # sessions are numbered from 1
        kinds[type(event).__name__] = kinds.get(type(event).__name__, 0) + 1
    assert kinds["SessionStart"] == kinds["SessionEnd"] == 1 and kinds["Transition"] == 6

    async def cancel_after(n: int):
        seen = 0
        async with engine.session("the cat", {"steps": 5000, "max_new_tokens": 12}, trace="c.jsonl") as session:
            async for _, event in session:
                if isinstance(event, events.Transition):
                    seen += 1
                    if seen == n:
                        session.cancel()
            return await session.result()

    result = asyncio.run(cancel_after(10))
    assert result.status == "cancelled" and 10 <= result.chains[0].summary.transitions < 5000
    (ended,) = presto_tui.read_trace("c.jsonl").sessions.itertuples()
    assert ended.status == "cancelled" and ended.ended  # the trace ends the session as it stopped


def test_chains_cancelled_midway_are_said_cancelled_and_k_is_not_blamed(engine):
    """`session.cancel()` after 20 transitions of two chains with K=5000: their draws are those so far; the
    warnings (the result's, and `stats`' of its trace) say the chains were cancelled and after how
    many transitions, and never that K was too short."""
    async def cancel_after(n: int):
        async with engine.session("the cat", {"steps": 5000}, chains=2,
                                  trace="c.jsonl") as session:
            seen = 0
            async for _, event in session:
                seen += isinstance(event, events.Transition)
                if seen == n:
                    session.cancel()
            return await session.result()

    from presto_tui import events

    result = asyncio.run(cancel_after(20))
    assert [c.status for c in result.chains] == ["cancelled", "cancelled"]
    counts = ", ".join(str(c.summary.transitions) for c in result.chains)
    said = " ".join(result.diagnostics.warnings)
    assert f"every chain cancelled after {counts} transitions (of K=5000 a block)" in said, said
    assert "too short" not in said and "-K" not in said
    printed = runner.invoke(app, ["stats", "c.jsonl"]).stdout
    assert f"every chain cancelled after {counts} transitions" in printed and "too short" not in printed


def test_a_damaged_trace_is_named_by_its_line(chains_trace):
    lines = Path("t.jsonl").read_text().splitlines()
    lines[3] = lines[3][: len(lines[3]) // 2]
    Path("bad.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(presto_tui.TraceError, match=r"^bad\.jsonl:4: "):
        presto_tui.read_trace("bad.jsonl")


def test_the_readme_example_runs_as_written():
    """The README's Python block, on the synthetic engine instead of the embedded model (the
    same calls; the engine tests cover vLLM): a renamed or renumbered API breaks it here."""
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    (block,) = re.findall(r"^```python\n(.*?)^```", readme, flags=re.DOTALL | re.MULTILINE)
    assert "presto_tui.Engine()" in block
    code = block.replace("presto_tui.Engine()", 'presto_tui.Engine(backend="synthetic")')
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)
    assert scope["result"].answer is not None and len(scope["data"].transitions) > 0


# -- what a notebook user hit ----------------------------------------------------------------------

def test_a_damaged_trace_reads_with_its_bad_lines_skipped_and_several_files_read_as_one(chains_trace, engine):
    lines = Path("t.jsonl").read_text().splitlines()
    at = next(i for i, ln in enumerate(lines) if '"type": "transition"' in ln or '"type":"transition"' in ln)
    lines[at] = lines[at][: len(lines[at]) // 2]
    Path("bad.jsonl").write_text("\n".join(lines) + "\n")
    data = presto_tui.read_trace("bad.jsonl", on_bad_lines="warn")
    assert any(f"bad.jsonl:{at + 1}" in w for w in data.warnings) and "damaged" in set(data.sessions["status"])
    with pytest.raises(presto_tui.InputError, match="on_bad_lines must be one of error, warn, skip"):
        presto_tui.read_trace("t.jsonl", on_bad_lines="ignore")
    presto_tui.sample(engine, "small tree", {"max_new_tokens": 8, "steps": 4}, trace="u.jsonl")
    both = presto_tui.read_trace(["t.jsonl", "u.jsonl", "t.jsonl"])  # (a file read twice counts once)
    assert len(both) == len(presto_tui.read_trace("t.jsonl")) + 1
    assert list(both.sessions["trace"]).count("u.jsonl") == 1 and list(both.sessions["session"]) == \
        list(range(1, len(both) + 1))
    assert any("counted once" in w for w in both.warnings)
    assert repr(both) == f"TraceData(3 files: {len(both)} sessions, 1 warning)"


def test_chains_take_a_burn_in_and_a_thinning_as_stats_does(chains_trace):
    arviz_stats = pytest.importorskip("arviz_stats")
    data = presto_tui.read_trace("t.jsonl")
    idata = data.chains(1, burn_in=10, thin=2)
    assert idata.posterior.sizes["draw"] == 10  # 30 transitions: the first 10 dropped, one in 2 of the 20 kept
    printed = cli_json("stats", "t.jsonl", "--json", "--burn-in", "10", "--thin", "2")["chains"][0]
    d = next(d for d in printed["diagnostics"] if d["quantity"] == "log_target")
    if d["rhat"] is not None:
        assert float(arviz_stats.rhat(idata.posterior["log_target"])) == pytest.approx(d["rhat"], rel=1e-9)
    with pytest.raises(presto_tui.InputError, match="thin must be a whole number >= 1, got 0"):
        data.chains(1, thin=0)
    with pytest.raises(presto_tui.InputError, match="no draws in block 1"):
        data.chains(1, burn_in=30)


def test_params_are_checked_when_built_named_as_python_names_them_and_help_lists_every_field():
    import pydoc

    with pytest.raises(presto_tui.ParamError, match=r"^max_new_tokens must lie in \[1, 65536\], got 0$"):
        presto_tui.Params(max_new_tokens=0)
    with pytest.raises(presto_tui.ParamError, match=r"^unknown parameter 'step'; did you mean 'steps'\?"):
        presto_tui.Params(step=8)
    with pytest.raises(presto_tui.ParamError, match="block_size 7 does not divide max_new_tokens 96"):
        presto_tui.Params(block_size=7)
    p = presto_tui.Params(steps=8)
    with pytest.raises(presto_tui.ParamError, match="steps must lie in"):
        p.with_(steps=0)
    text = pydoc.render_doc(presto_tui.Params, renderer=pydoc.plaintext)
    for name in ("sampler", "alpha", "steps", "particles", "sps_rollouts", "tries"):
        assert f"{name}: " in text, name
    assert "Sample" in pydoc.render_doc(presto_tui.sample, renderer=pydoc.plaintext)
    assert "DataFrame" in pydoc.render_doc(presto_tui.TraceData, renderer=pydoc.plaintext)


def test_results_summaries_and_traces_print_short(chains_trace):
    """A notebook printing a trace of 8 short sessions got 679,000 characters."""
    data = presto_tui.read_trace("t.jsonl")
    for obj in (data, chains_trace[0], chains_trace[0].chains[0], data.summaries()[0], presto_tui.Params()):
        assert len(repr(obj)) < 400, type(obj).__name__
    assert repr(data) == f"TraceData('t.jsonl': {len(data)} sessions)"
