#!/usr/bin/env python3
"""The model's shape without its weights, for timing the forward where the weights cannot travel.

Usage: pack-model.py header <model.safetensors> <header.bin>
       pack-model.py fill <header.bin> <model.safetensors>

header: writes the safetensors file's header (its 8-byte length, then the JSON naming every
tensor, its dtype, shape and byte range), a few KB where the weights are 91 MB.
fill: writes a safetensors file with that header whose every F32 value is one of a fixed
pattern of small numbers (within ±0.01), and every other value 0 (the I64 position ids,
which no forward reads). A forward over it does the model's arithmetic on the model's
shapes, so it takes the model's time; its embeddings mean nothing. scripts/gpu-pack.sh packs
the header, and .gpu-pack/run.sh fills it on the GPU machine to time `myelin embed-bench`
there. Standard library only (the GPU machine has python3 and nothing else).
"""
import json
import struct
import sys



def read_header(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        raw = f.read(n)
    if len(raw) != n:
        sys.exit(f"{path}: the header is cut short ({len(raw)} of {n} bytes)")
    return raw


def tensors(raw, path):
    header = json.loads(raw)
    end = 0
    for name, t in header.items():
        if name == "__metadata__":
            continue
        end = max(end, t["data_offsets"][1])
    return header, end


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("header", "fill"):
        sys.exit(__doc__)
    verb, src, dst = sys.argv[1:]
    if verb == "header":
        raw = read_header(src)
        tensors(raw, src)
        with open(dst, "wb") as f:
            f.write(struct.pack("<Q", len(raw)) + raw)
        return
    raw = read_header(src)
    header, end = tensors(raw, src)
    block = struct.pack("<1024f", *[((i % 97) - 48) / 4800 for i in range(1024)])
    spans = sorted((t["data_offsets"], t["dtype"]) for n, t in header.items() if n != "__metadata__")
    with open(dst, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        at = 0
        for (start, stop), dtype in spans:
            f.write(bytes(start - at))
            left = stop - start
            while left > 0:
                n = min(left, len(block))
                f.write(block[:n] if dtype == "F32" else bytes(n))
                left -= n
            at = stop
        f.write(bytes(end - at))
    print(f"{dst}: {len(header) - ('__metadata__' in header)} tensors, {end / 1e6:.1f} MB of patterned values")


if __name__ == "__main__":
    main()
