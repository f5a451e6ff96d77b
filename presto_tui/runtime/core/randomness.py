"""The random inputs of MH decisions (docs/randomness.md).

Each decision owns a cut uniform, a suffix-sampling seed and an acceptance
uniform.  In `decision` mode they come from a stream keyed by
(session seed, block, decision index), so sequential PowerMH and PreSTO with
the same seed meet the same inputs at the same decision and produce the same
trajectory (the coupling in the proof of paper prop. 1).  In `node` mode every
node of a round's prefetch tree draws its own inputs, keyed by
(session seed, block, round, node id), as the paper's implementation does.

Once drawn, inputs belong to their decision for good: a rule that has looked at
a cut must not redraw it (deferred nodes carry theirs into the next round).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

_DECISION, _NODE, _EXTEND, _CHAIN, _SAMPLE, _RESAMPLE, _ROLLOUT, _PICK, _MEMBER, _SWAP = 1, 2, 3, 4, 5, 6, 7, 8, 9, 10
SEED_LIMIT = 2**31 - 1  # engines take per-request seeds as signed 32-bit ints


@dataclass(frozen=True)
class DecisionInputs:
    cut_u: float  # in [0, 1): mapped to a cut by the sampler's cut law
    seed: int  # suffix-sampling seed of the decision's request
    accept_u: float  # in [0, 1): accept iff accept_u < A


# A draw builds a generator (about 50 us); a decision's inputs are asked for again by every rule that plans
# it (a round's tree, the sequential check, a replica's retry), twice on average in a tempering session.
@lru_cache(maxsize=8192)
def _draw(seed: int, key: tuple[int, ...]) -> DecisionInputs:
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=key)))
    cut_u, accept_u = rng.random(2)
    return DecisionInputs(float(cut_u), int(rng.integers(0, SEED_LIMIT)), float(accept_u))


def decision_inputs(seed: int, block: int, decision: int) -> DecisionInputs:
    """The random inputs of MH decision `decision` of block `block` in a session of seed `seed`: the same
    whichever rule (sequential or PreSTO) asks, which is what makes every rule's chain the same."""
    return _draw(seed, (_DECISION, block, decision))


def node_inputs(seed: int, block: int, round_: int, node: int) -> DecisionInputs:
    return _draw(seed, (_NODE, block, round_, node))


def extension_seed(seed: int, block: int) -> int:
    """Seed of the request that extends the state by one block (alg. 1, line 2)."""
    return _draw(seed, (_EXTEND, block)).seed


@lru_cache(maxsize=1024)
def chain_seed(seed: int, chain: int) -> int:
    """Session seed of chain m of `--chains M`: chain 0 keeps the seed itself (one chain is the run
    it always was); chain m runs exactly as a single chain with this seed would."""
    if chain == 0:
        return seed
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(_CHAIN, chain))))
    return int(rng.integers(0, 2**63 - 1))


def sample_seed(seed: int, block: int, index: int) -> int:
    """Seed of a baseline's request: sample `index` (best-of-N), particle `index` of block `block`
    (PowerSMC) or draw `index` of step `block` (SPS); low temperature is sample 0 of block 0."""
    return _draw(seed, (_SAMPLE, block, index)).seed


def resample_uniform(seed: int, step: int) -> float:
    """PowerSMC's uniform for systematic resampling after block `step`; the final draw of the
    answer uses step = -1 (keyed apart from every block)."""
    return _draw(seed, (_RESAMPLE, step + 1)).cut_u


def rollout_seed(seed: int, step: int, candidate: int, rollout: int) -> int:
    """Seed of SPS's rollout `rollout` of candidate `candidate` (in the step's order) at step `step`."""
    return _draw(seed, (_ROLLOUT, step, candidate, rollout)).seed


def pick_uniform(seed: int, step: int) -> float:
    """SPS's uniform for drawing step `step`'s chunk from its estimated conditional."""
    return _draw(seed, (_PICK, step)).cut_u


@lru_cache(maxsize=1024)  # (a population's parameters ask for each member's seed several times)
def member_seed(seed: int, member: int) -> int:
    """Session seed of member m of a population (tempering's replica, resample-move's particle): member 0
    keeps the seed itself (a population of one is the chain it always was); the others' are keyed apart
    from `chain_seed`'s, so chain m of `--chains M` never shares a member's randomness."""
    if member == 0:
        return seed
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(_MEMBER, member))))
    return int(rng.integers(0, 2**63 - 1))


def swap_uniform(seed: int, barrier: int, slot: int) -> float:
    """Parallel tempering's uniforms at barrier `barrier` (from 1): slot 0 chooses the pair (the random-pair
    scheme), slot i + 1 accepts or rejects the swap of ladder levels i and i + 1."""
    return _draw(seed, (_SWAP, barrier, slot)).cut_u
