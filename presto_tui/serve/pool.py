"""Several engines behind one endpoint: `presto-tui serve --workers W` (or `--ray-address`).

W Ray actors (`HostWorker`), each an `EngineHost` on its own engine (one GPU each
where the cluster has GPUs; the cores split between them otherwise, as `run
--workers` places them: runtime/session/cluster.py).  To the hub, the `Pool`
stands where the one `EngineHost` stands: chains in (`add`, `cancel`), one
stream of batches out, the token text, the numbers.

- Routing: every chain of a request goes to one worker: the one that served the
  same conversation before (prefix affinity: a chat's first user message, or a
  prompt's first characters or token ids, so that its turns reuse one engine's
  prefix cache) while that worker has a free slot or is no busier than the
  least loaded; otherwise the least loaded (fewest chains in flight).
- Events: each worker streams its batches back (a Ray streaming generator); one
  reader thread a worker writes them to the one trace (under one lock) and hands
  them to the hub, so the event streams and the trace merge every worker's.
- A worker that dies fails its requests, it does not re-run them: each chain it
  had started ends with an `error` event (`worker N died: ...`) after every
  event it delivered before dying, all of them in the trace; each chain it had
  not started is refused with the same line; their requests answer 500.  A
  re-run would give the same answer (same seed), but as a second session for
  one choice, after its client may have streamed the first one's events.  New
  requests go to the workers left; with none left, /health says `failed`.

Each chain is built by its worker's `EngineHost` exactly as `presto-tui run`
builds it, which is why an answer equals `run`'s whichever worker ran it.
"""

from __future__ import annotations

import collections
import hashlib
import queue
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from presto_tui.api.events import RoundDone, SessionEnd, SessionError, SessionStart
from presto_tui.api.params import CertaintyClassifier
from presto_tui.api.sessions import Cluster, EngineWorker
from presto_tui.safetext import visible
from presto_tui.serve.host import Chain, Deliver, EngineHost, RateWindow, Refused, ServerTrace, Withdrawn
from presto_tui.serve.protocol import Prompt
from presto_tui.serve.wire import Wired, wired

AFFINITY_KEYS = 4096  # conversations remembered for prefix affinity
AFFINITY_CHARS = 256  # a prompt's first characters (or 64 token ids) name its conversation
ENDS = (SessionEnd, SessionError, Refused, Withdrawn)


def affinity_key(prompt: Prompt) -> bytes:
    """What a chat's turns share (its first user message), and prompts that begin alike (their
    first characters or token ids): the prefix an engine may have cached."""
    if prompt.ids is not None:
        head = ",".join(map(str, prompt.ids[:64]))
    else:
        head = (prompt.history[0][0] if prompt.history else prompt.text)[:AFFINITY_CHARS]
    return hashlib.blake2b(head.encode(), digest_size=8).digest()


class HostWorker(EngineWorker):
    """A Ray actor (threaded): an EngineHost on this worker's engine; commands in, batches out."""

    def serve(self, max_chains: int, classifier: dict | None) -> None:
        clf = CertaintyClassifier.from_json(classifier) if classifier is not None else None
        self._out: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self._next = 0
        self._held: dict[int, tuple[str, Any]] = {}  # commands by sequence number, until their turn
        self.host = EngineHost(self.engine, max_chains=max_chains, classifier=clf,
                               deliver=lambda out, fresh: self._out.put((out, fresh)))
        self.host.start()

    def command(self, seq: int, kind: str, arg: Any) -> None:
        """`add` a Chain or `cancel` a key, in the order the pool sent them: a threaded actor may run
        two calls at once, and a cancel that overtook its add would cancel nothing."""
        with self._lock:
            self._held[seq] = (kind, arg)
            while self._next in self._held:
                kind, arg = self._held.pop(self._next)
                self._next += 1
                if kind == "add":
                    self.host.add(arg)
                elif kind == "watch":
                    self.host.watch(*arg)
                else:
                    self.host.cancel(arg)

    def batches(self):
        """(events, token text new in them, this engine's numbers), as the engine thread makes them;
        what waits is sent together.  Ends once `stop` has run."""
        while True:
            item = self._out.get()
            if item is None:
                return
            out, fresh = list(item[0]), dict(item[1])
            end = False
            while not end:
                try:
                    more = self._out.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    end = True
                else:
                    out += more[0]
                    fresh.update(more[1])
            yield out, fresh, self.host.numbers()
            if end:
                return

    def stop(self) -> None:
        """Every chain ends (`cancelled`), its last events go out, then the stream ends."""
        self.host.stop(timeout=60)
        self._out.put(None)


@dataclass
class Worker:
    index: int
    actor: Any
    alive: bool = True
    reason: str = ""
    seq: int = 0
    keys: set[str] = field(default_factory=set)  # chains sent to it, not ended
    started: set[str] = field(default_factory=set)  # ... whose session started
    numbers: dict = field(default_factory=dict)  # its EngineHost's, as of its last batch
    reader: threading.Thread | None = None


@dataclass
class PoolEngine:
    """What the server, the trace writer and the answers need of an engine that lives in the workers."""

    name: str
    model: str
    info: dict
    eos_id: int | None
    pieces: dict[int, str]

    def token_pieces(self, ids) -> list[str]:
        return [self.pieces.get(i, "") for i in ids]


class Pool:
    stopped_line = "every engine worker has died; restart presto-tui serve"
    gives_back_memory = False  # (each worker's EngineHost does in its process; the hub does in the server's)

    def __init__(self, workers: int, backend: str, engine_options, *, max_chains: int, address: str | None = None,
                 classifier: CertaintyClassifier | None = None, warn: Callable[[str], None] | None = None):
        # a threaded actor: its event stream runs while commands come in
        self.cluster = Cluster(workers, backend, engine_options, address=address, worker=HostWorker,
                               actor_options={"max_concurrency": 4})
        ray = self.ray = self.cluster.ray
        try:
            clf = classifier.to_json() if classifier is not None else None
            ray.get([w.serve.remote(max_chains, clf) for w in self.cluster.workers])
        except BaseException:
            self.cluster.close()
            raise
        self.max_chains = max_chains
        self.workers = [Worker(i, actor) for i, actor in enumerate(self.cluster.workers)]
        self.pieces: dict[int, str] = {}
        e = self.cluster.engine
        self.engine = PoolEngine(e["name"], e["model"], dict(e["info"], workers=workers), e["eos_id"], self.pieces)
        self.transitions = 0
        self.workers_lost = 0
        self._warn = warn or (lambda line: print(line, file=sys.stderr))
        self.trace = ServerTrace(None, self._warn)
        self._deliver: Deliver = lambda out, fresh: None
        self._lock = threading.Lock()
        self._request_worker: dict[str, Worker] = {}  # a request's chains' worker, while any runs
        self._request_chains: collections.Counter[str] = collections.Counter()
        self._affinity: collections.OrderedDict[bytes, int] = collections.OrderedDict()
        self._rate = RateWindow()
        self._stopping = False
        self._closed = False

    # -- the server's side -----------------------------------------------------------------
    def bind(self, deliver: Deliver, trace: Any = None) -> Pool:
        self._deliver, self.trace = deliver, ServerTrace(trace, self._warn)
        return self

    def start(self) -> None:
        for w in self.workers:
            stream = w.actor.batches.options(num_returns="streaming").remote()
            w.reader = threading.Thread(target=self._read, args=(w, stream), daemon=True,
                                        name=f"presto-worker-{w.index}")
            w.reader.start()

    def add(self, chain: Chain) -> None:
        request = chain.key.split("/", 1)[0]
        with self._lock:
            w = self._request_worker.get(request)
            if w is None or not w.alive:
                w = self._choose(affinity_key(chain.prompt))
            if w is None:
                refused: list[tuple[str, object, Wired | None]] = [(chain.key, Refused("engine", self.stopped_line),
                                                                    None)]
            else:
                refused = []
                self._request_worker[request] = w
                self._request_chains[request] += 1
                w.keys.add(chain.key)
                seq, w.seq = w.seq, w.seq + 1
        if w is None:
            self._deliver(refused, {})
            return
        w.actor.command.remote(seq, "add", chain)

    def cancel(self, key: str) -> None:
        self._command(key, "cancel", key)

    def watch(self, key: str, on: bool) -> None:
        self._command(key, "watch", (key, on))

    def _command(self, key: str, kind: str, arg: Any) -> None:
        """A command for the worker that runs the chain `key` (none if it is not running there)."""
        with self._lock:
            w = self._request_worker.get(key.split("/", 1)[0])
            if w is None or not w.alive or key not in w.keys:
                return
            seq, w.seq = w.seq, w.seq + 1
        w.actor.command.remote(seq, kind, arg)

    def _choose(self, akey: bytes) -> Worker | None:
        alive = [w for w in self.workers if w.alive]
        if not alive:
            return None
        pick = min(alive, key=lambda w: len(w.keys))  # the least loaded
        known = self._affinity.get(akey)
        if known is not None:
            w = self.workers[known]
            if w.alive and (len(w.keys) < self.max_chains or len(w.keys) <= len(pick.keys)):
                pick = w
        self._affinity[akey] = pick.index
        self._affinity.move_to_end(akey)
        while len(self._affinity) > AFFINITY_KEYS:
            self._affinity.popitem(last=False)
        return pick

    def stop(self, timeout: float | None = None) -> None:
        """Every worker ends its chains (their sessions end `cancelled` in the trace); then Ray goes."""
        if self._closed:
            return
        self._stopping = True
        alive = [w for w in self.workers if w.alive]
        refs = [w.actor.stop.remote() for w in alive]
        if refs:
            self.ray.wait(refs, num_returns=len(refs), timeout=timeout)
        for w in self.workers:
            if w.reader is not None:
                w.reader.join(timeout)
        for w in self.workers:  # one that died while it stopped: its chains end here
            if w.alive and w.keys:
                self._lost(w, "it stopped without ending its chains")
        self._closed = True
        self.trace.close()
        self.cluster.close()

    # -- the readers ----------------------------------------------------------------------
    def _read(self, w: Worker, stream) -> None:
        try:
            for ref in stream:
                out, fresh, numbers = self.ray.get(ref)
                self._publish(w, out, fresh, numbers)
        except Exception as e:  # (Ray's errors for a lost actor or node)
            self._lost(w, (str(e).strip().splitlines() or [type(e).__name__])[0][:200])
            return
        if not self._stopping:
            self._lost(w, "its event stream ended")

    def _publish(self, w: Worker, out: list, fresh: dict[int, str], numbers: dict) -> None:
        with self._lock:
            self.pieces.update(fresh)  # before the trace needs them
            w.numbers = numbers
            moved = 0
            for key, ev, _ in out:
                if isinstance(ev, SessionStart):
                    w.started.add(key)
                if isinstance(ev, RoundDone):
                    moved += ev.k_after - ev.k_before
                self.trace.record(key, ev)
                if isinstance(ev, ENDS):
                    self._end(w, key)
            if moved:
                self.transitions += moved
                self._rate.add(moved)
        self._deliver(out, fresh)

    def _lost(self, w: Worker, reason: str) -> None:
        with self._lock:
            if not w.alive:
                return
            w.alive, w.reason = False, reason
            w.numbers = {**w.numbers, "chains_live": 0, "chains_waiting": 0, "engine_live": 0}
            self.workers_lost += 1
            out: list[tuple[str, object, Wired | None]] = []
            for key in sorted(w.keys):
                if key in w.started:
                    ev: object = SessionError(f"worker {w.index} died: {reason}", "engine")
                    self.trace.record(key, ev)
                    out.append((key, ev, wired(ev)))  # type: ignore[arg-type]
                else:
                    out.append((key, Refused("engine", f"worker {w.index} died before the chain started: {reason}"),
                                None))
            for key, _, _ in out:
                self._end(w, key)
            left = sum(x.alive for x in self.workers)
        if not self._stopping:
            self._warn(f"presto-tui: error: worker {w.index} died ({visible(reason, keep_newlines=False)}); "
                       f"{len(out)} chains failed; serving on with {left} worker(s)")
        if out:
            self._deliver(out, {})

    def _end(self, w: Worker, key: str) -> None:
        w.keys.discard(key)
        w.started.discard(key)
        request = key.split("/", 1)[0]
        self._request_chains[request] -= 1
        if self._request_chains[request] <= 0:
            del self._request_chains[request]
            self._request_worker.pop(request, None)

    @property
    def trace_error(self) -> str:
        return self.trace.error

    # -- numbers ------------------------------------------------------------------------
    @property
    def alive(self) -> bool:
        return any(w.alive for w in self.workers)

    def _sum(self, name: str) -> int:
        return sum(int(w.numbers.get(name, 0)) for w in self.workers if w.alive)

    @property
    def chains_live(self) -> int:
        return self._sum("chains_live")

    @property
    def chains_waiting(self) -> int:
        return self._sum("chains_waiting")

    @property
    def engine_live(self) -> int:
        return self._sum("engine_live")

    @property
    def steps(self) -> int:
        return sum(int(w.numbers.get("steps", 0)) for w in self.workers)

    @property
    def faults(self) -> int:
        return sum(int(w.numbers.get("faults", 0)) for w in self.workers)

    @property
    def last_fault(self) -> str:
        return next((str(w.numbers["last_fault"]) for w in self.workers if w.numbers.get("last_fault")), "")

    def transitions_per_s(self) -> float:
        return self._rate.per_s()

    def worker_numbers(self) -> list[dict]:
        """Each worker's state, as /health and /metrics show it."""
        with self._lock:
            return [{"worker": w.index, "status": "ok" if w.alive else "failed", "reason": w.reason,
                     "chains_assigned": len(w.keys), "chains_live": int(w.numbers.get("chains_live", 0)),
                     "queue": int(w.numbers.get("chains_waiting", 0)), "steps": int(w.numbers.get("steps", 0)),
                     "engine_faults": int(w.numbers.get("faults", 0))} for w in self.workers]
