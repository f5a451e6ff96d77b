"""What a request within the server's caps may take from the others (issue 47).

Its admission bounds what the server will spend: the engine requests it keeps live at once and the
memory they hold (its prompt in every one), each list it carries (a tempering ladder) in length; the
engine's chain slots are shared between tenants in turn, and a tenant's full queue refuses nobody
else; a cancel ends the request's engine work and says what it stopped; another method's fields are
refused as unknown ones are; two Authorization headers are refused; a late keyless body counts 408.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from helpers import GatedEngine, presto_command, served, wait_for

from presto_tui.api.params import ParamError, params_from
from presto_tui.errors import InputError
from presto_tui.runtime.engines.synthetic import SyntheticEngine
from presto_tui.serve import allocator
from presto_tui.serve.app import ServeConfig, within_caps
from presto_tui.serve.host import Chain, EngineHost
from presto_tui.serve.protocol import COMPLETION, Prompt, parse
from presto_tui.serve.tenants import Tenant

pytestmark = pytest.mark.usefixtures("in_tmp")

SPS_AT_CAPS = {"prompt": "a b", "sampler": "sps", "sps_top_k": 256, "sps_draws": 4096, "sps_rollouts": 4096,
               "max_tokens": 4, "sps_chunk": 2, "tau": 100}


def admit(body: dict, **config):
    return within_caps(parse(body, COMPLETION, {}), ServeConfig(**config))


# -- 1, 4, 5: what a request keeps live and holds ----------------------------------------------------

def test_sps_at_the_caps_is_refused_for_the_engine_requests_it_keeps_live():
    """2.1M engine requests, under the request and token caps, a million of them live at once: one line
    names the cap and the field to lower."""
    with pytest.raises(InputError) as e:
        admit(SPS_AT_CAPS)
    assert "1048576 engine requests live at once" in e.value.line and "--max-live-requests" in e.value.line
    assert e.value.field == "sps_rollouts"  # type: ignore[attr-defined]
    assert admit({**SPS_AT_CAPS, "sps_top_k": 8, "sps_draws": 256, "sps_rollouts": 128}).live == 1024


def test_sps_width_counts_its_draws_as_well_as_its_rollouts():
    p = params_from({"sampler": "sps", "sps_top_k": 1, "sps_draws": 4096, "sps_rollouts": 2})
    assert p.method.width(p) == 4096


def test_the_prompt_in_every_live_request_is_in_the_memory_bound():
    """A 1 MB prompt with best-of-N at 128 samples was costed at its tokens only (and took 726 MB)."""
    prompt = "a b " * 250_000
    with pytest.raises(InputError) as e:
        admit({"prompt": prompt, "sampler": "bestofn", "samples": 128, "max_tokens": 16})
    assert "--max-request-memory" in e.value.line and e.value.field == "prompt"  # type: ignore[attr-defined]
    assert admit({"prompt": prompt, "sampler": "bestofn", "samples": 16, "max_tokens": 16}).memory < 512 << 20


def test_tempering_and_resample_move_at_their_largest_are_refused_before_they_grow():
    """63 replicas are 63 chains on the engine (each took 0.15 s of the engine thread to start): they take
    as many slots, and a request that would need more than a tenant's share is refused."""
    with pytest.raises(InputError, match="runs 63 chains on the engine at once") as e:
        admit({"prompt": "a b", "sampler": "ppt", "pt_replicas": 63, "max_tokens": 4096, "steps": 1024},
              max_chains=8)
    assert e.value.field == "pt_replicas"  # type: ignore[attr-defined]
    assert admit({"prompt": "a b", "sampler": "ppt", "pt_replicas": 8}, max_chains=8).slots == 8
    with pytest.raises(InputError, match="--max-request-memory"):
        admit({"prompt": "a b", "sampler": "ppt", "pt_replicas": 63, "max_tokens": 4096, "steps": 1024,
               "budget": "fill:16"}, max_chains=64)
    with pytest.raises(InputError, match="runs 4096 chains on the engine at once"):
        admit({"prompt": "a b", "sampler": "resample-move", "particles": 4096, "block_size": 1024, "max_tokens": 1024},
              max_chains=8)


def test_a_population_too_large_is_refused_without_building_its_members(monkeypatch):
    """Refusing 4,096 particles built every particle's parameters before their count was checked (in the
    check of the request's fields and again in its costing: 0.7 s and 7.6 MiB a time), and left the server
    8 MiB larger after the 400 (item 5b of benchmarks/bench_admission.py).  The count and the members'
    methods come without them; where members are built, they agree with what the count and methods said."""
    from presto_tui.runtime.methods.ppt import ParallelPowerTempering
    from presto_tui.runtime.methods.resample_move import ResampleMove

    for small in ({"sampler": "resample-move", "particles": 3}, {"sampler": "ppt", "pt_replicas": 5},
                  {"sampler": "ppt", "pt_ladder": "1,2.5,4", "pt_family": "multitry"}):
        p = params_from(small)
        members = p.method.members(p)
        assert p.method.member_count(p) == len(members)
        assert p.method.member_samplers(p) == {m.sampler for m in members}

    def built(*a):
        raise AssertionError("the members were built")

    for cls in (ResampleMove, ParallelPowerTempering):
        monkeypatch.setattr(cls, "members", built)
    with pytest.raises(InputError, match="runs 4096 chains on the engine at once"):
        admit({"prompt": "a b", "sampler": "resample-move", "particles": 4096, "block_size": 1024, "max_tokens": 1024},
              max_chains=8)
    with pytest.raises(InputError, match="runs 63 chains on the engine at once"):
        admit({"prompt": "a b", "sampler": "ppt", "pt_replicas": 63}, max_chains=8)


# -- 3: a tempering ladder -----------------------------------------------------------------------------

def test_a_ladder_holds_at_most_as_many_exponents_as_replicas_may_be():
    ladder = lambda n: ",".join(f"{1 + 3 * i / n:.6f}" for i in range(n - 1)) + ",4"
    assert len(params_from({"sampler": "ppt", "pt_ladder": ladder(64)}).method.members(
        params_from({"sampler": "ppt", "pt_ladder": ladder(64)}))) == 64
    for n in (65, 10_001):
        with pytest.raises(ParamError, match="at most 64 exponents"):
            params_from({"sampler": "ppt", "pt_ladder": ladder(n)})
    with pytest.raises(ParamError, match="at most 64 exponents"):  # (long exponents: the text is bounded too)
        params_from({"sampler": "ppt", "pt_ladder": "1." + "0" * 3000 + ",4"})


# -- 6: fair shares ----------------------------------------------------------------------------------------

def test_a_tenant_with_many_chains_leaves_a_slot_to_another():
    """One tenant's 8 chains on 4 slots took every slot; now it takes 3 and the other's chain starts at once,
    before any of the first tenant's ends."""
    engine = GatedEngine(shut=True)
    seen: list[tuple[str, str]] = []
    lock = threading.Lock()

    def deliver(batch, _pieces) -> None:
        with lock:
            seen.extend((key, type(ev).__name__) for key, ev, _ in batch)

    host = EngineHost(engine, max_chains=4, deliver=deliver, shared=True)
    host.start()
    try:
        params = params_from({"max_new_tokens": 8, "steps": 2})
        for i in range(8):
            host.add(Chain(f"a/{i}", Prompt("the cat"), params, i, 8, "", "alice"))
        wait_for(lambda: host.chains_live == 3 and host.chains_waiting == 5, "alice's three chains")
        host.add(Chain("b/0", Prompt("the cat"), params, tenant="bob"))
        wait_for(lambda: ("b/0", "SessionStart") in seen, "bob's chain started")
        assert not any(kind in ("SessionEnd", "SessionError") for _, kind in seen)
    finally:
        engine.open()
        host.stop(timeout=30)


def test_a_tenants_full_queue_refuses_only_that_tenant():
    """With n 8 on --max-chains 2 + --max-queue 6 another tenant got 429 (server busy) for the whole run."""
    engine = GatedEngine(shut=True)
    tenants = {"key-a": Tenant("alice"), "key-b": Tenant("bob")}
    with served(engine, tenants=tenants, max_chains=2, max_queue=6) as (url, server, _):
        threading.Thread(target=lambda: httpx.post(url + "/v1/completions", timeout=60, json={
            "prompt": "the cat", "n": 8, "max_tokens": 8, "steps": 2}, headers={"Authorization": "Bearer key-a"}),
            daemon=True).start()
        wait_for(lambda: server.hub.in_flight == 8, "alice's chains admitted")
        again = httpx.post(url + "/v1/completions", json={"prompt": "the cat", "max_tokens": 8, "steps": 2},
                           headers={"Authorization": "Bearer key-a"})
        got: dict = {}
        bob = threading.Thread(target=lambda: got.update(r=httpx.post(
            url + "/v1/completions", json={"prompt": "the cat", "max_tokens": 8, "steps": 2}, timeout=60,
            headers={"Authorization": "Bearer key-b"})))
        bob.start()
        wait_for(lambda: server.hub.in_flight == 9, "bob's chain admitted")
        engine.open()
        bob.join(60)
    assert again.status_code == 429
    assert got["r"].status_code == 200


# -- 2: a cancel ------------------------------------------------------------------------------------------

def test_a_cancel_ends_an_sps_requests_engine_work_and_says_what_it_stopped():
    body = {**SPS_AT_CAPS, "sps_top_k": 8, "sps_draws": 256, "sps_rollouts": 128, "max_tokens": 64,
            "request_id": "sps-1"}
    with served() as (url, server, _):
        t = threading.Thread(target=lambda: httpx.post(url + "/v1/completions", json=body, timeout=120), daemon=True)
        t.start()
        wait_for(lambda: server.host.engine_live > 256, "SPS's rollouts live")
        answer = httpx.post(url + "/v1/presto/requests/sps-1/cancel", timeout=30).json()
        live_after = server.engine.live  # (the answer came once the chain had ended: its requests are gone)
        t.join(60)
        done = httpx.post(url + "/v1/completions", json={"prompt": "the cat", "max_tokens": 4, "steps": 2,
                                                         "request_id": "small-1"}, timeout=60)
        late = httpx.post(url + "/v1/presto/requests/small-1/cancel", timeout=30).json()
    assert answer == {"id": "sps-1", "cancelled": [0], "finished": [], "running": []}
    assert live_after == 0
    assert done.status_code == 200
    assert late == {"id": "small-1", "cancelled": [], "finished": [0], "running": []}  # it had ended: not cancelled


# -- 11: smaller -------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("body", "field"), [
    ({"particles": 4}, "particles"), ({"tries": 4}, "tries"), ({"sampler": "lowtemp", "pt_replicas": 4}, "pt_replicas"),
    ({"sampler": "ppt", "tries": 3}, "tries")])
def test_another_methods_field_is_refused_as_an_unknown_field_is(body, field):
    with pytest.raises(InputError) as e:
        parse({"prompt": "a b", **body}, COMPLETION, {})
    assert e.value.line.startswith(f"unknown field {field!r} for sampler")
    assert e.value.field == field  # type: ignore[attr-defined]


def test_a_methods_own_and_its_members_fields_are_taken():
    assert parse({"prompt": "a b", "sampler": "multitry", "tries": 3}, COMPLETION, {}).params.tries == 3
    assert parse({"prompt": "a b", "sampler": "ppt", "pt_family": "multitry", "tries": 3}, COMPLETION,
                 {}).params.tries == 3


def test_two_authorization_headers_are_refused_and_a_late_keyless_body_counts_408():
    from test_serve import metrics
    from test_serve_shared import address, read_all

    with served(SyntheticEngine(), api_key="k", read_timeout=0.5) as (url, _, _):
        two = httpx.get(url + "/health", headers=[("Authorization", "Bearer k"), ("Authorization", "Bearer x")])
        two_rev = httpx.get(url + "/health", headers=[("Authorization", "Bearer x"), ("Authorization", "Bearer k")])
        socks = []
        for _ in range(3):
            s = socket.create_connection(address(url))
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{")
            socks.append(s)
        answers = [read_all(s, 3) for s in socks]
        time.sleep(0.2)
        m = metrics(url, Authorization="Bearer k")
    assert two.status_code == two_rev.status_code == 400 and "more than one Authorization" in two.text
    assert all(a.startswith(b"HTTP/1.1 408 ") for a in answers), answers[0][:100]
    assert m['presto_http_requests_total{code="408",route="completions"}'] == 3
    assert 'presto_http_requests_total{code="401",route="completions"}' not in m


# -- memory given back ---------------------------------------------------------------------------------------

@pytest.mark.skipif(sys.platform != "linux", reason="glibc's allocator and /proc")
def test_the_server_runs_on_the_c_allocator_so_that_freed_pages_go_back(tmp_path):
    """Python's allocator keeps a 1 MiB arena while one object in it lives: after a long request the server
    held 114 arenas for 35 MB of objects and RSS stayed 115 MiB up.  `serve` starts itself again, once, on
    the C library's allocator (whose free pages `malloc_trim` hands back); the process is the same one
    (its pid: signals reach it) and answers; other commands, and a PYTHONMALLOC already set, are left."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONMALLOC", "MALLOC_ARENA_MAX")}
    env.update(PRESTO_TUI_BACKEND="synthetic", PYTHONPATH=str(Path(__file__).parents[1]))
    proc = subprocess.Popen(presto_command("serve", "--port", "0", "--no-trace"), env=env, stderr=subprocess.PIPE,
                            text=True, cwd=tmp_path)
    try:
        url = re.search(r"at (http://\S+)/v1", proc.stderr.readline()).group(1)
        assert httpx.get(url + "/health", timeout=30).status_code == 200
        environ = dict(line.split("=", 1) for line in Path(f"/proc/{proc.pid}/environ").read_text().split("\0")
                       if "=" in line)
    finally:
        proc.terminate()
        proc.communicate(timeout=60)
    assert environ.get("PYTHONMALLOC") == "malloc" and environ.get("MALLOC_ARENA_MAX") == "2"
    assert proc.returncode == 0
    assert allocator.wanted(["--debug", "serve", "--port", "0"], {})["PYTHONMALLOC"] == "malloc"
    assert allocator.wanted(["run", "serve"], {}) is None  # (a prompt that reads "serve")
    assert allocator.wanted(["serve"], {"PYTHONMALLOC": "pymalloc"}) is None
    assert allocator.wanted(["serve"], {"MALLOC_ARENA_MAX": "8"})["MALLOC_ARENA_MAX"] == "8"
    # the restarted server takes out what the restart added (its engine processes start on the user's
    # settings), and does not start again
    restarted = allocator.wanted(["serve"], {"MALLOC_ARENA_MAX": "8"})
    assert restarted[allocator.ADDED] == "PYTHONMALLOC"
    allocator.forget_added(restarted)
    assert "PYTHONMALLOC" not in restarted and restarted["MALLOC_ARENA_MAX"] == "8"
    assert allocator.wanted(["serve"], restarted) is None


def test_a_large_request_hands_its_freed_memory_back_as_it_ends(monkeypatch):
    """glibc keeps what a request freed for reuse: RSS stayed at a 1 MB prompt's peak after it ended.  And
    most of what a chain held is in reference cycles, freed only by a full collection, which Python ran
    when it would: a 6-replica tempering request left the server at 218 MiB (from 87), 147 after one. So
    the request's end collects, then hands the pages back: in the engine thread, once the engine loop has
    let the chain go (from the event loop, the trim raced that and left 35 MiB of freed pages resident), again
    when the HTTP side has let the request go (asked of the engine thread), and a second later."""
    import presto_tui.serve.host as host
    from presto_tui.runtime.engines.synthetic import SyntheticEngine

    trims: list[int] = []
    threads: set[str] = set()
    collect = host.gc.collect
    monkeypatch.setattr(host, "_TRIM", lambda pad: trims.append(pad) or threads.add(threading.current_thread().name))
    monkeypatch.setattr(host.gc, "collect", lambda *a: trims.append(-1) or collect(*a))
    # before them, what the engine keeps and the interpreter's attribute cache go (in the engine thread)
    drop, clear = SyntheticEngine.drop_caches, host._CLEAR_CACHES
    assert clear is not None
    monkeypatch.setattr(SyntheticEngine, "drop_caches",
                        lambda self: trims.append(-3) or threads.add(threading.current_thread().name) or drop(self))
    monkeypatch.setattr(host, "_CLEAR_CACHES",
                        lambda: trims.append(-2) or threads.add(threading.current_thread().name) or clear())
    with served() as (url, _, _):
        small = httpx.post(url + "/v1/completions", json={"prompt": "the cat", "max_tokens": 4, "steps": 2},
                           timeout=60)
        after_small = list(trims)
        large = httpx.post(url + "/v1/completions", json={"prompt": "a b " * 50_000, "sampler": "bestofn",
                                                          "samples": 16, "max_tokens": 4}, timeout=60)
        wait_for(lambda: trims.count(0) >= 2, "the memory handed back, and again a second later")
        time.sleep(host.GIVE_BACK_AGAIN_S + 0.5)  # (the HTTP side's ask makes a pass of its own unless it came
        passes = trims.count(0)                    # as late as the second: the hub's own test asks it alone)
    assert small.status_code == large.status_code == 200
    assert after_small == [] and passes in (2, 3)
    assert trims == [-3, -2, -1, 0] * passes  # (let go, collected, then trimmed, each time)
    assert threads == {"presto-engine"}


def test_the_synthetic_engine_lets_its_memo_go_and_answers_alike_after():
    """Its memo is what the engine keeps only to be faster: dropped (as the server hands memory back), it is
    empty, and the same request gives the same tokens and numbers from the recomputed logits."""
    from presto_tui.runtime.core.types import Request
    from presto_tui.runtime.engines.synthetic import SyntheticEngine

    engine = SyntheticEngine()
    request = Request(prefix=(3, 4), n_new=12, seed=7, tau=0.5)
    before = engine.generate([request])[0]
    memo = engine.lm._log_probs.cache_info().currsize + engine.lm._logits.cache_info().currsize
    engine.drop_caches()
    assert memo > 0
    assert engine.lm._log_probs.cache_info().currsize == engine.lm._logits.cache_info().currsize == 0
    assert engine.generate([request])[0] == before


def test_with_the_engine_in_other_processes_the_server_gives_back_what_it_freed_itself(monkeypatch):
    """`serve --workers`: each worker's host gives its memory back; the server's own process (the events it
    kept) does so as a large request finishes."""
    import asyncio

    import presto_tui.serve.hub as hub
    from presto_tui.serve.protocol import parse

    given: list[str] = []
    monkeypatch.setattr(hub, "give_back_memory", lambda: given.append(threading.current_thread().name))

    class Workers:  # what the hub asks of a pool (pool.Pool), without its Ray workers
        gives_back_memory = False
        pieces: dict[int, str] = {}

        def __init__(self):
            self.added = []

        def add(self, chain):
            self.added.append(chain)

        def cancel(self, key):
            self.added.append(key)

        def watch(self, key, on):
            pass

    async def two_requests():
        h = hub.Hub(Workers(), max_chains=4, max_queue=4)
        ask = parse({"prompt": "the cat"}, "completion", {})
        for memory in (hub.TRIM_AFTER_BYTES - 1, hub.TRIM_AFTER_BYTES):
            run = h.reserve(ask, memory=memory)
            h.cancel(run)
            h.take([(c.key, hub.Withdrawn(), None) for c in run.chains])
            await asyncio.sleep(0.2)
        return h.host.added

    added = asyncio.run(two_requests())
    assert [c.large for c in added if not isinstance(c, str)] == [False, True]
    assert len(given) == 1 and given[0] != threading.main_thread().name  # (the large one, off the event loop)


def test_the_hub_asks_for_memory_back_as_a_large_request_finishes_and_as_its_kept_events_are_forgotten():
    """The events a finished request keeps for late listeners go when later requests push it out of the
    hub's keep (item 6 of benchmarks/bench_admission.py: 10 MiB, as 16 of the other tenant's requests
    finished after it, when every pass had run); that is a large request's memory let go too."""
    import asyncio

    import presto_tui.serve.hub as hub
    from presto_tui.serve.protocol import parse

    class Host:  # what the hub asks of an EngineHost that hands memory back in its engine thread
        gives_back_memory = True
        pieces: dict[int, str] = {}

        def __init__(self):
            self.asked: list[str] = []

        def add(self, chain):
            pass

        def cancel(self, key):
            pass

        def watch(self, key, on):
            pass

        def give_back(self):
            self.asked.append(done[-1])

    done: list[str] = []

    async def requests():
        h = hub.Hub(Host(), max_chains=4, max_queue=4, keep=1)
        ask = parse({"prompt": "the cat"}, "completion", {})
        for name, memory in (("small", 0), ("large", hub.TRIM_AFTER_BYTES), ("second small", 0),
                             ("third small", 0)):
            done.append(name)
            run = h.reserve(ask, memory=memory)
            h.cancel(run)
            h.take([(c.key, hub.Withdrawn(), None) for c in run.chains])
        return h.host.asked

    # the large one as it finished; then as the second small one's end pushed it out of the keep
    assert asyncio.run(requests()) == ["large", "second small"]


def test_a_finished_request_keeps_what_its_answer_said_and_lets_its_chains_summaries_go():
    """A finished request stays a while (late listeners, the cancel route), and with its chains' summaries
    it kept every event they had folded: 36 MiB for 6 tempering replicas run 15 s at 4,096 tokens, freed
    after the memory the request freed had been given back (benchmarks/bench_admission.py, item 5d)."""
    with served() as (url, server, _):
        answer = httpx.post(url + "/v1/completions", json={"prompt": "the cat", "max_tokens": 8, "steps": 4, "n": 2,
                                                           "request_id": "kept-1"}, timeout=60).json()
        (run,) = [r for r in server.hub.runs.values() if r.id == "kept-1"]
        late = httpx.post(url + "/v1/presto/requests/kept-1/cancel", timeout=30).json()
    assert [c.summary for c in run.chains] == [None, None]
    assert answer["presto"]["choices"] == [c.presto for c in run.chains]
    assert all(c.presto["transitions"] == c.transitions > 0 for c in run.chains)
    assert late == {"id": "kept-1", "cancelled": [], "finished": [0, 1], "running": []}
