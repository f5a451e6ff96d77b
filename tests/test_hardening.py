"""Faults and hostile input get a clean answer, and nothing is lost (one test per class).

- output paths are checked, with the right reason, before any engine starts;
- a full disk ends a run with one line, keeps what was written, and no traceback;
- every number is finite and within its documented range, and engine flags that do
  not apply to the chosen backend are refused, before any engine starts;
- one validation is the gate for every consumer: whatever the reader accepts of a
  damaged trace, `stats` and the replay screen show without an exception
  (property test over generated damage), and what it refuses is one `file:line:` line;
- strings from outside never reach the terminal raw; pipes and devices are refused as traces.
"""

from __future__ import annotations

import errno
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
from helpers import cli_error
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from presto_tui.cli import app
from presto_tui.errors import TraceError
from presto_tui.logs.reader import read_trace

runner = CliRunner()
DATA = Path(__file__).parent / "data"
pytestmark = pytest.mark.usefixtures("in_tmp")


# -- output paths, before any engine ------------------------------------------------------

@pytest.mark.parametrize("command", ["run", "chat", "bench"])
@pytest.mark.parametrize("make,reason", [
    (lambda p: p.write_text("old trace"), "exists already"),
    (lambda p: p.mkdir(), "is a directory"),
    (lambda p: None, "is not a directory"),
])
def test_trace_paths_are_checked_with_the_right_reason_before_the_engine(tmp_path, no_engine, command, make, reason):
    path = tmp_path / "t.jsonl"
    if reason == "is not a directory":
        (tmp_path / "file").write_text("x")
        path = tmp_path / "file" / "t.jsonl"
    else:
        make(path)
    args = [command] + (["x"] if command == "run" else []) + ["--backend", "vllm", "--trace", str(path)]
    line = cli_error(*args)
    assert reason in line
    if reason == "exists already":
        assert path.read_text() == "old trace"  # never overwritten


def test_a_full_disk_ends_the_run_in_one_line_and_keeps_what_was_written(tmp_path, monkeypatch):
    from presto_tui.cli import run as run_command

    real_open = run_command.open_trace

    class FullDisk:
        def __init__(self, f, room):
            self.f, self.room = f, room

        def write(self, b):
            if self.room <= 0:
                raise OSError(errno.ENOSPC, "No space left on device")
            self.room -= 1
            return self.f.write(b)

        def __getattr__(self, name):
            return getattr(self.f, name)

    def opener(path, command, engine, params):
        w = real_open(path, command, engine, params)
        w._f = FullDisk(w._f, room=8)
        return w

    monkeypatch.setattr(run_command, "open_trace", opener)
    path = tmp_path / "full.jsonl"
    line = cli_error("run", "the cat", "-n", "12", "-K", "8", "--trace", str(path), code=1)
    assert "No space left on device" in line
    trace = read_trace(path)  # every line written before the disk filled reads back
    assert trace.sessions and trace.sessions[0].start.prompt == "the cat"


# -- numbers, limits and flags ------------------------------------------------------------------

@pytest.mark.parametrize("args,needle", [
    (["--alpha", "inf"], "--alpha must be a finite number"),
    (["--alpha", "1e308"], "--alpha must lie in"),
    (["--tau", "inf"], "--tau must be a finite number"),
    (["--tau", "nan"], "--tau must be a finite number"),
    (["--sampler", "entropycut", "--beta", "1e308"], "--beta must lie in"),
    (["-n", "99999999999999999999"], "--max-new-tokens must lie in"),
    (["--epsilon", "0.6"], "--epsilon must lie in [0, 0.5]"),
    (["--cut-mix", "2"], "--cut-mix must lie in [0, 1]"),
    (["--seed", "-1"], "--seed must lie in"),
    (["--budget", "5000"], "--budget must lie in"),
    (["--backend", "foo"], "unknown --backend 'foo'"),
    (["--model", "/nonexistent"], "--model does not apply to --backend synthetic"),
    (["--threads", "-1"], "--threads does not apply to --backend synthetic"),
    (["--kv-cache-gib", "-1"], "--kv-cache-gib does not apply to --backend synthetic"),
    (["--backend", "transformers", "--kv-cache-gib", "4"], "--kv-cache-gib does not apply to --backend transformers"),
    (["--backend", "vllm", "--kv-cache-gib", "-1"], "--kv-cache-gib must lie in (0, 1e+06], got -1"),
    (["--backend", "vllm", "--threads", "0"], "--threads must lie in [1, 4096], got 0"),
    (["--backend", "vllm", "--model", "/nonexistent"], "no such model file or folder"),
    (["--backend", "vllm", "--dtype", "float8"], "unknown --dtype"),
    (["--concurrency", "0"], "--concurrency must lie in [1, 256]"),
    (["--prefetch", "stream", "--inputs", "node"], "--prefetch stream needs --inputs decision"),
])
def test_every_value_is_checked_before_any_engine(no_engine, args, needle):
    line = cli_error("run", "x", *args)
    assert needle in line


def test_blank_prompts_and_a_bom(tmp_path, no_engine):
    assert "the prompt is empty" in cli_error("run", "   ")
    f = tmp_path / "bom.txt"
    f.write_bytes("\ufeffthe cat\n".encode())
    from presto_tui.cli.options import read_prompts

    assert read_prompts(None, f) == ["the cat"]


@pytest.mark.parametrize("limit", ["0", "-1"])
def test_bench_limits_are_checked(no_engine, limit):
    assert "--limit must be >= 1" in cli_error("bench", "--limit", limit)


@pytest.mark.parametrize("content,needle", [
    ('{"kind": "presto-tui/certainty-classifier", "classes": ["reject", "accept", "uncertain"], '
     '"features": ["cut_fraction"], "coef": [[NaN], [1], [0]], "intercept": [0, 0, 0], "mean": [0], '
     '"scale": [1]}', "NaN is not a number"),
    ('{"kind": "presto-tui/certainty-classifier", "classes": ["reject", "accept", "uncertain"], '
     '"features": ["cut_fraction"], "coef": [[1e400], [1], [0]], "intercept": [0, 0, 0], "mean": [0], '
     '"scale": [1]}', "must be finite"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ('{"kind": "something else"}', "not a presto-tui classifier"),
])
def test_classifier_files_are_untrusted_input(tmp_path, no_engine, content, needle):
    f = tmp_path / "clf.json"
    f.write_text(content)
    line = cli_error("run", "x", "--prefetch", "predictive", "--classifier", str(f))
    assert needle in line and str(f) in line  # and it names the file


def test_an_engine_failure_in_bench_is_one_line(monkeypatch):
    from helpers import ScriptedEngine

    from presto_tui.cli import options

    monkeypatch.setattr(options, "start_engine", lambda name, opts: ScriptedEngine(fail_on_call=3))
    line = cli_error("bench", "--limit", "1", "-n", "8", "-K", "4", "--budgets", "4", "--rules", "spine",
                     "--no-trace", code=1)
    assert "out of memory (simulated)" in line


# -- traces: one gate for every consumer ----------------------------------------------------------

def test_pipes_and_devices_are_refused_as_traces(tmp_path):
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    for command in (["stats"], ["replay"], ["fit-classifier", "-o", str(tmp_path / "m.json")]):
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "presto_tui", *command[:1], str(fifo), *command[1:]],
                              capture_output=True, text=True, timeout=60)
        assert time.monotonic() - t0 < 30  # never waits for a writer
        assert proc.returncode == 2 and "not a regular file" in proc.stderr


def test_escape_sequences_in_a_file_name_never_reach_the_terminal(tmp_path):
    evil = tmp_path / "t\x1b]0;pwned\x07\x1b[2J.jsonl"
    evil.write_text("not a trace\n")
    for command in ("stats", "replay"):
        res = runner.invoke(app, [command, str(evil)])
        assert res.exit_code == 2
        assert "\x1b" not in res.output and "\x07" not in res.output and "\\x1b" in res.stderr


def test_a_session_without_end_is_called_cut_short(tmp_path):
    lines = (DATA / "replay.jsonl").read_text().splitlines()
    cut = tmp_path / "cut.jsonl"
    last_end = max(i for i, ln in enumerate(lines) if '"session_end"' in ln)
    cut.write_text("\n".join(lines[:last_end]) + "\n")
    res = runner.invoke(app, ["stats", str(cut), "--json"])
    assert res.exit_code == 0 and "cut short" in res.stderr
    rows = json.loads(res.stdout)["sessions"]
    assert rows[-1]["status"] == "cut short"


# Damage a valid trace the ways a file gets damaged or forged: a value replaced by any JSON value,
# a field removed, a line removed, duplicated or swapped.
# small integers are the ones that pass type checks and point at the wrong node, decision or request
JSON = st.recursive(st.none() | st.booleans() | st.integers(-2, 70) | st.integers(-10, 10**12)
                    | st.floats(allow_nan=False) | st.text(max_size=30)
                    | st.sampled_from(["inf", "-inf", "nan", "²", "١", "expanded", "leaf", "accept", "cap"]),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                    max_leaves=8)


def _paths(obj, prefix=()):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield prefix + (k,)
            yield from _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:6]):
            yield prefix + (i,)
            yield from _paths(v, prefix + (i,))


def _retarget(tree: dict, rnd: random.Random) -> None:
    """Point one index of a tree's rows at another plausible node, decision or request: the damage
    that passes every type check and breaks the structure the views walk."""
    kinds = [k for k in ("decisions", "requests", "scores", "table", "steps")
             if any(isinstance(r, list) for r in tree.get(k, []))]
    scalars = [k for k in ("stop_node", "k0", "depth_cap", "T") if k in tree]
    if kinds and (not scalars or rnd.random() < 0.8):
        row = rnd.choice([r for r in tree[rnd.choice(kinds)] if isinstance(r, list)])  # each kind alike
        j = rnd.randrange(len(row))
        if isinstance(row[j], bool) or not isinstance(row[j], int):
            row[j] = not row[j] if isinstance(row[j], bool) else rnd.randint(-1, 8)
        else:
            row[j] = row[j] + rnd.choice([-2, -1, 1, 2])
    elif scalars:
        key = rnd.choice(scalars)
        tree[key] = tree[key] + rnd.choice([-1, 1, 2]) if isinstance(tree[key], int) else 0


def _damage(lines: list[dict], rnd: random.Random, value) -> list[dict]:
    lines = [json.loads(json.dumps(ln)) for ln in lines]
    rounds = [j for j, ln in enumerate(lines) if ln.get("type") == "round"]
    if rounds and rnd.random() < 0.5:
        _retarget(lines[rnd.choice(rounds)]["tree"], rnd)
        return lines
    kind = rnd.choice(["replace", "replace", "replace", "delete", "drop", "duplicate", "swap"])
    # most damage lands in round trees, whose structure every view walks
    i = rnd.choice(rounds) if rounds and rnd.random() < 0.7 else rnd.randrange(1, len(lines))
    if kind in ("replace", "delete"):
        paths = list(_paths(lines[i]))
        if not paths:
            return lines
        path = rnd.choice(paths)
        parent = lines[i]
        for key in path[:-1]:
            parent = parent[key]
        if kind == "delete" and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = value
    elif kind == "drop":
        del lines[i]
    elif kind == "duplicate":
        lines.insert(i, lines[i])
    else:
        j = rnd.randrange(1, len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    return lines


BASE = [json.loads(ln) for ln in (DATA / "replay.jsonl").read_text().splitlines()]


def _accepted(seed: int, value, folder: Path):
    """The damaged trace of `seed` and `value`, read (None: the reader refused it, in one line naming it)."""
    path = folder / f"t{seed}.jsonl"
    damaged = _damage(BASE, random.Random(seed), value)
    path.write_bytes(b"".join(orjson.dumps(ln, option=orjson.OPT_APPEND_NEWLINE) for ln in damaged))
    try:
        return read_trace(path)
    except TraceError as e:
        msg = str(e)
        assert "\n" not in msg and msg.startswith(f"{path}:")
        return None


def _every_view_state(trace) -> None:
    """Everything the app computes to draw a trace, pure (no frame drawn): the reducer's state, every
    round's tree laid out in both modes and as text and JSON, the inspector's and the per-token split's
    words of every scored node, the overview's series, the history, the chains' mixing."""
    from presto_tui.views.state import export
    from presto_tui.views.state.chains import mixing
    from presto_tui.views.state.history import chain_history
    from presto_tui.views.state.layout import layout, tree_text
    from presto_tui.views.state.ratio import ratio_text
    from presto_tui.views.state.reducer import AppState
    from presto_tui.views.state.series import ChainSeries
    from presto_tui.views.state.tokens import token_split

    state = AppState(vocab=dict(trace.vocab))
    for sess in trace.sessions:
        for ev in sess.events:
            state.apply(ev)
    for s, view in enumerate(state.sessions):
        ChainSeries(view).update()
        chain_history(view)
        mixing([view.summary])
        for r, rd in enumerate(view.rounds):
            for mode in ("full", "rounded"):
                lay = layout(rd.tree, mode)
                tree_text(rd.tree, lay)
            export.tree_as_json(state, view, (s, r), rd)
            for v in rd.tree.iter_nodes(limit=2000):
                if v.score is not None:
                    ratio_text(v.score)
                    token_split(rd.tree, v, float(view.params.get("alpha", 1.0)))


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), value=JSON)
@example(seed=64437, value=None)  # a proposal shorter than its state's suffix: the per-token split raised
def test_whatever_the_reader_accepts_every_consumer_computes(tmp_path_factory, seed, value):
    """Damaged traces: the reader refuses one in one line naming it, or `stats` and every view's state
    take it (the app draws from that state: one frame per example would cost a second each, so the
    app itself is driven over a few fixed ones below)."""
    from rich.console import Console

    from presto_tui.logs.stats import pooled_groups, render, session_rows

    trace = _accepted(seed, value, tmp_path_factory.mktemp("damaged"))
    if trace is None:
        return
    rows = session_rows([trace])
    render(Console(file=open(os.devnull, "w"), width=120), rows, pooled_groups(rows))  # noqa: SIM115
    _every_view_state(trace)


# damaged traces the reader accepts, kept fixed: the app is driven over each (found with the
# generator above; each changes a value the views read)
DRIVEN = [(1, 0), (2, -1), (5, "x"), (7, 1e300)]


@pytest.mark.slow
async def test_whatever_the_reader_accepts_the_app_shows(tmp_path):
    from presto_tui.views.app import replay_app

    driven = 0
    for seed, value in DRIVEN:
        trace = _accepted(seed, value, tmp_path)
        if trace is None or not any(s.rounds for s in trace.sessions):
            continue
        driven += 1
        app = replay_app(trace)
        async with app.run_test(size=(100, 30)) as pilot:
            for key in ("right", "right", "down", "left", "f", "end", "right", "home", "plus"):
                await pilot.press(key)
            for _ in range(min(12, len(app.screen.state.all_rounds()))):
                await pilot.press("right_square_bracket")
            await pilot.pause()
    assert driven >= 2  # (not vacuous: most of them are read and driven)


def test_a_trace_that_cannot_be_created_is_an_output_error_with_its_reason(monkeypatch):
    from presto_tui.errors import OutputError
    from presto_tui.logs.writer import open_trace
    from presto_tui.runtime.core.params import SamplerParams
    from presto_tui.runtime.engines.synthetic import SyntheticEngine

    monkeypatch.chdir("/proc")  # (folders are made only inside the current one)
    with pytest.raises(OutputError) as err:  # /proc takes no new folders, whoever runs this
        open_trace(Path("presto-tui-test/t.jsonl"), "run", SyntheticEngine(), SamplerParams())
    assert "cannot make the folder for the trace (" in str(err.value) and "(None)" not in str(err.value)
    assert err.value.exit_code == 1
    with pytest.raises(OutputError) as err:  # /proc takes no new files either
        open_trace(Path("presto-tui-test.jsonl"), "run", SyntheticEngine(), SamplerParams())
    assert "cannot write trace (" in str(err.value) and "(None)" not in str(err.value)


def test_a_traced_chat_keeps_one_model(tmp_path):
    """A trace holds one model's sessions and token text: switching the model in a traced chat
    is refused in one line, and the trace stays readable with the first model's sessions."""
    from presto_tui.logs.writer import open_trace
    from presto_tui.runtime.core.params import SamplerParams
    from presto_tui.runtime.engines.synthetic import SyntheticEngine
    from presto_tui.runtime.session.chat import ChatSession, Notice
    from presto_tui.runtime.session.events import SessionEnd

    started = []
    path = tmp_path / "chat.jsonl"
    session = ChatSession(engine_factory=lambda model: started.append(model) or SyntheticEngine(),
                          trace_opener=lambda engine, p: open_trace(path, "chat", engine, p))
    params = SamplerParams(max_new_tokens=8, steps=4, budget=2)
    out: list = []
    session.run("the cat", params, None, out.append)
    assert any(isinstance(e, SessionEnd) for e in out)
    out.clear()
    session.run("a dog", params, "another-model", out.append)
    (notice,) = out
    assert isinstance(notice, Notice) and notice.kind == "input" and "start a new chat" in notice.message
    assert started == [None]  # no second engine was started
    session.close()
    assert [s.start.prompt for s in read_trace(path).sessions] == ["the cat"]


@pytest.mark.parametrize("args", [
    ["run", "the cat", "-n", "4", "-K", "1", "--trace", "{out}"],
    ["bench", "--limit", "1", "-n", "4", "-K", "1", "--rules", "spine", "--budgets", "2", "-o", "{out}"],
    ["eval", "--limit", "1", "-n", "4", "-K", "1", "--methods", "powermh", "-o", "{out}"],
    ["fit-classifier", "{trace}", "-o", "{out}"],
    ["lm-eval", "--tasks", "x", "-o", "{out}"],
])
def test_an_output_whose_folder_would_be_made_outside_the_current_one_is_refused(tmp_path, monkeypatch, no_engine,
                                                                                 args):
    """A trace into a missing folder elsewhere made that folder: every output path follows one rule
    (files.py), folders are made only inside the current folder's tree."""
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    out = tmp_path / "missing" / "dir" / "out.json"
    args = [a.format(out=out, trace=DATA / "replay.jsonl") for a in args]
    line = cli_error(*args)
    assert f"no folder {tmp_path / 'missing'} for the" in line and "only inside the current one" in line, line
    assert not (tmp_path / "missing").exists()


def test_missing_folders_inside_the_current_one_are_made_for_every_output(tmp_path):
    res = runner.invoke(app, ["run", "the cat", "-n", "4", "-K", "1", "--trace", "new/deeper/t.jsonl"])
    assert res.exit_code == 0, res.output
    assert read_trace(tmp_path / "new" / "deeper" / "t.jsonl").sessions
    res = runner.invoke(app, ["stats", str(tmp_path / "new" / "deeper" / "t.jsonl")])
    assert res.exit_code == 0


def test_the_app_exports_by_the_same_rule(tmp_path, monkeypatch):
    from presto_tui.views.state import export

    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    with pytest.raises(export.ExportError, match="only inside the current one"):
        export.write(tmp_path / "missing" / "dir", "a.txt", "x")
    assert not (tmp_path / "missing").exists()
    assert export.write(Path("made") / "here", "a.txt", "x").read_text() == "x"
