#!/usr/bin/env python3
"""Two probes of the question's words against the turns closest to it, added to the learned
gate's features, held out by conversation, for docs/log.md ("The gate's word probes
(2026-12-04)"). Both ask MiniLM whether one word of the question is foreign to the turn that matches
the rest (an adversarial question swaps a word of a true fact: "cats" for the dogs it was):

- drop: the question embedded with each content word left out in turn; how much closer the
  closest turn gets without it (largest gain, sum of gains, mean, the question's own cosine);
- align: each content word's contextual vector against every word piece of a turn (its best
  cosine, as BERTScore aligns); per turn the worst-aligned word and the mean, for the closest
  turn, the best-aligned one, and the best of each over the candidates.

    myelin train-gate LOCOMO_FILE BEAM_DIR --examples EXAMPLES.jsonl
    myelin peer-inputs locomo LOCOMO_FILE --out DIR   # (and beam BEAM_DIR --out DIR2)
    python3 scripts/gate-word-probes.py EXAMPLES.jsonl DIR [DIR2 ...]

Needs numpy, scipy, scikit-learn, tokenizers and safetensors, and the model in
$MYELIN_MODEL_DIR (default models/all-MiniLM-L6-v2). MiniLM runs here in numpy, independent of
Myelin's candle embedder (the script prints how close its question vectors are to Myelin's).
Candidates: the 5 turns of the question's conversation with the highest cosine (Myelin's
vectors from peer-inputs). Content words: the question's words but the speakers' names, the
extractor's stop words (src/graph/extract/words/stop_words.txt) and one-letter words. The
table is scripts/gate-alternatives.py's (pooled 3% threshold, rows compare among themselves).
"""
import importlib.util
import json
import os
import re
import sys
from pathlib import Path

import numpy as np
import scipy.special
from safetensors.numpy import load_file
from sklearn.metrics import roc_auc_score
from tokenizers import Tokenizer

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("alternatives", ROOT / "scripts" / "gate-alternatives.py")
alternatives = importlib.util.module_from_spec(spec)
spec.loader.exec_module(alternatives)

CANDIDATES = 5
MODEL = Path(os.environ.get("MYELIN_MODEL_DIR", ROOT / "models" / "all-MiniLM-L6-v2"))
STOP = set((ROOT / "src/graph/extract/words/stop_words.txt").read_text().split())
WORD = re.compile(r"[A-Za-z0-9]+")


class MiniLM:
    """all-MiniLM-L6-v2 (BERT, 6 layers, 12 heads, 384 wide) in numpy: hidden states per word piece."""

    def __init__(self, model_dir):
        self.w = {k.removeprefix("bert."): v.astype(np.float32) for k, v in load_file(model_dir / "model.safetensors").items()}
        self.tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tok.no_padding()
        self.tok.enable_truncation(256)
        self.cache = {}

    def _norm(self, x, p):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / np.sqrt(v + 1e-12) * self.w[p + ".weight"] + self.w[p + ".bias"]

    def _lin(self, x, p):
        return x @ self.w[p + ".weight"].T + self.w[p + ".bias"]

    def hidden(self, text):
        """Unit hidden vectors of the word pieces (special tokens included) and the encoding."""
        if text in self.cache:
            return self.cache[text]
        enc = self.tok.encode(text)
        n = len(enc.ids)
        w = self.w
        x = w["embeddings.word_embeddings.weight"][enc.ids] + w["embeddings.position_embeddings.weight"][:n]
        x = self._norm(x + w["embeddings.token_type_embeddings.weight"][0], "embeddings.LayerNorm")
        for layer in range(6):
            p = f"encoder.layer.{layer}."
            q, k, v = (self._lin(x, p + f"attention.self.{s}").reshape(n, 12, 32).transpose(1, 0, 2) for s in ("query", "key", "value"))
            a = scipy.special.softmax(q @ k.transpose(0, 2, 1) / np.sqrt(32), axis=-1)
            x = self._norm(x + self._lin((a @ v).transpose(1, 0, 2).reshape(n, 384), p + "attention.output.dense"),
                           p + "attention.output.LayerNorm")
            h = self._lin(x, p + "intermediate.dense")
            x = self._norm(x + self._lin(0.5 * h * (1 + scipy.special.erf(h / np.sqrt(2))), p + "output.dense"),
                           p + "output.LayerNorm")
        pooled = x.mean(0)
        out = (x / np.linalg.norm(x, axis=1, keepdims=True), enc, pooled / np.linalg.norm(pooled))
        if len(self.cache) < 50_000:
            self.cache[text] = out
        return out

    def embed(self, text):
        """The sentence vector: mean over word pieces, unit length (sentence-transformers' pooling)."""
        return self.hidden(text)[2]


def content_words(text, names):
    words = dict.fromkeys(m.group(0) for m in WORD.finditer(text))
    return [w for w in words if len(w) > 1 and w.lower() not in STOP and w.lower() not in names]


def probes(model, question, vectors, texts, names):
    """The drop and align features of one question (see the module's docstring)."""
    cos = vectors @ np.array(question["vector"], dtype=np.float32)
    top = np.argsort(-cos)[:CANDIDATES]
    base = float(cos[top].max())
    words = content_words(question["text"], names)
    gains = []
    for w in words:
        rest = re.sub(r"\s+", " ", re.sub(r"\b" + re.escape(w) + r"\b", "", question["text"])).strip()
        gains.append(float((vectors[top] @ model.embed(rest)).max()) - base)
    gains = gains or [0.0]
    drop = [max(gains), sum(g for g in gains if g > 0), float(np.mean(gains)), base]
    xq, enc, _ = model.hidden(question["text"])
    pieces = {}  # content word (lower case) -> its word pieces' rows
    for i, (a, b) in enumerate(enc.offsets):
        for m in WORD.finditer(question["text"]):
            if m.start() <= a < m.end() and b > a and m.group(0) in words:
                pieces.setdefault(m.group(0).lower(), []).append(i)
    per_turn = []
    for j in top:
        xt, enct, _ = model.hidden(texts[j])
        body = [i for i, (a, b) in enumerate(enct.offsets) if b > a]
        if not pieces:
            per_turn.append((0.0, 0.0))
            continue
        best = (xq @ xt[body].T).max(1)
        aligned = [float(best[rows].max()) for rows in pieces.values()]
        per_turn.append((min(aligned), float(np.mean(aligned))))
    t = np.array(per_turn)
    aligned_best = t[np.argmax(t[:, 1])]
    align = [t[0, 0], t[0, 1], aligned_best[0], aligned_best[1], t[:, 0].max(), t[:, 1].max()]
    return drop, align


DROP = ["drop: largest gain", "drop: sum of gains", "drop: mean gain", "drop: question's cosine"]
ALIGN = ["align: closest turn, worst word", "align: closest turn, mean", "align: best turn, worst word",
         "align: best turn, mean", "align: best worst word", "align: best mean"]


def main():
    rows, X, y, conv, dataset = alternatives.load(sys.argv[1])
    model = MiniLM(MODEL)
    found = {}
    agreement = []
    for d in sys.argv[2:]:
        turns = {}
        for line in open(Path(d) / "turns.jsonl"):
            t = json.loads(line)
            turns.setdefault(t["conversation"], []).append(t)
        memory = {c: (np.array([t["vector"] for t in ts], dtype=np.float32), [t["text"] for t in ts],
                      {t["text"].split(":", 1)[0].strip().lower() for t in ts if ":" in t["text"]})
                  for c, ts in turns.items()}
        questions = [json.loads(line) for line in open(Path(d) / "questions.jsonl")]
        for i, q in enumerate(questions):
            vectors, texts, names = memory[q["conversation"]]
            found[q["id"]] = probes(model, q, vectors, texts, names)
            if i < 20:
                agreement.append(float(model.embed(q["text"]) @ np.array(q["vector"])))
            if i % 200 == 0:
                print(f"{d}: {i}/{len(questions)}", file=sys.stderr, flush=True)
    print(f"numpy MiniLM against Myelin's question vectors: mean cosine {np.mean(agreement):.4f} over {len(agreement)}")
    keep = np.array([r["question"] in found for r in rows])
    drop = np.array([found[r["question"]][0] for r in rows if r["question"] in found])
    align = np.array([found[r["question"]][1] for r in rows if r["question"] in found])
    X, y, conv, dataset = X[keep], y[keep], conv[keep], dataset[keep]
    print(f"{keep.sum()} questions of {len(rows)} probed")
    print("\nROC AUC of each probe alone (higher = more answerable):")
    for name, column in [*zip(DROP, drop.T), *zip(ALIGN, align.T)]:
        aucs = [f"{d} {roc_auc_score(y[dataset == d], column[dataset == d]):.3f}" for d in ("locomo", "beam") if (dataset == d).any()]
        print(f"  {name:<34} {'  '.join(aucs)}")
    print()
    print(alternatives.HEADER)
    for name, features in [("the shipped 30 features", X), ("30 + drop (4)", np.hstack([X, drop])),
                           ("30 + align (6)", np.hstack([X, align])), ("30 + drop + align (10)", np.hstack([X, drop, align]))]:
        alternatives.row(f"logistic, C=1, {name}", alternatives.held_out(features, y, conv, dataset, lambda: [], 1.0), y, dataset)


if __name__ == "__main__":
    main()
