#!/usr/bin/env python3
"""Time sentence-transformers (all-MiniLM-L6-v2) on a file of sentences.

Usage:
    bench-embed.py --sentences FILE --batch-size B [--threads T] [--repeat R]

One sentence per line (empty lines are kept as empty sentences, a trailing
newline does not add one). Encodes with normalize_embeddings=True on the CPU
with T torch threads (default: all cores available to this process). Warms up
on the first batch, then times R full passes and reports the best, as one JSON
line on stdout:

    {"engine":"sentence-transformers","sentences":n,"batch_size":B,
     "threads":T,"seconds":s,"per_second":x,"torch":"<version>"}

Environment:
    MYELIN_MODEL_DIR  model directory (default: models/all-MiniLM-L6-v2
                      under the repo root). Runs offline (HF_HUB_OFFLINE=1).
"""
import argparse
import json
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
    args = ap.parse_args()
    if args.batch_size < 1 or args.repeat < 1:
        sys.exit("--batch-size and --repeat must be >= 1")
    threads = args.threads or available_cores()

    with open(args.sentences, encoding="utf-8") as f:
        sentences = f.read().split("\n")
    if sentences and sentences[-1] == "":
        sentences.pop()
    if not sentences:
        sys.exit(f"{args.sentences}: no sentences")

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

    with torch.inference_mode():
        encode(sentences[:args.batch_size])  # warm-up
        best = float("inf")
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            emb = encode(sentences)
            best = min(best, time.perf_counter() - t0)
    assert emb.shape[0] == len(sentences)

    print(json.dumps({
        "engine": "sentence-transformers",
        "sentences": len(sentences),
        "batch_size": args.batch_size,
        "threads": threads,
        "seconds": round(best, 4),
        "per_second": round(len(sentences) / best, 2),
        "torch": torch.__version__,
    }, separators=(",", ":")), flush=True)


if __name__ == "__main__":
    main()
