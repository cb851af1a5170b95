#!/usr/bin/env python3
"""Answer the questions of `myelin peer-inputs` with LanceDB, as a LanceDB user would.

Usage:
    peer-lancedb.py --inputs DIR --out FILE [--top-k K] [--db DIR]

DIR holds turns.jsonl and questions.jsonl (written by `myelin peer-inputs`): every episode
with the text Myelin's BM25 indexes and the embedding Myelin's dense signal reads, every
question with the query embedding Myelin's modes get. One LanceDB table per conversation
(Myelin keeps one memory per conversation), holding id, text and vector, with LanceDB's own
full-text index on the text (its defaults: English stemming, stop words removed). Each
question is asked three ways, each returning the top K episode ids:

    lancedb-fts      full-text search (BM25)
    lancedb-vector   vector search, cosine distance, exhaustive (exact at these sizes)
    lancedb-hybrid   hybrid search, fused by LanceDB's RRFReranker

Each search is timed alone (time.perf_counter around the query up to its list of ids; the
query vector is given, so no embedding is timed), after a warm-up pass over the first
questions. Writes one JSON object per line to FILE, which `myelin eval --peer FILE` scores:

    {"mode": "lancedb-fts", "conversation": c, "question": q, "returned": [ids], "ms": t}
"""
import argparse
import json
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import lancedb  # noqa: E402
import numpy as np  # noqa: E402
from lancedb.index import FTS  # noqa: E402
from lancedb.rerankers import RRFReranker  # noqa: E402

MODES = ("lancedb-fts", "lancedb-vector", "lancedb-hybrid")
WARMUP = 20


def read_lines(path):
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as e:
                    sys.exit(f"{path}: line {n}: {e}")


def search(table, mode, question, top_k, reranker):
    vector = np.asarray(question["vector"], dtype=np.float32)
    # Each search selects its score column too (lance warns on every search that leaves it out).
    if mode == "lancedb-fts":
        q = table.search(question["text"], query_type="fts").select(["id", "_score"])
    elif mode == "lancedb-vector":
        q = table.search(vector).distance_type("cosine").select(["id", "_distance"])
    else:
        q = (table.search(query_type="hybrid").vector(vector).text(question["text"])
             .select(["id"]).rerank(reranker))
    return [row["id"] for row in q.limit(top_k).to_list()]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inputs", required=True, type=Path, help="directory from `myelin peer-inputs`")
    ap.add_argument("--out", required=True, type=Path, help="answers file (JSON Lines)")
    ap.add_argument("--top-k", type=int, default=30, help="episodes per search (default 30, eval's top-k)")
    ap.add_argument("--db", type=Path, default=None, help="LanceDB directory (default: a temporary one)")
    args = ap.parse_args()
    if args.top_k < 1:
        sys.exit("--top-k must be at least 1")

    turns = defaultdict(list)
    for t in read_lines(args.inputs / "turns.jsonl"):
        turns[t["conversation"]].append({"id": t["id"], "text": t["text"], "vector": t["vector"]})
    questions = list(read_lines(args.inputs / "questions.jsonl"))
    unknown = sorted({q["conversation"] for q in questions} - set(turns))
    if unknown:
        sys.exit(f"questions.jsonl asks conversations turns.jsonl lacks: {', '.join(unknown)}")

    db = lancedb.connect(str(args.db or tempfile.mkdtemp(prefix="myelin-peer-")))
    tables = {}
    existing = set(db.list_tables().tables)
    t0 = time.perf_counter()
    for k, (conversation, rows) in enumerate(sorted(turns.items())):
        name = f"conversation_{k}"
        table = db.create_table(name, rows, mode="overwrite" if name in existing else "create")
        table.create_index("text", config=FTS())
        tables[conversation] = table
    build_s = time.perf_counter() - t0

    reranker = RRFReranker()
    for q in questions[:WARMUP]:
        for mode in MODES:
            search(tables[q["conversation"]], mode, q, args.top_k, reranker)

    times = defaultdict(list)
    with open(args.out, "w", encoding="utf-8") as out:
        for q in questions:
            table = tables[q["conversation"]]
            for mode in MODES:
                start = time.perf_counter()
                returned = search(table, mode, q, args.top_k, reranker)
                ms = (time.perf_counter() - start) * 1e3
                times[mode].append(ms)
                line = {"mode": mode, "conversation": q["conversation"], "question": q["id"],
                        "returned": returned, "ms": ms}
                out.write(json.dumps(line) + "\n")

    print(f"lancedb {lancedb.__version__}: {sum(map(len, turns.values()))} episodes in {len(tables)} tables, "
          f"indexed in {build_s:.1f} s; {len(questions)} questions, top {args.top_k}", file=sys.stderr)
    for mode in MODES:
        p50, p95 = np.percentile(times[mode], [50, 95])
        print(f"  {mode:16} p50 {p50:.3f} ms  p95 {p95:.3f} ms", file=sys.stderr)


if __name__ == "__main__":
    main()
