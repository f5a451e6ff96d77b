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

With a run log (`resume.RunLog`), every session that ends done is written to it once graded, before
the run goes on; a resumed run (`Resumed`) takes the sessions the log holds as they were (and those
its trace shows ended while the kill kept them from the log), and runs only the others, on the same
seeds: docs/eval/resume.md.

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
from presto_tui.errors import InputError
from presto_tui.eval.graders import Grade, Grader, grader
from presto_tui.eval.resume import RunLog, crash_if
from presto_tui.eval.sandbox import CodeLimits
from presto_tui.eval.tasks import Item
from presto_tui.safetext import visible


def item_seed(seed: int, item_id: str) -> int:
    """The seed of an item's sessions: a function of the methods' seed and the item's id (not of its
    place in the file, nor of --limit)."""
    key = int.from_bytes(hashlib.blake2b(item_id.encode("utf-8"), digest_size=8).digest(), "big")
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(0x4556, key))))
    return int(rng.integers(0, 2**63 - 1))


def item_params(method: MethodSpec, item: Item):
    return method.params.with_(seed=item_seed(method.params.seed, item.id))


def session_seed(method: MethodSpec, item: Item, chain: int) -> int:
    """The seed of chain `chain` of an (item, method) pair (chain 0: the item's seed)."""
    from presto_tui.api.sessions import chain_params

    return chain_params(item_params(method, item), chain).seed


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
                 kv_peak: Callable[[], float | None] | None, chains: int = 1, vote: bool = False,
                 log: RunLog | None = None):
        self.ev, self.trace, self.graders, self.on_end, self.kv_peak = ev, trace, graders, on_end, kv_peak
        self.chains, self.vote, self.log = chains, vote, log
        self.open: dict[Key, Outcome] = {}
        self.groups: dict[tuple[int, int], list[Outcome]] = {}  # (item, method) -> its chains, in chain order

    def start(self, key: Key, ev: SessionStart) -> None:
        i, j, *rest = key
        o = self.open[key] = Outcome(i, j, session_id=ev.session_id, chain=rest[0] if rest else 0)
        self._join(o)

    def _join(self, o: Outcome) -> None:
        """Chain 0's outcome is the pair's; every chain joins its list, in chain order (a resumed run's
        chains come back in any order)."""
        group = self.groups.setdefault((o.item, o.method), [])
        group.append(o)
        group.sort(key=lambda c: c.chain)
        if o.chain == 0:
            o.chains = group
            self.ev.outcomes[(o.item, o.method)] = o

    def restore(self, resumed: Resumed) -> set[tuple[int, int, int]]:
        """The sessions a run log holds, back as outcomes (not run again), and those the trace shows ended
        that the kill kept from the log; their keys."""
        from presto_tui.eval.resume import summary_from

        records, shown = resumed.records, resumed.shown
        items = {it.id: i for i, it in enumerate(self.ev.items)}
        methods = {m.label: j for j, m in enumerate(self.ev.methods)}
        done: set[tuple[int, int, int]] = set()
        for n, r in enumerate(records, start=2):
            i, j, c = items.get(str(r.get("item"))), methods.get(str(r.get("method"))), r.get("chain", 0)
            if i is None or j is None or not isinstance(c, int) or not 0 <= c < self.chains:
                raise InputError(f"{shown}:{n}: a session of another run (item {visible(str(r.get('item')))!r}, "
                                 f"method {visible(str(r.get('method')))!r}, chain {c!r})")
            if r.get("seed") != session_seed(self.ev.methods[j], self.ev.items[i], c):
                raise InputError(f"{shown}:{n}: a session with another seed than this run gives it")
            if (i, j, c) in done:
                continue  # (never written twice; a copy changes nothing)
            grade = r.get("grade")
            o = Outcome(i, j, session_id=str(r.get("session_id", "")), chain=c, kv_peak=r.get("kv_peak"),
                        summary=summary_from(shown, n, r.get("summary") or {}),
                        grade=None if grade is None else Grade(bool(grade["correct"]), grade.get("extracted"),
                                                              grade.get("detail", "")))
            self._join(o)
            done.add((i, j, c))
        if resumed.trace:
            self._recover(resumed.trace, done)
        if self.vote:
            for (i, j), group in self.groups.items():
                first = self.ev.outcomes.get((i, j))
                if first is not None and len(group) == self.chains:
                    self._vote(first, self.ev.items[i])
        return done

    def _recover(self, sessions: list, done: set[tuple[int, int, int]]) -> None:
        """Sessions the trace shows ended done whose record the kill kept from the log (it came while they
        were graded): graded and recorded now rather than run again (their KV peak is not in the trace)."""
        import orjson

        from presto_tui.api.sessions import chain_params

        key = lambda prompt, params: (prompt, orjson.dumps(params, option=orjson.OPT_SORT_KEYS))
        where = {key(it.prompt, chain_params(item_params(m, it), c).to_dict()): (i, j, c)
                 for i, it in enumerate(self.ev.items) for j, m in enumerate(self.ev.methods)
                 for c in range(self.chains)}
        for s in sessions:
            end = s.events[-1]
            k = where.get(key(s.start.prompt, s.start.params))
            if k is None or k in done or not isinstance(end, SessionEnd) or end.reason != "done":
                continue
            i, j, c = k
            o = Outcome(i, j, session_id=s.start.session_id, chain=c, summary=s.summary())
            item = self.ev.items[i]
            o.grade = self._grade(self.graders[item.grader], end.text, item)
            if self.log is not None:
                self._record(o)
            self._join(o)
            done.add(k)

    def _record(self, o: Outcome) -> None:
        """A session that ended done, graded: on disk before the run goes on (its summary's fields, enough
        for every table; the trace holds its events)."""
        from presto_tui.eval.resume import summary_state

        assert self.log is not None
        g = o.grade
        self.log.write({"item": self.ev.items[o.item].id, "method": self.ev.methods[o.method].label,
                        "seed": session_seed(self.ev.methods[o.method], self.ev.items[o.item], o.chain),
                        "chain": o.chain, "session_id": o.session_id, "kv_peak": o.kv_peak,
                        "grade": None if g is None else {"correct": g.correct, "extracted": g.extracted,
                                                         "detail": g.detail},
                        "summary": summary_state(o.summary)})

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
        crash_if("event")  # (the test hook: the Nth event is in the trace, then the kill)
        if o is None:
            return
        o.summary.update(ev)
        if isinstance(ev, (SessionEnd, SessionError)):
            del self.open[key]
            item = self.ev.items[o.item]
            if isinstance(ev, SessionEnd) and ev.reason == "done":
                o.grade = self._grade(self.graders[item.grader], ev.text, item)
                if self.log is not None:  # (an error or a cancel is not recorded: it runs again on --resume)
                    self._record(o)
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
        if result.majority is not None:  # the majority's first chain's own grade (chains from 1)
            first.voted = done[result.majority.chains[0] - 1].grade
        elif done:
            first.voted = Grade(False, None, "no chain gave an answer")

    def drop(self, key: tuple[int, int]) -> None:
        """A session whose worker died: it runs again from the start (a new session)."""
        self.open.pop(key, None)
        self.ev.outcomes.pop(key, None)
        self.groups.pop(key, None)


def _graders(items: list[Item], limits: CodeLimits) -> dict[str, Grader]:
    return {name: grader(name, limits) for name in {it.grader for it in items}}


@dataclass
class Resumed:
    """What a run log held: its finished sessions' records (`resume.RunLog.resume`), and the log's name."""

    records: list[dict]
    shown: str = "run log"
    trace: list = field(default_factory=list)  # the first run's trace's sessions (reader.SessionTrace)


def run_local(engine, items: list[Item], methods: list[MethodSpec], *, concurrency: int = 1, classifier=None,
              trace=None, limits: CodeLimits = NO_LIMITS_GIVEN, on_end: OnEnd | None = None, chains: int = 1,
              vote: bool = False, log: RunLog | None = None, resumed: Resumed | None = None) -> Evaluation:
    """Every (item, method) session on one engine, `concurrency` at a time (at least a pair's chains).
    `log`: each session that ends done, graded, goes to it; `resumed`: the sessions that finished in an
    earlier run, taken as they are (only the others run)."""
    from presto_tui.api.sampling import Job, stream_jobs
    from presto_tui.api.sessions import display_text

    ev = Evaluation(items, methods)
    consumer = _Consumer(ev, trace, _graders(items, limits), on_end, engine.kv_peak, chains, vote, log)
    done = consumer.restore(resumed) if resumed is not None else set()

    jobs, keys = [], []
    for i, item in enumerate(items):
        ids = None
        for j, m in enumerate(methods):
            missing = tuple(c for c in range(chains) if (i, j, c) not in done)
            if not missing:
                continue
            ids = ids if ids is not None else engine.encode_prompt(item.prompt)
            jobs.append(Job(item.prompt, item_params(m, item), chains, ids,
                            None if len(missing) == chains else missing))
            keys += [(i, j, c) if chains > 1 else (i, j) for c in missing]
    if not jobs:  # every session finished before
        return ev

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
                on_lost: Callable[[object], None] | None = None, log: RunLog | None = None,
                resumed: Resumed | None = None) -> Evaluation:
    """Every method's items over the cluster's workers, one method after the other (`log`, `resumed`:
    as for `run_local`)."""
    from presto_tui.api.sessions import WorkerLost

    ev = Evaluation(items, methods)
    consumer = _Consumer(ev, trace, _graders(items, limits), on_end, None, log=log)
    done = consumer.restore(resumed) if resumed is not None else set()
    try:
        for j, m in enumerate(methods):
            todo = [i for i in range(len(items)) if (i, j, 0) not in done]  # the cluster numbers these from 0
            if not todo:
                continue
            rerun: set[int] = set()
            for k, event in cluster.run([items[i].prompt for i in todo], [item_params(m, items[i]) for i in todo],
                                        classifier):
                i = todo[k] if k >= 0 else k  # (-1: a worker died)
                if isinstance(event, WorkerLost):
                    rerun.update(todo[p] for p in event.prompts)
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
