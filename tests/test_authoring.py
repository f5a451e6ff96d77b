"""A method author's kit (docs/extending.md): one validation path for every parameter, a plugin that
fails to load named where it is asked for, `presto-tui methods`, the public surface.

Fast: the synthetic engine, small methods registered in this process (`registry.register`)."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest

import presto_tui
from presto_tui.plugin import ChainMethod, Group, Limit, Param, ParamError, PowerMHFamily, SamplerParams
from presto_tui.runtime.core import registry


class TailMH(ChainMethod):
    """A chain method with a whole-number parameter of its own (what a plugin declares)."""

    name, display, help = "tailmh", "tail MH", "PowerMH whose own parameter is a whole number"
    params = (Param("tail_length", int, 4, "Tokens of the tail", Group.OWN, "tail length",
                    limit=Limit(1, math.inf, integer=True), symbol="L"),)

    def family(self, params: SamplerParams) -> PowerMHFamily:
        return PowerMHFamily(params.alpha, params.proposal_tau, params.epsilon)


@pytest.fixture
def tailmh():
    yield registry.register(TailMH())
    registry.reload()


# -- validation: every whole-number parameter refuses what is not one, naming the field -----------

@pytest.mark.parametrize("values, field", [
    (dict(steps=2.5), "steps"), (dict(steps="x"), "steps"), (dict(steps=True), "steps"),
    (dict(sampler="bestofn", samples=2.5), "samples"), (dict(max_new_tokens=8.5), "max_new_tokens"),
    (dict(alpha="x"), "alpha"), (dict(sampler=3), "sampler"),
])
def test_params_refuse_a_value_of_the_wrong_kind_naming_the_field(values, field):
    with pytest.raises(ParamError) as err:
        presto_tui.Params(**values)
    assert err.value.param == field and str(err.value).startswith(f"{field} must be ")
    assert "\n" not in str(err.value)


def test_a_plugins_whole_number_parameter_is_checked_as_a_built_in_one(tailmh):
    for bad in (2.5, "x"):
        with pytest.raises(ParamError, match=r"^tail_length must be a whole number >= 1, got "):
            presto_tui.Params(sampler="tailmh", tail_length=bad)
    assert presto_tui.Params(sampler="tailmh", tail_length=3.0).tail_length == 3  # a whole float, as JSON has it
    assert presto_tui.Params(steps=3.0).steps == 3 and isinstance(presto_tui.Params(steps=3.0).steps, int)


def test_every_limit_prints():
    assert str(Limit(1, math.inf, integer=True)) == "[1, inf]"
    assert Limit(1, math.inf, integer=True).where == ">= 1"
    assert str(Limit(0, 1, lo_open=True)) == "(0, 1]" and str(Limit(1, 2**63 - 1, integer=True)) == "[1, 2^63-1]"


# -- a plugin that fails to load is named wherever its method is asked for ----------------------

BROKEN = "from presto_tui.plugin import ChainMethod\n\nclass Broken(ChainMethod)\n    name = 'imh'\n"
PROBLEM = re.compile(r"plugin method 'imh' of broken-plugin 0\.3 \(entry point broken_plugin:METHOD\) failed to "
                     r"load: SyntaxError: expected ':' at .*broken_plugin[/\\]__init__\.py:3$")


def broken_plugin(root: Path) -> Path:
    """A package with a syntax error at its line 3, registered as method `imh` through its entry point
    (installed as pip would: the package and its dist-info side by side)."""
    (root / "broken_plugin").mkdir(parents=True)
    (root / "broken_plugin" / "__init__.py").write_text(BROKEN)
    dist = root / "broken_plugin-0.3.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 0.3\n")
    (dist / "entry_points.txt").write_text("[presto_tui.methods]\nimh = broken_plugin:METHOD\n")
    return root


@pytest.fixture
def broken(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(broken_plugin(tmp_path / "site")))
    registry.reload()
    yield tmp_path / "site"
    monkeypatch.undo()
    sys.modules.pop("broken_plugin", None)
    registry.reload()


def test_a_plugin_that_fails_to_load_is_named_by_package_entry_point_exception_and_line(broken):
    (line,) = registry.problems()
    assert PROBLEM.match(line), line
    assert registry.find("imh") is None and registry.find("powermh") is not None
    with pytest.raises(ParamError) as err:  # the API's Params, as run, chat and serve read --sampler
        presto_tui.Params(sampler="imh")
    assert PROBLEM.search(str(err.value)) and str(err.value).startswith("sampler: ")
    from presto_tui.api.params import parse_method

    with pytest.raises(presto_tui.InputError) as err:  # eval's --methods and --frontier
        parse_method("imh+stream:4", SamplerParams())
    assert str(err.value).startswith("--methods: ") and PROBLEM.search(str(err.value))
    (problem,) = presto_tui.method_catalog().problems
    assert (problem.package, problem.version, problem.entry_point) == ("broken-plugin", "0.3", "imh")
    assert problem.where is not None and problem.where.endswith("__init__.py:3")


def test_a_plugin_whose_method_breaks_a_rule_points_at_its_class(tmp_path, monkeypatch):
    root = broken_plugin(tmp_path / "site")
    (root / "broken_plugin" / "__init__.py").write_text(
        "from presto_tui.plugin import ChainMethod, Group, Param\n\n\n"
        "class Broken(ChainMethod):\n"
        "    name, display, help = 'imh', 'broken', 'declares alpha again'\n"
        "    params = (Param('alpha', float, 1.0, 'x', Group.OWN, 'alpha'),)\n\n\n"
        "METHOD = Broken()\n")
    monkeypatch.syspath_prepend(str(root))
    registry.reload()
    try:
        (line,) = registry.problems()
        assert "ValueError: method 'imh': parameter 'alpha' is declared already" in line
        assert line.endswith("__init__.py:4")  # the class
    finally:
        monkeypatch.undo()
        sys.modules.pop("broken_plugin", None)
        registry.reload()


def test_every_command_names_the_broken_plugin(broken, in_tmp):
    from typer.testing import CliRunner

    from presto_tui.cli import app

    for args in (["run", "the cat", "--sampler", "imh"], ["chat", "--sampler", "imh"],
                 ["serve", "--sampler", "imh", "--no-trace"], ["eval", "--methods", "imh,powermh"],
                 ["eval", "--frontier", "imh@2,4", "--synthetic-vocab", "3", "-n", "2"]):
        res = CliRunner().invoke(app, args)
        assert res.exit_code == 2, (args, res.output)
        (last,) = [ln for ln in res.output.splitlines() if ln.startswith("presto-tui: error:")]
        assert PROBLEM.search(last), (args, last)


def test_methods_lists_every_method_and_the_load_problems(broken):
    from typer.testing import CliRunner

    from presto_tui.cli import app

    out = CliRunner().invoke(app, ["methods", "--json"])
    assert out.exit_code == 1, out.output  # a plugin failed to load
    data = json.loads(out.stdout)
    rows = {m["name"]: m for m in data["methods"]}
    assert rows["bestofn"]["kind"] == "one-shot" and rows["bestofn"]["axis"] == "N (samples)"
    assert rows["powermh"]["origin"] == "built-in" and "samples" in rows["bestofn"]["params"]
    assert PROBLEM.match(data["problems"][0]["line"])
    lines = CliRunner().invoke(app, ["methods"]).stdout.splitlines()
    assert lines[0].split() == ["name", "kind", "budget", "own", "parameters", "from"]
    assert lines[1].split() == ["powermh", "chain", "K", "(steps)", "-", "built-in"]
    assert lines[-1].startswith("left out: ") and PROBLEM.search(lines[-1])


def test_run_help_names_the_broken_plugin(broken):
    """--help is made when the command line loads: a fresh process, with the plugin on its path."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(broken), os.environ.get("PYTHONPATH", "")]),
           "COLUMNS": "250"}
    helped = " ".join(subprocess.run([sys.executable, "-m", "presto_tui", "run", "--help"], capture_output=True,
                                     text=True, env=env, timeout=120).stdout.replace("│", " ").split())
    assert "plugin method 'imh' of broken-plugin 0.3 (entry point broken_plugin:METHOD) failed to load" in helped


def test_a_plugins_origin_is_its_package_and_version(tmp_path, monkeypatch):
    root = broken_plugin(tmp_path / "site")
    (root / "broken_plugin" / "__init__.py").write_text(
        "from presto_tui.plugin import ChainMethod, PowerMHFamily\n\n\n"
        "class Fine(ChainMethod):\n"
        "    name, display, help = 'imh', 'fine', 'loads'\n\n"
        "    def family(self, params):\n"
        "        return PowerMHFamily(params.alpha, params.proposal_tau, params.epsilon)\n\n\n"
        "METHOD = Fine()\n")
    monkeypatch.syspath_prepend(str(root))
    registry.reload()
    try:
        rows = {m.name: m for m in presto_tui.method_catalog().methods}
        assert rows["imh"].origin == "broken-plugin 0.3" and rows["imh"].kind == "chain"
        assert presto_tui.method_catalog().problems == ()
    finally:
        monkeypatch.undo()
        sys.modules.pop("broken_plugin", None)
        registry.reload()


# -- a trace of a method not installed here reads as far as the generic records go -------------

def recorded_without_its_method(tmp_path: Path, method, params: SamplerParams) -> Path:
    """A trace of `method` (registered for the run), with one record of the method's own added, read back
    once the method is gone (as on a machine without its plugin)."""
    registry.register(method)
    try:
        engine = presto_tui.Engine(backend="synthetic")
        presto_tui.sample(engine, "the cat", presto_tui.Params(**{**params.to_dict(), "sampler": method.name}),
                          trace=tmp_path / "t.jsonl")
    finally:
        registry.reload()
    lines = (tmp_path / "t.jsonl").read_text().splitlines()
    sid = json.loads(lines[2])["session_id"]
    lines.insert(4, json.dumps({"type": f"{method.name}_own", "sid": sid, "anything": [1, 2]}))
    (tmp_path / "t.jsonl").write_text("\n".join(lines) + "\n")
    return tmp_path / "t.jsonl"


class IMHLike(TailMH):
    name = "imh"


def test_a_trace_of_a_chain_method_not_installed_here_shows_its_transitions_and_answer(tmp_path):
    from typer.testing import CliRunner

    from presto_tui.cli import app
    from presto_tui.logs.reader import read_trace

    path = recorded_without_its_method(tmp_path, TailMH(), SamplerParams(steps=4, max_new_tokens=8))
    assert registry.installed("tailmh") is None
    trace = read_trace(path)
    (note,) = [w for w in trace.warnings if "tailmh" in w]
    assert "method 'tailmh' is not installed here" in note and "1 line(s) of its own records were skipped" in note
    assert "install the package that registers 'tailmh'" in note
    (session,) = trace.sessions
    summary = session.summary()
    assert summary.transitions == 4 and len(summary.tokens) == 8 and session.rounds
    data = presto_tui.read_trace(path)
    assert len(data.transitions) == 4 and data.warnings == trace.warnings
    res = CliRunner().invoke(app, ["stats", str(path), "--json"])
    assert res.exit_code == 0, res.output
    row = json.loads(res.stdout)["sessions"][0]
    assert row["sampler"] == "tailmh" and row["transitions"] == 4
    with pytest.raises(ParamError, match="'tailmh' is not installed here"):  # it reads, but does not run
        presto_tui.sample(presto_tui.Engine(backend="synthetic"), "x", SamplerParams(sampler="tailmh"))
    registry.reload()


def test_a_trace_of_a_one_shot_method_not_installed_here_shows_its_samples_and_answer(tmp_path, in_tmp):
    from typer.testing import CliRunner

    from presto_tui.cli import app
    from presto_tui.logs.reader import read_trace

    engine = presto_tui.Engine(backend="synthetic")
    presto_tui.sample(engine, "the cat", presto_tui.Params(sampler="bestofn", samples=3, max_new_tokens=8),
                      trace=tmp_path / "b.jsonl")
    path = tmp_path / "t.jsonl"
    path.write_text((tmp_path / "b.jsonl").read_text().replace('"sampler":"bestofn"', '"sampler":"mybest"'))
    trace = read_trace(path)
    assert any("method 'mybest' is not installed here" in w for w in trace.warnings)
    assert registry.find("mybest").kind is presto_tui.MethodKind.ONE_SHOT  # told by its records
    summary = trace.sessions[0].summary()
    assert len(summary.tokens) == 8
    res = CliRunner().invoke(app, ["stats", str(path)])
    assert res.exit_code == 0 and "one-shot sessions" in res.stdout and "mybest" in res.stdout
    registry.reload()


def test_stats_of_a_trace_whose_plugin_fails_to_load_reads_it_and_names_the_problem(tmp_path, broken):
    from typer.testing import CliRunner

    from presto_tui.cli import app

    path = recorded_without_its_method(tmp_path, IMHLike(), SamplerParams(steps=3, max_new_tokens=6))
    res = CliRunner().invoke(app, ["stats", str(path), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["sessions"][0]["transitions"] == 3
    (note,) = [ln for ln in res.stderr.splitlines() if "not installed here" in ln]
    assert PROBLEM.search(note), note


async def test_replay_draws_the_rounds_of_a_method_not_installed_here(tmp_path):
    from helpers import text_of, wait_until

    from presto_tui.logs.reader import read_trace
    from presto_tui.views.app import replay_app

    path = recorded_without_its_method(tmp_path, TailMH(), SamplerParams(steps=4, max_new_tokens=8))
    app = replay_app(read_trace(path))
    async with app.run_test(size=(120, 34)) as pilot:
        await wait_until(pilot, lambda: app.screen.state.sessions and app.screen.state.sessions[0].rounds)
        await wait_until(pilot, lambda: re.search(r"transitions \d/4", text_of(app, "#stats")))  # its rounds, drawn
    registry.reload()


# -- exact by construction: a family proposing at a temperature of its own ---------------------

@dataclass(frozen=True)
class AtOne(PowerMHFamily):
    """Proposes every suffix from p0 itself (tau = 1), whatever the run's --tau."""

    name: ClassVar[str] = "atone"


class TauOne(ChainMethod):
    display, help = "tau one", "a family proposing at temperature 1"

    def __init__(self, name: str, scored: bool) -> None:
        self.name, self.scored = name, scored  # type: ignore[misc]

    def family(self, params: SamplerParams) -> AtOne:
        return AtOne(params.alpha, 1.0, params.epsilon, score_taus=(1.0,) if self.scored else ())


@pytest.fixture
def tau_one():
    yield registry.register(TauOne("tauone", scored=True)), registry.register(TauOne("tauone-raw", scored=False))
    registry.reload()


def test_a_family_proposing_at_its_own_temperature_is_refused_unless_states_are_scored_at_it(tau_one):
    with pytest.raises(ParamError) as err:
        presto_tui.Params(sampler="tauone-raw")
    assert str(err.value).startswith("sampler tauone-raw is not exact as written: its family proposes at "
                                     "temperature 1 but a state's log q is q_tau's at tau 0.25")
    assert presto_tui.Params(sampler="tauone-raw", tau=1.0).tau == 1.0  # at the run's own temperature: exact
    assert presto_tui.Params(sampler="tauone").sampler == "tauone"


def test_a_family_scored_at_the_temperature_it_proposes_at_is_exact(tau_one):
    from presto_tui import testing

    params = SamplerParams(sampler="tauone", max_new_tokens=3, steps=4, prefetch="none")
    assert "within noise" in str(testing.check_invariance(params, chains=1000))
    testing.check_coupling(params.with_(max_new_tokens=6, steps=6), rules=("stream", "spine"), budgets=(4,))


def test_without_the_refusal_only_the_invariance_check_would_see_it(tau_one, monkeypatch):
    """What the refusal guards against: the same family scored against the state's log q_tau leaves
    another law than pi_alpha invariant, which the kit's invariance check sees (PIT and coupling cannot)."""
    from presto_tui import testing

    monkeypatch.setattr(ChainMethod, "check_exact", lambda self, params, naming: None)
    params = SamplerParams(sampler="tauone-raw", max_new_tokens=3, steps=4, prefetch="none")
    with pytest.raises(AssertionError, match="does not leave pi_alpha invariant"):
        testing.check_invariance(params, chains=1000)
    testing.check_coupling(params.with_(max_new_tokens=6, steps=6), rules=("stream",), budgets=(4,))


# -- help and docs list the methods of the registry ------------------------------------------------

def test_methods_help_and_the_frontier_help_list_every_method_and_take_a_ladder(tailmh):
    from presto_tui.api.params import frontier_axes, methods_help, parse_methods

    text, axes = methods_help(), frontier_axes()
    for m in registry.methods():
        word = min((m.name, *m.aliases), key=len)
        assert word in text and (m.axis is None or word in axes), m.name
    assert ":SYMBOL=VALUE" in text
    specs = parse_methods("ppt:pt_ladder=1,2,4,powermh,tailmh:l=3, bon:4", SamplerParams())
    assert [s.label for s in specs] == ["ppt:pt_ladder=1,2,4", "powermh", "tailmh:l=3", "bon:4"]
    assert specs[0].params.pt_ladder == "1,2,4" and specs[2].params.tail_length == 3


def test_settings_written_before_the_rule_are_answered_with_the_order_that_reads(tailmh):
    """`tailmh:l=2+bfs:4` is what an author writes first; the error shows the spelling that works."""
    from presto_tui.api.params import parse_methods
    from presto_tui.errors import InputError

    with pytest.raises(InputError) as e:
        parse_methods("tailmh:l=2+bfs:4", SamplerParams())
    assert "its :SYMBOL=VALUE settings come last (tailmh+bfs:4:l=2)" in str(e.value)
    assert parse_methods("tailmh+bfs:4:l=2", SamplerParams())[0].params.tail_length == 2
    with pytest.raises(InputError) as e:  # nothing to reorder: no hint
        parse_methods("tailmh+bfs:x", SamplerParams())
    assert "come last" not in str(e.value)


def test_every_class_an_author_imports_says_what_it_is():
    """help() and the API reference render these docstrings: a protocol without its own shows typing's
    "Base class for protocol classes", which tells an author nothing about `reverse_term` or a cut's range."""
    import inspect

    import presto_tui.plugin as plugin

    bare = [name for name in plugin.__all__ if inspect.isclass(getattr(plugin, name))
            and not (getattr(plugin, name).__dict__.get("__doc__") or "").strip()]
    assert not bare, bare
    for field in ("logq", "logp", "loglik", "confidence"):
        assert f"`{field}`" in (plugin.Sample.__doc__ or ""), field


def test_the_commands_page_names_every_built_in_method():
    text = (Path(__file__).resolve().parents[1] / "docs" / "commands.md").read_text()
    sampler_row = next(line for line in text.splitlines() if line.startswith("| `--sampler` |"))
    for m in registry.methods():
        assert f"`{m.name}`" in sampler_row, m.name
    assert "`...:SYMBOL=VALUE`" in text and "presto-tui methods" in text


def test_debug_adds_the_plugins_traceback(broken, in_tmp):
    from typer.testing import CliRunner

    from presto_tui.cli import app

    res = CliRunner().invoke(app, ["--debug", "run", "the cat", "--sampler", "imh"])
    assert res.exit_code == 2 and "class Broken(ChainMethod)" in res.output and "SyntaxError" in res.output
    quiet = CliRunner().invoke(app, ["run", "the cat", "--sampler", "imh"])
    assert "class Broken(ChainMethod)" not in quiet.output
