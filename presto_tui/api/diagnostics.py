"""MCMC diagnostics of a prompt's chains (ArviZ's split R-hat, bulk and tail ESS, MCSE per block) and
the answer they agree on (self-consistency's vote); a population's own diagnostics (`ladder_of`: tempering's
pairs, mean swap probabilities, Lambda, index process; `smc_of`: an SMC session's log Z, ESS and genealogy)."""

from __future__ import annotations

from presto_tui.runtime.methods.population_numbers import LadderNumbers, SmcNumbers, ladder_of, smc_of
from presto_tui.runtime.session.answers import AnswerGroup, Vote, vote
from presto_tui.runtime.session.diagnostics import (
    ALL,
    ESS_MIN,
    MISSING,
    QUANTITIES,
    RHAT_MAX,
    THRESHOLDS,
    ChainsReport,
    Diagnostic,
    Selection,
    autocorrelation,
    available,
    chain_groups,
    chains_report,
    diagnose,
    draws_of,
    require,
    running_rhat,
)

__all__ = [
    "ALL", "AnswerGroup", "ChainsReport", "Diagnostic", "ESS_MIN", "LadderNumbers", "MISSING", "QUANTITIES",
    "RHAT_MAX", "Selection", "SmcNumbers", "THRESHOLDS", "Vote", "autocorrelation", "available", "chain_groups",
    "chains_report", "diagnose", "draws_of", "ladder_of", "require", "running_rhat", "smc_of", "vote",
]
