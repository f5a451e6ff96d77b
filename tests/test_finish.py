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


# -- eqs. 21-22 of the response a person gets, for every method ----------------------------------------

def _sessions(prompt: str, seed: int, *samplers: str, **sizes):
    from presto_tui.runtime.core.params import SamplerParams
    from presto_tui.runtime.engines.synthetic import SyntheticEngine
    from presto_tui.runtime.session.runner import run_session

    engine = SyntheticEngine()
    out = {}
    for sampler in samplers:
        p = SamplerParams(sampler=sampler, prefetch="none", alpha=2.0, max_new_tokens=8, steps=6, seed=seed,
                          **sizes).validate()
        out[sampler] = list(run_session(engine, p, list(engine.encode_prompt(prompt, ()))))
    return engine, out


def test_an_answer_is_scored_over_its_response_up_to_eos_whatever_method_gave_it():
    import math

    from presto_tui.runtime.core.types import cut_at_eos
    from presto_tui.runtime.session.events import RoundDone, Sample
    from presto_tui.runtime.session.summary import summarize

    # "mat", seed 4: low temperature stops after EOS at 3 tokens, the chain's state runs on to 8
    engine, ev = _sessions("mat", 4, "lowtemp", "powermh", "bestofn", "powersmc", samples=2, particles=2, smc_block=4)
    s = {k: summarize(v) for k, v in ev.items()}
    response = cut_at_eos(s["powermh"].tokens, engine.eos_id)
    assert 0 < len(response) < len(s["powermh"].tokens) and cut_at_eos(s["lowtemp"].tokens, engine.eos_id) == response
    final = [e for e in ev["powermh"] if isinstance(e, RoundDone)][-1].tree.final_state
    n = len(response)  # recomputed from the chain's own per-token values, over the response alone
    assert s["powermh"].answer_loglik == pytest.approx(math.fsum(final.logp[:n]) / n, abs=1e-12)
    assert s["powermh"].answer_confidence == pytest.approx(-math.fsum(final.entropy[:n]) / n, abs=1e-12)
    for k in ("lowtemp", "bestofn", "powersmc"):
        if cut_at_eos(s[k].tokens, engine.eos_id) == response:  # the same text: the same numbers
            assert s[k].answer_loglik == pytest.approx(s["powermh"].answer_loglik, abs=1e-12), k
            assert s[k].answer_confidence == pytest.approx(s["powermh"].answer_confidence, abs=1e-12), k
    (sample,) = [e for e in ev["lowtemp"] if isinstance(e, Sample)]
    assert sample.tokens[-1] == engine.eos_id and sample.loglik == s["lowtemp"].answer_loglik
    # "a dog ran", seed 0: both answers are empty; an empty response has no eqs. 21-22 (null), for both
    engine, ev = _sessions("a dog ran", 0, "lowtemp", "powermh")
    s = {k: summarize(v) for k, v in ev.items()}
    assert all(cut_at_eos(x.tokens, engine.eos_id) == () for x in s.values())
    assert all(x.answer_loglik is None and x.answer_confidence is None for x in s.values())
    assert all(x.to_dict()["answer_loglik"] is None for x in s.values())


def test_eval_compares_the_same_span_for_every_method(tmp_path):
    """An answer both methods give alike gets one log-likelihood and confidence in eval's results:
    low temperature's empty answer was scored over its EOS, the chain's over all n tokens."""
    prompts = ["a dog ran", "mat", "a dog ran", "mat", "a dog ran"]
    (tmp_path / "t.jsonl").write_text("".join(json.dumps({"prompt": p, "answer": "x", "id": f"i{i}"}) + "\n"
                                              for i, p in enumerate(prompts)))
    res = invoke("eval", "t.jsonl", "--methods", "lowtemp,powermh", "--alpha", "2", "-n", "8", "-K", "6", "--json",
                 "--figures", "none", "--no-trace")
    assert res.exit_code == 0, res.output
    items = json.loads(res.stdout)["items"]
    alike = [it["results"] for it in items if it["results"]["lowtemp"]["text"] == it["results"]["powermh"]["text"]]
    assert alike  # (item i3: both empty)
    for r in alike:
        for stat in ("loglik", "confidence"):
            a, b = r["lowtemp"][stat], r["powermh"][stat]
            assert (a is None and b is None) if r["lowtemp"]["text"] == "" else a == pytest.approx(b, abs=1e-12)
