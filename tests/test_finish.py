"""What a researcher tripped on outside the app's screens: spans of eqs. 21-22, output paths, the
streaming rule's calls, help text, damaged traces, burn-in and thinning, every chain's draws."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from presto_tui.cli import app

runner = CliRunner()


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # commands write traces into ./sessions by default


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
