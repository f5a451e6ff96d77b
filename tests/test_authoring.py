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
from pathlib import Path

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
