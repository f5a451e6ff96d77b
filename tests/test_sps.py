"""Scalable Power Sampling (Ji et al. 2026, arXiv 2601.21590): its estimator, its session, its law.

- The estimator's bias, exactly: with rollout weights from a small discrete law every outcome of
  M rollouts can be enumerated, so E[p_hat] is computed, not sampled (lemma 3.2: O(1/M) for the
  plug-in; lemma 3.3: O(1/M^2) for the jackknife).
- The session's numbers recomputed from its rollouts alone: every rollout request the engine got,
  its tokens rescored under the model (tests/oracle.py), zeta, the plug-in and the jackknife
  recomputed with numpy, the chunk drawn checked against the recorded uniform.
- With one candidate per step it is low temperature's request itself, token for token.
- Its output law on the enumerable model approaches pi_alpha as the rollouts grow, with and
  without the jackknife: the law is Rao-Blackwellised from the recorded steps (each step's
  estimated conditional, averaged over the visits to its prefix, multiplied along a response).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import oracle
import pytest
from helpers import small_backend
from test_baselines import exact, responses, tv
from test_law import tv_bound

from presto_tui.runtime.core.params import ParamError, SamplerParams
from presto_tui.runtime.engines.synthetic import SyntheticEngine, SyntheticLM
from presto_tui.runtime.methods.sps import SpsStep
from presto_tui.runtime.samplers import sps
from presto_tui.runtime.session.events import Choice, ModelCall, SessionEnd
from presto_tui.runtime.session.loop import make_driver, run_chains
from presto_tui.runtime.session.runner import run_session

PROMPT = (1,)


def params(**kw) -> SamplerParams:
    return SamplerParams(sampler="sps", prefetch="none", **kw)


# -- the estimator ------------------------------------------------------------------------------

def test_without_rollouts_it_is_low_temperature_over_the_candidates():
    """No candidate has a future (the last chunk): p0^alpha normalised over the candidates (eq. 16)."""
    lp = [math.log(0.5), math.log(0.3), math.log(0.2)]
    est = sps.estimate(4.0, lp, [(), (), ()], use_jackknife=True)
    want = np.array([0.5, 0.3, 0.2]) ** 4
    assert est.probs == pytest.approx(want / want.sum(), rel=1e-12) and est.jackknife == ()
    assert est.log_zeta == (0.0, 0.0, 0.0)


def test_a_candidate_without_a_future_keeps_zeta_one_beside_estimated_ones():
    lp = [math.log(0.6), math.log(0.4)]
    log_w = [(math.log(0.2), math.log(0.6)), ()]  # the second ends at EOS
    est = sps.estimate(2.0, lp, log_w, use_jackknife=False)
    a, b = 0.6 ** 2 * 0.4, 0.4 ** 2 * 1.0
    assert est.plain == pytest.approx((a / (a + b), b / (a + b)), rel=1e-12)
    assert est.log_zeta[0] == pytest.approx(math.log(0.4)) and est.log_zeta[1] == 0.0


def test_the_jackknife_needs_two_rollouts_and_candidates_with_as_many():
    with pytest.raises(ValueError, match="at least 2"):
        sps.jackknife(2.0, [0.0, 0.0], [(0.0,), (0.0,)])
    with pytest.raises(ValueError, match="different numbers"):
        sps.jackknife(2.0, [0.0, 0.0], [(0.0, 0.0), (0.0,)])
    with pytest.raises(ParamError, match="--sps-jackknife needs --sps-rollouts >= 2"):
        params(sps_rollouts=1).validate()
    params(sps_rollouts=1, sps_jackknife=False).validate()


def test_final_clips_a_negative_jackknife_and_pick_never_draws_it():
    probs = sps.final([1.2, -0.3, 0.1])
    assert probs == pytest.approx([1.2 / 1.3, 0.0, 0.1 / 1.3])
    assert {sps.pick(probs, u) for u in np.linspace(0, 1, 1001, endpoint=False)} == {0, 2}
    assert sps.pick([0.5, 0.5, 0.0], 0.999999999) == 1


def test_top_candidates_are_distinct_and_most_likely_first():
    chunks = [((3, 4), -1.0), ((5,), -0.5), ((3, 4), -1.0), ((6, 7), -2.0), ((8,), -0.5)]
    assert sps.top_candidates(chunks, 3) == [1, 4, 0]  # ties: the earlier draw first
    assert sps.top_candidates(chunks, 10) == [1, 4, 0, 3]


def exact_bias(M: int, jackknife: bool, clip: bool = False) -> float:
    """E[p_hat(candidate 0)] - p_pow(candidate 0), every outcome of M rollouts per candidate enumerated.

    Two candidates with p0^alpha 0.5 and 0.3; each rollout's weight is one of two values (zeta_0 =
    0.7 * 0.2 + 0.3 * 1.4 = 0.56, zeta_1 = 0.5 * 0.5 + 0.5 * 1.0 = 0.75), rollouts independent."""
    alpha = 1.0  # log_p0 below are already alpha log p0
    log_p0 = [math.log(0.5), math.log(0.3)]
    values = [((0.2, 0.7), (1.4, 0.3)), ((0.5, 0.5), (1.0, 0.5))]
    true = 0.5 * 0.56 / (0.5 * 0.56 + 0.3 * 0.75)
    mean = 0.0
    for outcome in itertools.product(range(2), repeat=2 * M):
        prob, log_w = 1.0, []
        for c in range(2):
            row = outcome[c * M:(c + 1) * M]
            prob *= math.prod(values[c][i][1] for i in row)
            log_w.append(tuple(math.log(values[c][i][0]) for i in row))
        est = sps.estimate(alpha, log_p0, log_w, use_jackknife=jackknife)
        p = est.probs if clip or not jackknife else est.jackknife
        mean += prob * p[0]
    return mean - true


def test_the_jackknife_bias_is_of_a_higher_order_exactly(capsys):
    """Lemma 3.2 and 3.3, computed exactly: M times the plug-in's bias settles to a constant, and the
    jackknife's bias falls faster than 1/M (M^2 times it stays bounded)."""
    rows = [(M, exact_bias(M, False), exact_bias(M, True), exact_bias(M, True, clip=True)) for M in (2, 3, 4, 5, 6)]
    with capsys.disabled():
        print("\nSPS estimator bias on candidate 0, exact (2 candidates, two-valued rollout weights):")
        print("   M   plug-in (eq. 4)   M x it   jackknife (eq. 5)   M^2 x it   jackknife clipped")
        for M, b, j, c in rows:
            print(f"  {M:2d}   {b:+.6f}        {M * b:+.4f}   {j:+.6f}           {M * M * j:+.4f}    {c:+.6f}")
    plain = [M * b for M, b, _, _ in rows]
    assert all(b < 0 for _, b, _, _ in rows)  # the ratio underweights the candidate with the noisier zeta here
    assert max(plain[1:]) / min(plain[1:]) < 1.3  # M x bias: about constant from M = 3 on
    assert all(abs(j) < abs(b) / 2 for _, b, j, _ in rows)
    jk = [M * M * j for M, _, j, _ in rows]
    assert max(abs(x) for x in jk[2:]) < 1.5 * abs(jk[1])  # M^2 x bias: bounded, not growing as M would


# -- the session --------------------------------------------------------------------------------

class Recording(SyntheticEngine):
    """Every request the engine got, in order, with what it returned."""

    def __init__(self, lm: SyntheticLM):
        super().__init__(lm)
        self.requests: list = []
        self.proposals: dict[int, object] = {}

    def submit(self, request):
        h = super().submit(request)
        self.requests.append((h, request))
        return h

    def finished(self, request, proposal):
        return proposal

    def step(self):
        out = super().step()
        for h, p in out:
            self.proposals[h] = p
        return out


def inverse_cdf(probs, u: float) -> int:
    cdf = np.cumsum(probs) / np.sum(probs)
    return int(min(np.searchsorted(cdf, u, side="right"), len(probs) - 1))


def conditional(alpha: float, log_p0, rows, use_jackknife: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(log zeta, plug-in, jackknife) in numpy, from each candidate's rollouts' log weights (None: no
    future); written from the paper's equations (3-6), not from presto_tui's code."""
    lp = alpha * np.asarray(log_p0, dtype=float)
    has = np.array([r is not None for r in rows])
    M = max((len(r) for r in rows if r is not None), default=0)
    W = np.array([r if r is not None else [0.0] * M for r in rows], dtype=float).reshape(len(rows), M)

    def softmax(x, axis=0):
        e = np.exp(x - x.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)

    if M == 0:
        return np.zeros(len(rows)), softmax(lp), np.array([])
    top = W.max(axis=1, keepdims=True)
    E = np.exp(W - top)
    lz = np.where(has, top[:, 0] + np.log(E.sum(axis=1) / M), 0.0)  # eq. 3
    plain = softmax(lp + lz)  # eq. 4
    if not use_jackknife:
        return lz, plain, np.array([])
    with np.errstate(divide="ignore"):  # a rollout that holds all of a candidate's weight: zeta_-s = 0
        loo = np.where(has[:, None], top + np.log((E.sum(axis=1, keepdims=True) - E) / (M - 1)), 0.0)  # eq. 6
    return lz, plain, M * plain - (M - 1) / M * softmax(lp[:, None] + loo).sum(axis=1)  # eqs. 14, 5


CASES = [  # (vocab, eos, n, chunk, horizon, tau, top_k, draws, rollouts)
    (5, 0, 10, 1, 0, 1.0, 3, 6, 4),  # algorithm 1 token by token, rollouts from p0 (eq. 3 as written)
    (5, 0, 10, 3, 0, None, 3, 6, 3),  # chunks, rollouts from q_tau with the importance weight
    (6, None, 12, 4, 2, None, 4, 8, 2),  # a truncated horizon (eq. 11's H), no EOS
    (4, 0, 9, 2, 3, 0.5, 2, 4, 5),
]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("use_jackknife", [True, False])
def test_zeta_and_the_jackknife_recomputed_from_the_rollouts(case, seed, use_jackknife):
    V, eos, n, chunk, H, tau, K, L, M = case
    engine = Recording(SyntheticLM(vocab_size=V, order=2, seed=7 + seed, sharpness=1.2, eos_id=eos))
    p = params(max_new_tokens=n, alpha=3.0, tau=tau, sps_chunk=chunk, sps_horizon=H, sps_top_k=K, sps_draws=L,
               sps_rollouts=M, sps_jackknife=use_jackknife, seed=seed)
    events = list(run_session(engine, p, list(PROMPT)))
    requests = iter(engine.requests)
    path: tuple[int, ...] = ()
    steps = 0
    rollouts: list = []
    for ev in events:
        if isinstance(ev, ModelCall):
            batch = [next(requests) for _ in range(ev.requests)]
            assert all(r.stop_eos and r.tau == p.proposal_tau for _, r in batch)
            if ev.round == 1:
                rollouts = batch
            else:  # draws start from the path so far
                assert {r.prefix for _, r in batch} == {PROMPT + path}
            continue
        if not isinstance(ev, SpsStep):
            continue
        steps += 1
        assert ev.position == len(path) and len(ev.candidates) <= K and len(set(ev.candidates)) == len(ev.candidates)
        rows: list = []
        for c in ev.candidates:
            mine = [(h, r) for h, r in rollouts if r.prefix == PROMPT + path + c]
            ends = (eos is not None and eos in c) or len(path) + len(c) == n
            if ends or len(ev.candidates) == 1:
                assert not mine
                rows.append(None)
                continue
            left = n - len(path) - len(c)
            assert len(mine) == M and all(r.n_new == (left if H == 0 else min(H, left)) for _, r in mine)
            w = []
            for h, r in mine:
                toks = engine.proposals[h].tokens
                lq, lp = oracle.suffix_logprobs(engine.lm, r.prefix, toks, p.proposal_tau)
                w.append(p.alpha * lp - lq)
            rows.append(w)
        log_p0 = [oracle.suffix_logprobs(engine.lm, PROMPT + path, c, 1.0)[1] for c in ev.candidates]
        lz, plain, jk = conditional(p.alpha, log_p0, rows, bool(use_jackknife))
        assert ev.log_p0 == pytest.approx(log_p0, abs=1e-9)
        assert ev.log_weights == tuple(pytest.approx(r, abs=1e-9) if r else () for r in rows)
        assert ev.log_zeta == pytest.approx(lz, abs=1e-9)
        assert ev.plain == pytest.approx(plain, abs=1e-9)
        assert ev.jackknife == pytest.approx(tuple(jk), abs=1e-9)
        drawn_from = np.clip(jk, 0, None) / np.clip(jk, 0, None).sum() if len(jk) else plain
        assert ev.probs == pytest.approx(drawn_from, abs=1e-9)
        assert ev.chosen == inverse_cdf(ev.probs, ev.u)
        path += ev.candidates[ev.chosen]
        rollouts = []
    end = events[-1]
    assert isinstance(end, SessionEnd) and end.tokens == path and steps >= 1
    assert len(path) == n or (eos is not None and path[-1] == eos)
    (choice,) = [e for e in events if isinstance(e, Choice)]
    response = path[:path.index(eos)] if eos in path else path  # the response: up to and excluding EOS
    if not response:
        assert math.isnan(choice.loglik)
    else:
        _, lp_response = oracle.suffix_logprobs(engine.lm, PROMPT, response, 1.0)
        assert choice.loglik == pytest.approx(lp_response / len(response), abs=1e-9)


@pytest.mark.parametrize("chunk", [1, 4, 16])
def test_one_candidate_per_step_is_low_temperature_token_for_token(chunk):
    """K = 1 (and so one draw a step): no rollouts, and the draw is low temperature's own request,
    whose continuation after each chunk is the next step's draw; the engine sees one request."""
    for seed in range(8):
        engine = Recording(small_backend(vocab=6, seed=2).lm)
        common = dict(prefetch="none", max_new_tokens=16, seed=seed)
        low = list(run_session(engine, SamplerParams(sampler="lowtemp", **common), [3, 4]))[-1]
        engine.requests.clear()
        ev = list(run_session(engine, SamplerParams(sampler="sps", sps_top_k=1, sps_chunk=chunk, **common), [3, 4]))
        assert isinstance(low, SessionEnd) and ev[-1].tokens == low.tokens
        assert len(engine.requests) == 1
        assert all(len(s.candidates) == 1 and s.probs == (1.0,) for s in ev if isinstance(s, SpsStep))


def test_draws_that_began_with_the_chunk_drawn_are_the_next_steps_draws():
    """Only the missing draws are requested again, each from the new prefix."""
    engine = Recording(SyntheticLM(vocab_size=4, order=2, seed=5, sharpness=2.5, eos_id=None))
    p = params(max_new_tokens=12, sps_chunk=2, sps_top_k=2, sps_draws=6, seed=3)
    events = list(run_session(engine, p, list(PROMPT)))
    steps = [e for e in events if isinstance(e, SpsStep)]
    draws = [e for e in events if isinstance(e, ModelCall) and e.round == 0]
    assert sum(s.reused for s in steps) > 0  # at this sharpness draws often agree on a chunk
    assert steps[0].reused == 0 and all(s.draws == 6 for s in steps)
    assert sum(c.requests for c in draws) == sum(6 - s.reused for s in steps)


# -- the law ------------------------------------------------------------------------------------

LAW_M = (2, 4, 8, 16)
LAW_SESSIONS = 400
KINDS = ("plain", "jackknife")


def group_means(alpha: float, log_p0, rows, M: int) -> np.ndarray:
    """[kind, candidate]: the plug-in and the (clipped) jackknife with M rollouts per candidate, averaged
    over the disjoint groups of M among each candidate's recorded rollouts (each group is M rollouts: the
    mean has the estimator's expectation and less noise); eqs. 3-6 in numpy, as `conditional`."""
    lp = alpha * np.asarray(log_p0, dtype=float)[:, None, None]
    has = np.array([r is not None and len(r) > 0 for r in rows])
    total = max(len(r) for r in rows if r)
    G = total // M
    W = np.array([r[:G * M] if r else [0.0] * (G * M) for r in rows], dtype=float).reshape(len(rows), G, M)

    def softmax0(x):
        e = np.exp(x - x.max(axis=0, keepdims=True))
        return e / e.sum(axis=0, keepdims=True)

    top = W.max(axis=2, keepdims=True)
    E = np.exp(W - top)
    lz = np.where(has[:, None, None], top + np.log(E.sum(axis=2, keepdims=True) / M), 0.0)
    plain = softmax0(lp + lz)[:, :, 0]  # [candidate, group]
    with np.errstate(divide="ignore"):
        loo = np.where(has[:, None, None], top + np.log((E.sum(axis=2, keepdims=True) - E) / (M - 1)), 0.0)
    jk = M * plain - (M - 1) / M * softmax0(lp + loo).sum(axis=2)
    jk = np.clip(jk, 0, None)
    jk /= jk.sum(axis=0, keepdims=True)
    return np.stack([plain.mean(axis=1), jk.mean(axis=1)])


@pytest.mark.slow
def test_output_law_approaches_pi_alpha_as_the_rollouts_grow(capsys):
    """3 tokens, n = 3 with EOS (15 responses), alpha 4, token by token with all 3 candidates and rollouts
    from p0 (eq. 3 as the paper writes it).  One run of sessions with 16 rollouts per candidate gives
    every row: any M of a candidate's recorded rollouts are M rollouts, so each step yields the plug-in
    and the jackknife estimate for every M <= 16, and the law of SPS with M rollouts is the product
    along a response of their means at each prefix (the clipped jackknife, as sampled).  The noise
    column is half the distance between the laws of the two halves of the sessions (the law's own
    error, by which a distance to pi_alpha is also inflated).  The sessions' own answers are checked
    against the law they were drawn from (M = 16, jackknife)."""
    engine = small_backend(vocab=3, order=2, seed=5, sharpness=1.0)
    N, alpha = 3, 4.0
    R = responses(N, engine.eos_id)
    pi, *_ = exact(engine.lm, R, alpha, 1.0)
    p = params(max_new_tokens=N, alpha=alpha, tau=1.0, sps_top_k=3, sps_draws=32, sps_rollouts=max(LAW_M),
               sps_chunk=1)
    nodes = sorted({y[:t] for y in R for t in range(len(y))})
    node_id = {v: i for i, v in enumerate(nodes)}
    # per step: its session, its prefix, and each (M, kind)'s estimated conditional over the 3 tokens
    sessions, at, contrib = [], [], []
    ends = np.zeros(len(R))
    index = {y: i for i, y in enumerate(R)}
    paths: dict[int, tuple[int, ...]] = {}
    drivers = (make_driver(engine, p.with_(seed=s), list(PROMPT)) for s in range(LAW_SESSIONS))
    for i, ev in run_chains(engine, drivers, concurrency=64):
        if isinstance(ev, SpsStep):
            node = paths.get(i, ())
            row = np.zeros((len(LAW_M), len(KINDS), 3))
            tokens = [c[0] for c in ev.candidates]
            for m, M in enumerate(LAW_M):
                if any(ev.log_weights):
                    row[m][:, tokens] = group_means(alpha, ev.log_p0, ev.log_weights, M)
                else:  # no rollouts (the last token): every M draws from the same, exact conditional
                    row[m][:, tokens] = ev.plain
            sessions.append(i)
            at.append(node_id[node])
            contrib.append(row)
            paths[i] = node + ev.candidates[ev.chosen]
        elif isinstance(ev, SessionEnd):
            ends[index[tuple(ev.tokens)]] += 1
    sessions_a, at_a, contrib_a = np.array(sessions), np.array(at), np.array(contrib)

    def laws(keep: np.ndarray) -> np.ndarray:
        """[M, kind, response]: the law from the steps of the sessions kept."""
        w = keep[sessions_a].astype(float)
        sums = np.zeros((len(nodes), *contrib_a.shape[1:]))
        np.add.at(sums, at_a, w[:, None, None, None] * contrib_a)
        visits = np.zeros(len(nodes))
        np.add.at(visits, at_a, w)
        cond = sums / np.maximum(visits, 1e-300)[:, None, None, None]
        out = np.ones((len(LAW_M), len(KINDS), len(R)))
        for j, y in enumerate(R):
            for t in range(len(y)):
                out[:, :, j] *= cond[node_id[y[:t]], :, :, y[t]]
        return out

    every = np.ones(LAW_SESSIONS, dtype=bool)
    law = laws(every)
    table = np.array([[tv(x, pi) for x in per_m] for per_m in law])
    half = np.arange(LAW_SESSIONS) % 2 == 0
    a, b = laws(half), laws(~half)
    noise = np.array([[tv(x, y) / 2 for x, y in zip(pa, pb)] for pa, pb in zip(a, b)])
    with capsys.disabled():
        print(f"\nSPS output law against pi_alpha (3 tokens, n = 3, alpha 4, rollouts from p0, {LAW_SESSIONS} "
              "sessions; total variation, and the law's own noise):")
        print("   M   plug-in (eq. 4)    jackknife (eq. 5)")
        for m, M in enumerate(LAW_M):
            print(f"  {M:2d}   {table[m, 0]:.4f}  ({noise[m, 0]:.4f})   {table[m, 1]:.4f}  ({noise[m, 1]:.4f})")
    assert tv(ends / LAW_SESSIONS, law[-1, 1]) < tv_bound(law[-1, 1], LAW_SESSIONS)
    two, four, _, last = table
    assert (two > 3 * last).all() and (two > 1.5 * four).all()  # the bias falls as the rollouts grow
    assert (last < 0.03).all()  # at M = 16 both are within a few times their noise of pi_alpha
    assert (table[:2, 1] < 0.7 * table[:2, 0]).all()  # at M = 2, 4 the jackknife removes most of the bias


# -- the trace gate -----------------------------------------------------------------------------

@pytest.mark.parametrize(("damage", "field"), [
    (lambda d: d["plain"].pop(), "plain"),
    (lambda d: d["log_weights"].append([]), "log_weights"),
    (lambda d: d.update(chosen=len(d["candidates"])), "chosen"),
    (lambda d: d.update(probs=[1.5] * len(d["probs"])), "probs"),
    (lambda d: d.update(jackknife=[0.5]), "jackknife"),
    (lambda d: d.update(candidates=[[]] * len(d["candidates"])), "candidates"),
    (lambda d: d.update(reused=d["draws"] + 1), "reused"),
    (lambda d: d.pop("u"), "u"),
])
def test_the_gate_reads_a_step_back_equal_and_names_what_is_wrong(damage, field):
    from presto_tui.logs.schema import SchemaError, decode, encode

    engine = Recording(SyntheticLM(vocab_size=5, order=2, seed=9, sharpness=1.0, eos_id=None))
    steps = [e for e in run_session(engine, params(max_new_tokens=6, sps_chunk=2, sps_top_k=3, sps_draws=6,
                                                   seed=1), list(PROMPT)) if isinstance(e, SpsStep)]
    step = next(s for s in steps if any(s.log_weights))
    d = encode(step)
    assert decode(d) == step
    damage(d)
    with pytest.raises(SchemaError, match=f"'{field}'"):
        decode(d)


def test_steps_that_need_no_engine_call_run_in_a_loop_not_a_recursion():
    """With one candidate a step, a token at a time, every step after the first takes the next token of
    the draw it kept: no call, so thousands of steps follow one another inside one engine step."""
    engine = SyntheticEngine(SyntheticLM(vocab_size=5, order=2, seed=3, sharpness=1.0, eos_id=None))
    events = list(run_session(engine, params(max_new_tokens=3000, sps_top_k=1, sps_chunk=1), list(PROMPT)))
    assert sum(isinstance(e, SpsStep) for e in events) == 3000
    assert isinstance(events[-1], SessionEnd) and len(events[-1].tokens) == 3000
