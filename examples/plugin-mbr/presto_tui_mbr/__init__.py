"""Minimum-Bayes-risk (MBR) selection as a presto-tui method: N samples at temperature tau, the answer
the one that agrees most with the others.

MBR decoding picks, among samples y_1..y_N of the model, the y_i that minimises the expected loss
against the others, argmax_i (1 / (N - 1)) sum_{j != i} u(y_i, y_j), with a utility u (here the
F1 overlap of the two responses' tokens, counted with multiplicity).  Self-consistency is the same
with u an exact match of the extracted answers.  Like best-of-N it is no sampler of p0^alpha: the
law-test kit measures its distance to pi_alpha (`check_law(..., assert_=False)`).

All of it is the method's selection: presto-tui draws the N samples (each up to n tokens, stopping at
EOS, with seeds of their own) and records them, the choice and the answer, in every view and trace.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from presto_tui.plugin import (
    Axis,
    Group,
    Limit,
    OneShotMethod,
    Param,
    Sample,
    SamplerParams,
    Selection,
    best_by,
    cut_at_eos,
)


def token_f1(a: Sequence[int], b: Sequence[int]) -> float:
    """The F1 overlap of two token sequences as bags (1 for two empty responses)."""
    if not a and not b:
        return 1.0
    common = sum((Counter(a) & Counter(b)).values())
    return 2.0 * common / (len(a) + len(b))


class MinimumBayesRisk(OneShotMethod):
    name = "mbr"
    display = "MBR"
    help = "--mbr-samples samples at temperature tau, the one agreeing most with the others (an example plugin)"
    paper = "minimum-Bayes-risk decoding (Kumar and Byrne 2004) with token-F1 utility"
    params = (Param("mbr_samples", int, 8, "MBR: samples N, each at temperature tau", Group.OWN,
                    "samples N (MBR)", limit=Limit(1, 4096, integer=True), symbol="N"),)
    axis = Axis("mbr_samples", "N")
    count_param = "mbr_samples"
    score_label = "mean token F1"

    def select(self, samples: Sequence[Sample], params: SamplerParams, eos_id: int | None) -> Selection:
        if len(samples) == 1:
            return Selection(0, "the only sample", (1.0,))
        texts = [cut_at_eos(s.tokens, eos_id) for s in samples]
        scores = [sum(token_f1(t, u) for j, u in enumerate(texts) if j != i) / (len(texts) - 1)
                  for i, t in enumerate(texts)]
        return best_by(scores, f"highest mean token F1 to the other {len(samples) - 1}")


METHOD = MinimumBayesRisk()
