"""Traces as data: a trace's sessions, transitions, rounds and nodes as pandas DataFrames, and a
prompt's chains as an ArviZ DataTree (InferenceData), so every pandas and ArviZ tool works on them.

    import presto_tui

    t = presto_tui.read_trace("sessions/x.jsonl")
    t.sessions                      # one row per session: parameters, status, numbers `stats` prints
    t.transitions                   # one row per MH transition: log-target, eqs. 21-22, accepted
    t.rounds, t.nodes               # one row per round (epoch), per node of its tree
    t.swaps, t.replicas, t.ladder   # tempering: per swap proposed, per level at each barrier, per pair
    t.particles, t.smc_blocks       # PowerSMC, resample-move: per particle and per block (ESS, genealogy)
    idata = t.chains(1)             # the chains of the first `--chains M` prompt, for arviz
    import arviz_stats; arviz_stats.rhat(idata)

Sessions, chains, blocks, transitions and rounds are counted from 1, as everywhere else in
presto-tui (`stats`, the app, the `--draws` exports).  Columns have their own types, empty
frames too: whole numbers int64, or pandas' nullable Int64 where a value may be missing (a
streaming session's `calls`, a root node's `parent`, `decision` and `cut`), truth values bool
(nullable `boolean` for a root node's `accept_child`).  pandas
and ArviZ are optional (`pip install 'presto-tui[data]'`); without them these properties say
in one line what to install.  The trace is read through the same gate as `replay` and
`stats` (untrusted input, every line checked).
"""

from __future__ import annotations

import importlib.util
import math
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

from presto_tui.errors import InputError
from presto_tui.logs.draws import ChainDraws, common_draws, common_warmup, datatree, grouped, selected
from presto_tui.logs.reader import ON_BAD_LINES, SessionTrace, Trace
from presto_tui.logs.reader import read_trace as _read
from presto_tui.logs.stats import repeated_sessions, sessions_once
from presto_tui.runtime.core.spec import SAMPLER_PARAMS
from presto_tui.runtime.methods.population_numbers import ladder_of, smc_of
from presto_tui.runtime.methods.powersmc import SmcStep
from presto_tui.runtime.methods.ppt import PtStep
from presto_tui.runtime.methods.resample_move import RmStep
from presto_tui.runtime.session.batch import normalised
from presto_tui.runtime.session.diagnostics import Selection
from presto_tui.runtime.session.events import MemberEvent, RoundDone, SessionStart, Transition
from presto_tui.runtime.session.summary import SessionSummary

E = TypeVar("E")

__all__ = ["TraceData", "read_trace"]

# the columns' types (pandas'): Int64 and boolean hold a missing value (<NA>) where int64 and bool cannot
TRANSITION_TYPES = {"session": "int64", "chain": "int64", "block": "int64", "transition": "int64", "accepted": "bool",
                    "log_target": "float64", "loglik": "float64", "confidence": "float64", "first_diff": "int64"}
MEMBER_CHAIN_TYPES = {"session": "int64", "chain": "int64", "member": "int64", "exponent": "float64",
                      **{k: v for k, v in TRANSITION_TYPES.items() if k not in ("session", "chain")}}
ROUND_TYPES = {"session": "int64", "block": "int64", "round": "int64", "k_before": "int64", "k_after": "int64",
               "transitions": "int64", "nodes": "int64", "requests": "int64", "call_s": "float64", "clock": "float64"}
NODE_TYPES = {"session": "int64", "block": "int64", "round": "int64", "node": "int64", "parent": "Int64",
              "depth": "int64", "accept_child": "boolean", "decision": "Int64", "cut": "Int64",
              "log_target": "float64", "log_proposal": "float64", "log_ratio": "float64", "accept_prob": "float64",
              "reach": "float64", "on_path": "bool"}
SESSION_TYPES = {"session": "int64", "calls": "Int64", "transitions": "int64", "accepted": "int64", "rounds": "int64",
                 "chain": "int64", "chains": "int64", "ended": "bool", "population_transitions": "Int64",
                 "population_acceptance_rate": "float64", "log_z": "float64", "barrier": "float64",
                 "barrier_is_lower_bound": "boolean", "length": "float64", "suggested_replicas": "Int64"}

SUMMARY_COLUMNS = ("status", "text", "transitions", "accepted", "acceptance_rate", "calls", "rounds", "wall_s",
                   "answer_loglik", "answer_confidence", "tokens_generated", "requests_issued", "requests_aborted",
                   "eps_certain_share", "chain", "chains", "group", "population_transitions",
                   "population_acceptance_rate", "log_z", "error")
SWAP_TYPES = {"session": "int64", "chain": "int64", "barrier": "int64", "block": "int64", "transition": "int64",
              "pair": "object", "lower": "int64", "upper": "int64", "alpha_lower": "float64", "alpha_upper": "float64",
              "log_p0_lower": "float64", "log_p0_upper": "float64", "accept_prob": "float64", "accepted": "bool",
              "clock": "float64"}
REPLICA_TYPES = {"session": "int64", "chain": "int64", "barrier": "int64", "block": "int64", "transition": "int64",
                 "final": "bool", "level": "int64", "exponent": "float64", "state": "int64", "log_p0": "float64",
                 "log_target": "float64", "transitions": "int64", "accepted": "int64", "clock": "float64"}
LADDER_TYPES = {"session": "int64", "chain": "int64", "pair": "object", "lower": "int64", "upper": "int64",
                "alpha_lower": "float64", "alpha_upper": "float64", "proposed": "int64", "accepted": "int64",
                "mean_accept_prob": "float64", "rejection_rate": "float64", "length": "float64"}
PARTICLE_TYPES = {"session": "int64", "chain": "int64", "block": "int64", "t": "int64", "particle": "int64",
                  "log_weight": "float64", "weight": "float64", "ess": "float64", "resampled": "bool",
                  "ancestor": "int64", "moves_proposed": "Int64", "moves_accepted": "Int64"}
SMC_BLOCK_TYPES = {"session": "int64", "chain": "int64", "block": "int64", "t": "int64", "ess": "float64",
                   "ess_share": "float64", "resampled": "bool", "unique_ancestors": "int64", "lineages": "int64",
                   "log_mean_weight": "float64", "log_z_increment": "float64", "log_z_running": "float64",
                   "moves_accepted": "Int64"}


def need(module: str, extra: str = "data") -> Any:
    """Import an optional package, or say in one line what to install."""
    if importlib.util.find_spec(module) is None:
        raise InputError(f"this needs {module}: pip install 'presto-tui[{extra}]'")
    return importlib.import_module(module)


def read_trace(path: str | Path | Sequence[str | Path], *, on_bad_lines: str = "error") -> TraceData:
    """A trace, or several read as one (`path` a list: their sessions in order, each session once
    however many files hold it), read and checked line by line.  `on_bad_lines`: "error" (TraceError
    names `file:line` of the first bad line), "warn" or "skip" (a bad line is skipped and its session
    marked damaged; "warn" also lists them in `warnings`), as `stats --on-bad-lines` reads them."""
    paths = [path] if isinstance(path, (str, Path)) else list(path)
    if not paths:
        raise InputError("read_trace needs at least one trace file")
    if on_bad_lines not in ON_BAD_LINES:
        raise InputError(f"on_bad_lines must be one of {', '.join(ON_BAD_LINES)}, got {on_bad_lines!r}")
    return TraceData([_read(p, on_bad_lines) for p in paths])


def _transition(ev: Transition) -> dict[str, Any]:
    """A transition's own columns in `transitions` and `member_chains` (block, transition from 1)."""
    return {"block": ev.block + 1, "transition": ev.k + 1, "accepted": ev.accepted, "log_target": ev.log_target,
            "loglik": ev.loglik, "confidence": ev.confidence, "first_diff": ev.first_diff}


@dataclass(repr=False)
class TraceData:
    """One or several traces read for analysis: their sessions as DataFrames (`sessions`,
    `transitions`, `rounds`, `nodes`), a prompt's chains as an ArviZ DataTree (`chains`), every
    session's summary (`summaries`).  `traces` are the reader's traces (their events per session)."""

    traces: list[Trace]
    _summaries: list[SessionSummary] = field(default_factory=list)

    @property
    def raw(self) -> Trace:
        """The first trace (the only one, read from one file)."""
        return self.traces[0]

    @property
    def path(self) -> Path:
        return self.raw.path

    @property
    def paths(self) -> list[Path]:
        return [t.path for t in self.traces]

    @property
    def header(self) -> dict:
        return dict(self.raw.header)

    @property
    def warnings(self) -> list[str]:
        return [w for t in self.traces for w in t.warnings] + repeated_sessions(self.traces)

    @cached_property
    def _sessions(self) -> list[SessionTrace]:
        return sessions_once(self.traces)

    @cached_property
    def _files(self) -> list[str]:
        """Each session's file name (the first trace that holds it)."""
        where = {id(sess): t.path.name for t in reversed(self.traces) for sess in t.sessions}
        return [where[id(sess)] for sess in self._sessions]

    def _each(self, kind: type[E]) -> Iterator[tuple[int, SessionTrace, E]]:
        """Every event of `kind`, with its session's number (from 1) and its session: what each table reads."""
        for i, sess in enumerate(self._sessions, start=1):
            for ev in sess.events:
                if isinstance(ev, kind):
                    yield i, sess, ev

    def __len__(self) -> int:
        return len(self._sessions)

    def __repr__(self) -> str:
        n, w = len(self._sessions), len(self.warnings)
        where = repr(str(self.path)) if len(self.traces) == 1 else f"{len(self.traces)} files"
        return (f"TraceData({where}: {n} session{'s' if n != 1 else ''}"
                f"{f', {w} warning' + ('s' if w != 1 else '') if w else ''})")

    def session(self, number: int) -> SessionTrace:
        """Session `number` (from 1)."""
        if not 1 <= number <= len(self._sessions):
            raise InputError(f"{self.path}: no session {number} (it has {len(self._sessions)})")
        return self._sessions[number - 1]

    def summaries(self) -> list[SessionSummary]:
        """Every session's summary: the numbers `stats` and `run` print, from its events."""
        if not self._summaries:
            self._summaries = [s.summary() for s in self._sessions]
        return self._summaries

    # -- DataFrames --------------------------------------------------------------------------
    @cached_property
    def sessions(self):
        """One row per session: `session` (from 1, across every file read), its file (`trace`), its id,
        prompt, the sampler parameters of its header and the numbers its summary holds."""
        pd = need("pandas")
        rows = []
        for i, (sess, s) in enumerate(zip(self._sessions, self.summaries()), start=1):
            start = sess.start
            row: dict[str, Any] = {"session": i, "trace": self._files[i - 1], "session_id": start.session_id,
                                   "prompt": start.prompt, "backend": start.backend, "model": start.model}
            row.update({p.name: start.params.get(p.name) for p in SAMPLER_PARAMS})
            d = s.to_dict()
            row.update({k: d.get(k, getattr(s, k, None)) for k in SUMMARY_COLUMNS})
            ladder = d.get("ladder") or {}
            row.update({k: ladder.get(k) for k in ("barrier", "barrier_is_lower_bound", "length",
                                                   "suggested_replicas")})
            row["chain"] = start.chain + 1
            row["ended"] = sess.ended
            rows.append(row)
        frame = pd.DataFrame(rows)
        return frame.astype({k: v for k, v in SESSION_TYPES.items() if k in frame.columns})

    @cached_property
    def transitions(self):
        """One row per MH transition: session, chain, block, transition (from 1 in its block), accepted, the
        log-target alpha log p0(x), the log-likelihood and confidence of paper eqs. 21-22, and the first
        position where the state differs from the block's start."""
        pd = need("pandas")
        rows = []
        for i, sess, ev in self._each(Transition):
            rows.append({"session": i, "chain": sess.start.chain + 1, **_transition(ev)})
        return pd.DataFrame(rows, columns=list(TRANSITION_TYPES)).astype(TRANSITION_TYPES)

    @cached_property
    def rounds(self):
        """One row per round (an epoch under the streaming rule): session, block, round (from 1),
        the transitions it walked, its nodes, its time and the engine clock when it ended."""
        pd = need("pandas")
        rows = []
        for i, _, ev in self._each(RoundDone):
            rows.append({"session": i, "block": ev.block + 1, "round": ev.round + 1, "k_before": ev.k_before,
                         "k_after": ev.k_after, "transitions": ev.k_after - ev.k_before,
                         "nodes": ev.tree.count_nodes(), "requests": len(ev.tree.requests),
                         "rule": ev.tree.rule, "call_s": ev.call_wall_s, "clock": ev.clock})
        columns = ["session", "block", "round", "k_before", "k_after", "transitions", "nodes", "requests", "rule",
                   "call_s", "clock"]
        return pd.DataFrame(rows, columns=columns).astype(ROUND_TYPES)

    @cached_property
    def nodes(self):
        """One row per node of every round's tree: session, block, round (from 1), node id, parent,
        depth, which child it is, its status, its decision's cut, the MH terms of its score, its
        epsilon class, the probability the walk reaches it and whether it is on the realized path."""
        pd = need("pandas")
        rows = []
        for i, _, ev in self._each(RoundDone):
            tree = ev.tree
            for v in tree.iter_nodes(limit=1_000_000):
                sc, d = v.score, v.decision
                rows.append({"session": i, "block": ev.block + 1, "round": ev.round + 1, "node": v.id,
                             "parent": tree.parent_of(v.id), "depth": v.depth, "accept_child": v.accept,
                             "status": str(v.status), "decision": None if d is None else d.index + 1,
                             "cut": None if d is None else d.cut,
                             "log_target": None if sc is None else sc.log_target,
                             "log_proposal": None if sc is None else sc.log_proposal,
                             "log_ratio": None if sc is None else sc.log_ratio,
                             "accept_prob": None if sc is None else sc.accept_prob,
                             "eps_class": None if sc is None else sc.eps_class,
                             "reach": v.reach, "on_path": v.on_path})
        columns = ["session", "block", "round", "node", "parent", "depth", "accept_child", "status", "decision", "cut",
                   "log_target", "log_proposal", "log_ratio", "accept_prob", "eps_class", "reach", "on_path"]
        return pd.DataFrame(rows, columns=columns).astype(NODE_TYPES)

    # -- populations ----------------------------------------------------------------------------
    @cached_property
    def member_chains(self):
        """A population's every member's MH transitions (traces of schema 1.4 on; earlier ones record none):
        the `transitions` columns with the `member` (from 1: tempering's level, the lowest exponent first;
        resample-move's particle) and its `exponent` as it began (its log-target is exponent x log p0; an
        adaptive ladder's later exponents are `replicas`')."""
        pd = need("pandas")
        rows = []
        starts: dict[tuple[int, int], float] = {}
        for i, sess, ev in self._each(MemberEvent):
            inner = ev.event
            if isinstance(inner, SessionStart):
                starts[i, ev.member] = float(inner.params.get("alpha", math.nan))
            elif isinstance(inner, Transition):
                rows.append({"session": i, "chain": sess.start.chain + 1, "member": ev.member + 1,
                             "exponent": starts.get((i, ev.member), math.nan), **_transition(inner)})
        return pd.DataFrame(rows, columns=list(MEMBER_CHAIN_TYPES)).astype(MEMBER_CHAIN_TYPES)

    @cached_property
    def swaps(self):
        """Tempering: one row per swap proposed: session, chain, barrier (from 1), block and transition (of the
        block, done before it), the pair ('4-3', the higher replica first, as the app shows them), its levels
        `lower` and `upper` (from 1, the lowest exponent first) and their exponents, log p0 of the state each
        held before the swap, the swap probability A (`accept_prob`), whether it was accepted, the clock."""
        pd = need("pandas")
        rows = []
        for i, sess, ev in self._each(PtStep):
            for lo, A, ok in zip(ev.pairs, ev.accept_probs, ev.swapped):
                p_lo, p_hi = ev.log_p0[lo], ev.log_p0[lo + 1]  # after the swap: before it, the other way
                if ok:
                    p_lo, p_hi = p_hi, p_lo
                rows.append({"session": i, "chain": sess.start.chain + 1, "barrier": ev.step, "block": ev.block + 1,
                             "transition": ev.k, "pair": f"{lo + 2}-{lo + 1}", "lower": lo + 1, "upper": lo + 2,
                             "alpha_lower": ev.exponents[lo], "alpha_upper": ev.exponents[lo + 1],
                             "log_p0_lower": p_lo, "log_p0_upper": p_hi, "accept_prob": A, "accepted": ok,
                             "clock": ev.clock})
        return pd.DataFrame(rows, columns=list(SWAP_TYPES)).astype(SWAP_TYPES)

    @cached_property
    def replicas(self):
        """Tempering: one row per level (replica: the same fixed exponent, from 1, the lowest first; see
        docs/numbering.md) at every barrier (and the end's record, `final`): its exponent, the state it holds
        (`state`: named by the replica it started at, from 1; a state's levels over the barriers are its
        index process), log p0 and the log-target (exponent x log p0) of that state,
        and the level's MH transitions and accepted since the record before."""
        pd = need("pandas")
        rows = []
        for i, sess, ev in self._each(PtStep):
            for lv, (a, h, lp) in enumerate(zip(ev.exponents, ev.holders, ev.log_p0)):
                rows.append({"session": i, "chain": sess.start.chain + 1, "barrier": ev.step, "block": ev.block + 1,
                             "transition": ev.k, "final": ev.final, "level": lv + 1, "exponent": a,
                             "state": h + 1, "log_p0": lp, "log_target": a * lp,
                             "transitions": ev.transitions[lv], "accepted": ev.accepted[lv], "clock": ev.clock})
        return pd.DataFrame(rows, columns=list(REPLICA_TYPES)).astype(REPLICA_TYPES)

    @cached_property
    def ladder(self):
        """Tempering: one row per session and pair, top-down (the alpha pair first): swaps proposed and
        accepted, the mean swap probability A, the rejection rate 1 - mean A and the length 2 erfcinv(mean A)
        (the sessions frame holds their sums, the barrier Lambda and the length L, and the replicas L
        suggests)."""
        pd = need("pandas")
        rows = []
        for i, (sess, s) in enumerate(zip(self._sessions, self.summaries()), start=1):
            lad = ladder_of(s.info)
            if lad is None or len(lad.exponents) < 2:
                continue
            for p in reversed(lad.to_dict()["ladder"]["pairs"]):  # (top-down, as `stats` prints them)
                rows.append({"session": i, "chain": sess.start.chain + 1, "pair": f"{p['pair'][0]}-{p['pair'][1]}",
                             "lower": p["pair"][1], "upper": p["pair"][0], "alpha_lower": p["exponents"][1],
                             "alpha_upper": p["exponents"][0], "proposed": p["proposed"], "accepted": p["accepted"],
                             "mean_accept_prob": p["mean_accept_prob"], "rejection_rate": p["rejection_rate"],
                             "length": p["length"]})
        return pd.DataFrame(rows, columns=list(LADDER_TYPES)).astype(LADDER_TYPES)

    @cached_property
    def particles(self):
        """PowerSMC and resample-move: one row per particle slot of every block (from 1).  A row holds two
        particles, as the record does: slot j before the block's resampling (its log weight since the last
        resampling, its normalised weight, PowerSMC's tokens) and slot j after it (`ancestor`: the slot, from 1,
        it was copied from, itself where the block did not resample; resample-move's moves made from there,
        `moves_proposed` and `moves_accepted`, missing for PowerSMC); the block's ESS and whether it
        resampled."""
        pd = need("pandas")
        rows = []
        for i, (sess, s) in enumerate(zip(self._sessions, self.summaries()), start=1):
            K = int(s.params.get("steps") or 0)  # (a trace written before the records counted the moves: K each)
            for ev in sess.events:
                if not isinstance(ev, SmcStep):
                    continue
                P = len(ev.log_weights)
                proposed: tuple[int | None, ...] = (
                    (ev.transitions if ev.transitions is not None else (K,) * P) if isinstance(ev, RmStep)
                    else (None,) * P)
                finite = math.isfinite(max(ev.log_weights)) and not any(math.isnan(w) for w in ev.log_weights)
                weights = normalised(list(ev.log_weights)) if finite else [math.nan] * len(ev.log_weights)
                for j, (w, par) in enumerate(zip(ev.log_weights, ev.parents)):
                    rows.append({"session": i, "chain": sess.start.chain + 1, "block": ev.step + 1, "t": ev.t,
                                 "particle": j + 1, "log_weight": w, "weight": weights[j],
                                 "ess": ev.ess, "resampled": ev.resampled, "ancestor": par + 1,
                                 "moves_proposed": proposed[j],
                                 "moves_accepted": ev.accepted[j] if isinstance(ev, RmStep) else None})
        return pd.DataFrame(rows, columns=list(PARTICLE_TYPES)).astype(PARTICLE_TYPES)

    @cached_property
    def smc_blocks(self):
        """PowerSMC and resample-move: one row per block: its ESS (and its share of the particles), whether it
        resampled, the distinct particles the resampling kept (`unique_ancestors`), the distinct first-block
        particles the population still descends from (`lineages`), log of the mean weight since the last
        resampling (`log_mean_weight`: cumulative, not the block's own factor), the block's incremental
        evidence (`log_z_increment`) and their running sum (`log_z_running`: log Z of the block's
        intermediate target), resample-move's moves accepted (the sessions frame holds each session's log Z,
        the final weights' factor included)."""
        pd = need("pandas")
        rows = []
        for i, (sess, s) in enumerate(zip(self._sessions, self.summaries()), start=1):
            smc = smc_of(s.info)  # (the session's own fold, as `run` and `stats` read it)
            if smc is None:
                continue
            rows += [{"session": i, "chain": sess.start.chain + 1, "moves_accepted": None, **b} for b in smc.blocks]
        return pd.DataFrame(rows, columns=list(SMC_BLOCK_TYPES)).astype(SMC_BLOCK_TYPES)

    # -- ArviZ -------------------------------------------------------------------------------
    def chain_groups(self) -> list[list[int]]:
        """The session numbers (from 1) of each `--chains M` prompt, in order of first appearance, each
        in chain order; a single-chain session is a group of its own."""
        groups: dict[str, list[int]] = {}
        for i, sess in enumerate(self._sessions, start=1):
            start = sess.start
            key = start.group if start.chains > 1 and start.group else f"#{i}"
            groups.setdefault(key, []).append(i)
        order = {i: sess.start.chain for i, sess in enumerate(self._sessions, start=1)}
        return [sorted(g, key=order.__getitem__) for g in groups.values()]

    def chains(self, prompt: int = 1, *, block: int = 1, burn_in: int = 0, thin: int = 1,
               level: int | None = None) -> Any:
        """The draws of one prompt's chains (`prompt` numbers the chain groups from 1, in order of
        appearance, as `chain_groups` lists them and the `--draws` exports number them) in `block`
        (from 1) as an ArviZ DataTree: `posterior` holds log_target, loglik and confidence with dims
        (chain, draw), every chain cut to the shortest (the draws the diagnostics read);
        `sample_stats` holds `accepted`, `state` and `transition`.  `burn_in` and `thin` select the
        draws as `--burn-in` and `--thin` do (the first `burn_in` transitions of the block dropped,
        then every `thin`-th kept; the dropped ones in `warmup_posterior`; a method's own warm-up, an adaptive
        ladder's, is dropped whatever `burn_in` says, as `stats` drops it).  Any ArviZ statistic or
        plot reads it (`arviz_stats.rhat(idata)`, `arviz_stats.ess(idata)`) and gives what `stats`
        printed with the same selection.  It is the trace's `--draws PATH.nc` export at that prompt
        and block.  A tempering session's draws are its alpha replica's transitions; `level` (from 1, the
        lowest exponent first) gives one level's states instead (`level_chains`, with the same block,
        burn_in and thin)."""
        for name, value, lo in (("burn_in", burn_in, 0), ("thin", thin, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < lo:
                raise InputError(f"{name} must be a whole number >= {lo}, got {value!r}")
        if level is not None:
            return self.level_chains(prompt, level, block=block, burn_in=burn_in, thin=thin)
        need("arviz_base", "diagnostics")
        groups = grouped(ChainDraws.of(sess.events) for sess in self._sessions)
        if not 1 <= prompt <= len(groups):
            raise InputError(f"{self.path}: no chain group {prompt} (it has {len(groups)}, from 1)")
        selection = selected(groups[prompt - 1:prompt], Selection(burn_in, thin))
        k = common_draws(groups[prompt - 1], block - 1, selection)
        if k == 0:
            raise InputError(f"{self.path}: chain group {prompt} has no draws in block {block} in every chain "
                             f"({selection.words}; a one-shot method, or a session cut short before its first "
                             "transition, has none)")
        tree = datatree(groups, selection).sel(prompt=prompt, block=block).isel(chain=slice(0, len(groups[prompt - 1])))
        # each group holds its own draws: the posterior the kept ones, the warm-up the burn-in's (as many as
        # constant_data.warmup_draws says), not cut to the posterior's length
        warm = common_warmup(groups[prompt - 1], block - 1, selection)
        for name, node in list(tree.children.items()):
            if "draw" in node.dims:
                tree[name] = node.to_dataset().isel(draw=slice(0, warm if name == "warmup_posterior" else k))
        tree.attrs["groups"] = groups[prompt - 1][0].group  # the file's names every prompt's: this one's
        return tree

    def level_chains(self, prompt: int, level: int, *, block: int = 1, burn_in: int = 0, thin: int = 1) -> Any:
        """Tempering: the states one level (from 1, the lowest exponent first) held after each barrier's
        swaps in `block` (from 1: within a block the prefix is fixed, so the draws are one stationary
        chain's), over the prompt's chains, as an ArviZ DataTree: `posterior` holds `log_target` (the
        level's exponent x log p0) and `log_p0` with dims (chain, draw), every chain cut to the shortest;
        `sample_stats` the `state` it held (from 1: named by the replica it started at).  A draw
        every `--pt-swap-every` transitions (and the end's record where transitions followed the last
        barrier; not where it repeats that barrier's states).  `burn_in` drops the draws within the block's
        first `burn_in` transitions (into `warmup_posterior`), `thin` keeps every `thin`-th draw after them.
        (The alpha level's every transition: `chains`.)"""
        az = need("arviz_base", "diagnostics")
        np = need("numpy")
        for name, value, lo in (("block", block, 1), ("burn_in", burn_in, 0), ("thin", thin, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < lo:
                raise InputError(f"{name} must be a whole number >= {lo}, got {value!r}")
        groups = self.chain_groups()
        if not 1 <= prompt <= len(groups):
            raise InputError(f"{self.path}: no chain group {prompt} (it has {len(groups)}, from 1)")
        kept, early = [], []
        for number in groups[prompt - 1]:
            steps = [ev for ev in self._sessions[number - 1].events if isinstance(ev, PtStep)]
            R = len(steps[0].exponents) if steps else 0
            if isinstance(level, bool) or not isinstance(level, int) or not 1 <= level <= max(1, R):
                raise InputError(f"level must be a whole number in 1..{max(1, R)} (the ladder's levels, the lowest "
                                 f"exponent first), got {level!r}")
            # the block's records; the end's record only where it holds transitions no barrier recorded
            mine = [ev for ev in steps if ev.block == block - 1 and not (ev.final and not any(ev.transitions))]
            draws = [(ev.exponents[level - 1] * ev.log_p0[level - 1], ev.log_p0[level - 1], ev.holders[level - 1] + 1)
                     for ev in mine]
            warm = sum(ev.k <= burn_in for ev in mine)  # (a record after transition k: k of the block done)
            early.append(draws[:warm])
            kept.append(draws[warm::thin])
        k, w = min(len(c) for c in kept), min(len(c) for c in early)
        if k == 0:
            raise InputError(f"{self.path}: chain group {prompt} has no tempering records in block {block} in every "
                             f"chain after burn-in {burn_in} (a session of another method, or one cut short before "
                             "its first barrier, has none)")

        def arrays(per_chain: list, n: int) -> list:
            return [np.array([[c[d][j] for d in range(n)] for c in per_chain]).reshape(len(per_chain), n)
                    for j in range(3)]

        cols = arrays(kept, k)
        data: dict[str, Any] = {"posterior": {"log_target": cols[0], "log_p0": cols[1]},
                                "sample_stats": {"state": cols[2].astype(int)}}
        if w:
            wc = arrays(early, w)
            data["warmup_posterior"] = {"log_target": wc[0], "log_p0": wc[1]}
        with warnings.catch_warnings():  # (a short warm-up has fewer draws than chains: its dims are still right)
            warnings.simplefilter("ignore", UserWarning)
            tree = az.from_dict(data, coords={"chain": list(range(1, len(kept) + 1))}, save_warmup=bool(w))
        for name, node in list(tree.children.items()):  # draws from 1 in each group, as `chains` gives them
            if "draw" in node.dims:
                tree[name] = node.to_dataset().assign_coords(draw=np.arange(1, node.sizes["draw"] + 1))
        return tree
