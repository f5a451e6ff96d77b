"""Session traces: round trip, hostile input, interruption, stats and the classifier fit."""

from __future__ import annotations

import json
import random
import re
from dataclasses import replace

import orjson
import pytest
from helpers import small_backend
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from presto_tui.api.params import find_method
from presto_tui.cli import app
from presto_tui.errors import EngineError
from presto_tui.logs.reader import TraceError, read_trace
from presto_tui.logs.schema import SCHEMA_VERSION, encode
from presto_tui.logs.writer import TraceWriter
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.session.events import RoundDone, SessionEnd
from presto_tui.runtime.session.runner import run_session

runner = CliRunner()


def record(path, params_list, prompts=((1, 2),), backend=None):
    backend = backend or small_backend()
    events = []
    with TraceWriter(path, command="test", backend=backend.name, model=backend.model,
                     params=params_list[0].to_dict(), pieces=backend.token_pieces) as w:
        for params in params_list:
            for prompt in prompts:
                for ev in run_session(backend, params, list(prompt), prompt="p" + str(prompt)):
                    w.write(ev)
                    events.append(ev)
    return events


@pytest.fixture
def trace_file(tmp_path):
    path = tmp_path / "t.jsonl"
    events = record(path, [SamplerParams(sampler=smp, prefetch=r, inputs=i, budget=8, max_new_tokens=12,
                                         block_size=6, steps=8, seed=3, sps_chunk=4)
                           for smp, r, i in (("powermh", "spine", "decision"), ("powermh", "bfs", "node"),
                                             ("powermh", "predictive", "node"), ("powermh", "none", "decision"),
                                             ("powermh", "bfs", "decision"), ("entropycut", "bfs", "node"),
                                             ("entropycut", "spine", "decision"), ("multitry", "spine", "decision"),
                                             ("multitry", "bfs", "node"), ("multitry", "none", "decision"),
                                             # streaming (request, walked lines; epochs), every sampler
                                             ("powermh", "stream", "decision"), ("entropycut", "stream", "decision"),
                                             ("multitry", "stream", "decision"),
                                             # the baselines (sample, smc_step, choice lines) and SPS (sps_step)
                                             ("lowtemp", "none", "decision"), ("bestofn", "none", "decision"),
                                             ("powersmc", "none", "decision"), ("sps", "none", "decision"))])
    return path, events


def test_round_trip_events_equal(trace_file):
    path, events = trace_file
    trace = read_trace(path)
    read = [e for s in trace.sessions for e in s.events]
    assert len(read) == len(events) and not trace.warnings
    for a, b in zip(events, read):
        assert type(a) is type(b)
        assert encode(a) == encode(b)
        if isinstance(a, RoundDone):  # every node the views can ask for reads back the same
            paths = [a.tree.path_of(v.id) for v in a.tree.iter_nodes()]
            same_ids = not a.tree.lazy  # a level tree numbers off-path nodes as they are first looked at
            for va, vb in zip([a.tree.node_at(p) for p in paths], [b.tree.node_at(p) for p in paths]):
                assert va is not None and vb is not None
                assert va == (vb if same_ids or va.on_path else replace(vb, id=va.id))
            assert a.tree.final_state.tokens == b.tree.final_state.tokens
            assert a.tree.count_nodes() == b.tree.count_nodes()
    # replay needs no tokenizer: every token id has its text piece
    backend = small_backend()
    end = read[-1]
    assert isinstance(end, SessionEnd)
    assert trace.text(end.tokens) == "".join(backend.token_pieces(end.tokens))


def test_summary_from_trace_matches_live(trace_file):
    from presto_tui.runtime.session.summary import summarize

    path, events = trace_file
    trace = read_trace(path)
    live = [e for e in events]
    starts = [i for i, e in enumerate(live) if type(e).__name__ == "SessionStart"] + [len(live)]
    for sess, (a, b) in zip(trace.sessions, zip(starts, starts[1:])):
        assert sess.summary().to_dict() == summarize(live[a:b]).to_dict()


def test_node_statuses_and_request_kinds_read_as_enums_and_write_the_same_strings():
    """Node statuses and request kinds are enums whose values are the strings traces have always
    held: a recorded trace reads into them, and encoding writes back the very strings it holds."""
    from pathlib import Path

    from presto_tui.runtime.prefetch.tree import NodeStatus, TableTree
    from presto_tui.runtime.session.events import RequestEvent, RequestKind

    def spelled(docs):  # the statuses of every table row and the kinds of every request line
        return ({row[2] for d in docs if d["type"] == "round" for row in d["tree"].get("table", [])},
                {d["kind"] for d in docs if d["type"] == "request"})

    path = Path(__file__).parent / "data" / "stream.jsonl"
    written = spelled([orjson.loads(line) for line in path.read_bytes().splitlines()
                       if b'"type":"round"' in line or b'"type":"request"' in line])
    assert {"expanded", "live"} <= written[0] and written[1] == {"issued", "finished", "aborted"}
    events = [e for s in read_trace(path).sessions for e in s.events if isinstance(e, (RoundDone, RequestEvent))]
    statuses = [r.status for e in events if isinstance(e, RoundDone) and isinstance(e.tree, TableTree)
                for r in e.tree.table.values()]
    kinds = [e.kind for e in events if isinstance(e, RequestEvent)]
    assert {type(x) for x in statuses} == {NodeStatus} and {type(x) for x in kinds} == {RequestKind}
    assert spelled([orjson.loads(orjson.dumps(encode(e))) for e in events]) == written


def write_lines(path, lines, end="\n"):
    data = ("\n".join(lines) + end).encode() if isinstance(lines[0], str) else b"\n".join(lines) + end.encode()
    path.write_bytes(data)


def lines_of(path):
    return path.read_text().splitlines()


def expect_error(path, needle, line=None):
    with pytest.raises(TraceError) as e:
        read_trace(path)
    msg = str(e.value)
    assert "\n" not in msg and needle in msg, msg
    if line is not None:
        assert f"{path}:{line}:" in msg, msg
    res = runner.invoke(app, ["stats", str(path)])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert [ln for ln in res.stderr.splitlines() if ln.strip()] == [f"presto-tui: error: {msg}"]


def test_truncated_final_line_is_a_warning(trace_file, tmp_path):
    path, _ = trace_file
    raw = path.read_bytes()
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(raw[: len(raw) - 40])
    trace = read_trace(cut)
    assert "truncated final line" in trace.warnings[0] and "cut short" in trace.warnings[1]
    res = runner.invoke(app, ["stats", str(cut)])
    assert res.exit_code == 0 and "warning" in res.stderr


def test_byte_flipped_line(trace_file, tmp_path):
    path, _ = trace_file
    lines = lines_of(path)
    k = next(i for i, ln in enumerate(lines) if '"type":"round"' in ln)
    lines[k] = lines[k][:5] + "\x07}{" + lines[k][8:]
    bad = tmp_path / "flip.jsonl"
    write_lines(bad, lines)
    expect_error(bad, "not valid JSON", line=k + 1)


def test_missing_field_and_wrong_type(trace_file, tmp_path):
    path, _ = trace_file
    lines = lines_of(path)
    k = next(i for i, ln in enumerate(lines) if '"type":"model_call"' in ln)
    obj = json.loads(lines[k])
    del obj["wall_s"]
    bad = tmp_path / "missing.jsonl"
    write_lines(bad, lines[:k] + [json.dumps(obj)] + lines[k + 1:])
    expect_error(bad, "missing field 'wall_s'", line=k + 1)
    k = next(i for i, ln in enumerate(lines) if '"type":"round"' in ln)
    obj = json.loads(lines[k])
    obj["tree"]["decisions"][0][2] = "seven"
    bad2 = tmp_path / "type.jsonl"
    write_lines(bad2, lines[:k] + [json.dumps(obj)] + lines[k + 1:])
    expect_error(bad2, "tree.decisions[0][2]", line=k + 1)


@pytest.mark.parametrize(("key", "value", "said"), [
    ("steps", "many", "params.steps must be a whole number in [1, 10^6], got 'many'"),
    ("alpha", [4], "params.alpha must be a number"),
    ("budget", "lots", "params.budget must be a whole number"),
    ("sps_jackknife", "maybe", "params.sps_jackknife should be true or false, got 'maybe'"),
    ("steps", 0, "params.steps must lie in [1, 10^6], got 0"),
])
def test_a_parameter_of_the_wrong_type_is_refused_by_every_consumer_naming_its_line(trace_file, tmp_path, key,
                                                                                       value, said):
    """Every value of a trace is read on the parameter spec's one path (`Param.read`): a
    `session_start` whose params.steps is "many" stopped replay with a traceback and exit 0 while
    `stats` printed "12/12/many"; every consumer now refuses it in one line naming the line."""
    path, _ = trace_file
    lines = lines_of(path)
    k = next(i for i, ln in enumerate(lines) if '"type":"session_start"' in ln)
    obj = json.loads(lines[k])
    obj["params"][key] = value
    bad = tmp_path / "bad.jsonl"
    write_lines(bad, lines[:k] + [json.dumps(obj)] + lines[k + 1:])
    expect_error(bad, said, line=k + 1)  # the reader, and `stats`
    import presto_tui

    with pytest.raises(presto_tui.TraceError, match=rf"bad\.jsonl:{k + 1}: {re.escape(said)}"):
        presto_tui.read_trace(bad)
    for args in (["replay", str(bad)], ["replay", str(bad), str(path), "--compare", "1,2"],
                 ["stats", "--compare", str(bad), str(path)], ["fit-classifier", str(bad), "-o", str(tmp_path / "m")],
                 ["stats", "--critical-path", str(bad)]):
        res = runner.invoke(app, args)
        assert res.exit_code == 2 and "Traceback" not in res.output, (args, res.output)
        (line,) = [ln for ln in res.stderr.splitlines() if ln.strip()]
        assert line.startswith(f"presto-tui: error: {bad}:{k + 1}: {said}"), (args, line)


def test_replay_whose_app_fails_inside_exits_non_zero(trace_file, monkeypatch):
    """A failure inside the app (Textual prints its traceback) ended `replay` with exit status 0."""
    from textual.app import App

    import presto_tui.views.app as views

    class Failing(App):
        def on_mount(self) -> None:
            raise ValueError("a bug in a view")

        def run(self, **kwargs):  # (no terminal under the test runner)
            return super().run(headless=True)

    monkeypatch.setattr(views, "replay_app", lambda *a, **k: Failing())
    res = runner.invoke(app, ["replay", str(trace_file[0])])
    assert res.exit_code == 1


def test_unknown_major_version_is_refused(trace_file, tmp_path):
    path, _ = trace_file
    lines = lines_of(path)
    head = json.loads(lines[0])
    head["schema"] = "9.0"
    bad = tmp_path / "v9.jsonl"
    write_lines(bad, [json.dumps(head)] + lines[1:])
    expect_error(bad, f"trace schema 9.0 is not readable by this presto-tui (reads schema {SCHEMA_VERSION})",
                 line=1)


def test_minor_version_is_accepted(trace_file, tmp_path):
    path, _ = trace_file
    lines = lines_of(path)
    head = json.loads(lines[0])
    head["schema"] = SCHEMA_VERSION.split(".")[0] + ".99"
    ok = tmp_path / "minor.jsonl"
    write_lines(ok, [json.dumps(head)] + lines[1:])
    assert read_trace(ok).sessions


def test_empty_binary_and_huge_inputs(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    expect_error(empty, "empty file", line=1)
    binary = tmp_path / "bin.jsonl"
    binary.write_bytes(bytes(range(256)) * 10)
    expect_error(binary, "binary data", line=1)
    notrace = tmp_path / "other.jsonl"
    notrace.write_text('{"hello": 1}\n')
    expect_error(notrace, "not a presto-tui trace", line=1)
    huge = tmp_path / "huge.jsonl"
    huge.write_bytes(b'{"type": "header", "x": "' + b"a" * (10 * 2**20) + b'"}\n')
    expect_error(huge, "line longer than", line=1)
    expect_error(tmp_path / "nope.jsonl", "no such trace file")


def test_event_before_session_start(trace_file, tmp_path):
    path, _ = trace_file
    lines = lines_of(path)
    k = next(i for i, ln in enumerate(lines) if '"type":"session_start"' in ln)
    bad = tmp_path / "order.jsonl"
    write_lines(bad, lines[:k] + lines[k + 1:])
    expect_error(bad, "before any session_start")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_damaged_traces_never_crash_the_reader(trace_file, tmp_path_factory, data):
    path, _ = trace_file
    raw = bytearray(path.read_bytes())
    ops = data.draw(st.lists(st.tuples(st.sampled_from(["flip", "cut", "delete", "insert", "dup"]),
                                       st.integers(0, len(raw) - 1), st.integers(0, 255)),
                             min_size=1, max_size=4))
    for op, pos, byte in ops:
        pos = min(pos, max(0, len(raw) - 1))
        if op == "flip" and raw:
            raw[pos] ^= byte or 1
        elif op == "cut":
            raw = raw[:pos]
        elif op == "delete":
            del raw[pos:pos + byte]
        elif op == "insert":
            raw[pos:pos] = bytes([byte]) * 3
        elif op == "dup":
            raw[pos:pos] = raw[max(0, pos - byte):pos]
    bad = tmp_path_factory.mktemp("h") / "damaged.jsonl"
    bad.write_bytes(bytes(raw))
    try:
        trace = read_trace(bad)
    except TraceError as e:
        assert "\n" not in str(e) and str(bad) in str(e)
        return
    for sess in trace.sessions:  # what reads back must also be usable by consumers
        sess.summary()
        for rd in sess.rounds:
            list(rd.tree.iter_nodes(limit=200))


def failing_backend(on_call: int, error: BaseException):
    """A synthetic backend whose `on_call`-th model call raises `error` (Ctrl-C, out of memory)."""
    from helpers import ScriptedEngine

    return ScriptedEngine(small_backend().lm, fail_on_call=on_call, error=error)


def run_writer(path, backend, params):
    return TraceWriter(path, command="run", backend=backend.name, model=backend.model,
                       params=params.to_dict(), pieces=backend.token_pieces)


def test_interrupt_mid_round_leaves_a_replayable_trace(tmp_path):
    """Ctrl-C inside a model call: the trace keeps every finished round and ends cleanly."""
    from presto_tui.cli.run import run_prompts

    backend = failing_backend(on_call=4, error=KeyboardInterrupt())
    params = SamplerParams(prefetch="spine", budget=4, max_new_tokens=12, steps=30)  # a model call per round
    path = tmp_path / "int.jsonl"
    w = run_writer(path, backend, params)
    with pytest.raises(KeyboardInterrupt):
        run_prompts(backend, params, ["the cat"], trace=w)
    trace = read_trace(path)
    (sess,) = trace.sessions
    assert len(sess.rounds) == 2  # extension + 2 rounds finished before the 4th call
    end = sess.events[-1]
    assert isinstance(end, SessionEnd) and end.reason == "cancelled"
    assert end.tokens == sess.rounds[-1].tree.final_state.tokens


def test_engine_error_ends_the_trace_with_an_error_event(tmp_path):
    from presto_tui.cli.run import run_prompts

    backend = failing_backend(on_call=3, error=MemoryError("out of memory"))
    params = SamplerParams(prefetch="spine", budget=4, max_new_tokens=12, steps=30)
    path = tmp_path / "err.jsonl"
    w = run_writer(path, backend, params)
    with pytest.raises(EngineError, match="MemoryError: out of memory"):
        run_prompts(backend, params, ["x"], trace=w)
    sess = read_trace(path).sessions[0]
    assert type(sess.events[-1]).__name__ == "SessionError"
    assert "out of memory" in sess.events[-1].message and len(sess.rounds) == 1


@pytest.mark.usefixtures("in_tmp")
def test_run_writes_a_trace_by_default_and_stats_reads_it(tmp_path):
    res = runner.invoke(app, ["run", "the cat", "-K", "6", "-n", "12", "--json"])
    assert res.exit_code == 0
    (path,) = list((tmp_path / "sessions").glob("*-run.jsonl"))
    assert str(path.relative_to(tmp_path)) in res.stderr
    res = runner.invoke(app, ["stats", str(path), "--json"])
    assert res.exit_code == 0
    d = json.loads(res.stdout)
    assert d["pooled"][0]["transitions"] == 6 and d["sessions"][0]["prompt"] == "the cat"
    assert runner.invoke(app, ["run", "x", "--no-trace", "-K", "2", "-n", "4"]).exit_code == 0
    assert len(list((tmp_path / "sessions").glob("*.jsonl"))) == 1
    res = runner.invoke(app, ["run", "x", "--trace", str(path), "-K", "2", "-n", "4"])
    assert res.exit_code == 2 and "exists already" in res.stderr


def test_stats_shows_trace_text_literally(tmp_path):
    """A crafted trace cannot restyle the output or send escape sequences."""
    backend = small_backend()
    params = SamplerParams(max_new_tokens=6, steps=2)
    path = tmp_path / "evil.jsonl"
    evil = "[bold red]boom[/] \x1b[2J\x1b]0;pwned\x07 \x9b31m"
    with TraceWriter(path, command="run", backend=backend.name, model=backend.model,
                     params=params.to_dict(), pieces=backend.token_pieces) as w:
        for ev in run_session(backend, params, [1, 2], prompt=evil):
            w.write(ev)
    res = runner.invoke(app, ["stats", str(path)], env={"COLUMNS": "160"})
    assert res.exit_code == 0
    assert "\x1b" not in res.stdout and "\x07" not in res.stdout and "\x9b" not in res.stdout
    assert "[bold red]boom[/]" in res.stdout and "\\x1b[2J" in res.stdout


def test_classifier_fit_recovers_a_planted_dependence(tmp_path):
    """Relabel real rounds with classes drawn from a known function of the cut fraction."""
    from presto_tui.logs.fit import fit

    rng = random.Random(0)

    def planted(f):  # P(reject), P(accept), P(uncertain)
        import math
        z = [2.0 - 4.0 * f, -2.0 + 4.0 * f, 0.0]
        e = [math.exp(v) for v in z]
        return [v / sum(e) for v in e]

    paths = []
    for seed in range(8):
        path = tmp_path / f"s{seed}.jsonl"
        record(path, [SamplerParams(prefetch="bfs", inputs="node", budget=20, max_new_tokens=40,
                                    steps=60, seed=seed)])
        lines = lines_of(path)
        for k, ln in enumerate(lines):
            obj = json.loads(ln)
            if obj["type"] == "round":
                T = obj["tree"]["T"]
                for s in obj["tree"]["scores"]:
                    f = obj["tree"]["decisions"][s[0]][2] / T
                    s[10] = rng.choices(["reject", "accept", "uncertain"], planted(f))[0]
                lines[k] = json.dumps(obj)
        write_lines(path, lines)
        paths.append(path)
    clf = fit([read_trace(p) for p in paths])
    for f in (0.1, 0.5, 0.9):
        got = clf.proba({"cut_fraction": f})
        assert got == pytest.approx(planted(f), abs=0.08)
    cv = clf.meta["cross_validation"]
    assert cv["folds"] == 5 and cv["log_loss"] < cv["baseline_log_loss"]


def test_fit_classifier_cli_and_use_in_run(tmp_path):
    path = tmp_path / "fit.jsonl"
    record(path, [SamplerParams(prefetch="bfs", inputs="node", budget=20, max_new_tokens=40, steps=60)],
           prompts=((1, 2), (3, 4), (2, 1)))
    out = tmp_path / "clf.json"
    res = runner.invoke(app, ["fit-classifier", str(path), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "held-out accuracy" in res.stdout and "3-fold grouped by prompt" in res.stdout
    res = runner.invoke(app, ["run", "x", "--prefetch", "predictive", "--inputs", "node",
                              "--classifier", str(out), "--no-trace", "-K", "4", "-n", "8", "--json"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["fit-classifier", str(path), "-o", str(out), "--features", "nope"])
    assert res.exit_code == 2 and "unknown feature" in res.stderr
    one = tmp_path / "one.jsonl"
    record(one, [SamplerParams(max_new_tokens=4, steps=1)])
    res = runner.invoke(app, ["fit-classifier", str(one), "-o", str(out)])
    assert res.exit_code == 2 and "no examples of class" in res.stderr


def test_trace_lines_are_json_objects_with_type_first(trace_file):
    path, _ = trace_file
    for ln in path.read_bytes().splitlines():
        obj = orjson.loads(ln)
        assert next(iter(obj)) == "type"


def test_shipped_example_trace_reads_cleanly():
    from pathlib import Path

    trace = read_trace(Path(__file__).parent.parent / "sessions" / "example.jsonl")
    assert trace.sessions and not trace.warnings
    for sess in trace.sessions:
        assert type(sess.events[-1]).__name__ == "SessionEnd" and sess.rounds


# -- stats: what each row is, pooled only over comparable sessions, each session once --------------

def test_stats_rows_say_sampler_and_alpha_and_pool_only_comparable_sessions(tmp_path):
    path = tmp_path / "mixed.jsonl"
    base = dict(prefetch="spine", budget=8, max_new_tokens=12, steps=6, seed=3)
    kinds = [SamplerParams(sampler="powermh", **base), SamplerParams(sampler="entropycut", **base),
             SamplerParams(sampler="powermh", **{**base, "alpha": 2.0}),
             SamplerParams(sampler="powermh", prefetch="none", max_new_tokens=12, steps=6)]
    record(path, kinds, prompts=((1, 2), (3, 4)))
    res = runner.invoke(app, ["stats", str(path), "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    rows, groups = d["sessions"], d["pooled"]
    assert [(r["sampler"], r["alpha"]) for r in rows] == [(p.sampler, p.alpha) for p in kinds for _ in range(2)]
    # one pooled group per kind of session, each pooling its own two prompts and nothing else
    assert len(groups) == len(kinds)
    for g, p in zip(groups, kinds):
        members = [r for r in rows if r["group"] == g["group"]]
        assert [(m["trace"], m["session"]) for m in members] == [(m["trace"], m["session"]) for m in g["members"]]
        assert {(m["sampler"], m["alpha"], m["rule"]) for m in members} == {(g["sampler"], g["alpha"], g["rule"])}
        assert (g["sampler"], g["alpha"], g["comparable"]["prefetch"]) == (p.sampler, p.alpha, p.prefetch)
        assert g["sessions"] == 2 and g["transitions"] == sum(m["transitions"] for m in members)
        est = [m for m in members if m["speedup_estimate"] is not None]
        if est:  # eq. 20 over this group's sessions only
            assert g["speedup_estimate"] == pytest.approx(
                sum(m["speedup_estimate"] * m["wall_s"] for m in est) / sum(m["wall_s"] for m in est))
        else:
            assert g["speedup_estimate"] is None
    # the table names each session's sampler, alpha and group, and each pooled row what it pools
    res = runner.invoke(app, ["stats", str(path)], env={"COLUMNS": "200"})
    assert res.exit_code == 0
    out = res.stdout
    header = next(ln for ln in out.splitlines() if "prompt" in ln and "rule" in ln)
    assert "sampler" in header and "α" in header and "group" in header
    assert "EntropyCut β=4 mix=0.1" in out and "pooled (comparable sessions)" in out
    for g in groups:
        pooled_line = next(ln for ln in out.splitlines() if ln.strip().startswith(f"g{g['group']} "))
        assert "[1]#" in pooled_line and find_method(g["sampler"]).display in pooled_line


def test_stats_reads_each_trace_and_session_once_and_says_so(tmp_path):
    path = tmp_path / "one.jsonl"
    record(path, [SamplerParams(prefetch="spine", budget=8, max_new_tokens=12, steps=6)], prompts=((1, 2), (3, 4)))
    once = json.loads(runner.invoke(app, ["stats", str(path), "--json"]).stdout)
    link = tmp_path / "link.jsonl"
    link.symlink_to(path)
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(path.read_bytes())
    res = runner.invoke(app, ["stats", str(path), str(path), str(link), str(copy), "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["sessions"] == once["sessions"] and d["pooled"] == once["pooled"]  # counted once
    warnings = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(warnings) == 3 and all(ln.startswith("presto-tui: warning: ") for ln in warnings)
    assert f"{path}: the same file as {path}; read once" in warnings[0]
    assert f"{link}: the same file as {path}" in warnings[1]
    assert f"{copy}: its sessions are already read from {path}" in warnings[2]
    # a trace holding some sessions of another: only those count once
    part = tmp_path / "part.jsonl"
    lines = lines_of(path)
    second = [i for i, ln in enumerate(lines) if '"type":"session_start"' in ln][1]
    write_lines(part, lines[:second])
    res = runner.invoke(app, ["stats", str(part), str(path), "--json"])
    assert res.exit_code == 0 and len(json.loads(res.stdout)["sessions"]) == 2
    assert "sessions #1 already read from" in res.stderr


def test_stats_pools_sessions_that_ran_side_by_side_apart_from_those_that_ran_alone(tmp_path):
    """Chains sharing an engine make slower calls: a session pools only with sessions that ran
    with as many others at once (their lines interleave in the trace)."""
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("the cat\na dog\nthe sun\nwhy\n")
    paths = []
    for c in (1, 2):
        paths.append(tmp_path / f"c{c}.jsonl")
        res = runner.invoke(app, ["run", "--prompts-file", str(prompts), "-C", str(c), "-K", "4", "-n", "8",
                                  "--trace", str(paths[-1]), "--json"])
        assert res.exit_code == 0, res.output
    d = json.loads(runner.invoke(app, ["stats", *map(str, paths), "--json"]).stdout)
    assert [r["at_once"] for r in d["sessions"]] == [1] * 4 + [2] * 4
    assert [(g["comparable"]["at_once"], g["sessions"]) for g in d["pooled"]] == [(1, 4), (2, 4)]


def test_a_line_cut_in_the_middle_of_a_trace_is_said_to_be_cut_with_its_number(trace_file, tmp_path):
    path, _ = trace_file
    lines = lines_of(path)
    k = next(i for i, ln in enumerate(lines) if '"type":"round"' in ln)
    cut = tmp_path / "cut-middle.jsonl"
    for at in range(1, len(lines[k]), max(1, len(lines[k]) // 12)):  # inside strings, numbers, words, lists
        write_lines(cut, lines[:k] + [lines[k][:at]] + lines[k + 1:])
        expect_error(cut, f"line {k + 1} is cut short: it ends inside its JSON object", line=k + 1)
    write_lines(cut, lines[:k] + [lines[k][:40] + "\x07" + lines[k][41:]] + lines[k + 1:])
    expect_error(cut, f"line {k + 1} is damaged: not valid JSON at column 41", line=k + 1)


# -- a damaged trace, read anyway when asked (--on-bad-lines) ----------------------------------------

def _cut_round(path, tmp_path, which=1):
    """The trace with the `which`-th round line cut in its middle; (the file, its line number, its session)."""
    lines = lines_of(path)
    rounds = [i for i, ln in enumerate(lines) if '"type":"round"' in ln]
    k = rounds[which]
    starts = [i for i, ln in enumerate(lines[:k]) if '"type":"session_start"' in ln]
    bad = tmp_path / "damaged.jsonl"
    write_lines(bad, lines[:k] + [lines[k][:len(lines[k]) // 2]] + lines[k + 1:])
    return bad, k + 1, len(starts)


def test_on_bad_lines_skip_reads_a_damaged_trace_and_marks_the_session_it_broke(trace_file, tmp_path):
    path, _ = trace_file
    whole = read_trace(path)
    bad, line, session = _cut_round(path, tmp_path)
    expect_error(bad, f"line {line} is cut short", line=line)  # the default: error, as before
    res = runner.invoke(app, ["stats", str(bad), "--on-bad-lines", "skip", "--json"])
    assert res.exit_code == 0, res.output
    assert f"{bad}: 1 bad line(s) skipped: {line}" in res.stderr
    assert f"session {session} is damaged: line(s) {line} skipped" in res.stderr
    rows = json.loads(res.stdout)["sessions"]
    assert len(rows) == len(whole.sessions)  # every session is there, the damaged one too
    assert [r["status"] for r in rows] == ["damaged" if i + 1 == session else s.summary().status
                                           for i, s in enumerate(whole.sessions)]
    assert rows[session - 1]["damaged_lines"] == [line]
    assert rows[session - 1]["rounds"] == len(whole.sessions[session - 1].rounds) - 1  # never silently shorter
    warn = runner.invoke(app, ["stats", str(bad), "--on-bad-lines", "warn"])
    assert warn.exit_code == 0 and f"{bad}:{line}: skipped (line {line} is cut short" in warn.stderr
    fitted = runner.invoke(app, ["fit-classifier", str(bad), "--on-bad-lines", "skip", "-o", str(tmp_path / "m.json")])
    assert fitted.exit_code == 0 and f"session {session} is damaged" in fitted.stderr, fitted.output
    bogus = runner.invoke(app, ["stats", str(bad), "--on-bad-lines", "ignore"])
    assert bogus.exit_code == 2 and "unknown --on-bad-lines 'ignore'; choose one of error, warn, skip" in bogus.stderr


def test_a_skipped_session_start_loses_that_session_with_a_warning_and_no_other(trace_file, tmp_path):
    path, _ = trace_file
    lines = lines_of(path)
    k = [i for i, ln in enumerate(lines) if '"type":"session_start"' in ln][2]
    bad = tmp_path / "no-start.jsonl"
    write_lines(bad, lines[:k] + [lines[k][:60]] + lines[k + 1:])
    trace = read_trace(bad, "skip")
    assert len(trace.sessions) == len(read_trace(path).sessions) - 1
    assert all(s.summary().status != "damaged" for s in trace.sessions)
    assert any("its session_start could not be read" in w for w in trace.warnings)


async def test_replay_shows_a_damaged_session_as_damaged(trace_file, tmp_path):
    from helpers import text_of

    from presto_tui.views.app import replay_app

    path, _ = trace_file
    bad, _, session = _cut_round(path, tmp_path, which=0)
    assert session == 1  # the session replay opens on
    shown = replay_app(read_trace(bad, "skip"))
    async with shown.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert "damaged" in text_of(shown, "#stats")
    res = runner.invoke(app, ["replay", str(bad)])  # without the option, as before: one line, exit 2
    assert res.exit_code == 2
