"""The predictive rule's epsilon-class model (paper sec 3.3, appendices C.3 and E.7).

A 3-class logistic regression over features known before a request is
generated (by default only the cut fraction c/T) gives P(certain reject),
P(certain accept), P(uncertain); the branch probability of the accept edge is
the midpoint estimate h+ = (1 + P(accept) - P(reject)) / 2 (eq. 14).  A softmax
never outputs 0 or 1, so h+ lies strictly inside (0, 1) and reach weights
strictly decrease along every path, which the best-first selection relies on.

The shipped default is a prior shaped after the paper's finding that later
cuts are accepted more often and early cuts are mostly certain rejects;
`presto-tui fit-classifier` fits one from recorded traces.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from presto_tui.runtime.mh import EPS_CLASSES

# Features the rule can compute for a candidate node before generation
# (paper E.7, feature sets 1 and 2).
FEATURES = ("cut_fraction", "cut_index_fraction", "gap_fraction", "depth", "accepts")


def node_features(cut: int, cut_index: int, depth: int, accepts: int, T: int) -> dict[str, float]:
    """Features of the decision at a node whose cut index is `cut_index`, drawing `cut`."""
    return {
        "cut_fraction": cut / T,
        "cut_index_fraction": cut_index / T,
        "gap_fraction": (cut_index - cut) / T,
        "depth": float(depth),
        "accepts": float(accepts),
    }


@dataclass(frozen=True)
class CertaintyClassifier:
    features: tuple[str, ...] = ("cut_fraction",)
    # one row per class in EPS_CLASSES order: reject, accept, uncertain
    coef: tuple[tuple[float, ...], ...] = ((-3.0,), (2.5,), (0.0,))
    intercept: tuple[float, ...] = (1.5, -1.8, 0.0)
    mean: tuple[float, ...] = (0.0,)
    scale: tuple[float, ...] = (1.0,)
    meta: dict = field(default_factory=dict, compare=False)

    def __post_init__(self):
        f = len(self.features)
        unknown = [n for n in self.features if n not in FEATURES]
        if unknown:
            raise ValueError(f"unknown classifier feature {unknown[0]!r}; known: {', '.join(FEATURES)}")
        if len(self.coef) != 3 or any(len(r) != f for r in self.coef) or len(self.intercept) != 3:
            raise ValueError("classifier needs 3 classes x len(features) coefficients and 3 intercepts")
        if len(self.mean) != f or len(self.scale) != f or any(s == 0 for s in self.scale):
            raise ValueError("classifier needs one non-zero scale and one mean per feature")

    def proba(self, feats: dict[str, float]) -> tuple[float, float, float]:
        """(P reject, P accept, P uncertain)."""
        x = [(feats[n] - m) / s for n, m, s in zip(self.features, self.mean, self.scale)]
        z = [b + sum(w * xi for w, xi in zip(row, x)) for row, b in zip(self.coef, self.intercept)]
        top = max(z)
        e = [math.exp(v - top) for v in z]
        tot = sum(e)
        return e[0] / tot, e[1] / tot, e[2] / tot

    def branch_prob(self, feats: dict[str, float]) -> float:
        """Predicted accept-branch probability h+ (eq. 14)."""
        p_reject, p_accept, _ = self.proba(feats)
        return 0.5 * (1.0 + p_accept - p_reject)

    def to_json(self) -> dict:
        return {
            "kind": "presto-tui/certainty-classifier",
            "version": 1,
            "classes": list(EPS_CLASSES),
            "features": list(self.features),
            "coef": [list(r) for r in self.coef],
            "intercept": list(self.intercept),
            "mean": list(self.mean),
            "scale": list(self.scale),
            "meta": self.meta,
        }

    @classmethod
    def from_json(cls, d: dict) -> CertaintyClassifier:
        if not isinstance(d, dict) or d.get("kind") != "presto-tui/certainty-classifier":
            raise ValueError("not a presto-tui classifier file (missing kind)")
        if list(d.get("classes", [])) != list(EPS_CLASSES):
            raise ValueError(f"classifier classes must be {list(EPS_CLASSES)}")
        try:
            return cls(
                features=tuple(d["features"]),
                coef=tuple(tuple(float(v) for v in r) for r in d["coef"]),
                intercept=tuple(float(v) for v in d["intercept"]),
                mean=tuple(float(v) for v in d["mean"]),
                scale=tuple(float(v) for v in d["scale"]),
                meta=dict(d.get("meta", {})),
            )
        except (KeyError, TypeError) as e:
            raise ValueError(f"classifier file is missing or mistypes a field ({e})") from None

    @classmethod
    def load(cls, path: str | Path) -> CertaintyClassifier:
        try:
            data = json.loads(Path(path).read_text())
        except OSError as e:
            raise ValueError(f"{path}: cannot read classifier ({e.strerror})") from None
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: not JSON ({e.msg} at line {e.lineno})") from None
        try:
            return cls.from_json(data)
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None


DEFAULT_CLASSIFIER = CertaintyClassifier()
