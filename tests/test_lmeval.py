"""lm-evaluation-harness drives presto-tui: a local task (a JSONL dataset and a task YAML written
here, nothing downloaded) run through `presto-tui lm-eval`, through lm-eval's own API with the
model registered, and the requests' stop strings, lengths and seeds on the synthetic model."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers import error_line
from typer.testing import CliRunner

from presto_tui.cli import app
from presto_tui.errors import InputError
from presto_tui.lmeval.requests import ask_params, occurrences, read_ask, request_seed
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.core.types import cut_at_stop
from presto_tui.runtime.engines.synthetic import SyntheticEngine
from presto_tui.runtime.session.events import SessionEnd
from presto_tui.runtime.session.loop import make_driver, run_chains

if importlib.util.find_spec("lm_eval") is None:
    if os.environ.get("CI") == "true":  # CI installs the test extra, which has lm-eval
        pytest.fail("lm-eval is missing (pip install -e '.[lmeval]')", pytrace=False)
    pytestmark = pytest.mark.skip(reason="needs lm-eval: pip install -e '.[lmeval]'")

runner = CliRunner()
CONTEXTS = ["the cat sat on", "a dog ran under", "the big red", "it was warm and", "the small cat", "a dog slept",
            "the tree was big", "then it ran home"]
STOPS = [" ,"]
N_TOKENS = 8  # the task's max_gen_toks
LOWTEMP = SamplerParams(sampler="lowtemp", prefetch="none", max_new_tokens=N_TOKENS)
STREAM = SamplerParams(sampler="powermh", prefetch="stream", max_new_tokens=N_TOKENS, steps=4)


@pytest.fixture(autouse=True)
def _offline(in_tmp, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("PRESTO_TUI_CACHE", str(in_tmp / "cache"))  # lm-eval's own output goes to a log there


def session_text(context: str, params: SamplerParams, seed: int | None = None) -> str:
    """The answer a lone session gives: what lm-eval should receive, before its stop strings (with the
    request's own seed, as presto-tui's model draws it, unless `seed`)."""
    engine = SyntheticEngine()
    p = params.with_(seed=request_seed(params.seed, context, 0) if seed is None else seed)
    ends = [ev for _, ev in run_chains(engine, [make_driver(engine, p, engine.encode_prompt(context))])
            if isinstance(ev, SessionEnd)]
    return ends[0].text


def write_task(folder: Path, name: str, docs: list[dict], *, output_type: str = "generate_until",
               generation: str = "") -> Path:
    folder.mkdir(exist_ok=True)
    data = folder / f"{name}.jsonl"
    data.write_text("".join(json.dumps(d) + "\n" for d in docs))
    body = (f"task: {name}\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {data}\n"
            f"test_split: test\noutput_type: {output_type}\ndoc_to_text: \"{{{{text}}}}\"\n")
    if output_type == "multiple_choice":
        body += "doc_to_choice: \"{{choices}}\"\ndoc_to_target: 0\nmetric_list:\n  - metric: acc\n"
    else:
        body += ("doc_to_target: \"{{answer}}\"\n" + (generation or (
            f"generation_kwargs:\n  until: {json.dumps(STOPS)}\n  max_gen_toks: {N_TOKENS}\n  do_sample: false\n"))
            + "metric_list:\n  - metric: exact_match\n    aggregation: mean\n    higher_is_better: true\n")
    (folder / f"{name}.yaml").write_text(body)
    return folder


def graded_task(folder: Path, params: SamplerParams) -> tuple[Path, list[str]]:
    """A task whose even documents' targets are the answers `params` gives, the odd ones' not: its
    exact match is 1/2 if lm-eval received those answers, cut at the stop strings."""
    expected = [cut_at_stop(session_text(c, params), STOPS)[0] for c in CONTEXTS]
    docs = [{"text": c, "answer": e if i % 2 == 0 else e + " not"} for i, (c, e) in enumerate(zip(CONTEXTS, expected))]
    return write_task(folder, "words", docs), expected


def lm_eval_cli(*args: str):
    return runner.invoke(app, ["lm-eval", *args], catch_exceptions=False)


# -- the command, end to end ---------------------------------------------------------------

def test_lm_eval_grades_a_local_task_answered_by_each_method(tmp_path):
    folder, expected = graded_task(tmp_path / "tasks", LOWTEMP)
    full = [session_text(c, LOWTEMP) for c in CONTEXTS]
    assert any(e != f for e, f in zip(expected, full)) and any(e == f for e, f in zip(expected, full)), \
        "the stop strings should cut some answers and leave others whole"
    res = lm_eval_cli("--tasks", "words", "--include-path", str(folder), "--methods", "lowtemp,powermh+stream",
                      "-K", "4", "--trace", "t.jsonl", "--output", "results.json")
    assert res.exit_code == 0, res.output
    # lm-eval's own table, once per method, each after a line naming the method
    assert res.stdout.count("|words|") == 2 and res.stdout.count("exact_match") == 2
    assert "\nlowtemp: 8 sessions" in res.stdout and "\npowermh+stream: 8 sessions" in res.stdout
    doc = json.loads((tmp_path / "results.json").read_text())
    low, stream = doc["methods"]
    assert low["results"]["results"]["words"]["exact_match,none"] == pytest.approx(0.5)
    answers = {s["doc"]["text"]: s["resps"][0][0] for s in low["results"]["samples"]["words"]}
    assert answers == dict(zip(CONTEXTS, expected))
    # the other method answers with its own law: its answers are its sessions', cut the same way
    answers = {s["doc"]["text"]: s["resps"][0][0] for s in stream["results"]["samples"]["words"]}
    assert answers == {c: cut_at_stop(session_text(c, STREAM), STOPS)[0] for c in CONTEXTS}
    assert stream["results"]["config"]["presto_tui"]["params"]["prefetch"] == "stream"


def test_lm_eval_runs_scalable_power_sampling_with_the_rollouts_its_method_names(tmp_path):
    sps = SamplerParams(sampler="sps", prefetch="none", max_new_tokens=N_TOKENS, sps_chunk=3, sps_rollouts=2)
    folder, expected = graded_task(tmp_path / "tasks", sps)
    res = lm_eval_cli("--tasks", "words", "--include-path", str(folder), "--methods", "sps:2", "--sps-chunk", "3",
                      "--trace", "t.jsonl", "--output", "results.json")
    assert res.exit_code == 0, res.output
    (run,) = json.loads((tmp_path / "results.json").read_text())["methods"]
    assert run["results"]["results"]["words"]["exact_match,none"] == pytest.approx(0.5)
    answers = {s["doc"]["text"]: s["resps"][0][0] for s in run["results"]["samples"]["words"]}
    assert answers == dict(zip(CONTEXTS, expected))
    assert run["results"]["config"]["presto_tui"]["params"]["sps_rollouts"] == 2


def test_every_request_is_a_concurrent_session_in_one_trace(tmp_path):
    from presto_tui.logs.reader import read_trace

    folder, _ = graded_task(tmp_path / "tasks", LOWTEMP)
    res = lm_eval_cli("--tasks", "words", "--include-path", str(folder), "--methods", "lowtemp,powermh+stream",
                      "-K", "4", "--trace", "t.jsonl")
    assert res.exit_code == 0, res.output
    trace = read_trace(tmp_path / "t.jsonl")
    assert [s.start.params["sampler"] for s in trace.sessions] == ["lowtemp"] * 8 + ["powermh"] * 8
    assert all(s.ended and s.start.params["max_new_tokens"] == N_TOKENS for s in trace.sessions)
    for group in (trace.sessions[:8], trace.sessions[8:]):
        # all eight documents' sessions ran at once (64 live requests allow it with a budget of 8)
        assert max(s.first_line for s in group) < min(s.last_line for s in group)
        seeds = {s.start.prompt: s.start.params["seed"] for s in group}
        assert len(set(seeds.values())) == 8  # every document its own draw...
    assert {s.start.prompt: s.start.params["seed"] for s in trace.sessions[:8]} == \
        {s.start.prompt: s.start.params["seed"] for s in trace.sessions[8:]}  # ...the same for every method
    assert "presto-tui: trace written to t.jsonl" in res.output


def test_max_new_tokens_sets_n_for_every_request(tmp_path):
    folder, _ = graded_task(tmp_path / "tasks", LOWTEMP)
    res = lm_eval_cli("--tasks", "words", "--include-path", str(folder), "--methods", "powermh+spine", "-n", "4",
                      "-K", "2", "--limit", "3", "--trace", "t.jsonl")
    assert res.exit_code == 0, res.output
    starts = [json.loads(ln) for ln in (tmp_path / "t.jsonl").read_text().splitlines() if '"session_start"' in ln]
    assert len(starts) == 3 and {s["params"]["max_new_tokens"] for s in starts} == {4}


def test_ctrl_c_keeps_the_trace_whole_and_exits_130(tmp_path, monkeypatch):
    from presto_tui.logs.reader import read_trace

    folder, _ = graded_task(tmp_path / "tasks", LOWTEMP)
    step, steps = SyntheticEngine.step, []

    def interrupted(self):
        steps.append(1)
        # low temperature's eight sessions decode their n tokens side by side in n steps: a few steps
        # later the second method's sessions are under way
        if len(steps) == N_TOKENS + 4:
            raise KeyboardInterrupt
        return step(self)

    monkeypatch.setattr(SyntheticEngine, "step", interrupted)
    res = lm_eval_cli("--tasks", "words", "--include-path", str(folder), "--methods", "lowtemp,powermh+stream",
                      "-K", "4", "--trace", "t.jsonl")
    assert res.exit_code == 130 and "presto-tui: interrupted" in res.output
    sessions = read_trace(tmp_path / "t.jsonl").sessions
    ends = [s.events[-1].reason for s in sessions]
    assert all(s.ended for s in sessions) and ends[:8] == ["done"] * 8 and "cancelled" in ends[8:]


def test_a_loglikelihood_task_is_refused_before_any_engine_starts(tmp_path, monkeypatch):
    from presto_tui.cli import options

    folder = write_task(tmp_path / "tasks", "pick", [{"text": "the cat", "choices": ["sat", "ran"]}],
                        output_type="multiple_choice")
    monkeypatch.setattr(options, "start_engine", lambda *a: pytest.fail("the engine started"))
    res = lm_eval_cli("--tasks", "pick", "--include-path", str(folder))
    line = error_line(res)
    assert line.startswith("lm-eval task pick: presto-tui answers lm-eval's generate_until "
                           "requests only") and "multiple_choice" in line and "hf or vllm" in line
    assert not (tmp_path / "sessions").exists()


@pytest.mark.parametrize("args,says", [
    (["--tasks", "wrods"], "--tasks: unknown lm-eval task 'wrods'; did you mean 'words'?"),
    (["--tasks", "words", "--methods", "powermh+dfs"],
     "--methods: powermh+dfs: unknown PreSTO rule 'dfs'; choose one of bfs, predictive, spine, stream"),
    (["--tasks", "words", "-B", "3"],
     "lm-eval task words (its max_gen_toks is 8): --block-size 3 does not divide --max-new-tokens 8"),
    (["--tasks", "words", "--limit", "0"], "--limit must be >= 1, got 0"),
    (["--tasks", " , "], "--tasks needs at least one lm-eval task name (or a task's YAML file)"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, says):
    folder, _ = graded_task(tmp_path / "tasks", LOWTEMP)
    res = lm_eval_cli(*args, "--include-path", str(folder))
    assert error_line(res) == says


def test_an_include_path_that_is_no_folder_is_named(tmp_path):
    (tmp_path / "file.yaml").write_text("task: x\n")
    res = lm_eval_cli("--tasks", "x", "--include-path", str(tmp_path / "file.yaml"))
    assert error_line(res) == f"--include-path {tmp_path / 'file.yaml'}: not a folder of task YAML files"


def test_without_lm_eval_the_command_says_how_to_install_it(monkeypatch):
    from presto_tui.cli import lmeval

    real = importlib.util.find_spec
    monkeypatch.setattr(lmeval.importlib.util, "find_spec", lambda name, *a: None if name == "lm_eval" else
                        real(name, *a))
    res = lm_eval_cli("--tasks", "words")
    assert error_line(res) == lmeval.NEED


def test_help_says_how_to_use_the_model_from_python():
    res = runner.invoke(app, ["lm-eval", "--help"], env={"COLUMNS": "200"})
    assert res.exit_code == 0
    text = " ".join(res.stdout.split())
    assert "import lm_eval, presto_tui.lmeval.model" in text and 'model="presto-tui"' in text
    assert "python -m presto_tui.lmeval run --model presto-tui" in text


# -- lm-eval's own API and command line, with the model registered ------------------------------

def test_simple_evaluate_finds_the_registered_model_and_reads_model_args(tmp_path):
    import lm_eval
    from lm_eval.tasks import TaskManager

    import presto_tui.lmeval.model  # noqa: F401  (registers "presto-tui")

    params = STREAM.with_(steps=3)
    folder, expected = graded_task(tmp_path / "tasks", params)
    results = lm_eval.simple_evaluate(
        model="presto-tui", model_args="method=powermh+stream,steps=3,backend=synthetic,trace=api.jsonl",
        tasks=["words"], task_manager=TaskManager(include_path=str(folder), include_defaults=False))
    assert results is not None
    assert results["results"]["words"]["exact_match,none"] == pytest.approx(0.5)
    assert {s["doc"]["text"]: s["resps"][0][0] for s in results["samples"]["words"]} == dict(zip(CONTEXTS, expected))
    ends = [json.loads(ln) for ln in (tmp_path / "api.jsonl").read_text().splitlines() if '"session_start"' in ln]
    assert len(ends) == 8 and {e["params"]["steps"] for e in ends} == {3}


def test_registering_the_model_keeps_lm_evals_own_models():
    """lm-eval loads its own models only into an empty registry; ours must not be the first one in it."""
    code = ("import presto_tui.lmeval.model; from lm_eval.api.registry import get_model; "
            "print(*(get_model(m).__name__ for m in ('presto-tui', 'local-completions', 'dummy')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["PrestoLM", "LocalCompletionsAPI", "DummyLM"]


def test_every_engine_flag_is_a_model_arg():
    """Each engine option `run` takes is read from model_args with its type (none is a KeyError)."""
    from lm_eval.api.registry import get_model

    from presto_tui.api.params import ENGINE_PARAMS
    from presto_tui.lmeval.model import ARGS

    assert {p.name for p in ENGINE_PARAMS} <= set(ARGS)
    lm = get_model("presto-tui").create_from_arg_string("method=powermh+stream,backend=synthetic,synthetic_cost=0.004")
    assert lm.engine.name == "synthetic"


@pytest.mark.parametrize("model_args,says", [
    ("method=powermh+stream,stepz=3,backend=synthetic", "unknown model_args key 'stepz'; did you mean 'steps'?"),
    ("alpha=much,backend=synthetic", "alpha must be a number in (0, 1000], got 'much'"),
    ("method=powermh:4,backend=synthetic", "method: powermh:4: a number after an MH sampler is its PreSTO rule's "
     "budget; write powermh+RULE:4 (powermh alone is the sequential sampler)"),
    ("backend=synthetic,threads=2", "threads does not apply to backend synthetic"),
])
def test_bad_model_args_raise_one_line(model_args, says):
    from lm_eval.api.registry import get_model

    import presto_tui.lmeval.model  # noqa: F401

    with pytest.raises(InputError) as e:
        get_model("presto-tui").create_from_arg_string(model_args)
    assert e.value.line == says


@pytest.mark.slow
def test_lm_evals_own_command_line_runs_the_model(tmp_path, monkeypatch, capsys):
    """`python -m presto_tui.lmeval`: lm-eval's CLI, which builds its whole task index (seconds)."""
    import runpy

    folder, _ = graded_task(tmp_path / "tasks", LOWTEMP)
    monkeypatch.setattr(sys, "argv", ["lm-eval", "run", "--model", "presto-tui", "--model_args",
                                      "method=lowtemp,backend=synthetic,no_trace=true", "--tasks", "words",
                                      "--include_path", str(folder)])
    runpy.run_module("presto_tui.lmeval", run_name="__main__")
    out = capsys.readouterr().out
    assert "|words|" in out and "exact_match" in out and "0.5" in out


# -- requests: stop strings, lengths, seeds, refusals ------------------------------------------

def test_stop_strings_cut_at_the_first_of_any():
    assert cut_at_stop("a b. c\n d", ["\n", "."]) == ("a b", True)
    assert cut_at_stop("a b c", ["x"]) == ("a b c", False)
    assert cut_at_stop("a b c", []) == ("a b c", False)
    assert cut_at_stop("stop at once", ["stop"]) == ("", True)


def test_a_request_is_read_and_checked():
    ask = read_ask("ctx", {"until": "\n", "max_gen_toks": 16, "temperature": 0.0, "do_sample": False})
    assert ask.until == ("\n",) and ask.max_gen_toks == 16 and ask.ignored == ("do_sample", "temperature")
    assert read_ask("ctx", {"until": ["a", ""]}).until == ("a",)  # an empty stop never matches: dropped
    assert read_ask("ctx", None).until == () and read_ask("ctx", {}).max_gen_toks is None
    for kwargs, says in [({"until": 3}, "until should be a string or a list of strings, got 3"),
                         ({"max_gen_toks": "8"}, "max_gen_toks should be a whole number, got '8'"),
                         ({"max_gen_toks": 0}, "max_gen_toks must lie in [1, 65536], got 0")]:
        with pytest.raises(InputError) as e:
            read_ask("ctx", kwargs, "here")
        assert e.value.line == f"here: {says}"


def test_n_comes_from_the_person_then_the_request_then_the_default():
    base = SamplerParams()
    assert ask_params(base, 16, 4).max_new_tokens == 4
    assert ask_params(base, 16, None).max_new_tokens == 16
    assert ask_params(base, None, None).max_new_tokens == base.max_new_tokens


def test_seeds_depend_on_the_context_and_repeat_not_on_the_order():
    contexts = ["a", "b", "a", "a"]
    assert occurrences(contexts) == [0, 0, 1, 2]
    seeds = [request_seed(7, c, k) for c, k in zip(contexts, occurrences(contexts))]
    assert len(set(seeds)) == 4
    assert seeds[1] == request_seed(7, "b", 0) and request_seed(8, "b", 0) != seeds[1]


def test_generate_until_gives_each_repeat_its_own_draw_and_refuses_loglikelihood():
    from presto_tui.lmeval.model import PrestoLM

    lm = PrestoLM.on_engine(SyntheticEngine(), LOWTEMP, label="lowtemp")
    request = SimpleNamespace(args=("the small cat", {"max_gen_toks": 8}), task_name="t", doc_id=0)
    answers = lm.generate_until([request] * 4)
    assert answers[0] == session_text("the small cat", LOWTEMP)
    seeds = [s.params["seed"] for s in lm.summaries]
    assert len(set(seeds)) == 4 and seeds == [request_seed(0, "the small cat", k) for k in range(4)]
    with pytest.raises(InputError, match="hf or vllm model"):
        lm.loglikelihood([SimpleNamespace(args=("the", " cat"))])
    with pytest.raises(InputError, match="hf or vllm model"):
        lm.loglikelihood_rolling([SimpleNamespace(args=("the cat",))])
    with pytest.raises(InputError, match="chat template itself"):
        lm.apply_chat_template([{"role": "user", "content": "hi"}])


def test_a_context_too_long_for_the_model_is_named_before_any_session(monkeypatch):
    from presto_tui.lmeval.model import PrestoLM

    engine = SyntheticEngine()
    monkeypatch.setattr(SyntheticEngine, "max_len", 6)
    lm = PrestoLM.on_engine(engine, LOWTEMP)
    requests = [SimpleNamespace(args=("a dog", {"max_gen_toks": 2}), task_name="t", doc_id=0),
                SimpleNamespace(args=("a dog ran", {"max_gen_toks": 4}), task_name="t", doc_id=1)]
    with pytest.raises(InputError) as e:
        lm.generate_until(requests)
    assert e.value.line == ("lm-eval task t, doc 1: prompt (3 tokens) plus horizon (4) exceeds the model's "
                            "context of 6 tokens")
    assert lm.summaries == [] and engine.live == 0


# -- a client nobody here wrote: lm-eval's local-completions against presto-tui serve -----------

@contextmanager
def presto_serve(*flags: str):
    """`presto-tui serve` on the synthetic model, on a free loopback port: yields its OpenAI base URL."""
    env = {**os.environ, "PRESTO_TUI_BACKEND": "synthetic", "PYTHONPATH": str(Path(__file__).parents[1])}
    proc = subprocess.Popen([sys.executable, "-c", "from presto_tui.cli import main; main()", "serve", "--port", "0",
                             *flags], env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()
        found = re.search(r"at (http://\S+/v1)", first)
        assert found, first
        yield found.group(1)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)


def test_lm_evals_openai_client_runs_a_local_task_against_serve(tmp_path):
    """lm-eval's own local-completions model (a client nobody here wrote) grades a local task through
    presto-tui serve: the server's answers are presto-tui run's, cut at lm-eval's stop strings."""
    if importlib.util.find_spec("presto_tui.serve") is None:
        pytest.skip("presto-tui serve (the OpenAI-compatible server) is not in this version")
    import lm_eval
    from lm_eval.tasks import TaskManager

    # local-completions sends lm-eval's own seed (1234) with every request; the server's chains use it
    params = SamplerParams(max_new_tokens=N_TOKENS, steps=4, seed=1234)
    expected = [cut_at_stop(session_text(c, params, seed=1234), STOPS)[0] for c in CONTEXTS]
    docs = [{"text": c, "answer": e if i % 2 == 0 else e + " not"} for i, (c, e) in enumerate(zip(CONTEXTS, expected))]
    folder = write_task(tmp_path / "tasks", "words", docs)
    with presto_serve("-K", "4", "--trace", str(tmp_path / "served.jsonl")) as url:
        results = lm_eval.simple_evaluate(
            model="local-completions",
            model_args={"base_url": url + "/completions", "model": "synthetic-v26-o2-s0",
                        "tokenizer_backend": "none", "num_concurrent": 4, "max_retries": 1},
            tasks=["words"], task_manager=TaskManager(include_path=str(folder), include_defaults=False))
    assert results is not None
    assert {s["doc"]["text"]: s["resps"][0][0] for s in results["samples"]["words"]} == dict(zip(CONTEXTS, expected))
    assert results["results"]["words"]["exact_match,none"] == pytest.approx(0.5)
