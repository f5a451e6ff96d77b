"""`eval --resume`: a run killed with SIGKILL at a chosen point (mid-session, between methods, halfway
through writing the run log), then resumed, ends with the results of one uninterrupted run; nothing
that finished runs again; other settings are refused in one line; a torn last line is dropped.

The kill comes from the run itself (`PRESTO_TUI_CRASH_AT`, resume.py): no sleeps, no races."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from helpers import error_line
from typer.testing import CliRunner

from presto_tui.cli import app
from presto_tui.eval.resume import CRASH_ENV, RunLog, log_path_of
from presto_tui.logs.reader import read_trace
from presto_tui.runtime.session.events import SessionEnd

runner = CliRunner()
pytestmark = pytest.mark.usefixtures("in_tmp")
TASKS = [("the cat", "cat|dog"), ("a dog ran", "sat"), ("the tree", "mat|tree"), ("it was warm", "the")]
ARGS = ["--methods", "powermh,bon:2", "-n", "8", "-K", "4", "--figures", "none"]
TIMING = {"time_s", "time_per_prompt_s", "session_id", "figures"}  # what two runs of one evaluation differ by


def task_file() -> Path:
    p = Path("tasks.jsonl")
    p.write_text("".join(json.dumps({"prompt": q, "answer": a, "grader": "regex"}) + "\n" for q, a in TASKS))
    return p


def untimed(x):
    if isinstance(x, dict):
        return {k: untimed(v) for k, v in x.items() if k not in TIMING}
    if isinstance(x, list):
        return [untimed(v) for v in x]
    return x


def uninterrupted(*extra: str) -> dict:
    res = runner.invoke(app, ["eval", str(task_file()), *ARGS, *extra, "-o", "whole.json", "--trace", "whole.jsonl",
                              "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


_WHOLE: dict[tuple[str, ...], dict] = {}


def whole_run(*extra: str) -> dict:
    """One uninterrupted run's results for these flags (made once: every kill point compares with it)."""
    if extra not in _WHOLE:
        _WHOLE[extra] = uninterrupted(*extra)
    return _WHOLE[extra]


def killed(point: str, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PRESTO_TUI_BACKEND": "synthetic", CRASH_ENV: point}
    proc = subprocess.run([sys.executable, "-m", "presto_tui", "eval", str(task_file()), *ARGS, *extra,
                           "-o", "cut.json", "--trace", "cut.jsonl", "--json"],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == -9, proc.stderr  # SIGKILL: no handler ran, nothing was tidied up
    return proc


def records(path: Path) -> list[dict]:
    raw = path.read_bytes()
    return [orjson.loads(ln) for ln in raw[:raw.rfind(b"\n") + 1].splitlines()[1:]]


@pytest.mark.parametrize(("point", "extra", "shape"), [
    ("event:40", [], "mid-session"),  # item 2's powermh session is cut between its rounds
    ("record:3", [], "between methods"),  # item 2's powermh is on disk, its bon:2 not begun
    ("torn:6", [], "while writing"),  # half of the 6th session's line is on disk
    ("event:21", [], "while grading"),  # the first session's end is in the trace, its record not yet written
    ("event:60", ["--chains", "2", "--vote"], "mid-session"),  # a pair's chains cut together
    ("record:3", ["--chains", "2", "--vote"], "between chains"),  # chain 0 of a pair on disk, chain 1 not
])
def test_a_run_killed_then_resumed_ends_as_one_uninterrupted_run(point, extra, shape):
    whole = whole_run(*extra)
    killed(point, *extra)
    log = log_path_of(Path("cut.json"))
    assert log == Path("cut.runlog") and not Path("cut.json").exists()
    before = records(log)
    cut = read_trace("cut.jsonl")
    torn = not log.read_bytes().endswith(b"\n")
    assert torn == (shape == "while writing")
    if shape == "mid-session":  # the kill came inside a session: its trace has no end
        assert any(not s.ended for s in cut.sessions)
    total = len(TASKS) * 2 * (2 if extra else 1)
    assert len(before) < total
    res = runner.invoke(app, ["eval", str(task_file()), *ARGS, *extra, "--resume", str(log), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert untimed(out) == untimed(whole)
    assert json.loads(Path("cut.json").read_text()) == out  # the results go where the first run's would have
    # only what the log did not hold ran again, on the seeds the first run gave it
    trace = read_trace("cut.jsonl")
    assert not trace.warnings  # the sessions the kill cut short end `cancelled`; appended lines read cleanly
    new = trace.sessions[len(cut.sessions):]
    key = lambda s: (s.start.prompt, s.start.params["sampler"], s.start.params["seed"], s.start.chain)
    finished = {key(s) for s in cut.sessions if isinstance(s.events[-1], SessionEnd) and s.events[-1].reason == "done"}
    assert len(finished) == len(before) + (shape in ("while grading", "while writing"))  # (ended, not in the log)
    assert len(new) == total - len(finished)
    assert not finished & {key(s) for s in new}
    assert all(isinstance(s.events[-1], SessionEnd) for s in trace.sessions)
    # the log holds every session once, the torn line gone
    after = records(log)
    assert len(after) == total and log.read_bytes().endswith(b"\n")
    assert len({(r["item"], r["method"], r["chain"]) for r in after}) == total


def test_other_settings_are_refused_in_one_line_naming_the_difference():
    killed("record:2")
    log = Path("cut.runlog")
    kept = log.read_bytes()
    for args, difference in [(["-K", "8"], "method powermh's --steps: 4 then, 8 now"),
                             (["--methods", "powermh,bon:3"], "--methods: powermh,bon:2 then, powermh,bon:3 now"),
                             (["--chains", "2"], "--chains: 1 then, 2 now"),
                             (["--limit", "3"], "the number of items: 4 then, 3 now")]:
        res = runner.invoke(app, ["eval", str(task_file()), *ARGS, *args, "--resume", str(log)])
        assert res.exit_code == 2
        assert error_line(res) == (f"--resume {log}: the settings differ from the first run's ({difference}); give "
                                   "the first run's settings, or start a new run")
    assert log.read_bytes() == kept  # refused: nothing written
    # a new run with the first run's results path would overwrite hours of work: refused too
    res = runner.invoke(app, ["eval", str(task_file()), *ARGS, "-o", "cut.json", "--trace", "other.jsonl"])
    assert res.exit_code == 2 and error_line(res) == (f"{log}: a run log exists there already (a run with these "
                                                      f"results): continue it with --resume {log}, or remove it")


def test_a_torn_last_line_is_dropped_and_the_next_record_appends_cleanly(tmp_path):
    path = tmp_path / "r.runlog"
    settings = {"methods": [{"label": "a", "params": {"steps": 4}}]}
    log = RunLog.create(path, "eval", settings, trace=None, output=tmp_path / "r.json")
    log.write({"item": "1", "n": 1})
    log.write({"item": "2", "n": 2})
    log.close()
    with open(path, "ab") as f:
        f.write(b'{"item": "3", "ev')  # the kill came halfway through a line
    log, done = RunLog.resume(path, "eval", settings)
    assert [r["item"] for r in done] == ["1", "2"]
    log.write({"item": "3", "n": 3})
    log.close()
    assert [orjson.loads(ln)["item"] for ln in path.read_bytes().splitlines()[1:]] == ["1", "2", "3"]
    # a damaged line that is not the last is not a kill's: refused, naming it
    path.write_bytes(path.read_bytes().replace(b'{"item":"2"', b'{"item":2x'))
    with pytest.raises(Exception, match=r"r\.runlog:3: damaged line in the run log"):
        RunLog.resume(path, "eval", settings)


def test_resume_refuses_what_is_not_a_run_log(tmp_path):
    other = tmp_path / "x.jsonl"
    other.write_text('{"type": "header"}\n')
    res = runner.invoke(app, ["eval", str(task_file()), *ARGS, "--resume", str(other)])
    assert res.exit_code == 2 and "not a presto-tui run log" in error_line(res)
    res = runner.invoke(app, ["eval", str(task_file()), "--resume", str(other), "--frontier", "lowtemp"])
    assert error_line(res) == "--resume continues an evaluation of --methods; --frontier runs anew"


def test_a_finished_run_resumed_runs_nothing_and_reports_the_same():
    whole = uninterrupted()
    n = len(read_trace("whole.jsonl").sessions)
    res = runner.invoke(app, ["eval", str(task_file()), *ARGS, "--resume", "whole.json", "--json"])  # the JSON's name
    assert res.exit_code == 0, res.output
    assert untimed(json.loads(res.stdout)) == untimed(whole)
    assert json.loads(res.stdout)["items"] == whole["items"]  # the very sessions, ids and times included
    assert len(read_trace("whole.jsonl").sessions) == n


@pytest.mark.slow
@pytest.mark.ray
def test_a_run_killed_on_one_engine_resumes_over_ray_workers():
    """--workers: only the items each method misses go to the workers; the answers are one engine's."""
    pytest.importorskip("ray")
    whole = whole_run()
    killed("record:3")
    res = runner.invoke(app, ["eval", str(task_file()), *ARGS, "--resume", "cut.runlog", "--workers", "2",
                              "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert untimed(out["items"]) == untimed(whole["items"])
    assert len(read_trace("cut.jsonl").sessions) == len(TASKS) * 2


# -- bench ----------------------------------------------------------------------------------------

BENCH = ["bench", "--limit", "2", "-n", "8", "-K", "4", "--budgets", "4", "--rules", "spine,stream", "--throughput",
         "1,2", "--chains", "2", "--json"]
# timings: the host's clock, and the engine's (a row's chains cut apart by the kill ran apart, not side by side)
TIMED = re.compile(r"_s$|^speedup|^limit|^critical_path$|^mean_live|^prompts_per_min$|^x_seq$|^x_c1$|^engine_probe$")


def close(a, b) -> bool:
    """Equal, timings aside (and floats up to rounding: the virtual clock's sums)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k]) for k in a if not TIMED.search(k))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return a == b


@pytest.mark.parametrize("point", ["record:3", "record:10"])  # between a row's chains; in the throughput table
def test_bench_killed_then_resumed_gives_the_uninterrupted_tables(point):
    if ("bench", ) not in _WHOLE:
        whole = runner.invoke(app, [*BENCH, "-o", "whole.json", "--trace", "whole.jsonl"])
        assert whole.exit_code == 0, whole.output
        _WHOLE["bench", ] = json.loads(whole.stdout)
    env = {**os.environ, "PRESTO_TUI_BACKEND": "synthetic", CRASH_ENV: point}
    proc = subprocess.run([sys.executable, "-m", "presto_tui", *BENCH, "-o", "cut.json", "--trace", "cut.jsonl"],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == -9, proc.stderr
    before = records(Path("cut.runlog"))
    sessions = len(read_trace("cut.jsonl").sessions)
    res = runner.invoke(app, [*BENCH, "--resume", "cut.json"])
    assert res.exit_code == 0, res.output
    assert close(json.loads(res.stdout), _WHOLE["bench", ])
    # the recorded sessions and throughput rows did not run again
    ran = len(read_trace("cut.jsonl").sessions) - sessions
    recorded = sum(1 if r["kind"] == "session" else 2 for r in before)  # (a throughput row here: 2 prompts)
    assert ran == 2 * 3 * 2 + 2 * 2 * 2 - recorded


# -- progress -------------------------------------------------------------------------------------

def test_progress_says_the_sessions_done_per_method_and_the_time_left_at_the_runs_own_pace(monkeypatch):
    import io

    from rich.console import Console

    from presto_tui import console

    now = [100.0]
    monkeypatch.setattr(console.time, "perf_counter", lambda: now[0])
    out = io.StringIO()
    # a resumed run: 4 sessions of "a" finished before, so not in the pace
    p = console.SessionProgress(10, "eval", Console(file=out), per={"a": 5, "b": 5}, done={"a": 4})
    assert p.eta_s() is None  # no pace before this run's first session
    now[0] = 130.0
    p.advance("a")
    now[0] = 160.0
    p.advance("b")
    assert out.getvalue().splitlines() == ["eval: 5/10 sessions, 30 s, about 2 min left | a 5/5, b 0/5",
                                           "eval: 6/10 sessions, 60 s, about 2 min left | a 5/5, b 1/5"]
    assert p.eta_s() == 120.0  # 30 s a session, 4 to go
    assert [console.duration(s) for s in (42, 125, 4000, 30 * 3600 + 120)] == ["42 s", "2 min", "67 min", "30 h 02 min"]


def test_eval_progress_in_json_mode_goes_to_stderr_per_method_and_resumes_its_count():
    killed("record:3")
    res = runner.invoke(app, ["eval", str(task_file()), *ARGS, "--resume", "cut.runlog", "--json"])
    assert res.exit_code == 0
    json.loads(res.stdout)  # stdout: the JSON alone
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("eval: ")]
    pattern = re.compile(r"eval: (\d+)/8 sessions, (\d+)/(\d+) right so far, \d+ s, about \d+ s left "
                         r"\| powermh (\d)/4, bon:2 (\d)/4")
    matches = [pattern.fullmatch(ln) for ln in lines]
    assert all(matches), lines
    assert [int(m.group(1)) for m in matches if m] == list(range(4, 9))  # from the 3 the log held
    assert [(int(m.group(4)), int(m.group(5))) for m in matches if m][-1] == (4, 4)
    assert [int(m.group(3)) for m in matches if m] == list(range(4, 9))  # graded: the log's grades count too


def test_the_frontier_says_its_progress_per_method_on_stderr():
    res = runner.invoke(app, ["eval", "--backend", "synthetic", "--frontier", "lowtemp; powermh@2,4", "--limit", "2",
                              "-n", "8", "--figures", "none", "--no-trace", "-o", "f.json", "--json"])
    assert res.exit_code == 0, res.output
    json.loads(res.stdout)
    last = [ln for ln in res.stderr.splitlines() if ln.startswith("eval: ")][-1]
    # (the points of a method count as the method: powermh at K = 2 and 4)
    assert re.fullmatch(r"eval: 6/6 sessions, \d/6 right so far, \d+ s, about 0 s left \| lowtemp 2/2, powermh 4/4",
                        last), last


def test_after_ctrl_c_resume_grades_the_answer_it_cut_and_runs_only_the_rest(monkeypatch):
    """Ctrl-C came while an answer was graded (its session ended in the trace): --resume grades it from the
    trace rather than running it again; -C 2 runs two sessions at once, the other one is cancelled."""
    from presto_tui.eval import graders

    whole = whole_run()
    calls = {"n": 0}
    grade = graders.RegexGrader.grade

    def interrupted_third_time(self, *args):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return grade(self, *args)

    monkeypatch.setattr(graders.RegexGrader, "grade", interrupted_third_time)
    res = runner.invoke(app, ["eval", str(task_file()), *ARGS, "-C", "2", "-o", "cut.json", "--trace", "cut.jsonl"])
    assert res.exit_code == 130
    assert "presto-tui: continue this run with --resume cut.runlog" in res.stderr
    monkeypatch.setattr(graders.RegexGrader, "grade", grade)
    assert len(records(Path("cut.runlog"))) == 2
    cut = read_trace("cut.jsonl")
    ended = sum(s.events[-1].reason == "done" for s in cut.sessions)
    res = runner.invoke(app, ["eval", str(task_file()), *ARGS, "-C", "2", "--resume", "cut.json", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["concurrency"] == 2 and untimed({**out, "concurrency": 1}) == untimed(whole)  # (whole: -C 1)
    assert len(read_trace("cut.jsonl").sessions) - len(cut.sessions) == len(TASKS) * 2 - ended
    assert ended == 3


def test_the_trace_is_read_on_resume_passing_over_the_sessions_the_log_holds():
    """read_trace(skip=ids) never decodes the named sessions' lines (here one is damaged, and not seen)."""
    uninterrupted()
    sessions = read_trace("whole.jsonl").sessions
    kept = {s.start.session_id for s in sessions[:-1]}
    lines = Path("whole.jsonl").read_bytes().splitlines(keepends=True)
    second = sessions[1]
    # a line of a skipped session (its second: numbered from 1), broken but for its session's id
    lines[second.first_line] = lines[second.first_line].replace(b'"type":"', b'"type":x"', 1)
    assert b'"sid":"' + second.start.session_id.encode() in lines[second.first_line]
    Path("broken.jsonl").write_bytes(b"".join(lines))
    with pytest.raises(Exception, match="damaged|cut short"):
        read_trace("broken.jsonl")
    left = read_trace("broken.jsonl", skip=kept)
    assert [s.start.session_id for s in left.sessions] == [sessions[-1].start.session_id]
    assert left.sessions[0].events == sessions[-1].events and not left.warnings
