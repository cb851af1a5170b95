#!/usr/bin/env python3
"""Write the turn texts of a LoCoMo file, one per line.

Usage: make-sentences.py <locomo.json> <out.txt> [--limit N]

Turns are taken from every sample, every session (session_1, session_2, ... in
numeric order), every turn, in order. Newlines (and other line breaks) inside a
text are replaced by spaces so that each turn is exactly one line. The first N
turns are written (default 2000; --limit 0 means all).
"""
import argparse
import json
import re
import sys

SESSION_RE = re.compile(r"^session_(\d+)$")


def turn_texts(samples):
    for sample in samples:
        conv = sample.get("conversation", {})
        sessions = sorted(
            (int(m.group(1)), key)
            for key in conv
            if (m := SESSION_RE.match(key)) and isinstance(conv[key], list)
        )
        for _, key in sessions:
            for turn in conv[key]:
                text = turn.get("text")
                if not isinstance(text, str):
                    continue
                # one line per turn: replace any line break with a space
                yield re.sub(r"\r\n|[\r\n\u2028\u2029\x0b\x0c\x85]", " ", text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("locomo", help="LoCoMo JSON file (locomo10.json layout)")
    ap.add_argument("out", help="output text file, one sentence per line")
    ap.add_argument("--limit", type=int, default=2000,
                    help="number of turns to write (default 2000; 0 = all)")
    args = ap.parse_args()

    with open(args.locomo, encoding="utf-8") as f:
        samples = json.load(f)
    if not isinstance(samples, list):
        sys.exit(f"{args.locomo}: expected a JSON list of samples")

    n = 0
    with open(args.out, "w", encoding="utf-8", newline="\n") as out:
        for text in turn_texts(samples):
            if args.limit and n >= args.limit:
                break
            out.write(text + "\n")
            n += 1
    if args.limit and n < args.limit:
        print(f"note: only {n} turns available (limit {args.limit})", file=sys.stderr)
    print(f"wrote {n} sentences to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
