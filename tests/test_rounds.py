"""Rounds in detail: Condition 1, deferral, the depth cap, epsilon classes, lazy trees."""

from __future__ import annotations

import subprocess
import sys

import pytest
from helpers import small_backend, trajectory

from presto_tui.runtime.core.mh import ACCEPT, REJECT, UNCERTAIN, eps_class
from presto_tui.runtime.core.params import ParamError, SamplerParams
from presto_tui.runtime.core.randomness import decision_inputs, node_inputs
from presto_tui.runtime.prefetch.kernel import ChainState, build_kernel
from presto_tui.runtime.prefetch.tree import LevelTree, NodeStatus


def first_block(backend, params, n_rounds=None):
    """Extend once, then yield (chain before, chain after, tree) for the block's rounds."""
    from presto_tui.runtime.core.randomness import extension_seed
    from presto_tui.runtime.core.types import Request, SeqState

    (prop,) = backend.generate([Request((1, 2), params.block, extension_seed(params.seed, 0),
                                        params.proposal_tau)])
    chain = ChainState(SeqState((1, 2)).extended(prop), 0)
    kernel = build_kernel(params)
    out = []
    while chain.k < params.steps and (n_rounds is None or len(out) < n_rounds):
        nxt, tree = kernel.step(backend, chain)
        out.append((chain, nxt, tree))
        chain = nxt
    return out


@pytest.mark.parametrize("rule", ["bfs", "predictive"])
def test_node_mode_requests_satisfy_condition_1_and_use_root_prefixes(rule):
    params = SamplerParams(prefetch=rule, inputs="node", budget=12, max_new_tokens=24, steps=40)
    for _, _, tree in first_block(small_backend(), params):
        for rec in tree.table.values():
            if rec.status in (NodeStatus.EXPANDED, NodeStatus.UNREACHABLE):
                dec = tree.decisions[rec.decision]
                assert dec.cut <= tree.cut_index(rec.src)  # Condition 1
                # the node's state agrees with the root before the cut: the request's prefix
                assert tree.state_of(rec.src).tokens[:dec.cut] == tree.root.tokens[:dec.cut]
            if rec.status == NodeStatus.DEFERRED:
                dec = tree.decisions[rec.decision]
                assert dec.cut > tree.cut_index(rec.src) and dec.request is None
        assert len(tree.requests) <= params.budget


def test_bfs_enqueues_reject_child_of_deferred_node_as_unreachable():
    params = SamplerParams(prefetch="bfs", inputs="node", budget=20, max_new_tokens=24, steps=60)
    seen = 0
    for _, _, tree in first_block(small_backend(), params):
        for v, rec in tree.table.items():
            reject = tree.child(v, False)
            if rec.status == NodeStatus.DEFERRED and reject is not None:
                seen += 1
                assert tree.child(v, True) is None
                child = tree.node(reject)
                assert child.reach == 0.0
                assert child.status in (NodeStatus.UNREACHABLE, NodeStatus.DEFERRED, NodeStatus.LEAF)
    assert seen > 0


def test_node_mode_deferred_decision_keeps_its_inputs_in_the_next_round():
    params = SamplerParams(prefetch="bfs", inputs="node", budget=6, max_new_tokens=24, steps=80)
    checked = 0
    for _, after, tree in first_block(small_backend(), params):
        if tree.stop_reason == NodeStatus.DEFERRED:
            dec = tree.decisions[tree.table[tree.stop_node].decision]
            assert after.carried is not None
            assert (after.carried.seed, after.carried.accept_u) == (dec.seed, dec.accept_u)
            nxt_chain, nxt_tree = build_kernel(params).step(small_backend(), after)
            root_dec = nxt_tree.decisions[nxt_tree.table[0].decision]
            assert (root_dec.cut, root_dec.seed, root_dec.accept_u) == (dec.cut, dec.seed, dec.accept_u)
            # and not what a fresh draw for the next round's root would have given
            fresh = node_inputs(params.seed, 0, after.round, 0)
            assert (root_dec.seed, root_dec.accept_u) != (fresh.seed, fresh.accept_u)
            checked += 1
        else:
            assert after.carried is None
    assert checked > 0


def test_decision_mode_deferred_decision_is_the_next_rounds_root():
    params = SamplerParams(prefetch="bfs", budget=8, max_new_tokens=24, steps=60)
    rounds = first_block(small_backend(), params)
    deferred = 0
    for (_, after, tree), (_, _, nxt) in zip(rounds, rounds[1:]):
        assert nxt.k0 == after.k == tree.k0 + tree.transitions
        if tree.stop_reason == NodeStatus.DEFERRED:
            deferred += 1
            stop = tree.node(tree.stop_node)
            assert stop.decision.index == nxt.decisions[0].index
            assert stop.decision.cut == nxt.decisions[0].cut
            assert stop.decision.cut > tree.cut_index(stop.src)
        d = nxt.decisions[0]
        ref = decision_inputs(params.seed, 0, d.index)
        assert (d.seed, d.accept_u) == (ref.seed, ref.accept_u)
    assert deferred > 0


@pytest.mark.parametrize("rule,inputs", [("bfs", "decision"), ("spine", "decision"),
                                         ("predictive", "decision"), ("bfs", "node"),
                                         ("predictive", "node")])
def test_depth_cap_never_exceeds_transitions_left(rule, inputs):
    params = SamplerParams(prefetch=rule, inputs=inputs, budget=20, max_new_tokens=12,
                           block_size=4, steps=5)
    _, trees = trajectory(small_backend(vocab=3, sharpness=3.0), params)
    per_block = {}
    for tree in trees:
        assert tree.depth_cap == params.steps - tree.k0
        assert tree.transitions <= tree.depth_cap
        if isinstance(tree, LevelTree):
            assert len(tree.decisions) <= tree.depth_cap
        else:
            assert all(rec.depth <= tree.depth_cap for rec in tree.table.values())
            assert all(rec.status == NodeStatus.LEAF for rec in tree.table.values() if rec.depth == tree.depth_cap)
        per_block.setdefault(tree.root.T, 0)
        per_block[tree.root.T] += tree.transitions
    assert per_block == {4: 5, 8: 5, 12: 5}


def test_epsilon_classes_at_their_boundaries():
    eps = 0.01
    assert eps_class(1.0, eps) == ACCEPT
    assert eps_class(0.99, eps) == ACCEPT
    assert eps_class(0.9899, eps) == UNCERTAIN
    assert eps_class(0.5, eps) == UNCERTAIN
    assert eps_class(0.0101, eps) == UNCERTAIN
    assert eps_class(0.01, eps) == REJECT
    assert eps_class(0.0, eps) == REJECT


def test_rounded_subtree_follows_certain_decisions_only():
    params = SamplerParams(prefetch="bfs", inputs="node", budget=20, max_new_tokens=24, steps=60)
    for _, _, tree in first_block(small_backend(sharpness=2.5), params, n_rounds=5):
        for v in tree.iter_nodes():
            if v.id == 0:
                assert v.rounded
                continue
            p = tree.node(tree.parent_of(v.id))
            went_accept = v.accept
            blocked = p.score is None or p.score.eps_class == (REJECT if went_accept else ACCEPT)
            assert v.rounded == (p.rounded and not blocked)


def test_decision_mode_tree_unfolds_lazily():
    """64 levels: the full tree is astronomically large, yet nodes resolve on demand."""
    params = SamplerParams(prefetch="bfs", budget=64, max_new_tokens=32, steps=200)
    (_, _, tree), *_ = first_block(small_backend(vocab=3, sharpness=3.0), params, n_rounds=1)
    assert len(tree.decisions) == 64 and len(tree.requests) == 64
    assert tree.count_nodes() > 2**20
    deep = 2**40  # some node far down; resolving it walks its path only
    v = tree.node(deep)
    assert v is None or v.depth == 40
    shown = list(tree.iter_nodes(lambda n: n.reach >= 1e-3 or n.on_path, limit=5000))
    assert 0 < len(shown) < 5000
    path = set(tree.path_nodes)
    assert path <= {n.id for n in shown}


def test_walk_uses_the_decision_inputs_on_the_path():
    params = SamplerParams(prefetch="spine", budget=8, max_new_tokens=24, steps=30)
    for _, _, tree in first_block(small_backend(), params):
        for j, step in enumerate(tree.steps):
            dec = tree.decisions[step.decision]
            assert dec.index == tree.k0 + j
            sc = tree.scores[(step.decision, step.src)]
            assert step.accepted == (dec.accept_u < sc.accept_prob)


@pytest.mark.parametrize("changes,needle", [
    (dict(alpha=0), "--alpha"), (dict(alpha=-1), "--alpha"), (dict(budget=0), "--budget"),
    (dict(steps=0), "--steps"), (dict(max_new_tokens=10, block_size=3), "divide"),
    (dict(prefetch="dfs"), "unknown --prefetch"), (dict(prefetch="spine", inputs="node"), "spine"),
    (dict(epsilon=0.7), "--epsilon"), (dict(tau=0.0), "--tau"), (dict(sampler="x"), "sampler"),
    (dict(alpha=float("inf")), "finite"), (dict(tau=float("nan")), "finite"), (dict(beta=1e308), "--beta"),
    (dict(max_new_tokens=10**20), "--max-new-tokens"), (dict(epsilon=-0.1), "--epsilon"),
])
def test_invalid_parameters_are_refused(changes, needle):
    with pytest.raises(ParamError, match=needle):
        SamplerParams(**changes).validate()


def test_runtime_never_imports_textual():
    code = ("import sys, presto_tui.runtime.session.runner, presto_tui.runtime.prefetch.kernel, presto_tui.cli, "
            "presto_tui.cli; sys.exit(int(any(m.split('.')[0] == 'textual' for m in sys.modules)))")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_same_request_gives_same_proposal_alone_and_in_a_batch():
    from presto_tui.runtime.core.types import Request

    b = small_backend()
    reqs = [Request((1, 2, 3)[:k], 6, 100 + k, 0.25) for k in range(1, 4)]
    batch = b.generate(reqs)
    for r, p in zip(reqs, batch):
        assert b.generate([r]) == [p]
