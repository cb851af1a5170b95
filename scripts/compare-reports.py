#!/usr/bin/env python3
"""Compares two `myelin eval` reports field by field, timing fields left out.

    scripts/compare-reports.py A.json B.json [A.jsonl B.jsonl]

The timing fields (`latency_ms`, `query_embedding_ms`, `build_ms`, `gpu_batch`) measure the
machine, not the result, and are left out; every other field must be equal. With the two
runs' `--per-question` files, those must be equal byte for byte. Prints one line (the first
differing paths when they differ) and exits 1 on any difference. Used by
`scripts/check-identity.sh` (two builds) and for a run in shards against one process
(docs/scale-out.md).
"""

import json
import sys

TIMING = {"latency_ms", "query_embedding_ms", "build_ms", "gpu_batch"}


def strip(value):
    if isinstance(value, dict):
        return {k: strip(x) for k, x in value.items() if k not in TIMING}
    if isinstance(value, list):
        return [strip(x) for x in value]
    return value


def diff(a, b, path, found):
    if len(found) >= 5:
        return
    if type(a) is not type(b):
        found.append(f"{path}: {a!r} vs {b!r}")
    elif isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                found.append(f"{path}.{k}: only in {'the second' if k in b else 'the first'}")
            else:
                diff(a[k], b[k], f"{path}.{k}", found)
    elif isinstance(a, list):
        if len(a) != len(b):
            found.append(f"{path}: {len(a)} vs {len(b)} items")
        for i, (x, y) in enumerate(zip(a, b)):
            diff(x, y, f"{path}[{i}]", found)
    elif a != b:
        found.append(f"{path}: {a!r} vs {b!r}")


def main(args):
    if len(args) not in (2, 4):
        sys.exit("usage: compare-reports.py A.json B.json [A.jsonl B.jsonl]")
    with open(args[0]) as f:
        a = strip(json.load(f))
    with open(args[1]) as f:
        b = strip(json.load(f))
    bad = False
    name = f"{args[0]} vs {args[1]}"
    if len(args) == 4:
        with open(args[2], "rb") as f, open(args[3], "rb") as g:
            lines = f.read(), g.read()
        if lines[0] != lines[1]:
            bad = True
            print(f"{name}: per-question results DIFFERENT (cmp {args[2]} {args[3]})")
        else:
            count = lines[0].count(b"\n")
            print(f"{name}: per-question results identical ({count} lines)")
    if a == b:
        print(f"{name}: report identical ({len(a['modes'])} modes, {a['questions']} questions; timing fields aside)")
    else:
        bad = True
        found = []
        diff(a, b, "", found)
        print(f"{name}: DIFFERENT, first differences:\n  " + "\n  ".join(found))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
