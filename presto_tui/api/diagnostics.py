"""MCMC diagnostics of a prompt's chains (ArviZ's split R-hat, bulk and tail ESS, MCSE per block) and
the answer they agree on (self-consistency's vote)."""

from __future__ import annotations

from presto_tui.runtime.session.answers import AnswerGroup, Vote, vote
from presto_tui.runtime.session.diagnostics import (
    ESS_MIN,
    MISSING,
    QUANTITIES,
    RHAT_MAX,
    THRESHOLDS,
    ChainsReport,
    Diagnostic,
    available,
    chain_groups,
    chains_report,
    diagnose,
    draws_of,
    require,
)

__all__ = ["ESS_MIN", "MISSING", "QUANTITIES", "RHAT_MAX", "THRESHOLDS", "AnswerGroup", "ChainsReport", "Diagnostic",
           "Vote", "available", "chain_groups", "chains_report", "diagnose", "draws_of", "require", "vote"]
