"""A model folder with a real model's configuration and tokenizer and random weights, for measuring pass costs on a
machine the weights cannot reach (the device machine takes 64 MiB a call; qwen2.5-coder-0.5b is 1 GB in bf16).

A pass costs what its shapes cost (the weights' values do not change the work of a matmul), so a folder made here
loads with `quickdraft.load(folder, dtype=...)` and times like the real model; what it writes is noise. Pair it with
docs/results/2026-11-26-amx-llama-cpp/replay_on_weights.py to time the real model's output end to end.

    .venv/bin/python docs/results/2026-11-26-amx-llama-cpp/random_weights.py ~/.cache/quickdraft/qwen2.5-coder-0.5b/hf /tmp/rq05

The source folder needs config.json and the tokenizer's files, not the weights; `tokenizer.json.xz` is taken for
`tokenizer.json` (how the device run carries it). Weights: transformers' own initialisation (normal, the config's
initializer_range), seed 0, saved in bf16 (--dtype fp32 for float32).
"""

from __future__ import annotations

import argparse
import lzma
import shutil
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM

FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja",
         "vocab.json", "merges.txt", "special_tokens_map.json")


def make(source: Path, out: Path, dtype: torch.dtype, seed: int = 0) -> Path:
    torch.manual_seed(seed)
    config = AutoConfig.from_pretrained(source)
    model = AutoModelForCausalLM.from_config(config, dtype=dtype)  # initialised as for training: random
    model.save_pretrained(out)
    for name in FILES:  # after the save, which writes its own generation_config.json (one eos where there may be two)
        if name == "config.json":
            continue
        if (source / name).is_file():
            shutil.copyfile(source / name, out / name)
        elif (source / f"{name}.xz").is_file():
            (out / name).write_bytes(lzma.decompress((source / f"{name}.xz").read_bytes()))
    if not (out / "tokenizer.json").is_file() and not (out / "vocab.json").is_file():
        raise SystemExit(f"{source} has no tokenizer files (tokenizer.json[.xz] or vocab.json)")
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("source", type=Path, help="a folder with config.json and the tokenizer's files")
    ap.add_argument("out", type=Path)
    ap.add_argument("--dtype", choices=("bf16", "fp32"), default="bf16")
    args = ap.parse_args()
    made = make(args.source, args.out, {"bf16": torch.bfloat16, "fp32": torch.float32}[args.dtype])
    size = sum(p.stat().st_size for p in made.iterdir()) / 2**20
    print(f"{made}: {size:.0f} MiB")
