"""The paper's test-time baselines (appendix E.8): their laws on an enumerable model, PowerSMC's
weights recomputed independently, and what they share with plain sampling.

Responses stop at EOS: the response space is every sequence of length n without EOS and every
shorter one that ends at its first EOS.  On a 3-token model with n = 3 it has 15 members, so the
laws are exact: low temperature samples q_tau's response law; best-of-N's law follows from the
order statistics of N draws; PowerSMC's output law approaches pi_alpha ∝ p0^alpha as P grows.
"""

from __future__ import annotations

import json
import math

import numpy as np
import oracle
import pytest
from helpers import small_backend
from test_law import tv_bound

from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.methods.powersmc import SmcStep
from presto_tui.runtime.session.events import Choice, SessionEnd
from presto_tui.runtime.session.loop import make_driver, run_chains
from presto_tui.runtime.session.runner import run_session

PROMPT = (1,)
V, N_TOKENS, ALPHA = 3, 3, 4.0
RUNS = 4000


def backend(seed: int = 3, sharpness: float = 0.5):
    return small_backend(vocab=V, order=2, seed=seed, sharpness=sharpness)


def responses(n: int, eos: int) -> list[tuple[int, ...]]:
    out: list[tuple[int, ...]] = []

    def grow(prefix: tuple[int, ...]) -> None:
        if len(prefix) == n or (prefix and prefix[-1] == eos):
            out.append(prefix)
            return
        for t in range(V):
            grow(prefix + (t,))

    grow(())
    return out


def exact(lm, R, alpha: float, tau: float):
    """(pi_alpha, q_tau's response law, log q_tau, log p0) over the responses, from the model itself."""
    lq = np.array([oracle.suffix_logprobs(lm, PROMPT, y, tau)[0] for y in R])
    lp = np.array([oracle.suffix_logprobs(lm, PROMPT, y, 1.0)[1] for y in R])
    pi = np.exp(alpha * lp - (alpha * lp).max())
    return pi / pi.sum(), np.exp(lq), lq, lp


def empirical(engine, params: SamplerParams, R, runs: int = RUNS) -> np.ndarray:
    """The law of the final response over `runs` seeds, all sessions on one engine loop."""
    index = {y: i for i, y in enumerate(R)}
    counts = np.zeros(len(R))
    drivers = (make_driver(engine, params.with_(seed=s), list(PROMPT)) for s in range(runs))
    for _, ev in run_chains(engine, drivers, concurrency=64):
        if isinstance(ev, SessionEnd):
            counts[index[tuple(ev.tokens)]] += 1
    return counts / runs


def tv(a, b) -> float:
    return 0.5 * float(np.abs(a - b).sum())


def test_response_law_is_exact_and_sums_to_one():
    lm = backend().lm
    R = responses(N_TOKENS, lm.eos_id)
    _, q, *_ = exact(lm, R, ALPHA, 1 / ALPHA)
    assert len(R) == 15 and q.sum() == pytest.approx(1.0)


def test_low_temperature_samples_q_tau():
    engine = backend()
    R = responses(N_TOKENS, engine.eos_id)
    _, q, *_ = exact(engine.lm, R, ALPHA, 1 / ALPHA)
    got = empirical(engine, SamplerParams(sampler="lowtemp", prefetch="none", max_new_tokens=N_TOKENS,
                                          alpha=ALPHA), R)
    assert tv(got, q) < tv_bound(q, RUNS)


@pytest.mark.parametrize("rank", ["logq", "logp"])
def test_best_of_n_keeps_the_best_of_n_draws(rank):
    """P(best = y) = Q(s <= s(y))^N - Q(s < s(y))^N, s the ranking score (every score distinct here)."""
    engine = backend()
    R = responses(N_TOKENS, engine.eos_id)
    _, q, lq, lp = exact(engine.lm, R, ALPHA, 1 / ALPHA)
    score = lq if rank == "logq" else lp
    assert len(set(np.round(score, 9))) == len(R)
    N = 4
    law = np.array([q[score <= s].sum() ** N - q[score < s].sum() ** N for s in score])
    assert law.sum() == pytest.approx(1.0)
    got = empirical(engine, SamplerParams(sampler="bestofn", prefetch="none", samples=N, bon_rank=rank,
                                          max_new_tokens=N_TOKENS, alpha=ALPHA), R)
    assert tv(got, law) < tv_bound(law, RUNS)


@pytest.mark.slow
def test_powersmc_approaches_pi_alpha_as_particles_grow(capsys):
    engine = backend()
    R = responses(N_TOKENS, engine.eos_id)
    pi, *_ = exact(engine.lm, R, ALPHA, 1 / ALPHA)
    rows = []
    runs = RUNS // 2
    for P in (1, 4, 16):
        params = SamplerParams(sampler="powersmc", prefetch="none", particles=P, smc_block=1, smc_ramp=2,
                               max_new_tokens=N_TOKENS, alpha=ALPHA)
        rows.append((P, tv(empirical(engine, params, R, runs), pi)))
    bound = tv_bound(pi, runs)
    with capsys.disabled():
        print(f"\nPowerSMC output law against pi_alpha (3 tokens, n = 3, alpha 4, {runs} runs each; "
              f"sampling noise below {bound:.3f}):")
        for P, d in rows:
            print(f"  P = {P:2d}   total variation {d:.3f}")
    (_, tv1), (_, tv4), (_, tv16) = rows
    assert tv1 > tv4 + 2 * bound and tv4 > tv16 + bound
    assert tv16 < 2 * bound  # within noise (plus a finite-P bias below it)


def replay_weights(lm, steps: list[SmcStep], params: SamplerParams) -> list[tuple[list[float], float]]:
    """Each block's log weights and ESS from the recorded tokens and lineage alone, with log p0 and
    log q_tau recomputed from the model (not from the engine's records)."""
    from presto_tui.runtime.methods.powersmc import exponent  # the schedule is the spec; the rest is ours

    P, n = params.particles, params.max_new_tokens
    toks: list[tuple[int, ...]] = [()] * P
    log_w = [0.0] * P
    out = []
    t = 0
    for st in steps:
        a0 = exponent(t, params.alpha, params.smc_ramp, n)
        for i, new in enumerate(st.tokens):
            lp0 = oracle.suffix_logprobs(lm, PROMPT, toks[i], 1.0)[1]
            lq_new = oracle.suffix_logprobs(lm, PROMPT + toks[i], new, params.proposal_tau)[0]
            toks[i] = toks[i] + new
            lp1 = oracle.suffix_logprobs(lm, PROMPT, toks[i], 1.0)[1]
            log_w[i] += st.exponent * lp1 - a0 * lp0 - lq_new
        w = np.exp(np.array(log_w) - max(log_w))
        w /= w.sum()
        out.append((list(log_w), float(1 / (w ** 2).sum())))
        if st.resampled:
            toks = [toks[j] for j in st.parents]
            log_w = [0.0] * P
        t = st.t
    return out


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("eos", [None, 0])
def test_powersmc_weights_and_ess_recomputed_independently(seed, eos):
    """With EOS most particles stop early and the ramp's jump to alpha decides; without, blocks to n."""
    from presto_tui.runtime.engines.synthetic import SyntheticEngine, SyntheticLM

    engine = SyntheticEngine(SyntheticLM(vocab_size=8, order=2, seed=11, sharpness=1.2, eos_id=eos))
    params = SamplerParams(sampler="powersmc", prefetch="none", particles=6, smc_block=3, smc_ramp=5,
                           max_new_tokens=12, alpha=3.0, seed=seed)
    events = list(run_session(engine, params, list(PROMPT)))
    steps = [e for e in events if isinstance(e, SmcStep)]
    assert len(steps) == 4 if eos is None else len(steps) >= 1
    for st, (log_w, e) in zip(steps, replay_weights(engine.lm, steps, params)):
        assert st.log_weights == pytest.approx(log_w, abs=1e-9)
        assert st.ess == pytest.approx(e, rel=1e-9)
        if st.ess >= params.particles / 2 or st.exponent == params.alpha and st.t == params.max_new_tokens:
            assert not st.resampled
        elif st is not steps[-1]:
            assert st.resampled
    (choice,) = [e for e in events if isinstance(e, Choice)]
    last = steps[-1]
    if last.resampled:  # every copy had stopped at EOS: weights reset, then the exponent jumps to alpha
        toks: list[tuple[int, ...]] = [()] * params.particles
        for st in steps:
            toks = [a + b for a, b in zip(toks, st.tokens)]
            if st.resampled:
                toks = [toks[j] for j in st.parents]
        final = [(params.alpha - last.exponent) * oracle.suffix_logprobs(engine.lm, PROMPT, t, 1.0)[1] for t in toks]
        assert choice.scores == pytest.approx(final, abs=1e-9)
    else:
        assert choice.scores == pytest.approx(last.log_weights, abs=1e-12) and last.exponent == params.alpha
    end = events[-1]
    assert isinstance(end, SessionEnd) and len(end.tokens) <= params.max_new_tokens


def test_resampling_forks_without_decoding_the_shared_prefix_again():
    """After resampling, a particle's next request starts from its ancestor's tokens: the engine is
    asked for the block's new tokens only, on the ancestor's prefix (the prefix cache serves it)."""
    from presto_tui.runtime.engines.synthetic import SyntheticEngine, SyntheticLM

    engine = SyntheticEngine(SyntheticLM(vocab_size=8, order=2, seed=11, sharpness=1.2, eos_id=None))
    submitted = []
    real = engine.submit
    engine.submit = lambda req: (submitted.append(req), real(req))[1]  # type: ignore[method-assign]
    params = SamplerParams(sampler="powersmc", prefetch="none", particles=8, smc_block=2, smc_ramp=4,
                           max_new_tokens=10, alpha=4.0, seed=1)
    events = list(run_session(engine, params, list(PROMPT)))
    steps = [e for e in events if isinstance(e, SmcStep)]
    assert any(s.resampled for s in steps)
    assert all(r.n_new <= params.smc_block and r.stop_eos for r in submitted)
    # every request's prefix is the prompt plus a whole particle's tokens so far
    grown = {len(r.prefix) - len(PROMPT) for r in submitted}
    assert grown <= {s.t for s in steps} | {0}


def test_one_particle_at_alpha_one_is_plain_sampling():
    """P = 1, alpha = 1 (tau = 1), one block: the same request as low temperature at alpha 1, token for
    token; and low temperature at alpha 1 samples p0's response law."""
    engine = backend()
    common = dict(prefetch="none", max_new_tokens=N_TOKENS, alpha=1.0)
    for seed in range(20):
        a = run_session(engine, SamplerParams(sampler="lowtemp", seed=seed, **common), list(PROMPT))
        b = run_session(engine, SamplerParams(sampler="powersmc", particles=1, smc_block=N_TOKENS, seed=seed,
                                              **common), list(PROMPT))
        assert [e for e in a if isinstance(e, SessionEnd)][0].tokens == \
            [e for e in b if isinstance(e, SessionEnd)][0].tokens
    R = responses(N_TOKENS, engine.eos_id)
    _, p0, *_ = exact(engine.lm, R, 1.0, 1.0)
    got = empirical(engine, SamplerParams(sampler="lowtemp", **common), R)
    assert tv(got, p0) < tv_bound(p0, RUNS)


def test_best_of_n_sample_zero_is_the_low_temperature_sample():
    engine = small_backend()
    common = dict(prefetch="none", max_new_tokens=16, seed=9)
    lt = [e for e in run_session(engine, SamplerParams(sampler="lowtemp", **common), [3, 4])][-1]
    from presto_tui.runtime.session.events import Sample

    samples = [e for e in run_session(engine, SamplerParams(sampler="bestofn", samples=5, **common), [3, 4])
               if isinstance(e, Sample)]
    assert sorted(s.index for s in samples) == list(range(5))
    assert [s for s in samples if s.index == 0][0].tokens == lt.tokens
    assert all(math.isfinite(s.logq) and s.loglik <= 0 for s in samples)


@pytest.mark.parametrize("n", [96, 64])  # run's and chat's default n, and eval's
def test_powersmc_resamples_at_its_default_settings(n):
    """Blocks of 128 tokens were longer than every default response, so PowerSMC never resampled as a
    user ran it (best-of-N's time and tokens, and an answer drawn by weight).  Its defaults are now the
    paper's 128 and 400 tokens of n = 1024 scaled to n: blocks of n/8, a ramp over 400/1024 of n; run
    --json reports its resamplings, and a run that could not resample says so."""
    from typer.testing import CliRunner

    from presto_tui.cli import app as cli_app
    from presto_tui.runtime.core.params import PAPER_SETTINGS
    from presto_tui.runtime.engines.synthetic import SyntheticEngine
    from presto_tui.runtime.session.summary import summarize

    params = SamplerParams(sampler="powersmc", max_new_tokens=n)
    assert (params.to_dict()["smc_block"], params.to_dict()["smc_ramp"]) == (math.ceil(n / 8), round(n * 400 / 1024))
    paper = SamplerParams(sampler="powersmc", **PAPER_SETTINGS).to_dict()
    assert (paper["smc_block"], paper["smc_ramp"]) == (128, 400)
    engine = SyntheticEngine()  # the demo model, with EOS
    counts = [summarize(run_session(engine, params.with_(seed=seed), engine.encode_prompt("the cat"))).info.resamplings
              for seed in range(6)]
    assert all(c > 0 for c in counts), counts
    res = CliRunner().invoke(cli_app, ["run", "--backend", "synthetic", "--sampler", "powersmc", "-n", str(n),
                                       "--no-trace", "--json", "the cat"])
    assert res.exit_code == 0, res.output
    d = json.loads(next(line for line in res.output.splitlines() if line.startswith("{")))
    assert d["resamplings"] > 0 and d["smc_steps"] > 1 and d["params"]["smc_block"] == math.ceil(n / 8)
    one = summarize(run_session(engine, params.with_(smc_block=n), engine.encode_prompt("the cat")))
    assert one.info.resamplings == 0 and "it grew one block" in one.info.notes()[0]
