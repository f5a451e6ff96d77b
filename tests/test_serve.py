"""`presto-tui serve`: the official openai client against the server on the synthetic engine.

Answers equal `presto-tui run`'s for the same prompt, parameters and seed; a bad value is a
400 carrying the very line `run` prints; the key, the body limit and the queue are enforced
on every route; a client that goes away leaves no chain and no engine request behind; the
event stream decodes through the trace's gate; every session is in the trace.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
from pathlib import Path

import httpx
import pytest
from helpers import GatedEngine, cli_error, presto_command, served, wait_for
from typer.testing import CliRunner

from presto_tui.cli import app as cli
from presto_tui.logs.reader import read_trace
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.engines.synthetic import SyntheticEngine
from presto_tui.runtime.session.events import InFlight, LiveTree, RoundDone, SessionEnd, SessionStart
from presto_tui.serve.wire import decode_event, encode_event

openai = pytest.importorskip("openai")
runner = CliRunner()
SIZES = ["-n", "16", "-K", "10"]
BODY = {"max_tokens": 16, "steps": 10}
pytestmark = pytest.mark.usefixtures("in_tmp")


def client(url: str, key: str = "none") -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0)


def run_twin(prompt: str, *flags: str) -> dict:
    """What `presto-tui run --json` answers for the prompt."""
    res = runner.invoke(cli, ["run", prompt, "--json", "--no-trace", *flags])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def metrics(url: str, **headers) -> dict[str, float]:
    text = httpx.get(url + "/metrics", headers=headers).text
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


# -- answers ----------------------------------------------------------------------------------

@pytest.mark.parametrize("prefetch", ["spine", "stream"])
def test_completions_and_chat_answer_what_run_answers(prefetch):
    twin = run_twin("the cat", *SIZES, "--seed", "3", "--prefetch", prefetch)
    with served() as (url, *_):
        c = client(url)
        extra = {**BODY, "prefetch": prefetch}
        plain = c.completions.create(model="synthetic-v26-o2-s0", prompt="the cat", seed=3, max_tokens=16,
                                     extra_body={"steps": 10, "prefetch": prefetch})
        chat = c.chat.completions.create(model="synthetic-v26-o2-s0", seed=3, max_tokens=16,
                                         messages=[{"role": "user", "content": "the cat"}],
                                         extra_body={"steps": 10, "prefetch": prefetch})
        streamed = list(c.completions.create(model="synthetic-v26-o2-s0", prompt="the cat", seed=3, stream=True,
                                             extra_body=extra))
        chat_streamed = list(c.chat.completions.create(
            model="synthetic-v26-o2-s0", seed=3, stream=True, stream_options={"include_usage": True},
            messages=[{"role": "user", "content": "the cat"}], extra_body=extra))
    assert plain.choices[0].text == chat.choices[0].message.content == twin["text"]
    assert plain.model_extra["presto"]["choices"][0]["tokens"] == twin["tokens"]
    assert plain.choices[0].finish_reason == ("stop" if 0 in twin["tokens"] else "length")
    assert plain.usage.completion_tokens == 16 and plain.usage.prompt_tokens == 2
    assert "".join(ch.choices[0].text for ch in streamed if ch.choices) == twin["text"]
    texts = [ch.choices[0].delta.content for ch in chat_streamed if ch.choices and ch.choices[0].delta.content]
    assert texts == [twin["text"]]  # the final text comes in one piece, when the chain ends
    assert chat_streamed[0].choices[0].delta.role == "assistant"
    assert chat_streamed[-1].usage.completion_tokens == 16


def test_n_choices_run_on_chain_seeds_and_prompt_lists_keep_their_order():
    from presto_tui.runtime.core.randomness import chain_seed

    with served() as (url, *_):
        out = client(url).completions.create(model="synthetic-v26-o2-s0", prompt=["the cat", "a dog ran"], n=2,
                                             seed=5, extra_body=BODY)
    texts = {c.index: c.text for c in out.choices}
    assert texts[0] == run_twin("the cat", *SIZES, "--seed", "5")["text"]
    assert texts[1] == run_twin("the cat", *SIZES, "--seed", str(chain_seed(5, 1)))["text"]
    assert texts[2] == run_twin("a dog ran", *SIZES, "--seed", "5")["text"]
    assert texts[0] != texts[1]
    assert out.usage.prompt_tokens == 2 + 3  # each prompt once, whatever n


def test_token_id_prompts_and_stop_sequences_as_lm_eval_sends_them():
    """lm-eval's local-completions posts token ids (a list of lists), temperature 0, stop and seed."""
    engine = SyntheticEngine()
    ids = engine.encode_prompt("the cat")
    twin = run_twin("the cat", *SIZES, "--seed", "1234")
    stop = twin["text"].split()[3]
    with served(engine) as (url, *_):
        r = httpx.post(url + "/v1/completions", json={
            "model": engine.model, "prompt": [ids], "max_tokens": 16, "temperature": 0, "stop": [stop],
            "seed": 1234, "steps": 10}).json()
    (choice,) = r["choices"]
    assert r["presto"]["choices"][0]["tokens"] == twin["tokens"]
    assert choice["text"] == twin["text"][:twin["text"].index(stop)] and choice["finish_reason"] == "stop"
    assert r["presto"]["ignored"] == ["temperature"]


# -- errors -----------------------------------------------------------------------------------

@pytest.mark.parametrize("field,value,flag", [
    ("alpha", 0, "--alpha"), ("alpha", "abc", "--alpha"), ("steps", 4.5, "--steps"),
    ("budget", 0, "--budget"), ("sampler", "nope", "--sampler"), ("epsilon", 0.9, "--epsilon"),
])
def test_a_bad_value_is_a_400_with_the_line_run_prints(field, value, flag):
    """The same line `run` prints, naming the request field the client sent (not a flag it never
    typed), and OpenAI's error object names the field in `param`."""
    expected = cli_error("run", "the cat", flag, str(value)).replace(flag, field)
    with served() as (url, *_), pytest.raises(openai.BadRequestError) as e:
        client(url).completions.create(model="synthetic-v26-o2-s0", prompt="the cat", extra_body={field: value})
    assert e.value.status_code == 400 and e.value.body["message"] == expected
    assert e.value.body["param"] == field


@pytest.mark.parametrize("body,message,param", [
    ({"max_tokens": -1}, "max_tokens must lie in [1, 65536], got -1", "max_tokens"),
    ({"seed": "1e3"}, "seed must be a whole number in [0, 2^63-1], got '1e3'", "seed"),
    ({"rank": "best"}, "unknown rank 'best'; choose one of logq, logp", "rank"),
    ({"n": 0}, "n must lie in [1, 256], got 0", "n"),
])
def test_a_bad_field_is_named_as_the_request_names_it(body, message, param):
    with served() as (url, *_):
        r = httpx.post(url + "/v1/completions", json={"prompt": "the cat", **body})
    assert r.status_code == 400 and r.json()["error"]["message"] == message and r.json()["error"]["param"] == param


def test_bad_requests_get_one_line_each():
    cases = [
        ({"prompt": "the cat", "max_tokens": 16, "block_size": 5},
         "block_size 5 does not divide max_tokens 16"),
        ({"prompt": "the cat", "alpah": 2}, "unknown field 'alpah'; did you mean 'alpha'?"),
        ({"prompt": "  "}, "the prompt is empty"),
        ({"prompt": "the cat", "logprobs": 5}, None),
        ({"prompt": "the cat", "n": 0}, "n must lie in [1, 256], got 0"),
        ({"messages": []}, None),
    ]
    with served() as (url, *_):
        for body, line in cases:
            route = "/v1/chat/completions" if "messages" in body else "/v1/completions"
            r = httpx.post(url + route, json=body)
            assert r.status_code == 400, (body, r.text)
            message = r.json()["error"]["message"]
            assert "\n" not in message and (line is None or message == line), (body, message)
        r = httpx.post(url + "/v1/completions", content=b"{not json", headers={"Content-Type": "application/json"})
        assert r.status_code == 400 and r.json()["error"]["message"].startswith("the request body is not valid JSON")
        r = httpx.post(url + "/v1/completions", json={"prompt": "the cat", "model": "gpt-4"})
        assert r.status_code == 404 and "synthetic-v26-o2-s0" in r.json()["error"]["message"]
        r = httpx.get(url + "/v1/nothing")
        assert r.status_code == 404 and r.json()["error"]["message"] == "no route GET /v1/nothing " \
            "(see presto-tui serve --help)"


def test_a_prompt_too_long_for_the_model_is_a_400_before_the_stream_starts(monkeypatch):
    engine = SyntheticEngine()
    monkeypatch.setattr(SyntheticEngine, "max_len", 10)
    with served(engine) as (url, server, _):
        r = httpx.post(url + "/v1/completions", json={"prompt": "the cat", "max_tokens": 16, "stream": True})
        assert r.status_code == 400
        assert r.json()["error"]["message"] == \
            "prompt (2 tokens) plus horizon (16) exceeds the model's context of 10 tokens"
        r = httpx.post(url + "/v1/completions", json={"prompt": [[1, 2, 99]], "max_tokens": 4})
        assert r.status_code == 400 and "token id 99 is not in the model's vocabulary" in r.text
        assert server.host.faults == 0  # refused before the engine saw it


# -- the door: key, body size, queue ------------------------------------------------------------

ROUTES = [("GET", "/health"), ("GET", "/metrics"), ("GET", "/v1/models"), ("POST", "/v1/completions"),
          ("POST", "/v1/chat/completions"), ("GET", "/v1/presto/events"), ("POST", "/v1/presto/requests/x/cancel"),
          ("GET", "/v1/no-such-route")]


def test_without_the_key_every_route_is_401_and_a_10_mb_body_is_413():
    with served(api_key="s3cret") as (url, *_):
        for method, path in ROUTES:
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"}):
                r = httpx.request(method, url + path, headers=headers, json={"prompt": "the cat"})
                assert r.status_code == 401, (method, path, headers)
                assert r.json()["error"]["type"] == "authentication_error"
        with pytest.raises(openai.AuthenticationError):
            client(url, "wrong").models.list()
        ok = client(url, "s3cret")
        assert ok.models.list().data[0].id == "synthetic-v26-o2-s0"
        assert ok.completions.create(model="synthetic-v26-o2-s0", prompt="the cat", extra_body=BODY).choices[0].text
        key = {"Authorization": "Bearer s3cret"}
        big = json.dumps({"prompt": "the cat " * (10 * 2**20 // 8)}).encode()
        assert len(big) > 10 * 2**20
        r = httpx.post(url + "/v1/completions", content=big, headers={**key, "Content-Type": "application/json"})
        assert r.status_code == 413 and "limit of 1048576 bytes" in r.json()["error"]["message"]

        def chunks():  # no Content-Length: the limit holds while reading
            for _ in range(20):
                yield b" " * 2**16

        r = httpx.post(url + "/v1/completions", content=chunks(), headers=key)
        assert r.status_code == 413
        m = metrics(url, **key)
        assert m['presto_http_requests_total{code="413",route="completions"}'] == 2
        assert m['presto_http_requests_total{code="401",route="health"}'] == 3


def test_the_authorization_scheme_is_case_insensitive():
    """RFC 7235: `bearer KEY` and `BEARER KEY` are `Bearer KEY` (they were refused with 401)."""
    with served(api_key="s3cret") as (url, *_):
        for scheme in ("Bearer", "bearer", "BEARER"):
            r = httpx.get(url + "/v1/models", headers={"Authorization": f"{scheme} s3cret"})
            assert r.status_code == 200, scheme
        assert httpx.get(url + "/v1/models", headers={"Authorization": "Basic s3cret"}).status_code == 401


def test_a_full_queue_is_429_with_retry_after():
    engine = GatedEngine(shut=True)
    with served(engine, max_chains=1, max_queue=1) as (url, *_):
        with httpx.stream("POST", url + "/v1/completions", json={"prompt": "the cat", "stream": True, **BODY}) as a, \
                httpx.stream("POST", url + "/v1/completions", json={"prompt": "a dog", "stream": True, **BODY}) as b:
            assert a.status_code == b.status_code == 200  # one runs (stalled), one waits for its slot
            m = metrics(url)
            assert m["presto_chains_live"] == 1 and m["presto_queue_length"] == 1
            busy = httpx.post(url + "/v1/completions", json={"prompt": "a dog", **BODY})
            assert busy.status_code == 429 and int(busy.headers["Retry-After"]) >= 1
            assert busy.json()["error"]["message"].startswith("the server is busy")
            too_many = httpx.post(url + "/v1/completions", json={"prompt": "a dog", "n": 3, **BODY})
            assert too_many.status_code == 400 and "at most 2 at once" in too_many.json()["error"]["message"]
        wait_for(lambda: metrics(url)["presto_queue_length"] == metrics(url)["presto_chains_live"] == 0)


# -- clients that leave, timeouts, the trace ------------------------------------------------------

def test_a_client_that_disconnects_leaves_no_chain_and_no_engine_request(tmp_path):
    engine = GatedEngine(shut=True)
    trace = tmp_path / "serve.jsonl"
    twin = run_twin("a dog ran", *SIZES, "--prefetch", "stream", "--seed", "2")
    with served(engine, trace=trace, max_chains=4) as (url, server, _):
        c = client(url)
        other: dict = {}
        t = threading.Thread(target=lambda: other.update(r=c.completions.create(
            model=engine.model, prompt="a dog ran", seed=2, extra_body={**BODY, "prefetch": "stream"})))
        t.start()
        with httpx.stream("POST", url + "/v1/completions", json={"prompt": "the cat", "stream": True,
                                                                 "prefetch": "stream", **BODY}) as r:
            lines = r.iter_lines()  # (kept: a dropped iterator closes the response)
            next(lines)  # admitted and running (stalled)
            wait_for(lambda: metrics(url)["presto_chains_live"] == 2)
        # the stream was closed: its chain is cancelled and its requests aborted; the other goes on
        wait_for(lambda: metrics(url)['presto_chains_total{status="cancelled"}'] == 1)
        with pytest.raises(httpx.ReadTimeout):  # a plain answer's client that gives up
            httpx.post(url + "/v1/completions", json={"prompt": "it was warm", **BODY}, timeout=1.0)
        wait_for(lambda: metrics(url)['presto_chains_total{status="cancelled"}'] == 2)
        m = metrics(url)
        assert m["presto_chains_live"] == 1 and m["presto_engine_requests_live"] == engine.live > 0
        engine.open()
        t.join(30)
        assert other["r"].choices[0].text == twin["text"]
        wait_for(lambda: metrics(url)["presto_engine_requests_live"] == 0)
        m = metrics(url)
        assert m["presto_chains_live"] == 0 and m['presto_chains_total{status="done"}'] == 1
        assert m["presto_transitions_total"] == 10 and m["presto_requests_in_progress"] == 0
    ends = {s.start.prompt: s.events[-1] for s in read_trace(trace).sessions}
    assert ends["the cat"].reason == ends["it was warm"].reason == "cancelled" and ends["a dog ran"].reason == "done"
    assert ends["a dog ran"].text == twin["text"]


def test_a_request_past_its_timeout_is_504_and_its_session_ends_cancelled(tmp_path):
    engine = GatedEngine(shut=True)
    trace = tmp_path / "serve.jsonl"
    with served(engine, trace=trace, request_timeout=0.3) as (url, *_):
        r = httpx.post(url + "/v1/completions", json={"prompt": "the cat", **BODY})
        assert r.status_code == 504 and "--request-timeout" in r.json()["error"]["message"]
        lines = [ln for ln in httpx.post(url + "/v1/completions", json={"prompt": "a dog", "stream": True, **BODY})
                 .text.splitlines() if ln.startswith("data: ")]
        assert "request_timeout" in lines[-2] and lines[-1] == "data: [DONE]"
        wait_for(lambda: metrics(url)["presto_chains_live"] == 0)
    assert [s.events[-1].reason for s in read_trace(trace).sessions] == ["cancelled", "cancelled"]


# -- the event stream -------------------------------------------------------------------------

def test_the_event_stream_replays_a_request_through_the_trace_gate(tmp_path):
    trace = tmp_path / "serve.jsonl"
    with served(trace=trace) as (url, server, _):
        every: list[dict] = []
        firehose = threading.Thread(target=lambda: read_events(url, "", every, stop_after=1))
        firehose.start()
        wait_for(lambda: server.hub._listeners)  # listening before the request starts
        r = httpx.post(url + "/v1/chat/completions", json={
            "messages": [{"role": "user", "content": "the cat"}], "request_id": "mine", "prefetch": "stream",
            **BODY}).json()
        mine: list[dict] = []
        read_events(url, "?request=mine", mine)  # after the end: replayed from its first event
        firehose.join(10)
        gone = httpx.get(url + "/v1/presto/events?request=nobody")
    vocab: dict[int, str] = {}
    events = []
    for obj in mine:
        assert obj["type"] == "vocab" or obj["request_id"] == "mine"
        if obj["type"] == "vocab":
            vocab.update({int(k): v for k, v in obj["pieces"].items()})
            continue
        ev = decode_event(obj)
        if isinstance(ev, (SessionStart, SessionEnd)):
            ids = ev.prompt_ids if isinstance(ev, SessionStart) else ev.tokens
            assert all(i in vocab for i in ids)  # token text came first
        events.append(ev)
    assert isinstance(events[0], SessionStart) and isinstance(events[-1], SessionEnd)
    assert events[-1].text == r["choices"][0]["message"]["content"]
    (session,) = read_trace(trace).sessions
    assert [type(e) for e in events] == [type(e) for e in session.events]
    assert sum(isinstance(e, RoundDone) for e in events) == len(session.rounds)
    # (a live tree or a round in flight is progress for who listens then, never replayed: how many come is timing)
    shown = [o for o in every if o["type"] not in ("vocab", "live_tree", "in_flight")]
    assert shown == [o for o in mine if o["type"] != "vocab"]
    assert gone.status_code == 404


def read_events(url: str, query: str, out: list, stop_after: int | None = None) -> None:
    with httpx.stream("GET", url + "/v1/presto/events" + query, timeout=30) as r:
        for line in r.iter_lines():
            if line.startswith("data: "):
                out.append(json.loads(line[6:]))
                if stop_after is not None and out[-1]["type"] == "session_end":
                    stop_after -= 1
                    if not stop_after:
                        return


def test_transient_events_have_a_wire_form_that_decodes():
    from presto_tui.runtime.session import driver
    from presto_tui.runtime.session.runner import run_session

    engine = SyntheticEngine()
    seen = []
    old, driver.SNAPSHOT_EVERY_S = driver.SNAPSHOT_EVERY_S, 0.0
    try:
        for ev in run_session(engine, SamplerParams(prefetch="stream", max_new_tokens=16, steps=8),
                              engine.encode_prompt("the cat"), transient=True):
            if isinstance(ev, LiveTree):
                seen.append(ev)
    finally:
        driver.SNAPSHOT_EVERY_S = old
    assert seen
    for ev in seen:
        back = decode_event(json.loads(json.dumps(encode_event(ev))))
        assert (back.block, back.k_before, back.k_now) == (ev.block, ev.k_before, ev.k_now)
        assert back.tree.transitions == ev.tree.transitions and len(back.tree.requests) == len(ev.tree.requests)
    assert decode_event(encode_event(InFlight(3, 10, 48))) == InFlight(3, 10, 48)


# -- many clients at once ------------------------------------------------------------------------

def test_concurrent_clients_get_each_their_own_answer(tmp_path):
    prompts = ["the cat", "a dog ran", "the tree", "small red home", "it was warm", "then it slept"] * 2
    f = tmp_path / "prompts.txt"
    f.write_text("\n".join(prompts))
    res = runner.invoke(cli, ["run", "--prompts-file", str(f), "--json", "--no-trace", "-n", "8", "-K", "6",
                              "--prefetch", "stream"])
    twins = [json.loads(ln) for ln in res.stdout.splitlines() if ln.strip()]
    answers: dict[int, str] = {}
    with served(max_chains=4, max_queue=16) as (url, *_):
        c = client(url)

        def ask(i: int) -> None:
            answers[i] = c.completions.create(model="synthetic-v26-o2-s0", prompt=prompts[i], max_tokens=8,
                                              extra_body={"steps": 6, "prefetch": "stream"}).choices[0].text

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(prompts))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        m = metrics(url)
    assert [answers[i] for i in range(len(prompts))] == [t["text"] for t in twins]
    assert m['presto_chains_total{status="done"}'] == len(prompts) and m["presto_engine_requests_live"] == 0


# -- the command -------------------------------------------------------------------------------

def test_serve_checks_its_flags_and_port_before_the_engine(monkeypatch):
    from presto_tui.runtime.engines import registry

    monkeypatch.setattr(registry, "start_engine", lambda *a, **k: pytest.fail("the engine started"))
    assert cli_error("serve", "--port", "70000") == "--port must lie in [0, 65535], got 70000"
    assert cli_error("serve", "--max-chains", "0") == "--max-chains must lie in [1, 256], got 0"
    assert cli_error("serve", "--alpha", "-1") == "--alpha must lie in (0, 1000], got -1"
    assert cli_error("serve", "--api-key", " ") == "--api-key is empty (unset PRESTO_TUI_API_KEY, or give a key)"
    from presto_tui.serve.net import listen

    with listen("127.0.0.1", 0) as taken:
        port = taken.getsockname()[1]
        assert re.fullmatch(rf"cannot listen on 127\.0\.0\.1:{port} \(.+\)", cli_error("serve", "--port", str(port)))
    res = runner.invoke(cli, ["serve", "--help"])
    for flag in ("--api-key", "--max-chains", "--max-queue", "--request-timeout", "--max-body-bytes", "--host"):
        assert flag in res.stdout


def test_the_command_serves_until_ctrl_c_and_leaves_a_trace(tmp_path):
    env = {**os.environ, "PRESTO_TUI_BACKEND": "synthetic", "PYTHONPATH": str(Path(__file__).parents[1])}
    proc = subprocess.Popen(presto_command("serve", "--port", "0", "-n", "16", "-K", "10", "--epsilon", "0",
                                           "--trace", str(tmp_path / "t.jsonl")),
                            env=env, stderr=subprocess.PIPE, text=True)
    try:
        first = proc.stderr.readline()
        url = re.search(r"at (http://\S+)/v1", first).group(1)
        text = client(url).completions.create(model="synthetic-v26-o2-s0", prompt="the cat", seed=3).choices[0].text
        (served,) = httpx.get(url + "/v1/models").json()["data"]
    finally:
        proc.send_signal(signal.SIGINT)
        rest = proc.communicate(timeout=30)[1]
    assert text == run_twin("the cat", *SIZES, "--seed", "3", "--epsilon", "0")["text"]
    # a flag set to 0 is a value (not dropped for the built-in 0.01); -N auto: 8 chains at once
    assert served["presto"]["defaults"]["epsilon"] == 0 and served["presto"]["max_chains"] == 8
    assert proc.returncode == 130 and "trace written to" in rest
    (s,) = read_trace(tmp_path / "t.jsonl").sessions
    assert s.events[-1].text == text


def test_baselines_and_budget_policies_in_the_body_answer_as_run_does():
    cases = [({"sampler": "bestofn", "samples": 3}, ["--sampler", "bestofn", "--samples", "3"]),
             ({"prefetch": "stream", "budget": "fill:4"}, ["--prefetch", "stream", "-N", "fill:4"]),
             ({"sampler": "entropycut", "beta": 2, "cut_mix": 0.5}, ["--sampler", "entropycut", "--beta", "2",
                                                                     "--cut-mix", "0.5"]),
             ({"sampler": "sps", "sps_rollouts": 2, "sps_chunk": 4, "sps_jackknife": False},
              ["--sampler", "sps", "--sps-rollouts", "2", "--sps-chunk", "4", "--no-sps-jackknife"])]
    with served() as (url, *_):
        for body, flags in cases:
            r = httpx.post(url + "/v1/completions", json={"prompt": "the cat", "seed": 9, **BODY, **body}).json()
            twin = run_twin("the cat", *SIZES, "--seed", "9", *flags)
            assert r["presto"]["choices"][0]["tokens"] == twin["tokens"], body
            assert r["presto"]["choices"][0]["params"] == twin["params"], body
        r = httpx.post(url + "/v1/completions", json={"prompt": "the cat", "budget": "lots"})
    assert r.status_code == 400 and r.json()["error"]["message"] == cli_error("run", "x", "-N", "lots").replace(
        "--budget", "budget")


def test_an_engine_failure_ends_the_chains_it_hit_with_a_500_and_the_server_serves_on():
    from helpers import ScriptedEngine

    engine = ScriptedEngine(fail_on_call=2, error=MemoryError("out of memory (simulated)"))
    with served(engine) as (url, *_):
        failed = httpx.post(url + "/v1/completions", json={"prompt": "the cat", "prefetch": "none", **BODY})
        ok = httpx.post(url + "/v1/completions", json={"prompt": "the cat", "seed": 3, **BODY})
        m = metrics(url)
    assert failed.status_code == 500
    assert failed.json()["error"] == {"message": "MemoryError: out of memory (simulated)", "type": "engine_error",
                                      "param": None, "code": None}
    assert ok.status_code == 200 and ok.json()["choices"][0]["text"] == run_twin("the cat", *SIZES, "--seed", "3")[
        "text"]
    assert m["presto_engine_faults_total"] == 1 and m['presto_chains_total{status="error"}'] == 1


@pytest.mark.engine
def test_on_vllm_the_openai_client_gets_what_run_gets(vllm):
    """The embedded SmolLM2-135M on vLLM: the chain `run` builds (make_driver + the engine loop, on the
    same engine before it serves), then the same prompt through the openai client, plain and streamed."""
    from presto_tui.runtime.session.runner import run_session

    engine = vllm
    prompt, params = "What is 7 * 8?", SamplerParams(max_new_tokens=16, steps=4, budget=4, seed=3)
    (twin,) = [e for e in run_session(engine, params, engine.encode_prompt(prompt), prompt=prompt)
               if isinstance(e, SessionEnd)]
    extra = {"steps": 4, "budget": 4}
    with served(engine) as (url, *_):
        c = client(url)
        plain = c.completions.create(model=engine.model, prompt=prompt, seed=3, max_tokens=16, extra_body=extra)
        chat = list(c.chat.completions.create(model=engine.model, seed=3, max_tokens=16, stream=True,
                                              messages=[{"role": "user", "content": prompt}], extra_body=extra))
        with pytest.raises(openai.BadRequestError) as bad:
            c.completions.create(model=engine.model, prompt=prompt, extra_body={"alpha": 0})
    assert plain.model_extra["presto"]["choices"][0]["tokens"] == list(twin.tokens)
    assert plain.choices[0].text == twin.text
    assert "".join(ch.choices[0].delta.content or "" for ch in chat if ch.choices) == twin.text
    assert bad.value.body["message"] == "alpha must lie in (0, 1000], got 0" and bad.value.body["param"] == "alpha"
