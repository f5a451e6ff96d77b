"""`presto-tui serve --workers W`: several engines (Ray workers) behind one endpoint.

Two workers on the synthetic engine answer what `presto-tui run` answers, spread concurrent
requests over both, keep a chat's turns on one, merge their events into one stream and one
trace, and report per worker; a worker killed mid-load fails its own requests (500, each
started session ending with an `error` event in the trace, after every event it delivered) and
the other serves on; every part of the local Ray instance listens on loopback only.  Ray starts
slowly on two cores: one test, marked slow.
"""

from __future__ import annotations

import json
import os
import threading
from collections import Counter

import httpx
import pytest
from helpers import wait_for
from test_serve import client, metrics, run_twin

from presto_tui.logs.reader import read_trace
from presto_tui.logs.writer import TraceWriter
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.session.events import SessionEnd, SessionError

ray = pytest.importorskip("ray") if os.environ.get("CI") != "true" else __import__("ray")
openai = pytest.importorskip("openai")
PROMPTS = ["the cat", "a dog ran", "the tree", "small red home"]
pytestmark = pytest.mark.usefixtures("in_tmp")


def listening_beyond_loopback() -> list[tuple[str, str]]:
    """(process, address) of every socket this process and its children (Ray's GCS, raylet, agents,
    workers) listen on other than loopback's."""
    psutil = pytest.importorskip("psutil")
    me = psutil.Process()
    found = []
    for proc in (me, *me.children(recursive=True)):
        try:
            listening = [c.laddr for c in proc.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN]
            found += [(proc.name(), f"{a.ip}:{a.port}") for a in listening
                      if a.ip not in ("127.0.0.1", "::1", "::ffff:127.0.0.1")]
        except psutil.Error:  # (gone meanwhile)
            pass
    return found


def steps_by_worker(url: str) -> dict[str, float]:
    return {k: v for k, v in metrics(url).items() if k.startswith("presto_worker_engine_steps_total")}


@pytest.mark.slow
@pytest.mark.ray
def test_two_workers_answer_as_run_does_spread_the_load_and_a_killed_one_fails_only_its_requests(tmp_path):
    from presto_tui.runtime.engines.registry import EngineOptions
    from presto_tui.serve.app import ServeConfig, Server, create_app
    from presto_tui.serve.net import in_thread
    from presto_tui.serve.pool import Pool

    twins = {p: run_twin(p, "-n", "16", "-K", "10", "--seed", "4", "--prefetch", "stream") for p in PROMPTS}
    pool = Pool(2, "synthetic", EngineOptions(), max_chains=4)
    assert listening_beyond_loopback() == []  # a local Ray instance is this machine's only
    trace = tmp_path / "serve.jsonl"
    e = pool.engine
    writer = TraceWriter(trace, command="serve", backend=e.name, model=e.model, params=SamplerParams().to_dict(),
                         pieces=e.token_pieces, engine=dict(e.info))
    seen: list[dict] = []  # the merged event stream, every worker's
    with in_thread(create_app(Server(e, ServeConfig(max_chains=4), trace=writer, pool=pool))) as (url, _):
        listening = threading.Thread(target=read_all_events, args=(url, seen), daemon=True)
        listening.start()
        wait_for(lambda: metrics(url)["presto_event_streams"] == 1)
        c = client(url)
        answers: dict[str, str] = {}

        def ask(p: str) -> None:
            answers[p] = c.completions.create(model=e.model, prompt=p, seed=4, max_tokens=16,
                                              extra_body={"steps": 10, "prefetch": "stream"}).choices[0].text

        threads = [threading.Thread(target=ask, args=(p,)) for p in PROMPTS]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert answers == {p: twins[p]["text"] for p in PROMPTS}  # whichever worker ran it
        assert all(v > 0 for v in steps_by_worker(url).values())  # both took their share

        # a chat's second turn goes where its first went (that engine has its prefix cached)
        before = steps_by_worker(url)
        first = c.chat.completions.create(model=e.model, max_tokens=8, extra_body={"steps": 4},
                                          messages=[{"role": "user", "content": "the big mat"}])
        after_first = steps_by_worker(url)
        c.chat.completions.create(model=e.model, max_tokens=8, extra_body={"steps": 4}, messages=[
            {"role": "user", "content": "the big mat"},
            {"role": "assistant", "content": first.choices[0].message.content},
            {"role": "user", "content": "a cat sat"}])
        after_second = steps_by_worker(url)
        (ran,) = [k for k in before if after_first[k] > before[k]]
        assert [k for k in before if after_second[k] > after_first[k]] == [ran]

        # one worker dies mid-load: its requests fail with its line, the other's finish, serving goes on
        results: dict[str, httpx.Response] = {}

        def long(p: str) -> None:
            results[p] = httpx.post(url + "/v1/completions", timeout=120, json={
                "prompt": p, "max_tokens": 16, "steps": 400, "prefetch": "stream"})

        threads = [threading.Thread(target=long, args=(p,)) for p in PROMPTS]
        for t in threads:
            t.start()
        wait_for(lambda: all(v > 0 for k, v in metrics(url).items() if k.startswith("presto_worker_chains_live")))
        ray.kill(pool.workers[0].actor)
        for t in threads:
            t.join(120)
        health = httpx.get(url + "/health").json()
        after = c.completions.create(model=e.model, prompt="then it slept", max_tokens=8, extra_body={"steps": 4})
        m = metrics(url)
    listening.join(30)
    codes = Counter(r.status_code for r in results.values())
    assert codes[500] >= 1 and codes[200] >= 1 and codes[500] + codes[200] == len(PROMPTS)
    failed = [r.json()["error"]["message"] for r in results.values() if r.status_code == 500]
    assert all(line.startswith("worker 0 died") for line in failed)
    assert health["status"] == "degraded" and [w["status"] for w in health["workers"]] == ["failed", "ok"]
    assert after.choices[0].finish_reason in ("stop", "length")
    assert m['presto_worker_up{worker="0"}'] == 0 and m['presto_worker_up{worker="1"}'] == 1
    sessions = read_trace(trace).sessions  # one trace: every worker's sessions, each one closed
    ends = [s.events[-1] for s in sessions]
    assert all(isinstance(x, (SessionEnd, SessionError)) for x in ends)
    died = [x for x in ends if isinstance(x, SessionError)]
    assert all(x.message.startswith("worker 0 died: ") for x in died)
    assert len(died) == sum(not line.startswith("worker 0 died before the chain started") for line in failed)
    # nothing lost: the trace holds every recorded event the merged stream carried, session by session
    streamed = Counter(o["sid"] for o in seen if "sid" in o and o["type"] not in ("in_flight", "live_tree"))
    recorded = Counter({s.start.session_id: len(s.events) - 1 for s in sessions})
    assert streamed == recorded


def read_all_events(url: str, out: list) -> None:
    with httpx.stream("GET", url + "/v1/presto/events", timeout=180) as r:
        for line in r.iter_lines():
            if line.startswith("data: "):
                out.append(json.loads(line[6:]))
