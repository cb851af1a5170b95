#!/usr/bin/env python3
"""Other model classes over the learned gate's features, held out by conversation, beside the
shipped form (a logistic regression), for docs/log.md ("Other model classes for the gate
(2026-12-04)").

    myelin train-gate LOCOMO_FILE BEAM_DIR --examples EXAMPLES.jsonl
    python3 scripts/gate-alternatives.py EXAMPLES.jsonl      # needs numpy and scikit-learn

Each conversation is scored by a model fitted on the others (scikit-learn, features
standardised on the training side). The threshold for "rejected at <=3% refused" is the 3rd
percentile of the pooled held-out confidences of answerable questions: not nested, so every row
is a little optimistic against train-gate's table, and the rows compare among themselves only.
scripts/gate-word-probes.py reuses `load`, `held_out` and `row`.
"""
import json
import sys

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import PolynomialFeatures, SplineTransformer, StandardScaler


def load(path):
    """The examples of `train-gate --examples`: rows, features, labels, conversations, data sets."""
    rows = [json.loads(line) for line in open(path)]
    X = np.array([r["features"] for r in rows], dtype=float)
    y = np.array([r["answerable"] for r in rows], dtype=int)
    conv = np.array([r["conversation"] for r in rows])
    dataset = np.array([r["dataset"] for r in rows])
    return rows, X, y, conv, dataset


def held_out(X, y, conv, dataset, expand, C, same_dataset=False):
    """Each conversation's confidences from a model fitted on the other conversations."""
    p = np.zeros(len(y))
    for c in np.unique(conv):
        test = conv == c
        train = ~test & ((dataset == dataset[test][0]) if same_dataset else True)
        model = make_pipeline(*expand(), StandardScaler(), LogisticRegression(C=C, max_iter=5000))
        model.fit(X[train], y[train])
        p[test] = model.predict_proba(X[test])[:, 1]
    return p


def row(name, p, y, dataset):
    """One table line: per data set, ROC AUC and % rejected at the pooled 3% threshold."""
    cells = [f"{name:<48}"]
    for d in ("locomo", "beam"):
        s = dataset == d
        if not s.any():
            cells.append(f"{'-':>6} {'-':>6}")
            continue
        answerable = np.sort(p[s & (y == 1)])
        threshold = answerable[int(np.floor(0.03 * len(answerable)))]
        rejected = np.mean(p[s & (y == 0)] < threshold)
        cells.append(f"{roc_auc_score(y[s], p[s]):>6.3f} {100 * rejected:>6.1f}")
    print(" ".join(cells), flush=True)


HEADER = f"{'model (held out by conversation)':<48} {'LoCoMo AUC, rej@3%':>13}  {'BEAM AUC, rej@3%':>13}"

if __name__ == "__main__":
    _, X, y, conv, dataset = load(sys.argv[1])
    data = (X, y, conv, dataset)
    print(HEADER)
    row("logistic (the shipped form), C=1", held_out(*data, lambda: [], 1.0), y, dataset)
    row("logistic, one model per data set, C=1", held_out(*data, lambda: [], 1.0, same_dataset=True), y, dataset)
    for C in (0.01, 0.03):
        row(f"logistic on pairwise products, C={C}",
            held_out(*data, lambda: [PolynomialFeatures(2, include_bias=False)], C), y, dataset)
    for C in (0.03, 0.1):
        row(f"logistic on splines (4 knots, degree 2), C={C}",
            held_out(*data, lambda: [StandardScaler(), SplineTransformer(n_knots=4, degree=2, extrapolation="constant")], C),
            y, dataset)
