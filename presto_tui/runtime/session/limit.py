"""How fast any exact chain could go: the dependency limit and the compute limit of a trajectory.

Every exact rule with decision inputs walks the same trajectory (cuts c_k,
proposal lengths T - c_k, which decisions accepted); only the time it takes
differs.  The dependency limit is the time an exact chain would need on an
engine where a batch costs the same as one request, if an oracle that knows
which proposals the chain will use started each the moment the tokens of its
prefix exist:

- the block's extension decodes positions L..T-1 one a step from when the
  state before it exists in full (block 0: from the start);
- decision k's proposal starts once every token of x_{k-1} before c_k exists,
  and finishes T - c_k steps later; its position p exists p - c_k + 1 steps
  after it starts (tokens of an accepted proposal appear one step at a time);
- decisions are walked in order: decision k is taken at max(taken_{k-1},
  finish_k).  If it accepted, positions from c_k on now come from its proposal.

The limit is when the last decision is taken, in decode steps; times the
engine's single-request step time (`StepCost`) it is in seconds.  The compute
limit is the useful tokens (every extension and every walked decision's
proposal) at the engine's best measured throughput.  `bench`, `stats` and the
app read both from the same trajectory.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class BlockPath:
    """One block of a trajectory: tokens before it (L), after its extension (T), its walk."""

    L: int
    T: int
    walk: list[tuple[int, bool]] = field(default_factory=list)  # (cut, accepted) per decision, in order
    draws: int = 1  # proposals a decision needs (MultiTryMH: its candidates, all decoded)


def dependency_steps(blocks: list[BlockPath]) -> int:
    """Decode steps until the last decision is taken (see the module docstring)."""
    exists: list[int] = []  # the step at which each generated position of the current state exists
    taken = 0
    for b in blocks:
        exists += [0] * (b.L - len(exists))  # a chain started from a given state: its tokens exist at once
        start = max(exists, default=0)  # the whole state before the block
        exists = exists[: b.L] + [start + (p - b.L + 1) for p in range(b.L, b.T)]
        for cut, accepted in b.walk:
            s = max(exists[:cut], default=0)
            taken = max(taken, s + (b.T - cut))
            if accepted:
                exists = exists[:cut] + [s + (p - cut + 1) for p in range(cut, b.T)]
    return taken


def useful_tokens(blocks: list[BlockPath]) -> int:
    """Tokens an exact chain must decode whatever its schedule: extensions and walked proposals."""
    return sum((b.T - b.L) + b.draws * sum(b.T - cut for cut, _ in b.walk) for b in blocks)


@dataclass(frozen=True)
class Limits:
    steps: int  # dependency limit, decode steps
    seconds: float | None  # times the single-request step time (None: no step cost measured)
    compute_seconds: float | None  # useful tokens at the best measured throughput
    useful_tokens: int

    @property
    def best(self) -> float | None:
        """The binding limit in seconds: no exact chain on this engine can be faster."""
        vals = [v for v in (self.seconds, self.compute_seconds) if v is not None]
        return max(vals) if vals else None


def limits(blocks: list[BlockPath], single_step_s: float | None, best_rate: float | None) -> Limits:
    """The dependency and compute limits of a trajectory (docs/streaming.md): how fast any exact
    chain with these transitions could go, in decode steps and in useful tokens."""
    steps = dependency_steps(blocks)
    tokens = useful_tokens(blocks)
    return Limits(steps, steps * single_step_s if single_step_s else None,
                  tokens / best_rate if best_rate else None, tokens)
