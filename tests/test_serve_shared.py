"""`presto-tui serve` shared by clients nobody trusts: bounded memory, tenants, connection hygiene.

A listener that falls behind is dropped with a last event that says why, whole at any reading
speed; a request may ask for at most the server's steps and tokens, and what its chains may cost
(its sampler's bound times its chains) within the caps, a tenant's together within its own;
finished requests let go of their events; the rate behind /metrics is trimmed as it is written;
a key sees and cancels only its tenant's requests, and no id is taken up twice; a connection
must send its headers and every byte of its body in time, read or not, and there are at most so
many, event streams fewer; HEAD, 405, /health, slashes, bad values and both stopping signals
behave.  The soaks: max-size requests keep an engine step's cost flat, and the server's memory
stays within a fixed margin over thousands of requests with stalled listeners present.
"""

from __future__ import annotations

import gc
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import types
from pathlib import Path

import httpx
import pytest
from helpers import GatedEngine, cli_error, presto_command, served, wait_for
from test_serve import BODY, client, metrics, run_twin

from presto_tui.logs.reader import read_trace
from presto_tui.runtime.core.params import SamplerParams

openai = pytest.importorskip("openai")
MODEL = "synthetic-v26-o2-s0"
pytestmark = pytest.mark.usefixtures("in_tmp")


def address(url: str) -> tuple[str, int]:
    host, port = url.split("//")[1].rsplit(":", 1)
    return host, int(port)


def stalled(url: str, path: str = "/v1/presto/events", headers: str = "") -> socket.socket:
    """A client that asks for an event stream and never reads it (a small receive buffer, so that
    what the server writes backs up soon)."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(address(url))
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n{headers}\r\n".encode())
    return s


def squeeze(uv) -> None:
    """Small send buffers on the server's side of every open connection: a client that does not
    read holds up the server's writes after kilobytes, not megabytes of kernel buffers."""
    for conn in list(uv.server_state.connections):
        sock = conn.transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)


def data_lines(r: httpx.Response) -> list[dict]:
    return [json.loads(ln[6:]) for ln in r.iter_lines() if ln.startswith("data: ")]


# -- 1. listeners: bounded in bytes, a slow one dropped with a reason ---------------------------------

def test_a_listener_that_falls_behind_is_dropped_with_a_last_event_that_says_why():
    with served(listener_bytes=64 << 10) as (url, server, uv):
        with httpx.stream("GET", url + "/v1/presto/events", timeout=5) as slow:
            wait_for(lambda: server.hub.listeners == 1)
            squeeze(uv)
            for seed in range(40):  # about 30 KB of events each; the client reads none of it meanwhile
                httpx.post(url + "/v1/completions", json={"prompt": "the cat", "seed": seed, **BODY})
                if server.hub.listeners_dropped:
                    break
            got = data_lines(slow)  # what was on its way, then the last word; the stream ends
        m = metrics(url)
    assert got[-1]["type"] == "dropped" and "fell" in got[-1]["reason"] and "65536 bytes" in got[-1]["reason"]
    assert all(o["type"] != "dropped" for o in got[:-1])
    assert m["presto_event_streams_dropped_total"] == 1
    assert m["presto_event_streams"] == 0 and m["presto_event_stream_backlog_bytes"] == 0  # its backlog let go


def paced_reader(url: str, bytes_per_s: float, out: dict) -> None:
    """An event stream read at `bytes_per_s` (a small receive buffer, read a KiB at a time) until its
    response ends (out["whole"]: True) or the connection does; out["body"]: what it read."""
    import h11

    conn = h11.Connection(h11.CLIENT)
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(address(url))
    s.settimeout(30)
    s.sendall(conn.send(h11.Request(method="GET", target="/v1/presto/events", headers=[("Host", "x")]))
              + conn.send(h11.EndOfMessage()))
    body, out["whole"] = bytearray(), False
    try:
        while not out["whole"]:
            data = s.recv(1024)
            conn.receive_data(data)
            while (ev := conn.next_event()) not in (h11.NEED_DATA, h11.PAUSED):
                if isinstance(ev, h11.Data):
                    body += ev.data
                elif isinstance(ev, h11.EndOfMessage):
                    out["whole"] = True
            if not data:
                break
            time.sleep(len(data) / bytes_per_s)
    except (OSError, h11.RemoteProtocolError):  # cut: a reset, or the connection ended in the middle
        pass
    finally:
        s.close()
    out["body"] = bytes(body)


def test_every_dropped_reader_gets_a_whole_last_event_that_says_why_at_any_reading_speed():
    """Readers at 16, 32 and 64 KB/s of a stream that runs faster: each is dropped, and what it reads
    ends with the whole `dropped` event (not a connection cut in the middle of an event because the
    server's writes waited on it longer than --read-timeout: it reads, however slowly)."""
    speeds = (16_000, 32_000, 64_000)
    with served(listener_bytes=256 << 10, read_timeout=1, max_chains=16) as (url, server, uv):
        got: list[dict] = [{} for _ in speeds]
        readers = [threading.Thread(target=paced_reader, args=(url, rate, out)) for rate, out in zip(speeds, got)]
        for t in readers:
            t.start()
        wait_for(lambda: server.hub.listeners == len(speeds))
        squeeze(uv)
        done = threading.Event()

        def load(k: int) -> None:  # long prompts: every event is long
            with httpx.Client(base_url=url, timeout=60) as c:
                seed = k
                while not done.is_set():
                    c.post("/v1/completions", json={"prompt": "the cat " * 200, "seed": seed, **BODY})
                    seed += 2

        loaders = [threading.Thread(target=load, args=(k,)) for k in range(2)]
        for t in loaders:
            t.start()
        wait_for(lambda: server.hub.listeners_dropped == len(speeds) or not any(t.is_alive() for t in readers),
                 "every reader dropped (or cut)")
        done.set()
        for t in (*loaders, *readers):
            t.join(120)
    for rate, out in zip(speeds, got):
        lines = [ln for ln in out["body"].split(b"\n\n") if ln.startswith(b"data: ")]
        assert out["whole"] and out["body"].endswith(b"\n\n"), (rate, out["body"][-200:])
        last = json.loads(lines[-1][6:])
        assert last["type"] == "dropped" and "fell" in last["reason"], (rate, last)


def test_a_request_listener_reads_the_requests_own_events_and_its_replay_is_not_capped():
    """One request's listener copies nothing: a replay larger than a stream's buffer comes whole."""
    with served(listener_bytes=8 << 10) as (url, server, _):
        r = httpx.post(url + "/v1/completions", json={"prompt": "the cat", "request_id": "big", **BODY}).json()
        assert server.hub.find("big", "").kept_bytes > 3 * (8 << 10)
        with httpx.stream("GET", url + "/v1/presto/events?request=big", timeout=10) as late:
            got = data_lines(late)
    assert got[-1]["type"] == "session_end" and got[-1]["text"] == r["choices"][0]["text"]
    assert not any(o["type"] == "dropped" for o in got)


# -- 2. what one request may ask for and keep ------------------------------------------------------

def test_steps_and_tokens_above_the_servers_caps_are_400_before_anything_runs():
    with served(request_timeout=3) as (url, server, _):  # today's defaults: --max-steps 1024, --max-tokens 4096
        steps = httpx.post(url + "/v1/completions", json={"prompt": "the cat", "steps": 10**6, "max_tokens": 8})
        tokens = httpx.post(url + "/v1/completions", json={"prompt": "the cat", "max_tokens": 65536})
        assert server.host.steps == 0  # the engine never saw them
    assert steps.status_code == 400 and steps.json()["error"]["message"] == \
        "steps 1000000 is over this server's limit of 1024 (presto-tui serve --max-steps)"
    assert tokens.status_code == 400 and tokens.json()["error"]["message"] == \
        "max_tokens 65536 is over this server's limit of 4096 (presto-tui serve --max-tokens)"


ISSUE_SPS = {"sampler": "sps", "sps_top_k": 256, "sps_draws": 4096, "sps_rollouts": 4096, "max_tokens": 4096}


def test_a_request_whose_chains_would_cost_more_than_the_caps_is_400_before_anything_runs():
    """Steps and tokens within the caps, but a sampler that multiplies them (SPS: candidates x rollouts x
    draws) by millions: its cost bound is over --max-request-tokens, named with the cap."""
    with served(request_timeout=30) as (url, server, _):
        huge = httpx.post(url + "/v1/completions", json={"prompt": "the cat", **ISSUE_SPS})
        assert server.host.steps == 0 and server.engine.live == 0  # the engine never saw it
        many = httpx.post(url + "/v1/completions", json={"prompt": "the cat", "sampler": "bestofn", "samples": 64,
                                                          "max_tokens": 8, "n": 4})
        normal = httpx.post(url + "/v1/completions", json={"prompt": "the cat", **BODY})
        small_sps = httpx.post(url + "/v1/completions", json={"prompt": "the cat", "sampler": "sps", **BODY})
    message = huge.json()["error"]["message"]
    assert huge.status_code == 400 and message.startswith(
        "this request may cost up to 549764202496 tokens (one chain of its sampler's parameters), over this "
        "server's limit of 17179869184 (presto-tui serve --max-request-tokens)")
    assert many.status_code == 200  # 256 samples of 8 tokens: far within
    assert normal.status_code == 200 and small_sps.status_code == 200


def test_a_tenants_running_requests_together_stay_within_its_token_cap():
    engine = GatedEngine(shut=True)
    with served(engine, tenants=tenants(), max_tenant_tokens=3000) as (url, server, _):
        as_alice = {"Authorization": "Bearer key-a"}
        body = {"prompt": "the cat", "max_tokens": 16, "steps": 10, "prefetch": "none"}  # 16 + 10 x 16 = 176
        first = threading.Thread(target=lambda: httpx.post(url + "/v1/completions", headers=as_alice,
                                                            json={**body, "n": 16}, timeout=60))
        first.start()  # 16 chains: 2816 tokens on alice's account
        wait_for(lambda: server.hub.tenant_tokens["alice"] == 16 * 176)
        over = httpx.post(url + "/v1/completions", headers=as_alice, json={**body, "n": 2})
        alone = httpx.post(url + "/v1/completions", headers=as_alice, json={**body, "n": 32})
        bob = threading.Thread(target=lambda: httpx.post(url + "/v1/completions", json=body, timeout=60,
                                                          headers={"Authorization": "Bearer key-b"}))
        bob.start()  # another tenant's account
        wait_for(lambda: server.hub.tenant_tokens["bob"] == 176)
        engine.open()
        first.join(60)
        bob.join(60)
        wait_for(lambda: not server.hub.tenant_tokens)  # released as they finish
        again = httpx.post(url + "/v1/completions", headers=as_alice, json={**body, "n": 2})
    assert over.status_code == 429 and "--max-tenant-tokens" in over.json()["error"]["message"]
    assert "retry-after" in over.headers
    assert alone.status_code == 400 and "5632 tokens" in alone.json()["error"]["message"]
    assert again.status_code == 200


def test_a_request_id_the_server_made_cannot_be_taken_up_by_a_client():
    engine = GatedEngine(shut=True)
    with served(engine) as (url, server, _):
        running: dict = {}
        t = threading.Thread(target=lambda: running.update(r=httpx.post(
            url + "/v1/completions", json={"prompt": "the cat", **BODY, "stream": True}, timeout=60)))
        t.start()
        wait_for(lambda: server.hub.live_requests == 1)
        rid = next(iter(server.hub.runs.values())).id  # what X-Request-Id says
        taken = httpx.post(url + "/v1/completions", json={"prompt": "a dog", **BODY, "request_id": rid})
        engine.open()
        t.join(60)
        finished = httpx.post(url + "/v1/completions", json={"prompt": "a dog", **BODY, "request_id": rid})
    assert running["r"].headers["x-request-id"] == rid and running["r"].status_code == 200
    assert taken.status_code == 400 and taken.json()["error"]["message"] == \
        f"request_id {rid!r} was used before; a request id is never reused"
    assert finished.status_code == 400


def test_finished_requests_keep_their_events_only_within_the_byte_budget():
    with served(keep_bytes=100_000, keep=1000) as (url, server, _):
        ids = [httpx.post(url + "/v1/completions", json={"prompt": "the cat", "seed": s, **BODY}).json()["id"]
               for s in range(8)]
        kept = [rid for rid in ids if server.hub.find(rid, "") is not None]
        assert 0 < server.hub.finished_bytes <= 100_000 and server.hub.kept_bytes == server.hub.finished_bytes
        late = httpx.get(url + f"/v1/presto/events?request={ids[0]}")
        last = httpx.get(url + f"/v1/presto/events?request={ids[-1]}")
    assert kept == ids[-len(kept):] and len(kept) < len(ids)  # the oldest went first
    assert late.status_code == 404 and last.status_code == 200 and '"session_end"' in last.text


# -- 3. the rate window -------------------------------------------------------------------------

def test_the_rate_window_is_trimmed_as_it_is_written_even_if_nobody_scrapes(monkeypatch):
    import presto_tui.serve.host as host_module

    clock = iter(range(1, 10**9))  # the engine thread's clock runs a second a reading
    monkeypatch.setattr(host_module, "time", types.SimpleNamespace(monotonic=lambda: float(next(clock))))
    with served() as (url, server, _), httpx.Client(base_url=url) as c:
        for seed in range(25):
            c.post("/v1/completions", json={"prompt": "the cat", "seed": seed, "max_tokens": 4, "steps": 2})
        assert len(server.host._rate) <= 11  # ten seconds' worth, however much went before


# -- 4. tenants --------------------------------------------------------------------------------------

def tenants():
    from presto_tui.serve.tenants import Tenant

    return {"key-a": Tenant("alice"), "key-b": Tenant("bob"), "key-ops": Tenant("ops", admin=True)}


def test_a_tenant_sees_and_cancels_only_its_own_requests():
    engine = GatedEngine(shut=True)
    secret = "alice secret prompt"
    with served(engine, tenants=tenants()) as (url, server, _):
        a, b = client(url, "key-a"), client(url, "key-b")
        bob_sees: list[dict] = []

        def firehose(key: str, out: list) -> None:
            with httpx.stream("GET", url + "/v1/presto/events", headers={"Authorization": f"Bearer {key}"},
                              timeout=30) as r:
                for line in r.iter_lines():
                    if line.startswith("data: "):
                        out.append(json.loads(line[6:]))

        ops_sees: list[dict] = []
        for key, out in (("key-b", bob_sees), ("key-ops", ops_sees)):
            threading.Thread(target=firehose, args=(key, out), daemon=True).start()
        wait_for(lambda: server.hub.listeners == 2)
        answer: dict = {}
        t = threading.Thread(target=lambda: answer.update(r=a.completions.create(
            model=MODEL, prompt=secret, seed=3, extra_body={**BODY, "request_id": "a1"})))
        t.start()
        wait_for(lambda: server.host.chains_live == 1)
        as_bob = {"Authorization": "Bearer key-b"}
        assert httpx.get(url + "/v1/presto/events?request=a1", headers=as_bob).status_code == 404
        with pytest.raises(openai.NotFoundError) as nope:
            b.post("presto/requests/a1/cancel", cast_to=httpx.Response)  # (openai: relative to /v1)
        assert nope.value.body["message"] == "no request 'a1' on this server"  # (the route, not a missing one)
        assert httpx.post(url + "/v1/presto/requests/a1/cancel?tenant=alice", headers=as_bob).status_code == 404
        # bob's own request may carry the same id: ids are each tenant's own
        theirs: dict = {}
        u = threading.Thread(target=lambda: theirs.update(r=b.completions.create(
            model=MODEL, prompt="a dog", extra_body={**BODY, "request_id": "a1"})))
        u.start()
        wait_for(lambda: server.host.chains_live == 2)
        engine.open()
        t.join(30)
        u.join(30)
        with pytest.raises(openai.BadRequestError) as again:  # a used id is never reused
            a.completions.create(model=MODEL, prompt="the cat", extra_body={**BODY, "request_id": "a1"})
        admin = httpx.get(url + "/v1/presto/events?request=a1&tenant=alice",
                          headers={"Authorization": "Bearer key-ops"}, timeout=10)
        wait_for(lambda: sum(o.get("type") == "session_end" for o in ops_sees) == 2)
    assert answer["r"].choices[0].text == run_twin(secret, "-n", "16", "-K", "10", "--seed", "3")["text"]
    assert answer["r"].choices[0].finish_reason != "cancelled"
    assert secret not in json.dumps(bob_sees) and {o.get("tenant") for o in bob_sees if "tenant" in o} == {"bob"}
    assert "request_id 'a1' was used before" in again.value.body["message"]
    assert admin.status_code == 200 and secret in admin.text  # an admin key sees every tenant's
    assert {o.get("tenant") for o in ops_sees if "tenant" in o} == {"alice", "bob"}


def test_chat_connect_runs_as_its_keys_tenant():
    from presto_tui.runtime.session.chat import Notice
    from presto_tui.runtime.session.events import SessionEnd
    from presto_tui.serve.client import RemoteChatSession

    items: list = []
    with served(tenants=tenants()) as (url, server, _):
        RemoteChatSession(url, api_key="key-b").run("the cat", SamplerParams(max_new_tokens=8, steps=4), None,
                                                    items.append)
        (run,) = server.hub.runs.values()
    assert run.tenant.name == "bob" and not [x for x in items if isinstance(x, Notice)]
    assert [x.reason for x in items if isinstance(x, SessionEnd)] == ["done"]


def test_a_server_made_request_id_is_unguessable_and_keys_come_from_flags_or_a_file(tmp_path):
    from presto_tui.serve.tenants import Tenant, key_table

    with served() as (url, _, _):
        ids = {httpx.post(url + "/v1/completions", json={"prompt": "the cat", **BODY}).json()["id"] for _ in range(2)}
    assert len(ids) == 2 and all(re.fullmatch(r"cmpl-[0-9a-f]{32}", i) for i in ids)  # 128 random bits
    f = tmp_path / "keys"
    f.write_text("# tenants\nalice k1\nops k2 admin\n\n")
    assert key_table(["k0", "bob=k3"], ["root=k4"], f) == {
        "k0": Tenant("default"), "k3": Tenant("bob"), "k4": Tenant("root", admin=True), "k1": Tenant("alice"),
        "k2": Tenant("ops", admin=True)}
    f.write_text("alice k1 owner\n")
    with pytest.raises(ValueError, match=r"keys:1: a line is NAME KEY or NAME KEY admin"):
        key_table([], [], f)
    with pytest.raises(ValueError, match="this key is given twice"):
        key_table(["a=k", "b=k"])


def test_serve_checks_its_keys_caps_and_scale_flags_before_the_engine(monkeypatch, tmp_path):
    from presto_tui.runtime.engines import registry

    monkeypatch.setattr(registry, "start_engine", lambda *a, **k: pytest.fail("the engine started"))
    assert cli_error("serve", "--api-key", "a=k", "--api-key", "b=k") == "--api-key b=...: this key is given twice " \
        "(a key names one tenant)"
    assert cli_error("serve", "--admin-key", "nokey") == "--admin-key takes NAME=KEY (NAME: 1 to 64 letters, digits " \
        "or . _ -), got 'nokey'..."
    assert cli_error("serve", "--api-keys", str(tmp_path / "none")).endswith("cannot read the keys file (No such file "
                                                                             "or directory)")
    assert cli_error("serve", "--steps", "2000") == "--steps 2000 is over --max-steps 1024 (what a request may ask for)"
    assert cli_error("serve", "--max-tokens", "0") == "--max-tokens must lie in [1, 65536], got 0"
    assert cli_error("serve", "--read-timeout", "0") == "--read-timeout must lie in [0.1, 3600], got 0"
    assert cli_error("serve", "--workers", "0") == "--workers must lie in [1, 4096], got 0"
    assert cli_error("serve", "--ray-address", "nonsense").startswith("--ray-address must be host:port")


# -- 5. connections ------------------------------------------------------------------------------

def read_all(s: socket.socket, timeout: float) -> bytes:
    s.settimeout(timeout)
    out = b""
    try:
        while chunk := s.recv(65536):
            out += chunk
    except TimeoutError:
        out += b"<still open>"
    except ConnectionResetError:  # (closed while the client still sent: what it read before stays)
        out += b"<reset>"
    return out


def test_a_connection_must_send_its_headers_and_body_in_time_and_their_number_is_capped():
    with served(read_timeout=0.5, max_connections=4) as (url, _, _):
        half = socket.create_connection(address(url))
        half.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ")  # ... and nothing more
        silent = socket.create_connection(address(url))
        trickle = socket.create_connection(address(url))
        trickle.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                        b"Content-Length: 100\r\n\r\n{\"prompt\": ")
        held = [half, silent, trickle]
        time.sleep(0.1)
        extra = socket.create_connection(address(url))  # the fourth is fine, a fifth is one too many
        fifth = socket.create_connection(address(url))
        refused = read_all(fifth, 2)
        for s in held:
            answer = read_all(s, 3)
            assert answer.startswith(b"HTTP/1.1 408 ") and answer.endswith(b"}"), answer[:200]  # then closed
        assert b"--read-timeout" in read_all(extra, 3)
        ok = httpx.get(url + "/health")
    assert refused.startswith(b"HTTP/1.1 503 ") and b"--max-connections" in refused
    assert not refused.endswith(b"<still open>")
    assert ok.status_code == 200


def drip(s: socket.socket, every_s: float, stop: threading.Event) -> threading.Thread:
    """Send one byte of a body every `every_s` until the server answers or closes (or `stop`)."""
    import select

    def go() -> None:
        while not stop.wait(every_s):
            if select.select([s], [], [], 0)[0]:  # an answer, or the end: what it reads, not a reset
                return
            try:
                s.send(b"x")
            except OSError:
                return

    t = threading.Thread(target=go, daemon=True)
    t.start()
    return t


def test_every_byte_a_connection_owes_is_due_within_the_read_timeout_read_or_not():
    """A body the server never reads (after a 401 or 413, or one GET /health does not want) holds
    nothing past --read-timeout, and connections without a key do not lock out one with a key."""
    stop = threading.Event()
    with served(read_timeout=0.5, max_connections=6, api_key="k") as (url, _, _):  # six: all of them held
        key = b"Authorization: Bearer k\r\n"
        oversized = socket.create_connection(address(url))  # over --max-body-bytes, and never sent
        oversized.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + key + b"Content-Length: 2000000\r\n\r\n")
        keyless = []
        for _ in range(4):  # no key, a body owed one byte at a time
            s = socket.create_connection(address(url))
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{")
            drip(s, 0.1, stop)
            keyless.append(s)
        health = socket.create_connection(address(url))  # with a key, a body GET /health never reads
        health.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n" + key + b"Content-Length: 100000\r\n\r\n")
        drip(health, 0.1, stop)
        answers = [read_all(s, 3) for s in (oversized, *keyless, health)]
        ok = httpx.get(url + "/health", headers={"Authorization": "Bearer k"})
    stop.set()
    assert answers[0].startswith(b"HTTP/1.1 408 ") and b"--read-timeout" in answers[0]
    for answer in answers:
        assert not answer.endswith(b"<still open>"), answer[:200]  # closed: the body was due
    assert all(a.startswith((b"HTTP/1.1 401 ", b"HTTP/1.1 408 ")) for a in answers[1:5]), answers[1][:200]
    assert answers[5].startswith(b"HTTP/1.1 200 ")
    assert ok.status_code == 200


# -- 6. small things -------------------------------------------------------------------------------

def test_event_streams_have_a_cap_of_their_own_below_the_connections():
    with served(max_event_streams=3, max_connections=8) as (url, server, _):
        held = [stalled(url) for _ in range(3)]
        wait_for(lambda: server.hub.listeners == 3)
        refused = httpx.get(url + "/v1/presto/events")
        health = httpx.get(url + "/health")
        for s in held:
            s.close()
        wait_for(lambda: server.hub.listeners == 0)
        with httpx.stream("GET", url + "/v1/presto/events", timeout=5) as again:
            status = again.status_code
    assert refused.status_code == 429 and "--max-event-streams" in refused.json()["error"]["message"]
    assert health.status_code == 200 and status == 200


def test_head_allow_health_slashes_and_bad_values(tmp_path):
    with served(trace=tmp_path / "t.jsonl") as (url, _, _):
        heads = [httpx.head(url + p) for p in ("/health", "/metrics", "/v1/models")]
        wrong = httpx.post(url + "/health")
        health = httpx.get(url + "/health").json()
        slash = httpx.get(url + "/v1/models/", headers={"Host": "evil.example"})
        null = httpx.post(url + "/v1/completions", content=b"null", headers={"Content-Type": "application/json"})
        tiny = httpx.post(url + "/v1/completions", json={"prompt": "the cat", "alpha": 1e-300})
        huge = httpx.post(url + "/v1/completions", json={"prompt": "the cat", "n": 10**30})
        long = httpx.post(url + "/v1/completions", json={"prompt": "the cat", "steps": "9" * 2000})
        nul = httpx.post(url + "/v1/presto/requests/a%00b/cancel")
    assert [h.status_code for h in heads] == [200, 200, 200] and all(h.content == b"" for h in heads)
    assert wrong.status_code == 405 and set(wrong.headers["allow"].split(", ")) == {"GET", "HEAD"}
    assert health["trace"] == "t.jsonl" and str(tmp_path) not in json.dumps(health)
    assert slash.status_code == 404 and "location" not in slash.headers
    assert null.json()["error"]["message"] == "the request body should be a JSON object, got null"
    assert tiny.status_code == 400 and tiny.json()["error"]["message"] == (
        "alpha 1e-300 makes the proposal temperature 1/alpha = 1e+300, outside tau's range "
        "[0.0001, 100]; give tau too")
    assert huge.json()["error"]["message"] == "n must lie in [1, 256], got a 31-digit number"
    assert long.json()["error"]["message"] == "steps must lie in [1, 10^6], got a 2000-digit number"
    assert nul.json()["error"]["message"] == "no request 'a\\x00b' on this server"  # escaped once, not twice


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stopping_signal_drains_and_a_listener_that_never_reads_costs_no_traceback(tmp_path, sig):
    env = {**os.environ, "PRESTO_TUI_BACKEND": "synthetic", "PYTHONPATH": str(Path(__file__).parents[1])}
    proc = subprocess.Popen(presto_command("serve", "--port", "0", "--trace", str(tmp_path / "t.jsonl")),
                            env=env, stderr=subprocess.PIPE, text=True)
    try:
        url = re.search(r"at (http://\S+)/v1", proc.stderr.readline()).group(1)
        listener = stalled(url)
        # a long prompt makes every event long: what the listener is sent soon backs up on the server,
        # past the kernel's buffers (megabytes)
        body = {"prompt": "the cat " * 8000, "max_tokens": 8, "steps": 2, "n": 16}
        for seed in range(40):
            httpx.post(url + "/v1/completions", json={"seed": seed, **body}, timeout=60)
            if metrics(url)["presto_event_stream_backlog_bytes"] > 0:
                break
        assert metrics(url)["presto_event_stream_backlog_bytes"] > 0
        running = threading.Thread(target=lambda: httpx.post(url + "/v1/completions", timeout=60,
                                                             json={"prompt": "a dog", **body, "steps": 1000}))
        running.start()
        wait_for(lambda: metrics(url)["presto_chains_live"] > 0)
    finally:
        proc.send_signal(sig)
        rest = proc.communicate(timeout=60)[1]
    listener.close()
    running.join(10)
    assert "Traceback" not in rest and "Error" not in rest, rest
    lines = rest.strip().splitlines()
    if sig == signal.SIGTERM:  # stopped on purpose: 0, and the trace's line last
        assert proc.returncode == 0 and lines[-1].startswith("presto-tui: trace written to ")
    else:
        assert proc.returncode == 130 and lines[-2].startswith("presto-tui: trace written to ")
    sessions = read_trace(tmp_path / "t.jsonl").sessions
    assert sessions and all(s.events[-1].reason in ("done", "cancelled") for s in sessions)
    assert sessions[-1].events[-1].reason == "cancelled"  # the one running when the signal came


def test_ctrl_c_exits_130_even_when_sigint_came_in_ignored(tmp_path):
    """A script's background job starts with SIGINT ignored; a SIGINT sent to it still stops the server
    (uvicorn's handler), and the exit status says so as for Ctrl-C, not 0."""
    env = {**os.environ, "PRESTO_TUI_BACKEND": "synthetic", "PYTHONPATH": str(Path(__file__).parents[1])}
    command = [sys.executable, "-c", "from presto_tui.cli import main; main()", "serve", "--port", "0", "--no-trace"]
    proc = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True,  # (not presto_command: it undoes that)
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        url = re.search(r"at (http://\S+)/v1", proc.stderr.readline()).group(1)
        wait_for(lambda: httpx.get(url + "/health").status_code == 200)
    finally:
        proc.send_signal(signal.SIGINT)
        rest = proc.communicate(timeout=60)[1]
    assert proc.returncode == 130, rest
    assert rest.strip().splitlines()[-1] == "presto-tui: interrupted"


# -- the soaks: the largest requests, again and again; memory over thousands of requests ----------

MAX_SIZE = {"prompt": "the cat", "steps": 1024, "max_tokens": 4096}  # the server's caps: the largest request


def run_for(url: str, server, rid: str, steps: int, until=lambda: False) -> None:
    """A max-size request of the default sampler, run for `steps` engine steps (or `until`), then cancelled."""
    t = threading.Thread(target=lambda: httpx.post(url + "/v1/completions", json={**MAX_SIZE, "request_id": rid},
                                                   timeout=120))
    start = server.host.steps
    t.start()
    wait_for(lambda: server.host.steps >= start + steps or until(), f"{steps} engine steps of {rid}")
    assert httpx.post(url + f"/v1/presto/requests/{rid}/cancel").status_code == 200
    t.join(60)


def test_soak_max_size_requests_keep_an_engine_steps_cost_flat(monkeypatch):
    """What an engine step walks besides the engine: the live tree of a streaming epoch (a transient
    progress event), rebuilt at most every 0.1 s per chain, grows with the chain; with 4096-token
    states one took longer than 0.1 s, so every step built one and a max-size request crawled. It is
    built only for a chain someone listens to, and then takes a bounded share of the loop's time (on
    the loop's clock, made here to advance 1 ms a reading and 50 ms a tree: no wall-clock threshold).
    And the events' wire objects (a round's tree of long states took up to 1.4 s to encode) are encoded
    on the engine's thread, never on the server's asyncio loop, which /metrics and every answer wait on."""
    import presto_tui.runtime.session.loop as loop_module
    import presto_tui.serve.wire as wire
    from presto_tui.runtime.session import streaming

    encoded_on: set[str] = set()
    real_encode = wire.encode

    def encode(ev):
        encoded_on.add(threading.current_thread().name)
        return real_encode(ev)

    monkeypatch.setattr(wire, "encode", encode)

    clock = {"t": 0.0, "trees": 0}
    real = streaming.StreamDriver.progress_event

    def counted(self):
        clock["trees"] += 1
        clock["t"] += 0.05  # as long as a long epoch's tree takes to build
        return real(self)

    def reading() -> float:
        clock["t"] += 0.001
        return clock["t"]

    monkeypatch.setattr(streaming.StreamDriver, "progress_event", counted)
    monkeypatch.setattr(loop_module, "time", types.SimpleNamespace(perf_counter=reading))
    with served(request_timeout=None) as (url, server, uv):
        run_for(url, server, "alone", 300)  # nobody listens: no live tree is ever built
        assert clock["trees"] == 0
        listener = stalled(url)  # the same request again, and someone listens (and never reads)
        wait_for(lambda: server.hub.listeners == 1)
        squeeze(uv)
        since = clock["t"]
        run_for(url, server, "watched", 600)
        share = clock["trees"] * 0.05 / (clock["t"] - since)
        listener.close()
        wait_for(lambda: server.hub.listeners == 0 and server.host.chains_live == 0)
        left = (server.engine.live, len(server.host.loop.loop._owner), server.hub._watched, server.host._watched)
    assert clock["trees"] > 0 and share < 0.25, f"{clock['trees']} live trees, {share:.0%} of the loop's time"
    assert left == (0, 0, set(), set())  # nothing a finished request held is left
    assert encoded_on == {"presto-engine"}


# -- the soak: memory over thousands of requests, with stalled listeners --------------------------

def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


SOAK_REQUESTS = 2000
SOAK_MARGIN_MIB = 40


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the RSS from /proc")
def test_soak_memory_stays_within_a_margin_over_thousands_of_requests_with_stalled_listeners():
    body = {"prompt": "the cat", "max_tokens": 8, "steps": 4}
    with served(max_chains=8) as (url, server, uv):
        listeners = [stalled(url) for _ in range(3)]  # every request's events, never read
        listeners += [stalled(url, "/v1/presto/events?request=nobody-yet")]  # (a 404, answered and kept open)
        wait_for(lambda: server.hub.listeners == 3)
        squeeze(uv)

        def load(n: int) -> None:
            def worker(k: int) -> None:
                with httpx.Client(base_url=url, timeout=60) as c:
                    for i in range(k, n, 4):
                        assert c.post("/v1/completions", json={"seed": i, **body}).status_code == 200

            threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()

        load(200)  # warm: imports, caches, the allocator's arenas
        gc.collect()
        before = rss_mib()
        t0 = time.monotonic()
        load(SOAK_REQUESTS)
        gc.collect()
        after = rss_mib()
        took = time.monotonic() - t0
        m = metrics(url)
        for s in listeners:
            s.close()
    print(f"soak: {SOAK_REQUESTS} requests in {took:.1f} s, RSS {before:.0f} -> {after:.0f} MiB "
          f"({after - before:+.0f}), {m['presto_event_streams_dropped_total']:.0f} stalled listeners dropped")
    assert m['presto_chains_total{status="done"}'] == SOAK_REQUESTS + 200
    assert after - before < SOAK_MARGIN_MIB
