"""Every usage error is one line `presto-tui: error: ...` with exit code 2, --help reads as
written, `bench` checks its outputs first and talks when nobody watches, and the names a
person chooses from come from one registry.

Each error test asserts the exact line, the exit code and that nothing else was printed
(no usage box, no traceback, nothing on stdout).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import cli_error
from typer.testing import CliRunner

from presto_tui.cli import app
from presto_tui.runtime.core import registry
from presto_tui.runtime.core.names import InputMode, PrefetchRule
from presto_tui.runtime.core.params import ParamError, SamplerParams

runner = CliRunner()
pytestmark = pytest.mark.usefixtures("in_tmp")


# -- usage errors: unknown options, missing values, numbers that do not parse, bad choices, extra arguments --

@pytest.mark.parametrize("args,line", [
    # numbers: one range text for every bound, integers as integers, the value as given
    (["run", "x", "--alpha", "abc"], "--alpha must be a number in (0, 1000], got 'abc'"),
    (["run", "x", "--alpha", "-1"], "--alpha must lie in (0, 1000], got -1"),
    (["run", "x", "--alpha", "0"], "--alpha must lie in (0, 1000], got 0"),
    (["run", "x", "--alpha", "inf"], "--alpha must be a finite number in (0, 1000], got 'inf'"),
    (["run", "x", "--alpha", "1e309"], "--alpha must be a finite number in (0, 1000], got '1e309'"),  # what was typed
    (["run", "x", "--tau=-1e999"], "--tau must be a finite number in [0.0001, 100], got '-1e999'"),
    (["run", "x", "--seed", "1e3"], "--seed must be a whole number in [0, 2^63-1], got '1e3'"),
    (["run", "x", "--seed", "-5"], "--seed must lie in [0, 2^63-1], got -5"),
    (["run", "x", "--seed", str(2**63)], f"--seed must lie in [0, 2^63-1], got {2**63}"),
    (["run", "x", "--steps", "0"], "--steps must lie in [1, 10^6], got 0"),
    (["run", "x", "-K", "2.5"], "--steps must be a whole number in [1, 10^6], got '2.5'"),
    (["run", "x", "--epsilon", "0.6"], "--epsilon must lie in [0, 0.5], got 0.6"),
    (["run", "x", "--tau", "0"], "--tau must lie in [0.0001, 100], got 0"),
    (["run", "x", "--concurrency", "0"], "--concurrency must lie in [1, 256], got 0"),
    (["run", "x", "-C", "many"], "--concurrency must be a whole number in [1, 256], got 'many'"),
    (["run", "x", "--workers", "zero"], "--workers must be a whole number in [1, 4096], got 'zero'"),
    (["run", "x", "--backend", "vllm", "--threads", "x"], "--threads must be a whole number in [1, 4096], got 'x'"),
    (["run", "x", "--backend", "vllm", "--kv-cache-gib", "lots"],
     "--kv-cache-gib must be a number in (0, 1e+06], got 'lots'"),
    # choices, listed from the registry
    (["run", "x", "--sampler", "foo"], "unknown --sampler 'foo'; choose one of powermh, entropycut, multitry, "
     "ppt, lowtemp, bestofn, powersmc, sps, resample-move"),
    (["run", "x", "--prefetch", "dfs"], "unknown --prefetch 'dfs'; choose one of none, bfs, predictive, spine, stream"),
    (["run", "x", "--inputs", "edge"], "unknown --inputs 'edge'; choose one of decision, node"),
    # a near miss is suggested, as for an unknown option (not a guess: 'dfs' above is no near miss of 'bfs')
    (["run", "x", "--prefetch", "strem"],
     "unknown --prefetch 'strem'; did you mean stream? choose one of none, bfs, predictive, spine, stream"),
    (["run", "x", "--sampler", "powrmh"], "unknown --sampler 'powrmh'; did you mean powermh? choose one of powermh, "
     "entropycut, multitry, ppt, lowtemp, bestofn, powersmc, sps, resample-move"),
    # unknown options, with the closest one
    (["run", "x", "--alph", "3"], "unknown option --alph for presto-tui run; did you mean --alpha?"),
    (["run", "x", "-Z"], "unknown option -Z for presto-tui run (see presto-tui run --help)"),
    (["stats", "--jso", "t.jsonl"], "unknown option --jso for presto-tui stats; did you mean --json?"),
    (["--verbos", "run"], "unknown option --verbos for presto-tui; did you mean --verbose?"),
    (["--zzz"], "unknown option --zzz for presto-tui (see presto-tui --help)"),
    # missing values and arguments
    (["run", "x", "--alpha"], "--alpha needs a value: a number in (0, 1000]"),
    (["run", "x", "--sampler"], "--sampler needs a value: one of powermh, entropycut, multitry, ppt, lowtemp, "
     "bestofn, powersmc, sps, resample-move"),
    (["run", "x", "--trace"], "--trace needs a value: a file path"),
    (["run", "x", "--no-trace=yes"], "--no-trace is a flag and takes no value"),
    (["stats"], "presto-tui stats needs TRACE...: trace files (JSONL) to summarise"),
    (["replay"], "presto-tui replay needs TRACE...: traces written by presto-tui run, chat or bench; several replay "
                 "on one timeline, their sessions numbered from 1 in the order given"),
    (["fit-classifier", "t.jsonl"], "presto-tui fit-classifier needs --output: where to write the classifier JSON"),
    (["fit-classifier", "t.jsonl", "-o"], "-o needs a value: a file path"),
    (["--debug"], "missing command (see presto-tui --help)"),
    # extra arguments, saying what the command takes
    (["run", "x", "y"], "unexpected argument 'y' for presto-tui run (takes PROMPT; quote a value that has spaces)"),
    (["replay", "a.jsonl", "--compare"], "--compare needs a value: S,T"),
    (["bench", "extra"], "unexpected argument 'extra' for presto-tui bench (takes no arguments)"),
    (["chat", "hello"], "unexpected argument 'hello' for presto-tui chat (takes no arguments)"),
    # commands
    (["rn", "x"], "unknown command 'rn'; did you mean run?"),
    (["frobnicate"], "unknown command 'frobnicate'; choose one of bench, chat, eval, lm-eval, methods, run, "
     "serve, replay, stats, fit-classifier, web"),
    # bench's own lists and numbers
    (["bench", "--limit", "0"], "--limit must be >= 1, got 0"),
    (["bench", "--limit", "x"], "--limit must be a whole number >= 1, got 'x'"),
    (["bench", "--seeds", "0"], "--seeds must lie in [1, 10000], got 0"),
    (["bench", "--budgets", "8,0"], "--budgets must lie in [1, 4096], got 0"),
    (["bench", "--budgets", "8,x"], "--budgets must be a whole number in [1, 4096], auto, cost:N or fill:N, got 'x'"),
    (["bench", "--throughput", "1,300"], "--throughput must lie in [1, 256], got 300"),
    (["bench", "--rules", "spine,dfs"], "unknown --rules 'dfs'; choose one of bfs, predictive, spine, stream"),
    (["bench", "--rules", "none"],
     "--rules lists PreSTO rules; each sampler's sequential run is always the reference"),
    (["bench", "--samplers", "powermh,foo"],
     "unknown --samplers 'foo'; choose one of powermh, entropycut, multitry, ppt, lowtemp, bestofn, powersmc, sps, "
     "resample-move"),
    (["bench", "--throughput-rule", "dfs"],
     "unknown --throughput-rule 'dfs'; choose one of bfs, predictive, spine, stream"),
])
def test_every_usage_error_is_one_exact_line(no_engine, args, line):
    assert cli_error(*args) == line


def test_a_bad_value_is_shown_never_interpreted(no_engine):
    line = cli_error("run", "x", "--sampler", "\x1b[2Jboom")
    assert "\x1b" not in line and line.startswith("unknown --sampler '") and "boom" in line


def test_no_arguments_print_the_help():
    res = runner.invoke(app, [])
    assert res.exit_code == 2 and "presto-tui: error" not in res.output
    assert "Usage: presto-tui [OPTIONS] COMMAND" in res.stdout and "fit-classifier" in res.stdout


# -- --help ------------------------------------------------------------------------------

COMMANDS = ["chat", "run", "replay", "stats", "bench", "eval", "fit-classifier", "lm-eval"]


def help_of(*command: str) -> str:
    res = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    return res.stdout


def flat(text: str) -> str:
    """Help text without the panels' borders and line breaks."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


@pytest.mark.parametrize("command", [[], *([c] for c in COMMANDS)])
def test_help_shows_no_types_for_flags_and_names_for_arguments(command):
    text = help_of(*command)
    assert "<bool>" not in text and "<list[" not in text
    assert not re.search(r"\{\w+(\|\w+)+\}", text)  # click's {a|b} choice sets (a template's {prompt} is text)
    assert "Show this message and exit." in text


@pytest.mark.parametrize("command,usage", [
    ("run", "presto-tui run [OPTIONS] [PROMPT]"), ("replay", "presto-tui replay [OPTIONS] TRACE..."),
    ("stats", "presto-tui stats [OPTIONS] TRACE..."),
    ("fit-classifier", "presto-tui fit-classifier [OPTIONS] TRACE..."), ("bench", "presto-tui bench [OPTIONS]"),
])
def test_usage_lines_name_the_arguments(command, usage):
    assert f"Usage: {usage} " in help_of(command)


@pytest.mark.parametrize("command", ["run", "bench"])
def test_literal_brackets_survive_in_help(command):
    text = flat(help_of(command))
    assert "pip install 'presto-tui[ray]'" in text
    assert "Power exponent: the target is p0^alpha, in (0, 1000] [default: 4]." in text
    assert "[default: sessions/<time>-<command>.jsonl]" in text


def test_examples_keep_their_indentation():
    for command, example in [("run", 'presto-tui run "What is 7 * 8?"'), ("bench", "presto-tui bench --limit 2"),
                             ("chat", "presto-tui chat --backend synthetic"),
                             ("replay", "presto-tui replay sessions/example.jsonl"),
                             ("stats", "presto-tui stats sessions/example.jsonl"),
                             ("fit-classifier", "presto-tui fit-classifier sessions/*.jsonl -o model.json")]:
        lines = [ln for ln in help_of(command).splitlines() if example in ln]
        assert lines and all(ln.startswith("   presto-tui") for ln in lines), (command, lines)


def test_help_lists_every_registered_name_with_its_help():
    text = flat(help_of("run"))
    for choices in (PrefetchRule, InputMode):
        for member in choices:
            assert f"{member.value} ({member.help})" in text
    for method in registry.methods():
        assert f"{method.name} ({method.help})" in text


def test_help_shows_each_parameters_own_default_and_range():
    from presto_tui.runtime.core.spec import LIMITS, number_text

    text = flat(help_of("run"))
    defaults = SamplerParams()
    for name in ("alpha", "max_new_tokens", "steps", "epsilon", "seed", "beta", "cut_mix", "tries"):
        assert f"{LIMITS[name].where} [default: {number_text(getattr(defaults, name))}]" in text, name


# -- bench: outputs checked first; progress and every column where nobody watches ---------------

@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs a /proc file system")
@pytest.mark.parametrize("args", [["bench", "-o", "/proc/presto-tui.json"],
                                  ["bench", "--trace", "/proc/presto-tui.jsonl"],
                                  ["run", "x", "--trace", "/proc/presto-tui.jsonl"]])
def test_an_unwritable_output_is_refused_before_any_engine(no_engine, args):
    """/proc takes no new files, even from root, whatever its permission bits say."""
    line = cli_error(*args)
    assert line.startswith(f"{args[-1]}: cannot write in /proc (")


def test_bench_prints_a_progress_line_per_session_when_stderr_is_not_a_terminal():
    res = runner.invoke(app, ["bench", "--limit", "2", "-n", "8", "-K", "4", "--budgets", "4", "--rules",
                              "spine,stream", "--throughput", "1,2", "--no-trace", "-o", "b.json", "--json"])
    assert res.exit_code == 0, res.output
    progress = [ln for ln in res.stderr.splitlines() if ln.startswith("bench: ")]
    total = 2 * 3 + 2 * 2 * 2  # 2 prompts x (seq, spine, stream), then 2 prompts x (seq, stream) at each of 2 levels
    # ... the time so far, the time left at the run's pace, and the sessions done of each row
    pattern = re.compile(rf"bench: (\d+)/{total} sessions, (.+?), \d+ s, about \d+ s left \| (.+)")
    matches = [pattern.fullmatch(ln) for ln in progress]
    assert all(matches) and [int(m.group(1)) for m in matches if m] == list(range(1, total + 1))
    assert [m.group(2) for m in matches if m][:3] == ["powermh seq, prompt 1/2", "powermh spine 4, prompt 1/2",
                                                     "powermh stream 4, prompt 1/2"]
    assert progress[-1].startswith(f"bench: {total}/{total} sessions, throughput powermh stream 4, 2 chain(s), ")
    assert [m.group(3) for m in matches if m][0] == \
        "powermh seq 1/2, powermh spine 4 0/2, powermh stream 4 0/2, throughput 0/8"
    assert progress[-1].endswith("| powermh seq 2/2, powermh spine 4 2/2, powermh stream 4 2/2, throughput 8/8")


def test_bench_tables_keep_every_column_in_a_pipe_at_a_narrow_width(tmp_path):
    env = {**os.environ, "COLUMNS": "62", "PRESTO_TUI_BACKEND": "synthetic"}
    proc = subprocess.run([sys.executable, "-m", "presto_tui", "bench", "--limit", "1", "-n", "8", "-K", "4",
                           "--budgets", "4", "--rules", "spine,stream", "--throughput", "1", "--no-trace",
                           "-o", str(tmp_path / "b.json")],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    header = next(ln for ln in proc.stdout.splitlines() if "sampler rule N" in ln)
    assert header.split() == ["sampler", "rule", "N", "tr/call", "ms/tr", "tr/s", "speedup", "+ext", "lim%", "s/prompt",
                              "est.", "tok", "waste", "req/use", "abort", "live", "1st", "s", "=seq"]
    main, _, paths = proc.stdout.partition("critical path:")
    rows = [ln.split() for ln in main.splitlines() if ln.lstrip().startswith("powermh ") and "limit" not in ln]
    assert len(rows) == 3 and all(row[-1] in ("yes", "NO") for row in rows[1:])
    # the critical path's table: every row whole, its numbers to the last cause
    rows = [ln.split() for ln in paths.splitlines() if ln.lstrip().startswith("powermh ")]
    from presto_tui.runtime.session.critpath import CAUSES

    # (sampler, rule, N where streamed; time, dep%; the causes; idle%, a population's: "-" for a chain)
    assert len(rows) == 3 and all(len(row) == 2 + (row[1] != "seq") + 2 + len(CAUSES) + 1 for row in rows)
    assert all(row[-1] == "-" for row in rows)
    assert "…" not in proc.stdout


def test_stats_tables_keep_every_column_in_a_pipe_at_a_narrow_width(tmp_path):
    env = {**os.environ, "COLUMNS": "62", "PRESTO_TUI_BACKEND": "synthetic"}
    run = [sys.executable, "-m", "presto_tui"]
    made = subprocess.run([*run, "run", "the cat", "-n", "8", "-K", "4", "--trace", "t.jsonl"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    assert made.returncode == 0, made.stderr
    proc = subprocess.run([*run, "stats", "t.jsonl"], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env=env)
    assert proc.returncode == 0, proc.stderr
    header = next(ln for ln in proc.stdout.splitlines() if " sampler " in ln and " prompt " in ln)
    assert header.split()[:5] == ["id", "prompt", "sampler", "α", "rule"] and header.split()[-1] == "lim%"
    assert "…" not in proc.stdout.split("pooled")[0]


# -- one registry of names ---------------------------------------------------------------------

@pytest.mark.parametrize("sampler", registry.names())
def test_every_registered_sampler_runs_from_the_command_line(sampler):
    res = runner.invoke(app, ["run", "the cat", "--sampler", sampler, "-n", "8", "-K", "3", "--json",
                              "--no-trace"])
    assert res.exit_code == 0, res.output
    assert f'"sampler":"{sampler}"' in res.stdout


@pytest.mark.parametrize("rule", list(PrefetchRule))
def test_node_inputs_are_taken_exactly_by_the_rules_the_registry_says(rule):
    params = SamplerParams(prefetch=rule.value, inputs=InputMode.NODE.value)
    if rule.node_inputs or not rule.presto:
        params.validate()
    else:
        with pytest.raises(ParamError, match=f"--prefetch {rule.value} needs --inputs decision"):
            params.validate()


def test_every_registered_sampler_has_its_family_or_its_driver():
    from helpers import small_backend

    from presto_tui.runtime.samplers.families import sampler_family
    from presto_tui.runtime.session.driver import SessionDriver

    for method in registry.methods():
        params = SamplerParams(sampler=method.name)
        if method.population:  # several chains in a session: its decision rule is its answer's chain's
            assert sampler_family(params).name in {m.method.name for m in method.members(params)}
            assert isinstance(method.driver(small_backend(), params, (1, 2)), SessionDriver)
        elif method.chain:
            assert sampler_family(params).name == method.name
        else:
            assert isinstance(method.driver(small_backend(), params, (1, 2)), SessionDriver)
