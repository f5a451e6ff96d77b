"""Real backends on the embedded SmolLM2-135M: exact per-token quantities, seeds, coupling.

These need the engines installed by the README's set-up command (marker
`engine`; see conftest.py for when they skip and when they fail).
"""

from __future__ import annotations

import pytest

from presto_tui.runtime.core.params import SamplerParams
from presto_tui.runtime.core.types import Request

pytestmark = pytest.mark.engine
TOL = 5e-4  # per token, nats: fp32 logits from an incremental pass vs one full pass


@pytest.fixture(scope="module")
def hf(model_dir):
    from presto_tui.runtime.engines.hf_engine import TransformersEngine

    return TransformersEngine(model_dir, model_name="smollm2-135m")


@pytest.fixture(scope="module")
def reference_model(model_dir):
    import torch
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).eval()


def round_requests(backend, T=24, tau=0.25):
    ids = backend.encode_prompt("Name a prime number.")
    (root,) = backend.generate([Request(tuple(ids), T, 1, tau)])
    full = tuple(ids) + root.tokens
    return [Request(full[: len(ids) + c], T - c, 100 + c, tau) for c in (0, 3, 11, 20, 23)]


def check_against_float64(model, req, prop):
    """log p0, log q_tau and entropy of each sampled token, recomputed in float64 from one pass."""
    import torch

    seq = list(req.prefix) + list(prop.tokens)
    with torch.inference_mode():
        z = model(input_ids=torch.tensor([seq])).logits[0].to(torch.float64)
    L = len(req.prefix)
    worst = 0.0
    for i, tok in enumerate(prop.tokens):
        row = z[L - 1 + i]
        logp = torch.log_softmax(row, -1)
        logq = torch.log_softmax(row / req.tau, -1)
        ent = -torch.special.xlogy(logp.exp(), logp.exp()).sum()
        worst = max(worst, abs(float(logp[tok]) - prop.logp[i]), abs(float(logq[tok]) - prop.logq[i]),
                    abs(float(ent) - prop.entropy[i]))
    return worst


@pytest.mark.parametrize("which", ["hf", "vllm"])
def test_per_token_quantities_match_float64_recomputation(which, request, reference_model):
    backend = request.getfixturevalue(which)
    reqs = round_requests(backend)
    props = backend.generate(reqs)
    for req, prop in zip(reqs, props):
        assert len(prop.tokens) == req.n_new  # fixed horizon, EOS does not stop it
        assert check_against_float64(reference_model, req, prop) < TOL


@pytest.mark.parametrize("which", ["hf", "vllm"])
def test_same_request_same_tokens_alone_and_in_a_batch(which, request):
    backend = request.getfixturevalue(which)
    reqs = round_requests(backend)
    batch = backend.generate(reqs)
    for req, prop in zip(reqs, batch):
        (alone,) = backend.generate([req])
        assert alone.tokens == prop.tokens
        assert max(abs(a - b) for a, b in zip(alone.logq, prop.logq)) < TOL


def test_vllm_self_check_agrees(vllm):
    assert vllm.self_check(vllm.encode_prompt("Hello"), 0.25) < 1e-3


def test_prompts_travel_as_token_ids_through_the_chat_template(hf):
    ids = hf.encode_prompt("What is 2+2?")
    text = hf.decode(ids)
    assert "What is 2+2?" in text and "<|im_start|>user" in text
    assert ids[-3:] == hf.encode_prompt("anything")[-3:]  # ends with the assistant header


_SEQUENTIAL: dict = {}


def sequential_trajectory(engine, params: SamplerParams, ids) -> list:
    """Sequential PowerMH's trajectory, run once for every rule compared with it: on one engine a request
    gets the same tokens whatever else runs (test_same_request_same_tokens_alone_and_in_a_batch)."""
    from helpers import trajectory

    key = (id(engine), params, tuple(ids))
    if key not in _SEQUENTIAL:
        _SEQUENTIAL[key] = trajectory(engine, params, ids)[0]
    return _SEQUENTIAL[key]


@pytest.mark.parametrize("rule", ["bfs", "predictive", "spine", "stream", "stream-inside"])
def test_presto_reproduces_powermh_on_vllm(vllm, rule):
    """The coupled trajectory test on the real engine (short horizon); `stream-inside`: the streaming
    rule also requesting decisions cut inside proposals still decoding (the tokens vLLM hands back
    every step), over two blocks with the next block's extension decoded ahead."""
    from helpers import trajectory

    base = SamplerParams(max_new_tokens=16, steps=8, budget=4, seed=3)
    if rule == "stream-inside":
        rule, base = "stream", base.with_(block_size=8, steps=4, speculate="proposal,block", budget_policy="fill")
    ids = vllm.encode_prompt("Name a prime number.")
    seq = sequential_trajectory(vllm, base.with_(prefetch="none"), ids)
    pre, trees = trajectory(vllm, base.with_(prefetch=rule), ids)
    assert seq == pre and len(seq) == 8 + base.n_blocks
    if rule != "stream":  # (streaming has epochs, one per accepted move, not rounds)
        assert len(trees) < 8  # rounds did realize several transitions


def test_spine_on_vllm_keeps_what_the_sequential_chain_holds(vllm):
    """On a real engine the same token gets slightly different records from different calls.
    Where the spine's content check lets a decision use a proposal made from the round's root
    although an accepted proposal reproduced the root's tokens past its cut, the chain's state
    keeps the accepted proposal's records (what sequential PowerMH holds), not the root's."""
    from helpers import trajectory

    from presto_tui.runtime.prefetch.tree import ROOT

    ids = vllm.encode_prompt("Name three colours.")
    checked = differ = 0
    for seed in range(2):  # (6 content-check cases on the embedded model; seeds 2 and 3 added 6 more)
        base = SamplerParams(max_new_tokens=24, steps=12, budget=8, seed=seed)
        _, trees = trajectory(vllm, base.with_(prefetch="spine"), ids)
        for t in trees:
            states = [t.root, *t.states_after_steps()]
            for j, s in enumerate(t.steps):
                before, after = states[j], states[j + 1]
                if not s.accepted:
                    continue
                cut = t.decisions[s.decision].cut
                prop = t.requests[t.decisions[s.decision].request].proposal
                # the state after an accept holds exactly the state before's records up to the cut
                assert after.logq[:cut] == before.logq[:cut] and after.logp[:cut] == before.logp[:cut]
                assert after.logq[cut:] == prop.logq
                if s.src != ROOT and before.tokens[:cut] == t.root.tokens[:cut]:
                    checked += 1
                    differ += before.logq[:cut] != t.root.logq[:cut]
    assert checked > 0  # content-check cases occurred; `differ` of them had records unequal to the root's


def test_baselines_stop_at_eos_on_vllm(vllm):
    """Low temperature and best-of-N on vLLM: samples stop at the model's EOS (or run to n), best-of-N's
    sample 0 is low temperature's, PowerSMC's particles grow in blocks to an answer, and SPS steps to one
    (with one candidate a step, low temperature's tokens)."""
    from presto_tui.runtime.methods.powersmc import SmcStep
    from presto_tui.runtime.methods.sps import SpsStep
    from presto_tui.runtime.session.events import Choice, Sample, SessionEnd
    from presto_tui.runtime.session.runner import run_session

    ids = vllm.encode_prompt("Say yes.")
    common = dict(prefetch="none", max_new_tokens=32, seed=5)
    lt = list(run_session(vllm, SamplerParams(sampler="lowtemp", **common), ids))
    bon = list(run_session(vllm, SamplerParams(sampler="bestofn", samples=3, **common), ids))
    smc = list(run_session(vllm, SamplerParams(sampler="powersmc", particles=3, smc_block=8, **common), ids))
    sps = list(run_session(vllm, SamplerParams(sampler="sps", sps_top_k=3, sps_draws=4, sps_rollouts=2, sps_chunk=8,
                                               **common), ids))
    sps_one = list(run_session(vllm, SamplerParams(sampler="sps", sps_top_k=1, sps_chunk=4, **common), ids))
    (one,) = [e for e in lt if isinstance(e, Sample)]
    samples = sorted((e for e in bon if isinstance(e, Sample)), key=lambda e: e.index)
    assert samples[0].tokens == one.tokens
    for s in samples:
        assert len(s.tokens) == 32 or len(s.tokens) < 32 and s.tokens[-1] == vllm.eos_id
    assert [e for e in smc if isinstance(e, SmcStep)] and [e for e in smc if isinstance(e, Choice)]
    steps = [e for e in sps if isinstance(e, SpsStep)]
    assert steps and sum(st.position == 0 for st in steps) == 1 and any(any(st.log_weights) for st in steps)
    assert sps_one[-1].tokens == one.tokens  # one candidate a step: low temperature's own request
    assert all(isinstance(evs[-1], SessionEnd) and evs[-1].reason == "done" for evs in (lt, bon, smc, sps, sps_one))


def test_context_overflow_is_one_line_error(vllm):
    from presto_tui.errors import InputError
    from presto_tui.runtime.session.events import SessionError
    from presto_tui.runtime.session.runner import run_session

    events = []
    with pytest.raises(InputError):
        for ev in run_session(vllm, SamplerParams(max_new_tokens=600, steps=1), [1, 2, 3]):
            events.append(ev)
    assert isinstance(events[-1], SessionError) and "exceeds the model's context of 512" in events[-1].message


def test_vllm_reports_peak_kv_pool_use_from_its_own_scheduler(vllm):
    """The fraction of the pool's blocks held by live requests, the largest after any step of a window:
    eight suffixes hold more than one (each its own blocks beside the shared prompt's), and once all
    have finished the pool is free again."""
    ids = tuple(vllm.encode_prompt("Name a prime number."))
    vllm.kv_peak()  # a window starts
    vllm.generate([Request(ids, 64, 1, 0.25)])
    one = vllm.kv_peak()
    vllm.generate([Request(ids, 64, 2 + i, 0.25) for i in range(8)])
    eight = vllm.kv_peak()
    assert 0 < one < eight <= 1 and eight > 3 * one
    assert vllm.kv_peak() == 0.0  # nothing live since the last step


def test_the_records_normalisers_at_score_temperatures_are_each_rows_own():
    """vLLM's logits processor records a normaliser at each score temperature a request asks for (MultiTryMH's
    candidates, a tempering replica's ladder): each is that row's own logsumexp of its logits over the
    temperature, whichever rows share the batch; a row that asks for none gets none."""
    import torch

    from presto_tui.runtime.engines.vllm_stats import LogitStats

    stats = LogitStats(None, "cpu", False)
    ladders = {0: (1.0, 0.5, 0.25), 1: (), 2: (1.0, 0.5, 0.25), 3: (0.8, 0.3)}
    stats.rows = {i: (f"r{i}", 0.25, [7] * i, taus) for i, taus in ladders.items()}
    logits = torch.randn(5, 300, generator=torch.Generator().manual_seed(0), dtype=torch.float32) * 4
    stats.apply(logits)
    for i, taus in ladders.items():
        (record,) = stats.records[f"r{i}"].values()
        want = [float(torch.logsumexp(logits[i].to(torch.float64) / t, dim=-1)) for t in taus]
        assert record[5] == pytest.approx(want, rel=0, abs=1e-12) and len(record[5]) == len(taus)
