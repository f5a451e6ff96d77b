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

from presto_tui.errors import InputError
from presto_tui.runtime.core.mh import EPS_CLASSES
from presto_tui.safetext import visible

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
            raise InputError(f"unknown classifier feature {str(unknown[0])[:40]!r}; known: {', '.join(FEATURES)}")
        if not self.features:
            raise InputError("classifier needs at least one feature")
        if len(self.coef) != 3 or any(len(r) != f for r in self.coef) or len(self.intercept) != 3:
            raise InputError("classifier needs 3 classes x len(features) coefficients and 3 intercepts")
        if len(self.mean) != f or len(self.scale) != f or any(s == 0 for s in self.scale):
            raise InputError("classifier needs one non-zero scale and one mean per feature")
        numbers = [v for row in self.coef for v in row] + [*self.intercept, *self.mean, *self.scale]
        if not all(math.isfinite(v) and abs(v) < 1e12 for v in numbers):
            raise InputError("classifier numbers must be finite (|x| < 1e12)")

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
            raise InputError("not a presto-tui classifier file (missing kind)")
        if d.get("classes") != list(EPS_CLASSES):
            raise InputError(f"classifier classes must be {list(EPS_CLASSES)}")

        def numbers(v, what: str) -> tuple[float, ...]:
            if not isinstance(v, list) or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
                raise InputError(f"classifier field '{what}' should be a list of numbers")
            return tuple(float(x) for x in v)

        missing = [k for k in ("features", "coef", "intercept", "mean", "scale") if k not in d]
        if missing:
            raise InputError(f"classifier file is missing field '{missing[0]}'")
        feats = d["features"]
        if not isinstance(feats, list) or not all(isinstance(f, str) for f in feats):
            raise InputError("classifier field 'features' should be a list of names")
        if not isinstance(d["coef"], list):
            raise InputError("classifier field 'coef' should be a list of rows")
        meta = d.get("meta", {})
        return cls(features=tuple(feats), coef=tuple(numbers(r, "coef") for r in d["coef"]),
                   intercept=numbers(d["intercept"], "intercept"), mean=numbers(d["mean"], "mean"),
                   scale=numbers(d["scale"], "scale"), meta=meta if isinstance(meta, dict) else {})

    @classmethod
    def load(cls, path: str | Path) -> CertaintyClassifier:
        """Read a classifier file as untrusted input; every error names the file."""
        shown = visible(str(path), keep_newlines=False)
        try:
            raw = Path(path).read_bytes()
            if len(raw) > MAX_FILE:
                raise InputError(f"larger than {MAX_FILE // 2**20} MiB, not a classifier")
            data = json.loads(raw, parse_constant=_no_constant)
            return cls.from_json(data)
        except OSError as e:
            raise InputError(f"{shown}: cannot read classifier ({e.strerror})") from None
        except json.JSONDecodeError as e:
            raise InputError(f"{shown}: not JSON ({e.msg} at line {e.lineno})") from None
        except UnicodeDecodeError:
            raise InputError(f"{shown}: not JSON (not UTF-8 text)") from None
        except RecursionError:
            raise InputError(f"{shown}: JSON nested too deeply, not a classifier") from None
        except InputError as e:
            raise InputError(f"{shown}: {e}") from None


MAX_FILE = 2**20


def _no_constant(name: str):
    raise InputError(f"{name} is not a number a classifier can hold")


DEFAULT_CLASSIFIER = CertaintyClassifier()
