#!/usr/bin/env python3
"""The learned gate with and without the reader's features, from one `train-gate --reader` run's
examples (the last two features are the held-out reader's, `reader_best` and `reader_mean`),
for docs/log.md ("A reader for the gate (2026-12-07)"):

    myelin train-gate LOCOMO_FILE BEAM_DIR --reader --examples EXAMPLES.jsonl
    python3 scripts/gate-reader.py EXAMPLES.jsonl     # needs numpy and scikit-learn

Each conversation is scored by a logistic regression fitted on the others; one threshold, the
3rd percentile of the pooled held-out confidences of answerable questions. Each cell: ROC AUC,
then the share rejected, of one kind of unanswerable question against its data set's
answerable ones (own: adversarial or abstention; other: asked of another conversation). Then
single features' AUCs.
"""
import json
import sys

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler
from sklearn.pipeline import make_pipeline
from sklearn.metrics import roc_auc_score
rows=[json.loads(l) for l in open(sys.argv[1])]
X=np.array([r['features'] for r in rows]); y=np.array([r['answerable'] for r in rows]).astype(int)
conv=np.array([r['conversation'].split('@')[0] for r in rows]); ds=np.array([r['dataset'] for r in rows]); cross=np.array([r.get('from') is not None for r in rows])
NAMES_DENSE_BEST = 30  # dense_best's place in KnowingFeatures::NAMES
print(X.shape)
def held(F):
    p=np.zeros(len(y))
    for c in np.unique(conv):
        t=conv==c
        m=make_pipeline(StandardScaler(),LogisticRegression(C=1.0,max_iter=3000)).fit(F[~t],y[~t]); p[t]=m.predict_proba(F[t])[:,1]
    return p
print("cell: ROC AUC / % rejected at one threshold (3rd percentile of answerable held-out confidences)")
print("               locomo own      locomo other    beam own        beam other")
for name,F in [('34 features',X[:,:34]),('34 + reader',X),('reader only',X[:,34:])]:
    p=held(F); th=np.sort(p[y==1])[int(0.03*(y==1).sum())]
    out=[name.ljust(14)]
    for d in ['locomo','beam']:
        for cr in [False,True]:
            sel=(ds==d)&((y==1)|(cross==cr)); yy=y[sel]; pp=p[sel]
            out.append(f"{roc_auc_score(yy,pp):.3f} / {100*np.mean(pp[yy==0]<th):4.1f}".ljust(15))
    print(' '.join(out))
print("one feature alone, ROC AUC (answerable higher):")
for d in ['locomo','beam']:
    for cr in [False,True]:
        sel=(ds==d)&((y==1)|(cross==cr))
        print(f"  {d} {'other' if cr else 'own'}: reader_best {roc_auc_score(y[sel],X[sel,34]):.3f}, reader_mean {roc_auc_score(y[sel],X[sel,35]):.3f}, dense_best {roc_auc_score(y[sel],X[sel,NAMES_DENSE_BEST]):.3f}")
