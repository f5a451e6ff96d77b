"""A method from another package: the example plugin (examples/plugin/, independent Metropolis-Hastings),
installed with pip as a user would, is a method like the built-in ones everywhere.

The package is installed once into a folder of its own (`pip install --target`); the commands run as
child processes with that folder on their path (their registry finds the plugin through its entry
point), and the in-process checks (the settings dialog, the law-test kit) put the folder on
`sys.path` and reload the registry.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from presto_tui.runtime.core import registry

PLUGIN = Path(__file__).resolve().parents[1] / "examples" / "plugin"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The example plugins (the IMH chain, the MBR selection), installed with pip into a folder of their own,
    as the docs say (`pip install --no-deps --target DIR ./examples/...`)."""
    target = tmp_path_factory.mktemp("plugin")
    for folder, package in (("plugin", "presto_tui_imh"), ("plugin-mbr", "presto_tui_mbr")):
        # Built from a copy: the test workers each install it, and setuptools builds in the source tree
        # (build/, *.egg-info), so two builds of one tree race and one wheel can come out empty.
        source = tmp_path_factory.mktemp("plugin-source") / folder
        shutil.copytree(PLUGIN.parent / folder, source, ignore=shutil.ignore_patterns("build", "*.egg-info",
                                                                                      "__pycache__"))
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                        "--disable-pip-version-check", "--target", str(target), str(source)], check=True,
                       capture_output=True)
        assert (target / package).is_dir()
    return target


@pytest.fixture
def loaded(installed, monkeypatch):
    """The plugin on this process's path and in its registry (gone again after the test)."""
    monkeypatch.syspath_prepend(str(installed))
    registry.reload()
    yield registry.find("imh")
    monkeypatch.undo()
    sys.modules.pop("presto_tui_imh", None)
    registry.reload()


def presto(installed: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(installed), os.environ.get("PYTHONPATH", "")]),
           "PRESTO_TUI_BACKEND": "synthetic", "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "presto_tui", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=300)


def test_without_the_plugin_there_is_no_such_method():
    assert registry.find("imh") is None


def test_its_method_is_in_sampler_help_and_runs(installed, tmp_path):
    help_text = " ".join(presto(installed, "run", "--help").stdout.replace("│", " ").split())
    assert "imh (every proposal a whole response from q_tau (an example plugin))" in help_text
    res = presto(installed, "run", "the cat", "--sampler", "imh", "-n", "8", "-K", "6", "--json",
                 "--trace", "t.jsonl", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["params"]["sampler"] == "imh" and out["transitions"] == 6
    stats = presto(installed, "stats", "t.jsonl", cwd=tmp_path)  # stats of its trace: a chain method's row
    assert stats.returncode == 0, stats.stderr
    assert "independent MH" in stats.stdout and "stream" in stats.stdout
    as_json = json.loads(presto(installed, "stats", "t.jsonl", "--json", cwd=tmp_path).stdout)
    assert as_json["sessions"][0]["sampler"] == "imh" and as_json["sessions"][0]["transitions"] == 6


async def test_replay_shows_its_trace_and_without_the_plugin_says_so(installed, loaded, tmp_path, monkeypatch):
    from helpers import text_of, wait_until
    from test_baseline_views import rendered

    from presto_tui.logs.reader import read_trace
    from presto_tui.views.app import replay_app

    res = presto(installed, "run", "the cat", "--sampler", "imh", "-n", "8", "-K", "4", "--trace", "t.jsonl",
                 cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    app = replay_app(read_trace(tmp_path / "t.jsonl"))
    async with app.run_test(size=(120, 34)) as pilot:
        await wait_until(pilot, lambda: app.screen.state.sessions and app.screen.state.sessions[0].rounds)
        await wait_until(pilot, lambda: "transitions 1/4" in text_of(app, "#stats"))  # its chain's rounds, drawn
        await pilot.press("f1")  # the help lists it among the MH chains
        await wait_until(pilot, lambda: "imh independent MH: every proposal" in
                         " ".join(rendered(app, "#help-text").split()))
    with monkeypatch.context() as m:  # as if the plugin were not installed: its generic records still read
        m.setattr(registry, "entry_points", lambda **kw: [])
        registry.reload()
        trace = read_trace(tmp_path / "t.jsonl")
        assert trace.sessions[0].summary().transitions == 4
    registry.reload()
    (note,) = [w for w in trace.warnings if "'imh'" in w]
    assert "not installed here" in note and "install the package" in note


def test_eval_and_the_frontier_take_it(installed, tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"prompt": q, "answer": a, "grader": "regex"}) + "\n"
                             for q, a in [("the cat", "cat|dog"), ("a dog ran", "sat")]))
    res = presto(installed, "eval", str(tasks), "--methods", "imh,imh+stream,powermh", "-n", "8", "-K", "4",
                 "--json", "--no-trace", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert {m["label"] for m in json.loads(res.stdout)["methods"]} >= {"imh", "imh+stream"}
    front = presto(installed, "eval", "--synthetic-vocab", "3", "--synthetic-sharpness", "1", "-n", "3", "--limit",
                   "1", "--frontier", "imh@2,4; imh+stream@2,4; lowtemp", "--frontier-seeds", "20", "--json",
                   "--no-trace", cwd=tmp_path)
    assert front.returncode == 0, front.stderr
    rows = json.loads(front.stdout)["points"]
    assert {r["label"] for r in rows} >= {"imh@2", "imh@4", "imh+stream@4"}
    assert all(r["tv"] is not None for r in rows if r["group"].startswith("imh"))


def test_the_server_schema_and_requests_take_it(installed, tmp_path):
    import urllib.request

    env = {**os.environ, "PYTHONPATH": str(installed), "PRESTO_TUI_BACKEND": "synthetic"}
    proc = subprocess.Popen([sys.executable, "-m", "presto_tui", "serve", "--port", "0", "--no-trace"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=tmp_path)
    try:
        url = None
        for line in proc.stdout:  # type: ignore[union-attr]
            if "http://" in line:
                url = line[line.index("http://"):].split()[0].rstrip(",").removesuffix("/v1")
                break
        assert url is not None
        schema = json.load(urllib.request.urlopen(f"{url}/openapi.json", timeout=30))
        text = json.dumps(schema)
        assert '"imh"' in text
        body = json.dumps({"prompt": "the cat", "sampler": "imh", "max_tokens": 8, "steps": 4}).encode()
        req = urllib.request.Request(f"{url}/v1/completions", body, {"Content-Type": "application/json"})
        answer = json.load(urllib.request.urlopen(req, timeout=60))
        assert answer["choices"][0]["text"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


async def test_the_settings_dialog_offers_it(loaded):
    from test_app import SlowBackend, make_chat

    assert loaded is not None and loaded.display == "independent MH"
    app, _ = make_chat(SlowBackend())
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.press("ctrl+s")
        await pilot.pause()
        note = str(app.screen.query_one("#settings-note").render())
        assert "imh" in note.split("one-shot")[0]  # among the MH chains
        app.screen.query_one("#f-sampler").value = "imh"
        await pilot.pause()
        assert app.screen.query_one("#row-steps").display  # a chain method: K applies
        await pilot.click("#save")
        await pilot.pause()
        assert app.screen.params.sampler == "imh"


def test_the_selection_plugin_runs_and_reads_everywhere(installed, tmp_path):
    """The MBR example, a one-shot method that is its selection alone: run with its own flag, stats of its
    trace, eval's methods and frontier along its budget axis."""
    res = presto(installed, "run", "the cat", "--sampler", "mbr", "--mbr-samples", "3", "-n", "8", "--json",
                 "--trace", "t.jsonl", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["params"]["mbr_samples"] == 3 and out["samples"] == 3 and "F1" in out["choice"]
    stats = presto(installed, "stats", "t.jsonl", cwd=tmp_path)
    assert stats.returncode == 0 and "one-shot sessions" in stats.stdout and "MBR N=3" in stats.stdout
    front = presto(installed, "eval", "--synthetic-vocab", "3", "--synthetic-sharpness", "1", "-n", "3", "--limit",
                   "1", "--frontier", "mbr@1,4; lowtemp", "--frontier-seeds", "20", "--json", "--no-trace",
                   cwd=tmp_path)
    assert front.returncode == 0, front.stderr
    assert {r["label"] for r in json.loads(front.stdout)["points"]} >= {"mbr@1", "mbr@4"}
    listed = presto(installed, "methods", "--json")
    rows = {m["name"]: m for m in json.loads(listed.stdout)["methods"]}
    assert rows["mbr"]["origin"] == "presto-tui-mbr 0.1.0" and rows["imh"]["origin"] == "presto-tui-imh 0.1.0"


def test_a_broken_plugin_is_left_out_with_one_line_saying_why(tmp_path, monkeypatch):
    """A plugin whose method cannot load (here: it declares a parameter the core owns) costs only
    itself: every other method works, and `problems()` says which plugin and why."""
    pkg = tmp_path / "broken_plugin"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        "from presto_tui.plugin import ChainMethod, Group, Param\n"
        "class Broken(ChainMethod):\n"
        "    name, display, help = 'broken', 'broken', 'declares alpha again'\n"
        "    params = (Param('alpha', float, 1.0, 'x', Group.OWN, 'alpha'),)\n"
        "METHOD = Broken()\n")
    dist = tmp_path / "broken_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[presto_tui.methods]\nbroken = broken_plugin:METHOD\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry.reload()
    try:
        assert registry.find("broken") is None and registry.find("powermh") is not None
        (line,) = registry.problems()
        assert "'broken'" in line and "alpha" in line and "declared already" in line
    finally:
        monkeypatch.undo()
        registry.reload()
