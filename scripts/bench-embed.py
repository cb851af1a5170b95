#!/usr/bin/env python3
"""Time sentence-transformers (all-MiniLM-L6-v2) on a file of sentences.

Usage:
    bench-embed.py --sentences FILE --batch-size B [--threads T] [--repeat R]
                   [--queries FILE] [--one N]

One sentence per line (empty lines are kept as empty sentences, a trailing
newline does not add one). Encodes with normalize_embeddings=True on the CPU
with T torch threads (default: all cores available to this process). Warms up
on the first batch, then times R full passes and reports the best, as a JSON
line on stdout:

    {"engine":"sentence-transformers","mode":"batch","texts":n,"batch_size":B,
     "threads":T,"seconds":s,"per_second":x,"torch":"<version>"}

With --one N (N > 0), first embeds the first N queries (--queries, default the
sentences) one at a time, each its own encode call as a search embeds its
question, R times over, the fastest time of each text counting, and prints a
line with "mode":"one" and p50_ms, p95_ms before the batch line.

Environment:
    MYELIN_MODEL_DIR  model directory (default: models/all-MiniLM-L6-v2
                      under the repo root). Runs offline (HF_HUB_OFFLINE=1).
"""
import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO_ROOT = Path(__file__).resolve().parent.parent


def available_cores():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sentences", required=True, help="text file, one sentence per line")
    ap.add_argument("--batch-size", type=int, required=True)
    ap.add_argument("--threads", type=int, default=None,
                    help="torch intra-op threads (default: all available cores)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="timed full passes; the best is reported (default 3)")
    ap.add_argument("--queries", default=None,
                    help="texts embedded one at a time (default: the sentences)")
    ap.add_argument("--one", type=int, default=0,
                    help="how many queries to embed one at a time (default 0: none)")
    args = ap.parse_args()
    if args.batch_size < 1 or args.repeat < 1:
        sys.exit("--batch-size and --repeat must be >= 1")
    threads = args.threads or available_cores()

    def read(path):
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if not lines:
            sys.exit(f"{path}: no sentences")
        return lines

    sentences = read(args.sentences)
    queries = (read(args.queries) if args.queries else sentences)[:args.one]

    # an explicit MYELIN_MODEL_DIR is taken relative to the current directory;
    # the default is relative to the repo root
    model_dir = Path(os.environ.get("MYELIN_MODEL_DIR")
                     or REPO_ROOT / "models/all-MiniLM-L6-v2")

    import torch
    torch.set_num_threads(threads)
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(model_dir), device="cpu")

    def encode(texts):
        return model.encode(texts, batch_size=args.batch_size,
                            normalize_embeddings=True, convert_to_numpy=True,
                            show_progress_bar=False)

    def one(text):
        return model.encode([text], batch_size=1, normalize_embeddings=True,
                            convert_to_numpy=True, show_progress_bar=False)

    with torch.inference_mode():
        if queries:
            one(queries[0])  # warm-up
            best_each = [float("inf")] * len(queries)
            for _ in range(args.repeat):
                for i, q in enumerate(queries):
                    t0 = time.perf_counter()
                    one(q)
                    best_each[i] = min(best_each[i], time.perf_counter() - t0)
            ms = sorted(s * 1e3 for s in best_each)
            pick = lambda q: ms[min(len(ms), max(1, math.ceil(q * len(ms)))) - 1]
            total = sum(best_each)
            print(json.dumps({
                "engine": "sentence-transformers", "mode": "one", "texts": len(queries),
                "batch_size": 1, "threads": threads, "seconds": round(total, 4),
                "per_second": round(len(queries) / total, 2),
                "p50_ms": round(pick(0.5), 3), "p95_ms": round(pick(0.95), 3),
                "torch": torch.__version__,
            }, separators=(",", ":")), flush=True)
        encode(sentences[:args.batch_size])  # warm-up
        best = float("inf")
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            emb = encode(sentences)
            best = min(best, time.perf_counter() - t0)
    assert emb.shape[0] == len(sentences)

    print(json.dumps({
        "engine": "sentence-transformers",
        "mode": "batch",
        "texts": len(sentences),
        "batch_size": args.batch_size,
        "threads": threads,
        "seconds": round(best, 4),
        "per_second": round(len(sentences) / best, 2),
        "torch": torch.__version__,
    }, separators=(",", ":")), flush=True)


if __name__ == "__main__":
    main()
