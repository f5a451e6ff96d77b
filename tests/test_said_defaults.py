"""What the help and the words promise is what runs: every command's `--help` default against the
parameters its sessions record, eval's one default budget, the method language's words for a
population's own parameters, the library's describe / repr / signatures, and the app's and the
frontier figure's labels (synthetic engine)."""

from __future__ import annotations

import json
import math
import pydoc
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

import presto_tui
from presto_tui.cli import app
from presto_tui.errors import InputError
from presto_tui.eval.runner import item_seed
from presto_tui.lmeval.requests import request_seed
from presto_tui.runtime.core.language import parse_method
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.core.spec import budget_text, sampler_table
from presto_tui.runtime.session.events import SessionStart
from presto_tui.runtime.session.runner import run_session

pytestmark = pytest.mark.usefixtures("in_tmp")
runner = CliRunner()
DOCS = Path(__file__).parent.parent / "docs"


def invoke(*args: str):
    res = runner.invoke(app, list(args))
    assert res.exit_code == 0, res.output
    return res


def recorded(path: str) -> list[dict]:
    """The parameters every session of a trace records."""
    out = []
    for line in Path(path).read_text().splitlines():
        rec = json.loads(line)
        if rec.get("type") == "session_start":
            out.append(rec["params"])
    assert out
    return out


# -- --help's defaults against what runs --------------------------------------------------------------

def help_defaults(command: str) -> dict[str, str]:
    """Each option's `[default: ...]` as `COMMAND --help` prints it (wide enough for one line each)."""
    text = runner.invoke(app, [command, "--help"], env={"COLUMNS": "1000"}).stdout
    out = {}
    for line in text.splitlines():
        m = re.match(r"^│ (--[a-z0-9-]+)", line)
        said = re.findall(r"\[default: ([^\]]*)\]", line)
        if m and said:
            out[m.group(1)] = said[-1]
    assert out, text
    return out


# defaults the help says in words, and what a recorded session holds for each
IN_WORDS = {
    "1/alpha": lambda p, name: p[name] == pytest.approx(1 / p["alpha"]),
    "n, one block": lambda p, name: p[name] == p["max_new_tokens"],
    "geometric": lambda p, name: p[name] is None,  # no ladder given: the geometric one between the exponents
    "n/8, the paper's 128 of 1024": lambda p, name: p[name] == p["max_new_tokens"] // 8,
    "400/1024 of n, the paper's 400 of 1024": lambda p, name: p[name] == round(p["max_new_tokens"] * 400 / 1024),
    "--sps-top-k": lambda p, name: p[name] in (None, p["sps_top_k"]),
    # one default for the budget, whatever the command: the streaming rule's auto, a round rule's 8
    "auto for stream, 8 for the round rules": lambda p, name: budget_text(p) == (
        "auto" if p["prefetch"] == "stream" else "8"),
}


def check_help_against(command: str, sessions: list[dict], derived: dict | None = None,
                       given: tuple[str, ...] = ()) -> set[str]:
    """Every sampler parameter's help default of `command` is what each session recorded (`derived`: the
    parameters a session runs a function of, as (session, default) -> the value it must hold; `given`: the
    flags the run gave, not checked); the flags checked."""
    said = help_defaults(command)
    checked = set()
    for p in sampler_table():
        flag = p.cli_flag
        if p.flag == "" or flag not in said or flag in given:
            continue
        text = said[flag]
        for s in sessions:
            if s[p.name] is None and not p.applies(s):  # (resolved only where its method reads it)
                continue
            if p.name in (derived or {}):
                (value,) = p.read(text).values()
                assert s[p.name] == derived[p.name](s, value), f"{command} {flag}: help says {text!r}"
                continue
            if text in IN_WORDS:
                assert IN_WORDS[text](s, p.name), f"{command} {flag}: help says {text!r}, a session ran {s[p.name]!r}"
                continue
            for name, value in p.read(text).items():  # (a default that is not in words reads as a flag's value)
                got = s[name]
                same = math.isclose(got, value) if isinstance(value, float) else got == value
                assert same, f"{command} {flag}: help says {text!r}, a session ran {got!r}"
        checked.add(flag)
    return checked


def test_runs_help_states_the_defaults_a_run_records():
    invoke("run", "the cat", "--trace", "r.jsonl", "--json")
    checked = check_help_against("run", recorded("r.jsonl"))
    assert {"--steps", "--max-new-tokens", "--budget", "--tau", "--block-size", "--particles"} <= checked


def test_evals_help_states_the_defaults_its_methods_run_with_the_budget_said_once():
    """eval ran powermh+stream at N=8 while --budget's help said "auto for stream"."""
    invoke("eval", "--methods", "powermh,powermh+stream,powermh+bfs", "--limit", "1", "--trace", "e.jsonl",
           "--figures", "none", "--json", "-o", "e.json")
    sessions = recorded("e.jsonl")
    assert {s["prefetch"] for s in sessions} == {"none", "stream", "bfs"}
    (item,) = json.loads(Path("e.json").read_text())["items"]
    # every session of an item on the seed derived from --seed and the item's id, as the help says
    checked = check_help_against("eval", sessions, {"seed": lambda s, seed: item_seed(seed, item["id"])})
    assert {"--budget", "--steps", "--max-new-tokens", "--seed"} <= checked
    rows = {m["label"]: m["params"] for m in json.loads(Path("e.json").read_text())["methods"]}
    assert budget_text(rows["powermh+stream"]) == "auto" and rows["powermh+bfs"]["budget"] == 8
    # a budget given is every rule's, as before
    invoke("eval", "--methods", "powermh+stream,powermh+bfs", "--limit", "1", "-N", "4", "-n", "8", "-K", "2",
           "--no-trace", "--figures", "none", "--json", "-o", "f.json")
    rows = {m["label"]: m["params"] for m in json.loads(Path("f.json").read_text())["methods"]}
    assert rows["powermh+stream"]["budget"] == rows["powermh+bfs"]["budget"] == 4


def test_benchs_help_states_the_defaults_it_runs():
    invoke("bench", "--limit", "1", "--rules", "stream", "--budgets", "8", "--throughput", "1", "--trace", "b.jsonl",
           "--json", "-o", "b.json")
    checked = check_help_against("bench", recorded("b.jsonl"))
    assert {"--steps", "--max-new-tokens", "--alpha"} <= checked


# -- the method language ------------------------------------------------------------------------------

def test_a_populations_count_after_a_colon_points_at_its_own_parameter():
    """`ppt:4` (read like `smc:4`) was refused with "write ppt+RULE:4", the prefetch budget."""
    with pytest.raises(InputError) as e:
        parse_method("ppt:4", SamplerParams())
    assert "write ppt:r=4" in str(e.value) and "ppt+RULE:4" in str(e.value)
    with pytest.raises(InputError, match="write rm:p=16"):
        parse_method("rm:16", SamplerParams())
    assert parse_method("ppt:r=4", SamplerParams()).params.pt_replicas == 4  # what it points at runs
    assert parse_method("rm:p=16", SamplerParams()).params.particles == 16
    text = " ".join(runner.invoke(app, ["eval", "--help"], env={"COLUMNS": "200"}).stdout.split())
    assert "ppt:r=4" in text and "rm+stream:p=16" in text  # the help shows a population's own parameters


# -- the library --------------------------------------------------------------------------------------

def test_a_method_describes_params_its_info_prints_what_it_holds_and_signatures_say_params():
    """`find_method("ppt").describe(Params(sampler="ppt"))` raised AttributeError; `summary.info`
    printed as `<...PptInfo object at 0x...>`; `help(presto_tui.sample)` showed `SamplerParams`."""
    for m in presto_tui.methods():
        params = presto_tui.Params(sampler=m.name)
        assert m.describe(params) == m.describe(params.to_dict())
    engine = presto_tui.Engine(backend="synthetic")
    [result] = presto_tui.sample(engine, "the cat", presto_tui.Params(sampler="ppt", max_new_tokens=8, steps=4))
    info = result.chains[0].summary.info
    shown = repr(info)
    assert shown.startswith("PptInfo(") and " object at 0x" not in shown
    assert "round_trips=" in shown and "ladder=" in shown
    for fn in (presto_tui.sample, presto_tui.stream, presto_tui.Session):
        doc = pydoc.render_doc(fn, renderer=pydoc.plaintext)
        assert "SamplerParams" not in doc and "Params | dict | None" in doc


# -- the app, the run header, the figure, the docs ---------------------------------------------------------

def test_a_session_stopped_before_it_chose_says_so_where_its_text_is_scored():
    """After Escape the answer pane read "no answer yet" while the stats panel showed the answer's
    log-likelihood."""
    from presto_tui.runtime.engines.synthetic import SyntheticEngine
    from presto_tui.views.state import baseline_text as bt
    from presto_tui.views.state.reducer import AppState

    b = SyntheticEngine()
    for sampler in ("ppt", "powersmc", "resample-move"):
        params = SamplerParams(sampler=sampler, max_new_tokens=16, block_size=4, steps=2, smc_block=4, seed=1)
        polls = iter(range(10**6))
        state = AppState()
        for ev in run_session(b, params, b.encode_prompt("the cat"), prompt="the cat",
                              cancel=lambda polls=polls: next(polls) >= 3):  # cancelled on its fourth engine step
            state.apply(ev)
        session = state.sessions[0]
        assert session.summary.status == "cancelled", sampler
        title = bt.answer_title(session)
        stats = bt.stats_text(session).plain
        assert "no answer yet" not in title and "no answer yet" not in stats, sampler
        assert title.startswith("cancelled before it chose an answer"), title
        if session.summary.answer_loglik is not None:  # what the panel scores is the text the pane shows
            assert "its text's log-lik" in stats and "answer log-lik" not in stats, stats
    # a session that runs on says no answer yet; one that ends says its answer
    state = AppState()
    for ev in run_session(b, SamplerParams(sampler="powersmc", max_new_tokens=8, smc_block=4), b.encode_prompt("a"),
                          prompt="a"):
        state.apply(ev)
        if isinstance(ev, SessionStart):
            assert "no answer yet" in bt.answer_title(state.sessions[0])
    assert bt.answer_title(state.sessions[0]).startswith("the answer")


async def test_resample_moves_particles_field_names_it():
    """resample-move's settings field read "particles P (PowerSMC)"."""
    from presto_tui.runtime.session.chat import ChatSession
    from presto_tui.views.app import chat_app
    from presto_tui.views.dialogs.settings import SettingsScreen

    session = ChatSession(engine_factory=lambda model: None)
    chat = chat_app(session, SamplerParams(sampler="resample-move"), backend="synthetic", model=None)
    async with chat.run_test(size=(120, 40)) as pilot:
        await pilot.press("ctrl+s")
        await pilot.pause()
        dialog = chat.screen
        assert isinstance(dialog, SettingsScreen)
        row = dialog.query_one("#row-particles")
        assert row.display
        assert "resample-move" in str(row.children[0].render())


def test_resample_moves_header_says_its_block_once():
    """`run --sampler resample-move -B 4` printed "...P=8 B=4 ESS<0.5P, ... K=2, B=4"."""
    out = invoke("run", "the cat", "--sampler", "resample-move", "-n", "16", "-B", "4", "-K", "2", "--no-trace").stdout
    (header,) = [ln for ln in out.splitlines() if "resample-move P=" in ln]
    assert header.count("B=4") == 1 and "K=2" in header


def test_the_frontier_figures_title_is_whole():
    """The frontier PNG's title was cut at the figure's edge ("synthetic-v3-o2-s0-x1-noe")."""
    pytest.importorskip("matplotlib")
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from presto_tui.eval.frontier_report import figure

    point = {"label": "bon@2", "group": "bon", "tokens_per_prompt": 6.0, "time_per_prompt_s": 0.03, "tv": 0.006,
             "tv_low": 0.005, "tv_high": 0.007, "tv_floor": 0.008}
    res = {"backend": "synthetic", "model": "synthetic-v3-o2-s0-x1-noeos", "axis": "tokens", "measures": ["tv"],
           "points": [point], "fronts": {"tv": {"bon": ["bon@2"]}}, "joint_front": {"tv": ["bon@2"]},
           "virtual_clock": True}
    fig = figure(res)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    for ax in fig.axes:
        box = ax.title.get_window_extent(canvas.get_renderer())
        assert box.x0 >= 0 and box.x1 <= fig.bbox.x1, ax.get_title()
        assert "synthetic-v3-o2-s0-x1-noeos" in ax.get_title()


def test_the_docs_say_the_json_stats_writes_for_one_shot_sessions():
    """docs/commands.md still described `"baseline": true, "rule": "baseline"`."""
    invoke("run", "the cat", "--sampler", "bestofn", "-n", "8", "--trace", "o.jsonl", "--json")
    row = json.loads(invoke("stats", "o.jsonl", "--json").stdout)["sessions"][0]
    doc = (DOCS / "commands.md").read_text()
    said = dict(re.findall(r'`"(one_shot|baseline|rule)": ([^`]+)`', doc))
    assert said, "docs/commands.md says nothing of a one-shot session's JSON"
    for key, value in said.items():
        assert key in row and json.loads(value) == row[key], (key, value, row.get(key))


def test_lm_evals_help_states_the_defaults_its_requests_run():
    pytest.importorskip("lm_eval")
    folder = Path("tasks")
    folder.mkdir()
    (folder / "words.jsonl").write_text("".join(json.dumps({"text": t, "answer": "x"}) + "\n"
                                               for t in ("the cat sat on", "a dog ran")))
    (folder / "words.yaml").write_text(
        f"task: words\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {folder.resolve()}/words.jsonl\n"
        "test_split: test\noutput_type: generate_until\ndoc_to_text: \"{{text}}\"\ndoc_to_target: \"{{answer}}\"\n"
        "generation_kwargs:\n  until: [\" ,\"]\n  max_gen_toks: 8\n  do_sample: false\n"
        "metric_list:\n  - metric: exact_match\n    aggregation: mean\n    higher_is_better: true\n")
    invoke("lm-eval", "--tasks", "words", "--include-path", str(folder), "--methods", "powermh+stream,powermh+bfs",
           "-K", "2", "--trace", "l.jsonl", "--output", "l.json")
    words = {"each request's max_gen_toks, as its task sets it; 96 where it sets none": lambda p, name: p[name] == 8}
    IN_WORDS.update(words)
    # every request on the seed derived from --seed and its context, as the help says
    starts = [json.loads(ln) for ln in Path("l.jsonl").read_text().splitlines() if '"session_start"' in ln]
    sessions = [s["params"] | {"_context": s["prompt"]} for s in starts]
    try:
        checked = check_help_against("lm-eval", sessions, given=("--steps",),
                                     derived={"seed": lambda s, seed: request_seed(seed, s["_context"], 0)})
    finally:
        for k in words:
            del IN_WORDS[k]
    assert {"--budget", "--max-new-tokens", "--seed"} <= checked
