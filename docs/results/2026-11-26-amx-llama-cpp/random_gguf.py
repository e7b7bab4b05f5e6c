"""A GGUF file with a real model's header and random weights, for timing llama.cpp on a machine the weights cannot
reach (the device machine takes 64 MiB a call; qwen2.5-coder-0.5b's Q4_K_M file is 491 MB, its header 6 MB).

The header (metadata, tokenizer and tensor table) is the real file's, byte for byte, so llama.cpp loads the same
architecture with the same tensor types (qwen2.5-coder-0.5b's: Q5_0, Q8_0, Q6_K, Q4_K and F32) and its kernels do
the same work; only the values are random. Two steps:

    # here: the header, xz-compressed (1.3 MB for qwen2.5-coder-0.5b)
    .venv/bin/python docs/results/2026-11-26-amx-llama-cpp/random_gguf.py header ~/.cache/quickdraft/qwen2.5-coder-0.5b/model.gguf .device/q05.head.xz
    # there: the whole file, random weights (about 15 s for 491 MB on 2 cores)
    python3 docs/results/2026-11-26-amx-llama-cpp/random_gguf.py build .device/q05.head.xz /tmp/q05.gguf

Random bytes would give blocks whose fp16 scales are now and then inf or NaN, so every block's scales are set to one
value of the type's (SCALES: a weight's magnitude comes out near 0.02, as in a trained model's layers), and F32
tensors are normal(0, 0.02) except norms (ones). Needs numpy and the gguf package (its reader only).
"""

from __future__ import annotations

import argparse
import lzma
import struct
from pathlib import Path

import numpy as np

# per type: bytes in a block, and (offset of an fp16 scale in the block, its value) for each scale field. A weight is
# about scale x (integer code), codes are 8-bit for Q8_0, 5-bit for Q5_0, 6-bit sub-scales of 4-bit codes for Q4_K and
# int8 sub-scales of 6-bit codes for Q6_K (ggml-common.h), so these values put weights near 0.02.
SCALES = {
    "Q8_0": (34, ((0, 3e-4),)),
    "Q5_0": (22, ((0, 2.5e-3),)),
    "Q5_1": (24, ((0, 1.2e-3), (2, 1.2e-3))),
    "Q4_0": (18, ((0, 5e-3),)),
    "Q4_1": (20, ((0, 2.5e-3), (2, 2.5e-3))),
    "Q4_K": (144, ((0, 8e-5), (2, 8e-5))),
    "Q5_K": (176, ((0, 4e-5), (2, 4e-5))),
    "Q6_K": (210, ((208, 2e-5),)),
}
_SIZE = struct.Struct("<Q")  # the header file starts with the whole file's size


def header(source: Path, out: Path) -> int:
    """Write `source`'s bytes before its tensor data, xz-compressed, after the whole file's size; returns that size."""
    from gguf import GGUFReader

    reader = GGUFReader(source)
    start = reader.data_offset
    size = source.stat().st_size
    with open(source, "rb") as f:
        head = f.read(start)
    out.write_bytes(lzma.compress(_SIZE.pack(size) + head, preset=9))
    return size


def build(head_file: Path, out: Path, seed: int = 0) -> Path:
    """The header of `head_file` followed by random tensor data, as big as the source file was."""
    from gguf import GGUFReader

    raw = lzma.decompress(head_file.read_bytes())
    (size,), head = _SIZE.unpack_from(raw), raw[_SIZE.size:]
    with open(out, "wb") as f:
        f.write(head)
        f.truncate(size)
    reader = GGUFReader(out, "r+")
    rng = np.random.default_rng(seed)
    for tensor in reader.tensors:
        kind = tensor.tensor_type.name
        data = np.asarray(tensor.data)
        if kind == "F32":
            data[...] = 1.0 if "norm" in tensor.name else rng.normal(0.0, 0.02, data.shape).astype(np.float32)
            continue
        if kind not in SCALES:
            raise SystemExit(f"{tensor.name}: type {kind} is not one this script knows the blocks of ({', '.join(SCALES)})")
        block, scales = SCALES[kind]
        blocks = data.view(np.uint8).reshape(-1, block)  # [n_blocks, block bytes]
        blocks[...] = rng.integers(0, 256, blocks.shape, dtype=np.uint8)
        for offset, value in scales:
            blocks[:, offset:offset + 2] = np.frombuffer(np.float16(value).tobytes(), np.uint8)
    reader.data.flush()
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    h = sub.add_parser("header", help="a GGUF file's header, xz-compressed")
    h.add_argument("source", type=Path)
    h.add_argument("out", type=Path)
    b = sub.add_parser("build", help="a whole GGUF file from a header, with random weights")
    b.add_argument("head", type=Path)
    b.add_argument("out", type=Path)
    b.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.command == "header":
        size = header(args.source, args.out)
        print(f"{args.out}: {args.out.stat().st_size / 2**20:.1f} MiB, for a file of {size / 2**20:.0f} MiB")
    else:
        print(f"{build(args.head, args.out, args.seed)}: {args.out.stat().st_size / 2**20:.0f} MiB")
