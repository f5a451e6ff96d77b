"""Every number a person or a program reads counts from 1 (docs/numbering.md), and counts what it
says: the diagnostics' blocks, the DataFrames' decisions beside their transitions, the tree's
labels, the answer's length up to its first EOS, the warm-up's draws; and a walk over the JSON of
`run`, `stats`, `eval` and `bench` (synthetic engine) that finds no counted thing from 0, with the
trace's own indices, the only numbers from 0, listed in docs/numbering.md."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

import presto_tui
from presto_tui.cli import app
from presto_tui.logs.reader import read_trace as read_raw
from presto_tui.runtime.core.types import cut_at_eos
from presto_tui.runtime.session.events import RoundDone
from presto_tui.views.state.layout import label

pytestmark = pytest.mark.usefixtures("in_tmp")
runner = CliRunner()
DOCS = Path(__file__).parent.parent / "docs"


def cli_json(*args: str) -> list[dict]:
    """A command's JSON: one object, or one a line (`run`)."""
    res = runner.invoke(app, list(args))
    assert res.exit_code == 0, res.output
    try:
        return [json.loads(res.stdout)]
    except json.JSONDecodeError:
        return [json.loads(ln) for ln in res.stdout.splitlines() if ln.strip()]


# -- item by item ---------------------------------------------------------------------------------

def test_the_diagnostics_count_blocks_from_1_as_the_table_prints_them():
    """`run --chains 2 -B 8 --json` said blocks 0 and 1 and shared_blocks [0] while its table printed
    1 and 2*; Python's Diagnostic said block=0."""
    (obj,) = cli_json("run", "the cat", "--chains", "2", "-K", "6", "-n", "16", "-B", "8", "--json", "--no-trace")
    assert sorted({d["block"] for d in obj["diagnostics"]}) == [1, 2]
    assert obj["shared_blocks"] == [1]  # the first block starts from the prompt in every chain
    assert all(w.startswith("block 1: ") for w in obj["warnings"] if w.startswith("block"))  # shared blocks warn
    res = runner.invoke(app, ["run", "the cat", "--chains", "2", "-K", "6", "-n", "16", "-B", "8", "--no-trace"],
                        env={"COLUMNS": "200"})
    rows = [ln.split()[0] for ln in res.stdout.splitlines() if re.match(r"^\s*[0-9]+\*?\s+log-target\s", ln)]
    assert set(rows) == {"1", "2*"}  # the table and the JSON say the same blocks
    [result] = presto_tui.sample(presto_tui.Engine(backend="synthetic"), "the cat",
                                 {"max_new_tokens": 16, "block_size": 8, "steps": 6}, chains=2)
    assert sorted({d.block for d in result.diagnostics.diagnostics}) == [1, 2]
    assert result.diagnostics.shared == (1,)


def test_a_nodes_decision_is_the_transition_it_decides_and_the_tree_says_so():
    """`read_trace(...).nodes.decision` counted from 0 while `transitions.transition` counted from 1
    (a join was off by one); the tree labelled the node deciding transition 11 "k10"."""
    cli_json("run", "the cat", "-n", "12", "-K", "12", "--prefetch", "bfs", "-N", "4", "--json", "--trace", "t.jsonl")
    data = presto_tui.read_trace("t.jsonl")
    nodes, transitions = data.nodes, data.transitions
    decided = nodes[nodes["on_path"] & nodes["decision"].notna() & nodes["log_target"].notna()]
    assert int(decided["decision"].min()) == 1 and int(decided["decision"].max()) == 12
    assert set(decided["decision"].astype(int)) == set(transitions["transition"])
    # a node on the realized path, joined to its transition, is that transition's proposal
    rounds = [ev for ev in data.traces[0].sessions[0].events if isinstance(ev, RoundDone)]
    for rd in rounds:
        for v in rd.tree.iter_nodes(limit=10_000):
            if v.decision is not None:
                assert label(rd.tree, v).split()[1] == f"k{v.decision.index + 1}"


def test_the_answers_length_is_up_to_its_first_eos():
    """`stats` said `answer 96` (the state's length) for a session whose text was empty."""
    for s in ("bestofn", "powermh"):
        cli_json("run", "the cat", "--sampler", s, "-n", "24", "-K", "2", "--seed", "3", "--json",
                 "--trace", f"{s}.jsonl")
    [printed] = cli_json("stats", "bestofn.jsonl", "powermh.jsonl", "--json")
    eos = read_raw("bestofn.jsonl").sessions[0].start.backend_info["eos_id"]
    cut = 0
    for row in printed["sessions"]:
        answer = cut_at_eos(row["tokens"], eos)
        assert row["answer_tokens"] == len(answer)
        cut += len(answer) < len(row["tokens"])
    assert cut  # (a response that stops early: the synthetic model's EOS comes soon)
    assert printed["pooled"][0]["answer_tokens_mean"] == printed["sessions"][0]["answer_tokens"]


def test_the_warm_up_holds_every_burn_in_draw():
    """`chains(1, burn_in=45)` gave a warmup_posterior of 15 draws (the posterior's) while
    constant_data.warmup_draws said 45."""
    pytest.importorskip("arviz_base")
    cli_json("run", "the cat", "--chains", "2", "-K", "60", "-n", "8", "--json", "--trace", "w.jsonl")
    idata = presto_tui.read_trace("w.jsonl").chains(1, burn_in=45)
    assert int(idata.constant_data["warmup_draws"]) == 45 and int(idata.constant_data["draws"]) == 15
    assert idata.warmup_posterior.sizes["draw"] == 45 and idata.posterior.sizes["draw"] == 15
    assert list(idata.warmup_posterior["draw"].values) == list(range(1, 46))
    first = presto_tui.read_trace("w.jsonl").transitions
    chain1 = first[first["chain"] == 1].sort_values("transition")
    assert list(idata.warmup_posterior["log_target"].sel(chain=1).values) == list(chain1["log_target"][:45])


# -- the walk ---------------------------------------------------------------------------------------

# keys whose whole-number values count things (from 1 wherever a person or a program reads them)
COUNTED = {"block", "chain", "prompt", "transition", "session", "round", "epoch", "particle", "replica", "draw",
           "sample", "decision", "index", "step", "k", "group"}
# lists of counted things
COUNTED_LISTS = {"shared_blocks", "chains", "unanswered", "pair", "blocks", "sessions"}


def numbers(obj: object, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], int]]:
    """Every whole number in a JSON object, with the keys leading to it (a list adds no key)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from numbers(v, (*path, str(k)))
    elif isinstance(obj, list):
        for v in obj:
            yield from numbers(v, path)
    elif isinstance(obj, int) and not isinstance(obj, bool):
        yield path, obj


def counted(path: tuple[str, ...], in_list: bool) -> bool:
    if not path or path[0] in ("params", "shared_params", "comparable", "engine"):  # parameters, not counts
        return False
    if any(p in ("params", "comparable", "engine", "thresholds") for p in path):
        return False
    return path[-1] in COUNTED or (in_list and path[-1] in COUNTED_LISTS)


def counted_numbers(obj: object) -> list[tuple[str, int]]:
    """(dotted key, value) of every counted number in `obj`."""
    out = []

    def walk(x: object, path: tuple[str, ...], in_list: bool) -> None:
        if isinstance(x, dict):
            for k, v in x.items():
                walk(v, (*path, str(k)), False)
        elif isinstance(x, list):
            for v in x:
                walk(v, path, True)
        elif isinstance(x, int) and not isinstance(x, bool) and counted(path, in_list):
            out.append((".".join(path), x))

    walk(obj, (), False)
    return out


def test_no_json_counts_from_0_in_run_stats_eval_and_bench():
    """A walk over every object `run`, `stats` (with its critical path), `eval` and `bench` print with
    `--json`: every block, chain, prompt, transition, session, round, particle, replica, draw and
    sample they count is counted from 1."""
    docs = []
    docs += cli_json("run", "the cat", "--chains", "2", "-K", "6", "-n", "16", "-B", "8", "--json",
                     "--trace", "a.jsonl")
    for i, s in enumerate(("ppt", "resample-move", "powersmc", "bestofn", "sps")):
        docs += cli_json("run", "the cat", "--sampler", s, "-n", "16", "-K", "4", "-B", "8", "--json",
                         "--trace", f"b{i}.jsonl")
    traces = ["a.jsonl", *(f"b{i}.jsonl" for i in range(5))]
    docs += cli_json("stats", *traces, "--json")
    docs += cli_json("stats", "a.jsonl", "--critical-path", "--json")
    docs += cli_json("eval", "--methods", "powermh,powermh+stream,bon:2", "--limit", "2", "-n", "8", "-K", "4",
                     "--chains", "2", "--json", "--no-trace", "--figures", "none")
    docs += cli_json("bench", "--limit", "1", "--rules", "stream", "--budgets", "8", "--throughput", "1", "-n", "16",
                     "-K", "4", "--chains", "2", "--json", "--no-trace")
    seen = [n for d in docs for n in counted_numbers(d)]
    zero = sorted({k for k, v in seen if v < 1})
    assert not zero, f"counted from 0: {zero}"
    keys = {k.rsplit(".", 1)[-1] for k, _ in seen}
    # the walk reads what it should (a walk that met none of them could not fail)
    assert {"block", "chain", "session", "group", "shared_blocks", "chains", "pair"} <= keys, keys


def test_the_numbers_from_0_are_the_trace_indices_docs_numbering_lists():
    """The trace's own fields that count from 0 are the exceptions docs/numbering.md names: every
    counted field a trace holds at 0 is named there."""
    cli_json("run", "the cat", "--chains", "2", "-K", "4", "-n", "16", "-B", "8", "--prefetch", "bfs", "--json",
             "--trace", "a.jsonl")
    for i, s in enumerate(("ppt", "powersmc", "bestofn", "sps")):
        cli_json("run", "the cat", "--sampler", s, "-n", "16", "-K", "4", "-B", "8", "--json", "--trace", f"b{i}.jsonl")
    doc = (DOCS / "numbering.md").read_text()
    section = doc.split("## From 0: the trace's own indices", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`([a-z_.]+)`", section))
    at_zero: set[str] = set()
    for path in ["a.jsonl", *(f"b{i}.jsonl" for i in range(4))]:
        for line in Path(path).read_text().splitlines():
            rec = json.loads(line)
            for keys, v in numbers(rec):
                if v == 0 and keys and keys[-1] in COUNTED | {"parents", "request"} and keys[0] not in ("params",):
                    at_zero.add(keys[-1])
    assert at_zero, "the traces hold no index from 0: nothing was checked"
    missing = {k for k in at_zero if not any(k == n.rsplit(".", 1)[-1] or k in n.split("'") for n in named)}
    assert not missing, f"docs/numbering.md does not list these trace fields from 0: {sorted(missing)}"


def test_no_dataframe_or_draws_column_counts_from_0():
    """The DataFrames and the `--draws` CSV: every column that counts sessions, chains, prompts, blocks,
    rounds, transitions, decisions or states starts at 1."""
    cli_json("run", "the cat", "--chains", "2", "-K", "4", "-n", "16", "-B", "8", "--prefetch", "bfs", "--json",
             "--trace", "a.jsonl", "--draws", "a.csv")
    data = presto_tui.read_trace("a.jsonl")
    frames = {"sessions": data.sessions, "transitions": data.transitions, "rounds": data.rounds, "nodes": data.nodes}
    columns = {"session", "chain", "chains", "prompt", "block", "round", "transition", "decision"}
    checked = set()
    for name, frame in frames.items():
        assert len(frame), name
        for col in columns & set(frame.columns):
            if col == "prompt" and name == "sessions":  # (the prompt's text)
                continue
            assert frame[col].dropna().min() >= 1, f"{name}.{col}"
            checked.add(f"{name}.{col}")
    assert {"transitions.block", "transitions.transition", "nodes.decision", "rounds.round"} <= checked
    rows = Path("a.csv").read_text().splitlines()
    header = rows[0].split(",")
    for col in ("prompt", "chain", "block", "transition", "state"):
        i = header.index(col)
        assert min(int(r.split(",")[i]) for r in rows[1:] if r.split(",")[i]) == 1, col
