#!/usr/bin/env python3
"""The learned gate with questions asked of another conversation among its examples: the shipped
form (one logistic regression over every example) beside the alternatives tried, held out by
conversation, for docs/log.md ("Questions it was never told about (2026-12-07)").

    myelin train-gate LOCOMO_FILE BEAM_DIR --examples EXAMPLES.jsonl
    python3 scripts/gate-cross-alternatives.py EXAMPLES.jsonl     # needs numpy and scikit-learn

Each conversation is scored by a model fitted on the others. One threshold for all rows, the
3rd percentile of the pooled held-out confidences of answerable questions (not nested, so a
little optimistic against train-gate's table; the rows compare among themselves). Each cell:
ROC AUC, then the share rejected at that threshold, of one kind of unanswerable question
against its data set's answerable ones (O: its own, adversarial or abstention; X: asked of
another conversation).
"""
import json
import sys

import numpy as np
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

rows = [json.loads(line) for line in open(sys.argv[1])]
X = np.array([r["features"] for r in rows], dtype=float)
y = np.array([r["answerable"] for r in rows], dtype=int)
conv = np.array([r["conversation"] for r in rows])
dataset = np.array([r["dataset"] for r in rows])
cross = np.array([r.get("from") is not None for r in rows])


def held_out(make, features=X, train_on=None):
    """Each conversation's confidences from a model fitted on the others (and `train_on`)."""
    p = np.zeros(len(y))
    keep = np.ones(len(y), bool) if train_on is None else train_on
    for c in np.unique(conv):
        test = conv == c
        model = make().fit(features[~test & keep], y[~test & keep])
        p[test] = model.predict_proba(features[test])[:, 1]
    return p


def row(name, p):
    t = np.sort(p[y == 1])[int(0.03 * (y == 1).sum())]
    cells = [name.ljust(34)]
    for d in ["locomo", "beam"]:
        yes = p[(dataset == d) & (y == 1)]
        for x in [False, True]:
            no = p[(dataset == d) & (y == 0) & (cross == x)]
            auc = roc_auc_score(np.r_[np.ones(len(yes)), np.zeros(len(no))], np.r_[yes, no])
            cells.append(f"{d}{'X' if x else 'O'} {auc:.3f} {100 * (no < t).mean():5.1f}")
    print(" | ".join(cells), flush=True)


def logistic():
    # The shipped fit's penalty, 1e-3 per example on standardised features.
    return make_pipeline(StandardScaler(), LogisticRegression(C=1 / (1e-3 * len(y)), max_iter=5000))


single = held_out(logistic)
row("one model, every example (shipped)", single)
own = held_out(logistic, train_on=~cross)
row("own unanswerable questions only", own)
other = held_out(logistic, train_on=cross | (y == 1))
row("the smaller of own and other", np.minimum(own, other))
row("the product of own and other", own * other)
named = X[:, :1]  # `named` is the first feature
row("x named (interactions)", held_out(logistic, np.hstack([X, X * named])))
row("gradient-boosted trees", held_out(lambda: HistGradientBoostingClassifier(
    max_iter=200, learning_rate=0.05, max_leaf_nodes=15, l2_regularization=1.0, random_state=0)))
row("MLP (32)", held_out(lambda: make_pipeline(
    StandardScaler(), MLPClassifier((32,), alpha=1e-2, max_iter=2000, random_state=0))))
