"""MCMC diagnostics of a prompt's chains (ArviZ's split R-hat, bulk and tail ESS, MCSE per block) and
the answer they agree on (self-consistency's vote)."""

from __future__ import annotations

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
    "ALL", "AnswerGroup", "ChainsReport", "Diagnostic", "ESS_MIN", "MISSING", "QUANTITIES", "RHAT_MAX", "Selection",
    "THRESHOLDS", "Vote", "autocorrelation", "available", "chain_groups", "chains_report", "diagnose", "draws_of",
    "require", "running_rhat", "vote",
]
