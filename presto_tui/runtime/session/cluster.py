"""Many prompts across a Ray cluster: one engine per worker, chains streamed back to the driver.

`Cluster` starts W Ray actors (`EngineWorker`), each owning one engine (one GPU
each where the cluster has GPUs; on a CPU machine the cores are split between
them) and running its prompts through the engine loop, `concurrency` chains
at a time.  Prompts are handed out in chunks from one queue, so a fast worker
takes more; every event streams back to the driver as it happens (Ray's
streaming generators), where the caller writes the trace, so a trace from a
cluster is one file that replays like any other.

A worker that dies (its process killed, its node lost) is reported once; the
sessions it had open end with an `error` event and its unfinished prompts go
back to the queue for the other workers.  Nothing here is home-made
distribution: Ray places the actors, moves the events and detects the failures.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from presto_tui.errors import EngineError, InputError
from presto_tui.runtime.core.classifier import CertaintyClassifier
from presto_tui.runtime.core.engine import Engine
from presto_tui.runtime.core.names import BackendName
from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.session.events import Event, SessionEnd, SessionError, SessionStart


@dataclass(frozen=True)
class WorkerLost:
    """A worker died; `prompts` are the unfinished prompts it had, queued again.  The sessions it
    had started follow as `error` events (the prompts' new sessions come later)."""

    worker: int
    reason: str
    prompts: tuple[int, ...]


def require_ray():
    """Ray, imported; one line naming the extra to install where it is missing."""
    try:
        import ray
    except ImportError:
        raise InputError("--workers and --ray-address need Ray: pip install 'presto-tui[ray]'") from None
    return ray


def check_address(address: str, timeout_s: float = 3.0) -> None:
    """Refuse an unreachable --ray-address in one line, before Ray spends a minute retrying."""
    if address in ("auto", "local"):
        return
    hostport = address.split("://", 1)[-1]
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise InputError(f"--ray-address must be host:port (or auto), got {address!r}")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            pass
    except OSError as e:
        raise InputError(f"--ray-address {address}: cannot reach it ({e.strerror or e})") from None


def worker_threads(share: int) -> int:
    """A CPU worker's threads without --threads: as a local engine's (`OMP_NUM_THREADS` where it is
    set, for a busy machine), at most the worker's share of the cores."""
    raw = os.environ.get("OMP_NUM_THREADS", "")
    return min(share, int(raw)) if raw.isdigit() and int(raw) > 0 else share


LOOPBACK = "127.0.0.1"
# how presto-tui starts or joins Ray: no dashboard, the workers' output and Ray's own log kept off the terminal
RAY_OPTIONS: dict[str, Any] = dict(include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
_CLUSTER_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"  # Ray's switch: 0 makes a node's address loopback's


@contextlib.contextmanager
def _on_loopback(ray):
    """A local Ray instance whose every part (GCS, raylet, workers, the driver, the agents) listens on
    loopback only, not on every interface as Ray's own default does: nothing outside this machine needs
    to reach it (joining a cluster, `address`, is the cluster's business).  Ray takes a node's address
    from `_node_ip_address`, which it turns from loopback into the machine's address unless its cluster
    switch is off: off in the environment its processes start with, and in this process, which read it
    when Ray was imported."""
    before = os.environ.get(_CLUSTER_ENV)
    os.environ[_CLUSTER_ENV] = "0"
    constants = getattr(getattr(ray, "_private", None), "ray_constants", None)
    had = getattr(constants, "ENABLE_RAY_CLUSTER", None)
    if had is not None:
        constants.ENABLE_RAY_CLUSTER = False  # type: ignore[union-attr]
    try:
        yield
    finally:
        if had is not None:
            constants.ENABLE_RAY_CLUSTER = had  # type: ignore[union-attr]
        if before is None:
            os.environ.pop(_CLUSTER_ENV, None)
        else:
            os.environ[_CLUSTER_ENV] = before


def cluster_resources(ray, patience_s: float = 60.0) -> dict:
    """The cluster's resources, Ray's first question to the head it has just started or joined.
    Ray's state client gives up on the head after a few seconds, and on a machine whose cores are
    busy a head that has just started can answer later than that (seen: a 2-core machine running
    vLLM beside, "Failed to connect to GCS" a minute after the start), so the question is asked
    again for `patience_s`; then it is one engine-failure line, as a start that fails is."""
    end = time.monotonic() + patience_s
    while True:
        try:
            return ray.cluster_resources()
        except ray.exceptions.RaySystemError as e:
            if time.monotonic() >= end:
                raise EngineError(f"the Ray cluster did not answer within {patience_s:g} s: {e}") from e
            time.sleep(1.0)


def start_local_ray(ray, tries: int = 2) -> None:
    """A local Ray instance, on loopback, with `RAY_OPTIONS`.  Ray waits 30 s (a constant of its own)
    for the node it starts to register; on a machine whose cores are busy that can pass (seen beside
    vLLM's multiprocess workers on two cores), so the start is tried once more before it is reported,
    in one line, as an engine failure."""
    for attempt in range(1, tries + 1):
        try:
            with _on_loopback(ray):
                ray.init(num_cpus=os.cpu_count() or 1, _node_ip_address=LOOPBACK, **RAY_OPTIONS)
            return
        except Exception as e:  # Ray raises a bare Exception for a node that timed out
            with contextlib.suppress(Exception):
                ray.shutdown()
            if attempt == tries:
                raise EngineError(f"could not start a local Ray instance ({tries} tries): {e}") from e


class Cluster:
    """W engine workers on Ray: a local instance started and stopped here, on loopback only; or `address`;
    or the Ray this process has started already (a notebook's), used and left running."""

    def __init__(self, workers: int, backend: str, engine_options, *, address: str | None = None,
                 concurrency: int = 1, worker: type | None = None, actor_options: dict | None = None):
        """`worker`: the actor class (EngineWorker or a subclass: `serve --workers` runs its own),
        `actor_options`: more of Ray's options for it (a threaded actor's max_concurrency)."""
        if workers < 1:
            raise InputError(f"--workers must be >= 1, got {workers}")
        ray = require_ray()
        if address:
            check_address(address)
        self.ray = ray
        self.concurrency = concurrency
        self._own = not ray.is_initialized()
        if self._own:
            if address:
                ray.init(address=address, **RAY_OPTIONS)
            else:
                start_local_ray(ray)
        try:
            resources = cluster_resources(ray)
            gpus = int(resources.get("GPU", 0))
            cpus = int(resources.get("CPU", 1))
            if gpus:
                if workers > gpus:
                    raise InputError(f"--workers {workers} is more than the cluster's {gpus} GPUs (one engine per GPU)")
                per: dict = {"num_gpus": 1, "num_cpus": 1}
            else:
                if workers > cpus:
                    raise InputError(f"--workers {workers} is more than the cluster's {cpus} CPU cores")
                share = cpus // workers
                # OMP_NUM_THREADS must be right when the worker process starts: once vLLM has run in
                # this process it preloads libgomp for its children, which reads the variable at load
                # (measured: 2 workers with a core each but 2 threads each, 20x slower than with 1 each)
                threads = str(engine_options.threads or worker_threads(share))
                per = {"num_cpus": share, "runtime_env": {"env_vars": {"OMP_NUM_THREADS": threads}}}
            worker_cls = ray.remote(max_restarts=0, max_task_retries=0, **(actor_options or {}))(worker or EngineWorker)
            self.workers = [worker_cls.options(**per).remote() for _ in range(workers)]
            cores = [None] * workers if gpus else split_cores(ray.get([w.place.remote() for w in self.workers]))
            # start every engine now (in parallel), so a start failure is reported before any prompt runs
            infos = ray.get([w.start.remote(backend, engine_options, c) for w, c in zip(self.workers, cores)])
        except BaseException:
            self.close()
            raise
        self.engine = infos[0]  # name, model, info, eos_id of the engines (all the same)
        self.vocab: dict[int, str] = {}  # token text, as the workers report it with their events

    def pieces(self, ids: Sequence[int]) -> list[str]:
        return [self.vocab.get(i, f"<{i}>") for i in ids]

    def close(self) -> None:
        for w in getattr(self, "workers", []):
            with contextlib.suppress(Exception):  # already gone
                self.ray.kill(w)
        if self._own and self.ray.is_initialized():
            self.ray.shutdown()

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def run(self, prompts: Sequence[str], params: SamplerParams | Sequence[SamplerParams],
            classifier: CertaintyClassifier | None = None) -> Iterator[tuple[int, Event | WorkerLost]]:
        """Yield (prompt index, event) as workers produce them, and (-1, WorkerLost) when one dies.
        `params`: for every prompt, or one for each (`eval` gives each item its own seed).

        Each prompt's session is complete once its end (or error) event has come; a prompt whose
        worker died is run again from the start on another worker (a new session)."""
        per = [params] * len(prompts) if isinstance(params, SamplerParams) else list(params)
        ray = self.ray
        queue = deque(range(len(prompts)))
        alive = dict(enumerate(self.workers))
        streams: dict[object, tuple[int, list[int]]] = {}  # Ray streaming generator -> (worker, prompts)
        done: set[int] = set()  # prompts whose session ended
        started: dict[int, set[int]] = {}  # worker -> prompts whose session it started and did not end
        clf = classifier.to_json() if classifier is not None else None
        while queue or streams:
            busy = {w for w, _ in streams.values()}
            for wid in [w for w in alive if w not in busy]:
                if not queue:
                    break
                ids = [queue.popleft() for _ in range(min(self.concurrency, len(queue)))]
                gen = alive[wid].run.options(num_returns="streaming").remote(
                    [(i, prompts[i], per[i]) for i in ids], clf, self.concurrency)
                streams[gen] = (wid, ids)
            ready, _ = ray.wait(list(streams), num_returns=1)
            gen = ready[0]
            wid, ids = streams[gen]
            try:
                i, (ev, pieces) = ray.get(next(gen))
                self.vocab.update(pieces)
            except StopIteration:  # the chunk is done; the worker takes the next one
                del streams[gen]
                continue
            except Exception as e:
                if not _is_worker_loss(ray, e):
                    raise
                del streams[gen]
                del alive[wid]
                lost = tuple(i for i in ids if i not in done)
                queue.extendleft(reversed(lost))
                yield -1, WorkerLost(wid, _reason(e), lost)
                for i in sorted(started.pop(wid, set())):  # their sessions end here; the prompts run again
                    yield i, SessionError(f"worker {wid} died: {_reason(e)}", "engine")
                if not alive:
                    raise EngineError(f"every worker died (the last: {_reason(e)})") from None
                continue
            if isinstance(ev, SessionStart):
                started.setdefault(wid, set()).add(i)
            elif isinstance(ev, (SessionEnd, SessionError)):
                started.get(wid, set()).discard(i)
                done.add(i)
            yield i, ev


def _is_worker_loss(ray, e: Exception) -> bool:
    exc = ray.exceptions
    return isinstance(e, (exc.RayActorError, exc.ActorDiedError, exc.NodeDiedError, exc.WorkerCrashedError,
                          exc.ActorUnavailableError))


def _reason(e: Exception) -> str:
    text = str(e).strip().splitlines()
    return (text[0] if text else type(e).__name__)[:200]


def split_cores(places: Sequence[tuple[str, Sequence[int]]]) -> list[tuple[int, ...]]:
    """Each CPU worker's own cores: the cores of its node, split evenly between the workers there.

    `places` holds each worker's (node id, the cores it may run on).  Left alone, the engines
    of workers sharing a node each run as many threads as the node has cores, on all of them,
    and spin against each other (measured: 2 workers on 2 cores 3-4x slower than 1).
    """
    on_node: dict[str, list[int]] = {}
    for i, (node, _) in enumerate(places):
        on_node.setdefault(node, []).append(i)
    out: list[tuple[int, ...]] = [()] * len(places)
    for ids in on_node.values():
        node_cores = sorted(places[ids[0]][1])
        share = max(1, len(node_cores) // len(ids))
        for rank, i in enumerate(ids):
            start = rank * share % len(node_cores)
            out[i] = tuple(node_cores[start:start + share])
    return out


class EngineWorker:
    """A Ray actor that owns one engine and runs prompts through the engine loop."""

    engine: Engine

    def place(self) -> tuple[str, list[int]]:
        """(node id, the cores this process may run on)."""
        import ray

        return ray.get_runtime_context().get_node_id(), sorted(os.sched_getaffinity(0))

    def start(self, backend: str, engine_options, cores: tuple[int, ...] | None) -> dict:
        """Start the engine, on `cores` only where given (a CPU worker): vLLM binds its threads to
        the cores the process may use, and the engine's threads default to their number."""
        from dataclasses import replace

        from presto_tui.runtime.engines.registry import start_engine

        if cores:
            os.sched_setaffinity(0, cores)
            if engine_options.threads is None and BackendName.of(backend).thread_control:
                engine_options = replace(engine_options, threads=len(cores))
        self.engine = start_engine(backend, engine_options)
        return self.info()

    def info(self) -> dict:
        e = self.engine
        return {"name": e.name, "model": e.model, "info": dict(e.info), "eos_id": e.eos_id,
                "cores": sorted(os.sched_getaffinity(0))}

    def run(self, jobs: list[tuple[int, str, SamplerParams]], classifier: dict | None, concurrency: int):
        """Yield (prompt index, (event, token text new to this worker)) for every event of every job's
        session: the driver writes the trace, and needs the text of the token ids it holds."""
        from presto_tui.runtime.core.classifier import CertaintyClassifier
        from presto_tui.runtime.session.loop import make_driver, run_chains
        from presto_tui.runtime.session.vocab import Vocab

        clf = CertaintyClassifier.from_json(classifier) if classifier is not None else None
        e = self.engine
        vocab = Vocab(e.token_pieces)
        drivers = (make_driver(e, params, e.encode_prompt(p), prompt=p, classifier=clf) for _, p, params in jobs)
        for k, ev in run_chains(e, drivers, concurrency=concurrency):
            yield jobs[k][0], (ev, vocab.new_pieces(ev))
