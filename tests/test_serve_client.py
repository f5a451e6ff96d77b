"""`presto-tui chat --connect`: the app's worker side on a server (serve/client.py).

A prompt sent to the server gives the events the local chat session gives (same chain, same
tree, same text), recorded in a local trace too; Escape cancels on the server; a lost
connection ends the session with one line and keeps what came before; the app draws a
remote prompt's tree as it draws a local one.
"""

from __future__ import annotations

import contextlib
import socket
import threading

import pytest
from helpers import GatedEngine, served, wait_for, wait_until
from typer.testing import CliRunner

from presto_tui.cli import app as cli
from presto_tui.logs.reader import read_trace
from presto_tui.logs.writer import open_trace
from presto_tui.runtime.core.params import SamplerParams, params_from
from presto_tui.runtime.engines.synthetic import SyntheticEngine
from presto_tui.runtime.session.chat import ChatSession, EngineReady, Notice, ParamsChanged, VocabUpdate
from presto_tui.runtime.session.events import TRANSIENT, RoundDone, SessionEnd, SessionError, SessionStart
from presto_tui.serve.client import RemoteChatSession, check_url
from presto_tui.serve.net import listen
from presto_tui.views.app import chat_app

PARAMS = SamplerParams(max_new_tokens=16, steps=8, prefetch="stream", seed=4)


def recorded(items: list) -> list:
    return [x for x in items if not isinstance(x, (*TRANSIENT, VocabUpdate, Notice, EngineReady))]


def opener(path):
    return lambda engine, params: open_trace(path, "chat", engine, params)


def test_a_remote_prompt_gives_the_local_sessions_events_and_a_local_trace(tmp_path):
    local_items: list = []
    local = ChatSession(engine_factory=lambda model: SyntheticEngine())
    for prompt in ("the cat", "a dog ran"):  # the second with the first in its history
        local.run(prompt, PARAMS, None, local_items.append)
    items: list = []
    with served() as (url, *_):
        remote = RemoteChatSession(url + "/v1", trace_opener=opener(tmp_path / "here.jsonl"))
        remote.start_engine(None, items.append)
        for prompt in ("the cat", "a dog ran"):
            remote.run(prompt, PARAMS, None, items.append)
        remote.close()
    ready = [x for x in items if isinstance(x, EngineReady)]
    assert ready and ready[0] == EngineReady("synthetic", f"synthetic-v26-o2-s0 at {url.split('//')[1]}")
    mine, theirs = recorded(items), recorded(local_items)
    assert [type(e) for e in mine] == [type(e) for e in theirs]
    starts = [e for e in mine if isinstance(e, SessionStart)]
    assert [e.prompt_ids for e in starts] == [e.prompt_ids for e in theirs if isinstance(e, SessionStart)]
    ends = [e for e in mine if isinstance(e, SessionEnd)]
    assert [(e.tokens, e.text) for e in ends] == [(e.tokens, e.text) for e in theirs if isinstance(e, SessionEnd)]
    rounds = [e for e in mine if isinstance(e, RoundDone)]
    assert [len(e.tree.requests) for e in rounds] == [len(e.tree.requests) for e in theirs if isinstance(e, RoundDone)]
    assert remote.history == local.history
    pieces: dict[int, str] = {}
    for x in items:  # every token id's text arrived before the event that shows it
        if isinstance(x, VocabUpdate):
            pieces.update(x.pieces)
        elif isinstance(x, SessionEnd):
            assert all(t in pieces for t in x.tokens)
    trace = read_trace(tmp_path / "here.jsonl")
    assert [s.events[-1].text for s in trace.sessions] == [e.text for e in ends]
    assert trace.header["backend"] == "synthetic" and trace.vocab


class Proxy:
    """A loopback TCP relay to the server whose `cut()` drops every connection at once: a lost network."""

    def __init__(self, url: str):
        self.target = int(url.rsplit(":", 1)[1])
        self.sock = listen("127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.pairs: list[list] = []  # [client side, server side, the last request line sent]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                down, _ = self.sock.accept()
            except OSError:
                return
            pair = [down, socket.create_connection(("127.0.0.1", self.target)), b""]
            self.pairs.append(pair)
            threading.Thread(target=self._pipe, args=(pair, 0, 1), daemon=True).start()
            threading.Thread(target=self._pipe, args=(pair, 1, 0), daemon=True).start()

    @staticmethod
    def _pipe(pair: list, a: int, b: int) -> None:
        with contextlib.suppress(OSError):
            while data := pair[a].recv(65536):
                if a == 0 and data[:4] in (b"GET ", b"POST"):
                    pair[2] = data.split(b"\r\n", 1)[0]
                pair[b].sendall(data)

    def cut(self) -> None:
        """The event streams first: a lost answer connection alone cancels the chain on the server,
        whose `cancelled` end could otherwise still come through the event stream."""
        self.sock.close()
        for down, up, _ in sorted(self.pairs, key=lambda p: b"/v1/presto/events" not in p[2]):
            for c in (down, up):
                with contextlib.suppress(OSError):
                    c.shutdown(socket.SHUT_RDWR)
                c.close()


def test_escape_cancels_on_the_server_and_a_lost_connection_keeps_what_came(tmp_path):
    engine = GatedEngine(shut=True)
    items: list = []
    with served(engine) as (url, *_):
        proxy = Proxy(url)
        remote = RemoteChatSession(proxy.url, trace_opener=opener(tmp_path / "here.jsonl"))
        worker = threading.Thread(target=remote.run, args=("the cat", PARAMS, None, items.append))
        worker.start()
        wait_for(lambda: any(isinstance(x, SessionStart) for x in items))
        remote.cancel()
        worker.join(10)
        assert isinstance(items[-1], SessionEnd) and items[-1].reason == "cancelled"
        worker = threading.Thread(target=remote.run, args=("a dog", PARAMS, None, items.append))
        worker.start()
        wait_for(lambda: sum(isinstance(x, SessionStart) for x in items) == 2)
        kept = len(items)
        proxy.cut()  # the network goes while the prompt runs
        worker.join(30)
        assert not worker.is_alive()
        remote.close()
    (lost,) = [x for x in items[kept:] if not isinstance(x, TRANSIENT)]
    assert isinstance(lost, SessionError) and lost.message.startswith(f"lost the connection to {proxy.url} (")
    assert lost.message.endswith("; kept what was received") and "\n" not in lost.message
    first, second = read_trace(tmp_path / "here.jsonl").sessions
    assert first.events[-1].reason == "cancelled"
    assert [type(e) for e in second.events] == [type(e) for e in recorded(items[items.index(second.start):])]
    assert second.events[-1] == lost


def test_a_server_that_refuses_or_is_not_there_is_one_notice(monkeypatch):
    with listen("127.0.0.1", 0) as s:
        port = s.getsockname()[1]
    items: list = []
    RemoteChatSession(f"http://127.0.0.1:{port}").start_engine(None, items.append)
    (notice,) = items
    assert isinstance(notice, Notice) and notice.kind == "engine"
    assert notice.message.startswith(f"cannot reach the server at http://127.0.0.1:{port} (")
    monkeypatch.setattr(SyntheticEngine, "max_len", 10)
    items = []
    with served() as (url, *_):
        RemoteChatSession(url).run("the cat", PARAMS, None, items.append)
        remote = RemoteChatSession(url)
        remote.run("the cat", PARAMS, "another-model", items.append)
    notices = [x for x in items if isinstance(x, Notice)]
    assert notices[0] == Notice("input", "server: prompt (2 tokens) plus horizon (16) exceeds the model's context "
                                         "of 10 tokens")
    assert notices[1].kind == "input" and "runs synthetic-v26-o2-s0" in notices[1].message


def test_check_url_takes_what_openai_clients_take():
    assert check_url("http://127.0.0.1:8000/v1/") == "http://127.0.0.1:8000"
    assert check_url("https://host") == "https://host"
    with pytest.raises(ValueError, match="--connect takes the server's URL"):
        check_url("127.0.0.1:8000")


@pytest.mark.usefixtures("in_tmp")
def test_chat_connect_refuses_engine_flags_in_one_line():
    runner = CliRunner()
    for args, line in [
        (["--connect", "ftp://x"], "--connect takes the server's URL, e.g. http://127.0.0.1:8000, got 'ftp://x'"),
        (["--connect", "http://x", "--model", "m"], "--model does not apply with --connect: the server chose its "
                                                    "engine and model when it started"),
        (["--connect", "http://x", "--backend", "vllm"], "--backend does not apply with --connect: the server chose "
                                                         "its engine and model when it started"),
    ]:
        res = runner.invoke(cli, ["chat", *args])
        assert res.exit_code == 2 and res.stderr == f"presto-tui: error: {line}\n", res.output


async def test_the_app_draws_a_remote_prompts_tree_live(tmp_path):
    with served() as (url, *_):
        session = RemoteChatSession(url, trace_opener=opener(tmp_path / "here.jsonl"))
        app = chat_app(session, PARAMS, backend="remote", model=None, subtitle=f"presto-tui serve at {url}")
        async with app.run_test(size=(110, 32)) as pilot:
            scr = app.screen
            await wait_until(pilot, lambda: "synthetic" in app.sub_title)
            scr.query_one("#prompt").focus()
            await pilot.press(*"the cat", "enter")
            await wait_until(pilot, lambda: scr.state.current is not None and scr.state.current.status == "done")
            await wait_until(pilot, lambda: not scr.running)
            s = scr.state.current
            assert s.summary.transitions == 8 and s.rounds
            assert scr.query_one("#tree").round_tree is s.rounds[-1].tree
            assert "<" not in str(scr.query_one("#output-text").render()).split("\n", 1)[1]
        session.close()
    (recorded_session,) = read_trace(tmp_path / "here.jsonl").sessions
    assert recorded_session.events[-1].text == s.summary.text and len(recorded_session.rounds) == len(s.rounds)


async def test_the_app_shows_the_defaults_of_a_restarted_server(tmp_path):
    """After the server restarted with K=5 the prompts ran with it while the app's settings still
    showed the old server's K=12: the app takes the new parameters and shows them."""
    from presto_tui.serve.app import ServeConfig, Server, create_app
    from presto_tui.serve.net import in_thread
    from presto_tui.views.dialogs.settings import SettingsScreen

    with listen("127.0.0.1", 0) as s:
        port = s.getsockname()[1]
    with in_thread(create_app(Server(SyntheticEngine(), ServeConfig(defaults={"steps": 12}))), port=port) as (url, _):
        session = RemoteChatSession(url, trace_opener=opener(tmp_path / "here.jsonl"))
        params = params_from({**session.server_flags(), "max_new_tokens": 16, "seed": 4})  # as chat --connect
    app = chat_app(session, params, backend="remote", model=None, subtitle=f"presto-tui serve at {url}")
    with in_thread(create_app(Server(SyntheticEngine(), ServeConfig(defaults={"steps": 5}))), port=port):
        async with app.run_test(size=(120, 36)) as pilot:
            scr = app.screen
            assert scr.params.steps == 12
            scr.query_one("#prompt").focus()
            await pilot.press(*"the cat", "enter")
            await wait_until(pilot, lambda: scr.state.current is not None and scr.state.current.status == "done")
            await wait_until(pilot, lambda: not scr.running)
            assert scr.state.current.params["steps"] == 5 and scr.params.steps == 5
            await pilot.press("ctrl+s")
            await wait_until(pilot, lambda: isinstance(app.screen, SettingsScreen))
            assert app.screen.query_one("#f-steps").value == "5"
            await pilot.press("escape")
        session.close()


@pytest.mark.parametrize("changes", [
    {}, {"prefetch": "stream", "budget": 12, "budget_policy": "fill", "speculate": "none"},
    {"sampler": "entropycut", "beta": 2.0, "cut_mix": 0.3, "tau": 0.5, "block_size": 8},
    {"sampler": "bestofn", "prefetch": "none", "samples": 3, "bon_rank": "logp"},
    {"sampler": "multitry", "tries": 2, "inputs": "decision", "epsilon": 0.05, "seed": 2**40},
])
def test_a_prompt_sends_every_parameter_the_server_needs_to_build_the_same_chain(changes):
    from presto_tui.serve.client import body_for
    from presto_tui.serve.protocol import CHAT, parse

    params = PARAMS.with_(**changes).validate()
    ask = parse(body_for("the cat", [("a", "b")], params, "r1"), CHAT, {"alpha": 2.0, "steps": 99})
    assert ask.params == params  # the server's own defaults change nothing the app chose
    assert ask.prompts[0].history == (("a", "b"),) and ask.request_id == "r1" and ask.stream


@pytest.mark.usefixtures("in_tmp")
def test_chat_connect_starts_from_the_servers_defaults_and_its_own_flags_win(monkeypatch):
    import presto_tui.views.app as views_app

    seen = {}

    class NoApp:
        return_code = 0

        def run(self):
            pass

    def fake_app(session, params, **kwargs):
        seen.update(params=params, kwargs=kwargs)
        return NoApp()

    monkeypatch.setattr(views_app, "chat_app", fake_app)
    runner = CliRunner()
    with served(defaults={"steps": 7, "prefetch": "stream", "budget": "fill:4"}) as (url, *_):
        res = runner.invoke(cli, ["chat", "--connect", url, "--alpha", "2", "--no-trace"])
    assert res.exit_code == 0, res.output
    p = seen["params"]
    assert (p.steps, p.prefetch, p.budget, p.budget_policy, p.alpha) == (7, "stream", 4, "fill", 2.0)
    assert p.proposal_tau == 0.5  # 1/alpha of the alpha given here, not the server's tau
    with listen("127.0.0.1", 0) as s:
        port = s.getsockname()[1]
    res = runner.invoke(cli, ["chat", "--connect", f"http://127.0.0.1:{port}", "--no-trace"])
    assert res.exit_code == 1 and res.stderr.startswith(f"presto-tui: error: cannot reach the server at "
                                                        f"http://127.0.0.1:{port} (")
    assert len(res.stderr.splitlines()) == 1


def test_several_chains_per_prompt_come_back_as_the_local_sessions_chain_events(tmp_path):
    from presto_tui.runtime.session.chat import ChainEvent

    def by_chain(items: list) -> dict[int, list]:
        out: dict[int, list] = {}
        for x in items:
            if isinstance(x, ChainEvent) and not isinstance(x.event, TRANSIENT):
                out.setdefault(x.chain, []).append(x.event)
        return out

    local_items: list = []
    local = ChatSession(engine_factory=lambda model: SyntheticEngine())
    local.run("the cat", PARAMS, None, local_items.append, 3)
    items: list = []
    with served() as (url, *_):
        remote = RemoteChatSession(url, trace_opener=opener(tmp_path / "here.jsonl"))
        remote.run("the cat", PARAMS, None, items.append, 3)
        remote.close()
    mine, theirs = by_chain(items), by_chain(local_items)
    assert sorted(mine) == sorted(theirs) == [0, 1, 2]
    for m in mine:
        assert [type(e) for e in mine[m]] == [type(e) for e in theirs[m]]
        assert mine[m][-1].tokens == theirs[m][-1].tokens
        assert (mine[m][0].chain, mine[m][0].chains) == (m, 3)
    assert remote.history == local.history  # the answer most chains agree on
    trace = read_trace(tmp_path / "here.jsonl")
    assert sorted(s.start.chain for s in trace.sessions) == [0, 1, 2]


def test_a_server_stopped_midway_says_so_and_a_restarted_one_gives_its_new_defaults(tmp_path):
    """Ctrl-C on the server mid-run showed only "cancelled": one notice now says the server stopped.
    The app kept the old server's K after it restarted with another: each prompt asks anew."""
    from presto_tui.serve.app import ServeConfig, Server, create_app
    from presto_tui.serve.net import in_thread

    with listen("127.0.0.1", 0) as s:
        port = s.getsockname()[1]
    engine = GatedEngine(shut=True)  # the chain stalls until the server stops
    items: list = []
    with in_thread(create_app(Server(engine, ServeConfig(defaults={"steps": 12}))), port=port) as (url, _):
        remote = RemoteChatSession(url, trace_opener=opener(tmp_path / "here.jsonl"))
        params = params_from({**remote.server_flags(), "max_new_tokens": 16, "seed": 4})  # as chat --connect
        assert params.steps == 12
        worker = threading.Thread(target=remote.run, args=("the cat", params, None, items.append))
        worker.start()
        wait_for(lambda: any(isinstance(x, SessionStart) for x in items))
    worker.join(30)  # leaving the block stops the server as Ctrl-C does
    assert not worker.is_alive()
    (end,) = [x for x in items if isinstance(x, SessionEnd)]
    assert end.reason == "cancelled"
    (said,) = [x for x in items if isinstance(x, Notice)]
    assert said.kind == "engine" and said.message.startswith(f"the server at {url} stopped before the answer was ready")
    assert "\n" not in said.message
    items.clear()
    with in_thread(create_app(Server(SyntheticEngine(), ServeConfig(defaults={"steps": 5}))), port=port):
        remote.run("a dog", params, None, items.append)  # the app still holds K=12, taken from the old server
        (moved,) = [x.params for x in items if isinstance(x, ParamsChanged)]  # the app holds these from now on
        assert (moved.steps, moved.alpha) == (5, params.alpha)
        remote.run("a cat", moved.with_(alpha=2.0), None, items.append)
    starts = [x for x in items if isinstance(x, SessionStart)]
    assert [st.params["steps"] for st in starts] == [5, 5]
    assert [st.params["alpha"] for st in starts] == [params.alpha, 2.0]  # what the person chose stays
    (changed,) = [x for x in items if isinstance(x, Notice)]  # said once
    assert "has other defaults now (steps 12 -> 5)" in changed.message
    assert len([x for x in items if isinstance(x, ParamsChanged)]) == 1
    remote.close()
    assert [s.events[-1].reason for s in read_trace(tmp_path / "here.jsonl").sessions] == ["cancelled", "done", "done"]
