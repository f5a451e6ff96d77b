"""The law-test kit (`presto_tui.testing`) on every built-in method, and its power: a kit that passes
everything would be no kit, so each check is shown failing on a method that is wrong in its way."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import ClassVar

import pytest

from presto_tui import testing
from presto_tui.plugin import ChainMethod, PowerMHFamily, SeqState, UniformCut
from presto_tui.runtime.core import registry
from presto_tui.runtime.core.params import SamplerParams

pytestmark = pytest.mark.slow

CHAIN_METHODS = [m.name for m in registry.methods() if m.chain]
ONE_CHAIN_METHODS = [m.name for m in registry.methods() if m.rounds]  # (a population's members: its family's chains)
OWN = {"entropycut": dict(beta=2.0, cut_mix=0.1)}  # (a sharper cut law than the default)


def chain(sampler: str, **kw) -> SamplerParams:
    return SamplerParams(**{"sampler": sampler, "prefetch": "none", "alpha": 4.0, **OWN.get(sampler, {}), **kw})


@pytest.mark.parametrize("sampler", CHAIN_METHODS)
def test_every_mh_kernel_leaves_pi_alpha_invariant(sampler):
    report = testing.check_invariance(chain(sampler, max_new_tokens=3, steps=4), chains=800)
    assert report.within_noise and report.foreign == 0


@pytest.mark.parametrize("sampler", CHAIN_METHODS)
def test_every_presto_rule_reproduces_every_mh_method(sampler):
    report = testing.check_coupling(chain(sampler, max_new_tokens=8, steps=6), budgets=(1, 4, 8))
    assert report.compared >= len(CHAIN_METHODS) and report.transitions > 0


@pytest.mark.parametrize("sampler", ONE_CHAIN_METHODS)
def test_every_mh_transition_draws_from_its_laws(sampler):
    """(Every rule, with laws re-derived independently of the samplers' maths: tests/test_transitions.py;
    PreSTO's rules reproduce these transitions token for token: the coupling above.)"""
    params = chain(sampler, max_new_tokens=10, steps=20)
    assert min(testing.check_pit(params, chains=60).values()) > testing.P_MIN


def test_the_one_shot_methods_distance_is_measured_and_falls_with_their_budget():
    """An approximate method is not within noise of pi_alpha: the kit measures how far it is
    (PowerSMC with one particle per token block comes within noise as P grows; low temperature
    stays away: it sharpens every conditional on its own)."""
    far = testing.check_law(SamplerParams(sampler="lowtemp", max_new_tokens=3), sessions=400, assert_=False)
    small = testing.check_law(SamplerParams(sampler="powersmc", max_new_tokens=3, particles=2, smc_block=1),
                              sessions=400, assert_=False)
    large = testing.check_law(SamplerParams(sampler="powersmc", max_new_tokens=3, particles=16, smc_block=1),
                              sessions=400, assert_=False)
    assert not far.within_noise and far.low > far.floor
    assert small.tv > large.tv and large.within_noise


# -- the kit's power: each check fails where it should ----------------------------------------

@dataclass(frozen=True)
class NoCorrection(PowerMHFamily):
    """PowerMH that forgets the proposal's correction log q(x) - log q(y): it targets p0^alpha / q_tau."""

    name: ClassVar[str] = "nocorrection"

    def score(self, state, cut, inp, proposals, selected):
        sc = super().score(state, cut, inp, proposals, selected)
        ratio = sc.log_target
        accept = math.exp(min(0.0, ratio))
        return dataclasses.replace(sc, log_proposal=0.0, log_ratio=ratio, accept_prob=accept)


class SkewedCut(UniformCut):
    """Draws cuts towards the end while saying they are uniform (what a selection bias looks like)."""

    def cut(self, u: float, state: SeqState) -> int:
        return min(state.T - 1, int(u ** 0.5 * state.T))


@dataclass(frozen=True)
class Skewed(PowerMHFamily):
    name: ClassVar[str] = "skewed"


class Wrong(ChainMethod):
    display, help = "a wrong method", "for the kit's power"

    def __init__(self, name: str, family) -> None:
        self.name, self.make = name, family  # type: ignore[misc]

    def family(self, params: SamplerParams):
        return self.make(params)


@pytest.fixture
def wrong():
    made = [registry.register(Wrong("nocorrection", lambda p: NoCorrection(p.alpha, p.proposal_tau, p.epsilon))),
            registry.register(Wrong("skewed", lambda p: Skewed(p.alpha, p.proposal_tau, p.epsilon, SkewedCut())))]
    yield made
    registry.reload()


def test_invariance_fails_a_kernel_that_forgets_the_proposal_correction(wrong):
    with pytest.raises(AssertionError, match="does not leave pi_alpha invariant"):
        testing.check_invariance(chain("nocorrection", max_new_tokens=3, steps=4), chains=800)


def test_the_pit_fails_cuts_drawn_from_another_law_than_the_one_claimed(wrong):
    with pytest.raises(AssertionError, match="cut PIT"):
        testing.check_pit(chain("skewed", max_new_tokens=10, steps=20), chains=40)


def test_coupling_fails_a_rule_that_uses_a_request_its_state_does_not_agree_with(monkeypatch):
    """The spine rule without its content check (a state may use a request made from a prefix it does
    not hold) walks another trajectory than the sequential chain's; the kit says where."""
    from presto_tui.runtime.prefetch import rules

    params = chain("powermh", max_new_tokens=8, steps=12)
    testing.check_coupling(params, rules=("spine",), budgets=(8,))  # as it is: it passes
    monkeypatch.setattr(rules.SpineLevels, "may_use", lambda self, tree, src, cut: True)
    with pytest.raises(AssertionError, match="PreSTO spine N=8 leaves the sequential chain"):
        testing.check_coupling(params, rules=("spine",), budgets=(8,))
