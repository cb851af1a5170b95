#!/usr/bin/env python3
"""Runs `myelin eval` in shards as Ray tasks and merges their parts into one report.

    "$(scripts/ray-env.sh)" scripts/ray-eval.py --shards N [--address ADDR] [--binary PATH] \\
        [--cpus-per-shard C] -- eval locomo FILE [eval flags] --json whole.json

The arguments after `--` are the command line of one `myelin eval` (global flags such as
`--store` included). The script

1. makes the store ready once, on this machine: the same command with `--prepare-only`
   (ingests what the store lacks; a store already ready is only read), since the shards read
   the store at once and never write it;
2. starts a local Ray cluster (or joins the one at `--address`) and runs shard I of N
   (I = 1 … N) as one Ray task each: the same command plus `--shard I/N --json <part>`; each
   task returns its part's bytes, so a worker on another node needs the same binary, store and
   input paths (a shared file system) but no shared temporary directory;
3. runs `myelin eval-merge` over the parts, which checks they are every shard of one run and
   prints the tables and writes the files of the report one process gives: the eval
   arguments' `--json`, `--plot`, `--gate-plot` and `--per-question` are given to the merge,
   not to the shards.

Prints the wall time of each step and of each shard. The binary is `--binary`, else
`$CARGO_TARGET_DIR/release/myelin`, else `target/release/myelin` of this repository. The
environment variables `MYELIN_*` and `RAYON_NUM_THREADS` travel to the tasks, and those named
by `--env NAME` (repeatable; `--env 'AWS_*'` names every variable that starts so): a store on
S3 needs the AWS variables on every node, from there or set on the nodes themselves.
See docs/scale-out.md ("Batch evaluation on Ray").
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The eval flags whose files the merge writes, not a shard.
OUTPUTS = ("--json", "--plot", "--gate-plot", "--per-question")
# Flags the script sets itself.
OWN = ("--shard", "--prepare-only")


def default_binary() -> Path:
    target = os.environ.get("CARGO_TARGET_DIR")
    base = Path(target) if target else Path(__file__).resolve().parent.parent / "target"
    return base / "release" / "myelin"


def split_outputs(args: list[str]) -> tuple[list[str], list[str]]:
    """The eval arguments without the output flags, and those flags with their values."""
    rest, outputs = [], []
    i = 0
    while i < len(args):
        arg = args[i]
        name = arg.split("=", 1)[0]
        if name in OWN:
            sys.exit(f"ray-eval: {name} is the script's to set; leave it out of the eval arguments")
        if name in OUTPUTS:
            if "=" in arg:
                outputs.append(arg)
            elif i + 1 < len(args):
                outputs.extend(args[i : i + 2])
                i += 1
            else:
                sys.exit(f"ray-eval: {arg} needs a value")
        else:
            rest.append(arg)
        i += 1
    return rest, outputs


def travels(name: str, patterns: list[str]) -> bool:
    """Whether the variable `name` goes to the tasks: a pattern is a name, or a prefix and `*`."""
    return any(name.startswith(p[:-1]) if p.endswith("*") else name == p for p in patterns)


def run(command: list[str], what: str) -> float:
    """Runs `command` in the foreground (its output on ours); its wall time in seconds."""
    started = time.monotonic()
    done = subprocess.run(command)
    if done.returncode != 0:
        sys.exit(f"ray-eval: {what} failed (exit {done.returncode}): {' '.join(command)}")
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shards", type=int, required=True, help="N: how many shards (Ray tasks)")
    parser.add_argument("--address", help="a running Ray cluster (default: start a local one)")
    parser.add_argument("--binary", type=Path, default=default_binary(), help="the myelin binary")
    parser.add_argument("--cpus-per-shard", type=float, default=1.0, help="Ray CPUs each task reserves")
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME",
        help="an environment variable the tasks get from here (NAME, or PREFIX* for all that start so); repeatable",
    )
    parser.add_argument("eval", nargs=argparse.REMAINDER, help="-- then the eval command line")
    options = parser.parse_args()
    eval_args = options.eval[1:] if options.eval[:1] == ["--"] else options.eval
    if options.shards < 1:
        sys.exit("ray-eval: --shards must be at least 1")
    if "eval" not in eval_args:
        sys.exit("ray-eval: give the eval command line after --, e.g. -- eval locomo FILE --json whole.json")
    binary = options.binary.resolve()
    if not os.access(binary, os.X_OK):
        sys.exit(f"ray-eval: no binary at {binary} (cargo build --release, or --binary PATH)")
    shard_args, outputs = split_outputs(eval_args)
    if not any(o.split("=", 1)[0] == "--json" for o in outputs):
        print("ray-eval: no --json among the eval arguments: the merged report is only printed", file=sys.stderr)
    cwd = os.getcwd()
    env = {k: v for k, v in os.environ.items() if travels(k, ["MYELIN_*", "RAYON_NUM_THREADS", *options.env])}

    started = time.monotonic()
    prepare_s = run([str(binary), *shard_args, "--prepare-only"], "making the store ready")

    import ray  # after the cheap checks: importing Ray takes a few seconds

    ray.init(address=options.address, runtime_env={"env_vars": env}, log_to_driver=False)

    @ray.remote(num_cpus=options.cpus_per_shard, max_retries=0)
    def shard(index: int) -> tuple[int, float, str, bytes]:
        with tempfile.TemporaryDirectory(prefix="myelin-shard-") as tmp:
            part = Path(tmp) / "part.json"
            command = [str(binary), *shard_args, "--shard", f"{index}/{options.shards}", "--json", str(part)]
            began = time.monotonic()
            done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
            took = time.monotonic() - began
            log = done.stderr[-4000:] if done.returncode else done.stderr[-400:]
            return done.returncode, took, log, part.read_bytes() if done.returncode == 0 else b""

    shards_began = time.monotonic()
    results = ray.get([shard.remote(i) for i in range(1, options.shards + 1)])
    shards_s = time.monotonic() - shards_began
    ray.shutdown()
    failed = [(i, r) for i, r in enumerate(results, 1) if r[0] != 0]
    for i, (rc, _, log, _) in failed:
        print(f"ray-eval: shard {i}/{options.shards} failed (exit {rc}):\n{log}", file=sys.stderr)
    if failed:
        sys.exit(1)

    with tempfile.TemporaryDirectory(prefix="myelin-parts-") as tmp:
        parts = []
        for i, (_, _, _, data) in enumerate(results, 1):
            part = Path(tmp) / f"part-{i}.json"
            part.write_bytes(data)
            parts.append(str(part))
        merge_s = run([str(binary), "eval-merge", *parts, *outputs], "the merge")
    for i, (_, took, _, data) in enumerate(results, 1):
        print(f"ray-eval: shard {i}/{options.shards}: {took:.1f} s, part {len(data) / 1e6:.1f} MB", file=sys.stderr)
    print(
        f"ray-eval: prepare {prepare_s:.1f} s, {options.shards} shards {shards_s:.1f} s, merge {merge_s:.1f} s, "
        f"total {time.monotonic() - started:.1f} s",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
