"""A method author's kit (docs/extending.md): one validation path for every parameter, a plugin that
fails to load named where it is asked for, `presto-tui methods`, the public surface.

Fast: the synthetic engine, small methods registered in this process (`registry.register`)."""

from __future__ import annotations

import math

import pytest

import presto_tui
from presto_tui.plugin import ChainMethod, Group, Limit, Param, ParamError, PowerMHFamily, SamplerParams
from presto_tui.runtime.core import registry


class TailMH(ChainMethod):
    """A chain method with a whole-number parameter of its own (what a plugin declares)."""

    name, display, help = "tailmh", "tail MH", "PowerMH whose own parameter is a whole number"
    params = (Param("tail_length", int, 4, "Tokens of the tail", Group.OWN, "tail length",
                    limit=Limit(1, math.inf, integer=True), symbol="L"),)

    def family(self, params: SamplerParams) -> PowerMHFamily:
        return PowerMHFamily(params.alpha, params.proposal_tau, params.epsilon)


@pytest.fixture
def tailmh():
    yield registry.register(TailMH())
    registry.reload()


# -- validation: every whole-number parameter refuses what is not one, naming the field -----------

@pytest.mark.parametrize("values, field", [
    (dict(steps=2.5), "steps"), (dict(steps="x"), "steps"), (dict(steps=True), "steps"),
    (dict(sampler="bestofn", samples=2.5), "samples"), (dict(max_new_tokens=8.5), "max_new_tokens"),
    (dict(alpha="x"), "alpha"), (dict(sampler=3), "sampler"),
])
def test_params_refuse_a_value_of_the_wrong_kind_naming_the_field(values, field):
    with pytest.raises(ParamError) as err:
        presto_tui.Params(**values)
    assert err.value.param == field and str(err.value).startswith(f"{field} must be ")
    assert "\n" not in str(err.value)


def test_a_plugins_whole_number_parameter_is_checked_as_a_built_in_one(tailmh):
    for bad in (2.5, "x"):
        with pytest.raises(ParamError, match=r"^tail_length must be a whole number >= 1, got "):
            presto_tui.Params(sampler="tailmh", tail_length=bad)
    assert presto_tui.Params(sampler="tailmh", tail_length=3.0).tail_length == 3  # a whole float, as JSON has it
    assert presto_tui.Params(steps=3.0).steps == 3 and isinstance(presto_tui.Params(steps=3.0).steps, int)


def test_every_limit_prints():
    assert str(Limit(1, math.inf, integer=True)) == "[1, inf]"
    assert Limit(1, math.inf, integer=True).where == ">= 1"
    assert str(Limit(0, 1, lo_open=True)) == "(0, 1]" and str(Limit(1, 2**63 - 1, integer=True)) == "[1, 2^63-1]"
