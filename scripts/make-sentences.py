#!/usr/bin/env python3
"""Write the texts of a data set, one per line: LoCoMo turns or questions, BEAM messages.

Usage: make-sentences.py <source> <out.txt> [--kind turns|questions|beam] [--limit N]

turns (default): <source> is a LoCoMo file; turns are taken from every sample,
every session (session_1, session_2, ... in numeric order), every turn, in order.
questions: the questions of a LoCoMo file, in order. beam: <source> is a BEAM
directory (100K layout: <conversation>/chat.json); every message of every
conversation, conversations in numeric order. Newlines (and other line breaks)
inside a text are replaced by spaces so that each text is exactly one line. The
first N texts are written (default 2000; --limit 0 means all).
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


def one_line(text):
    return re.sub(r"\r\n|[\r\n\u2028\u2029\x0b\x0c\x85]", " ", text)


def questions(samples):
    for sample in samples:
        for qa in sample.get("qa", []):
            if isinstance(qa.get("question"), str):
                yield one_line(qa["question"])


def beam_messages(directory):
    import os
    names = sorted((n for n in os.listdir(directory) if n.isdigit()), key=int)
    for name in names:
        path = os.path.join(directory, name, "chat.json")
        if not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8") as f:
            batches = json.load(f)
        for batch in batches:
            for turn in batch.get("turns", []):
                for message in turn:
                    content = message.get("content")
                    if isinstance(content, str) and content.strip():
                        yield one_line(content)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("locomo", help="LoCoMo JSON file (locomo10.json layout), or a BEAM directory")
    ap.add_argument("out", help="output text file, one sentence per line")
    ap.add_argument("--limit", type=int, default=2000,
                    help="number of texts to write (default 2000; 0 = all)")
    ap.add_argument("--kind", choices=["turns", "questions", "beam"], default="turns")
    args = ap.parse_args()

    if args.kind == "beam":
        texts = beam_messages(args.locomo)
    else:
        with open(args.locomo, encoding="utf-8") as f:
            samples = json.load(f)
        if not isinstance(samples, list):
            sys.exit(f"{args.locomo}: expected a JSON list of samples")
        texts = turn_texts(samples) if args.kind == "turns" else questions(samples)

    n = 0
    with open(args.out, "w", encoding="utf-8", newline="\n") as out:
        for text in texts:
            if args.limit and n >= args.limit:
                break
            out.write(text + "\n")
            n += 1
    if args.limit and n < args.limit:
        print(f"note: only {n} texts available (limit {args.limit})", file=sys.stderr)
    print(f"wrote {n} texts to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
