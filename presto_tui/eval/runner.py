"""Run every (item, method) session and grade each as it ends.

On one engine the sessions go through the engine loop (`run_chains`), items outer and
methods inner, so that drift on a shared machine hits every method alike; `concurrency`
sessions share the engine's batch at a time.  Over Ray (`Cluster.run`) each method runs
its items spread over the workers, one method after the other.  Every event goes to the
trace.  Ctrl-C ends the open sessions as `cancelled` in the trace and keeps everything
that finished (`Evaluation.interrupted`).

Each item runs with a seed of its own, derived from the methods' seed and the item's id
(`item_seed`): items are then independent draws, as the paired test across items assumes
(with one seed for every item, every chain would meet the same random inputs on every
prompt, and on a small model the differences across items would move together).  Every
method of an item runs with that item's seed: the pairs are matched by prompt and seed.

With `--chains M` every (item, method) runs M chains at once (their seeds derived from the
item's, `chain_seed`); each chain is graded, the outcome of the pair is chain 0's, and with
`vote` its grade is that of the answer most chains agree on (grouped by what the item's
grader reads from each answer: self-consistency's majority vote), with the vote kept beside.

Per session:
- `time_s`: the engine time of its model calls (its rounds or streaming epochs, and its
  block extensions; a baseline's calls): the generation time per prompt of appendix E.8,
  without model loading or grading.  Sessions that share an engine wait for each other.
- `kv_peak`: the largest fraction of the engine's KV pool in use while the session ran
  (vLLM's own count, read after every engine step; None where the engine has no pool or
  it lives in a Ray worker).  With --concurrency above 1 the pool holds the other open
  sessions' blocks too: it is the engine's peak while this session ran.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Generator
from dataclasses import dataclass, field

import numpy as np

from presto_tui.api.events import Event, SessionEnd, SessionError, SessionStart, SessionSummary
from presto_tui.api.params import MethodSpec
from presto_tui.eval.graders import Grade, Grader, grader
from presto_tui.eval.sandbox import CodeLimits
from presto_tui.eval.tasks import Item


def item_seed(seed: int, item_id: str) -> int:
    """The seed of an item's sessions: a function of the methods' seed and the item's id (not of its
    place in the file, nor of --limit)."""
    key = int.from_bytes(hashlib.blake2b(item_id.encode("utf-8"), digest_size=8).digest(), "big")
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(0x4556, key))))
    return int(rng.integers(0, 2**63 - 1))


def item_params(method: MethodSpec, item: Item):
    return method.params.with_(seed=item_seed(method.params.seed, item.id))


@dataclass
class Outcome:
    """One (item, method) session."""

    item: int
    method: int
    session_id: str = ""
    summary: SessionSummary = field(default_factory=SessionSummary)
    kv_peak: float | None = None
    grade: Grade | None = None  # None unless the session ended done
    chain: int = 0  # --chains M: which chain of the pair this session is
    chains: list[Outcome] = field(default_factory=list)  # chain 0's outcome: every chain of the pair
    vote: dict | None = None  # chain 0's outcome under --vote: the chains' answers grouped (answers.Vote)
    voted: Grade | None = None  # ... and the majority answer's grade (chain 0's own stays in `grade`)

    @property
    def verdict(self) -> Grade | None:
        """The grade the pair is scored by: the majority's under --vote, else this session's."""
        return self.voted if self.vote is not None else self.grade

    @property
    def status(self) -> str:
        return self.summary.status

    @property
    def time_s(self) -> float:
        return self.summary.wall_s


@dataclass
class Evaluation:
    items: list[Item]
    methods: list[MethodSpec]
    outcomes: dict[tuple[int, int], Outcome] = field(default_factory=dict)  # (item, method) -> its session
    interrupted: bool = False  # Ctrl-C: what finished is here
    failure: Exception | None = None  # the engine or a worker failed: what finished before is here

    def finished(self, method: int) -> list[Outcome]:
        """The method's sessions that ended (done, cancelled or failed), in item order."""
        return [o for (i, j), o in sorted(self.outcomes.items()) if j == method and o.status != "running"]


OnEnd = Callable[[Outcome], None]
NO_LIMITS_GIVEN = CodeLimits()  # the python grader's default limits


Key = tuple[int, int] | tuple[int, int, int]  # (item, method[, chain])


class _Consumer:
    """Folds a stream of (key, event) into outcomes: summaries, trace lines, KV peaks, grades."""

    def __init__(self, ev: Evaluation, trace, graders: dict[str, Grader], on_end: OnEnd | None,
                 kv_peak: Callable[[], float | None] | None, chains: int = 1, vote: bool = False):
        self.ev, self.trace, self.graders, self.on_end, self.kv_peak = ev, trace, graders, on_end, kv_peak
        self.chains, self.vote = chains, vote
        self.open: dict[Key, Outcome] = {}

    def start(self, key: Key, ev: SessionStart) -> None:
        i, j, *rest = key
        o = self.open[key] = Outcome(i, j, session_id=ev.session_id, chain=rest[0] if rest else 0)
        if o.chain == 0:  # chains start in order: chain 0 first
            self.ev.outcomes[(i, j)] = o
        self.ev.outcomes[(i, j)].chains.append(o)

    def event(self, key: Key, ev: Event) -> None:
        if self.kv_peak is not None:  # the window since the last event, for every session open in it
            peak = self.kv_peak()
            if peak is not None:
                for other in self.open.values():
                    other.kv_peak = peak if other.kv_peak is None else max(other.kv_peak, peak)
        if isinstance(ev, SessionStart):
            self.start(key, ev)
        o = self.open.get(key)
        if self.trace is not None:
            self.trace.write(ev, o.session_id if o is not None else None)
        if o is None:
            return
        o.summary.update(ev)
        if isinstance(ev, (SessionEnd, SessionError)):
            del self.open[key]
            item = self.ev.items[o.item]
            if isinstance(ev, SessionEnd) and ev.reason == "done":
                o.grade = self._grade(self.graders[item.grader], ev.text, item)
            first = self.ev.outcomes.get((o.item, o.method))
            if self.vote and first is not None and len(first.chains) == self.chains \
                    and all(c.status != "running" for c in first.chains):
                self._vote(first, item)
            if self.on_end is not None:
                self.on_end(o)

    @staticmethod
    def _grade(g: Grader, text: str, item: Item) -> Grade:
        """A response the grader cannot read is wrong, with why: one item, not the whole evaluation."""
        try:
            return g.grade(text, item.answer, item.prompt)
        except Exception as e:
            return Grade(False, None, f"the {g.name} grader failed on this response ({type(e).__name__}: {e})")

    def _vote(self, first: Outcome, item: Item) -> None:
        """Grade the answer most chains agree on (by what the grader reads), in chain 0's outcome."""
        from presto_tui.api.diagnostics import vote

        done = [c for c in first.chains if c.status == "done"]
        g = self.graders[item.grader]
        result = vote([c.summary.text for c in done], g.grouper(item.prompt))
        first.vote = result.to_dict()
        if result.majority is not None:
            first.voted = self._grade(g, done[result.majority.chains[0] - 1].summary.text, item)  # (chains from 1)
        elif done:
            first.voted = Grade(False, None, "no chain gave an answer")

    def drop(self, key: tuple[int, int]) -> None:
        """A session whose worker died: it runs again from the start (a new session)."""
        self.open.pop(key, None)
        self.ev.outcomes.pop(key, None)


def _graders(items: list[Item], limits: CodeLimits) -> dict[str, Grader]:
    return {name: grader(name, limits) for name in {it.grader for it in items}}


def run_local(engine, items: list[Item], methods: list[MethodSpec], *, concurrency: int = 1, classifier=None,
              trace=None, limits: CodeLimits = NO_LIMITS_GIVEN, on_end: OnEnd | None = None, chains: int = 1,
              vote: bool = False) -> Evaluation:
    """Every (item, method) session on one engine, `concurrency` at a time (at least a pair's chains)."""
    from presto_tui.api.sampling import Job, stream_jobs
    from presto_tui.api.sessions import display_text

    ev = Evaluation(items, methods)
    keys: list[Key] = [(i, j, c) if chains > 1 else (i, j)
                       for i in range(len(items)) for j in range(len(methods)) for c in range(chains)]
    consumer = _Consumer(ev, trace, _graders(items, limits), on_end, engine.kv_peak, chains, vote)

    jobs = []
    for item in items:
        ids = engine.encode_prompt(item.prompt)
        jobs += [Job(item.prompt, item_params(m, item), chains, ids) for m in methods]

    engine.kv_peak()  # a window starts here
    stream: Generator = stream_jobs(engine, jobs, concurrency=max(concurrency, chains),  # type: ignore[assignment]
                                    classifier=classifier)
    try:
        for k, event in stream:
            consumer.event(keys[k - 1], event)  # (sessions numbered from 1)
    except KeyboardInterrupt:
        _interrupted(ev, trace, lambda ids: display_text(engine, ids))
    except Exception as e:  # the open sessions have their error events: keep what finished, then report
        _failed(ev, e)
    finally:
        stream.close()  # an interrupt outside the loop's own step: its live requests are aborted
    return ev


def run_cluster(cluster, items: list[Item], methods: list[MethodSpec], *, classifier=None, trace=None,
                limits: CodeLimits = NO_LIMITS_GIVEN, on_end: OnEnd | None = None,
                on_lost: Callable[[object], None] | None = None) -> Evaluation:
    """Every method's items over the cluster's workers, one method after the other."""
    from presto_tui.api.sessions import WorkerLost

    ev = Evaluation(items, methods)
    consumer = _Consumer(ev, trace, _graders(items, limits), on_end, None)
    prompts = [it.prompt for it in items]
    try:
        for j, m in enumerate(methods):
            rerun: set[int] = set()
            for i, event in cluster.run(prompts, [item_params(m, it) for it in items], classifier):
                if isinstance(event, WorkerLost):
                    rerun.update(event.prompts)
                    if on_lost is not None:
                        on_lost(event)
                    continue
                if isinstance(event, SessionError) and i in rerun:  # the session its worker left open
                    rerun.discard(i)
                    if trace is not None:
                        trace.write(event, consumer.open[(i, j)].session_id if (i, j) in consumer.open else None)
                    consumer.drop((i, j))
                    continue
                consumer.event((i, j), event)
    except KeyboardInterrupt:
        _interrupted(ev, trace, lambda ids: "".join(cluster.pieces(ids)))
    except Exception as e:
        _failed(ev, e)
    return ev


def _interrupted(ev: Evaluation, trace, text_of) -> None:
    ev.interrupted = True
    _keep_finished(ev)
    if trace is not None:
        trace.end_open_session("cancelled", text_of)


def _failed(ev: Evaluation, e: Exception) -> None:
    ev.failure = e
    _keep_finished(ev)


def _keep_finished(ev: Evaluation) -> None:
    for key, o in list(ev.outcomes.items()):
        # not finished, or not graded when Ctrl-C came: kept in the trace, not in the results
        if o.status == "running" or (o.status == "done" and o.grade is None):
            del ev.outcomes[key]
