#!/usr/bin/env bash
# The S3-compatible server the object-store tests start on loopback (s3s-fs, from crates.io,
# pinned), built once into ~/.cache/myelin-s3s (about two minutes cold); prints its path.
set -euo pipefail
root="${MYELIN_S3S_ROOT:-$HOME/.cache/myelin-s3s}"
exe="$root/bin/s3s-fs"
if [ ! -x "$exe" ] || ! "$exe" --version 2>/dev/null | grep -q "0.14.1"; then
  echo "s3s-fs: building s3s-fs 0.14.1 into $root" >&2
  cargo install --quiet --root "$root" s3s-fs@0.14.1 --locked --features binary >&2
fi
echo "$exe"
