"""What a llama.cpp pass costs on this machine, and whether its numbers depend on the pass size.

When to run: on a new CPU or llama-cpp-python version, before relying on the llama.cpp runner's exactness or
speed there (docs/llamacpp.md).

Needs only llama-cpp-python (runs under a stock build too, in another venv). For a GGUF file:
milliseconds per pass of n tokens after `--cached` tokens, prefill time of `--prefill` tokens, and the
largest logit difference between scoring n tokens in one pass and one at a time.

    .venv/bin/python scripts/llamacpp_costs.py ~/.cache/quickdraft/qwen2.5-coder-0.5b/model.gguf --exact
    /tmp/stock/bin/python scripts/llamacpp_costs.py ~/.cache/quickdraft/qwen2.5-coder-0.5b/model.gguf

--exact: quickdraft's runner settings (no repacking, no flash attention, GGML_CPU_TILED_MM=0; the
build's llamafile is reported, not changed). Without it: llama.cpp's defaults, as llama-cpp-python's
Llama uses them (repacking on, flash attention off), except on a build with llama.cpp's AMX kernels,
where repacked weights crash and stay off, as for the bench's baselines (bench/llamacpp_stock.py).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import sys
import time
from pathlib import Path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("gguf")
    p.add_argument("--exact", action="store_true")
    p.add_argument("--sizes", default="1,2,4,8,16,32,64")
    p.add_argument("--cached", type=int, default=1000)
    p.add_argument("--prefill", type=int, default=2000)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    args = p.parse_args()
    if args.exact:
        os.environ["GGML_CPU_TILED_MM"] = "0"  # before llama.cpp's first matrix product
    import numpy as np
    import llama_cpp as ll

    quiet = ll.llama_log_callback(lambda level, text, data: None)
    ll.llama_log_set(quiet, ctypes.c_void_p(0))
    ll.llama_backend_init()
    mp = ll.llama_model_default_params()
    mp.n_gpu_layers = 0
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src" / "quickdraft" / "bench"))
    from llamacpp_stock import repack_allowed  # stdlib only: runs where quickdraft is not installed

    mp.use_extra_bufts = not args.exact and repack_allowed(ll.llama_print_system_info().decode())
    model = ll.llama_model_load_from_file(args.gguf.encode(), mp)
    n_vocab = ll.llama_vocab_n_tokens(ll.llama_model_get_vocab(model))
    cp = ll.llama_context_default_params()
    cp.n_ctx = max(args.prefill, args.cached + 2 * max(map(int, args.sizes.split(",")))) + 16
    cp.n_batch = cp.n_ubatch = 512
    cp.n_threads = cp.n_threads_batch = args.threads
    cp.flash_attn_type = ll.LLAMA_FLASH_ATTN_TYPE_DISABLED
    ctx = ll.llama_init_from_model(model, cp)
    mem = ll.llama_get_memory(ctx)
    batch = ll.llama_batch_init(512, 0, 1)
    ids = [(i * 7919) % (n_vocab - 300) + 100 for i in range(cp.n_ctx)]  # arbitrary but fixed tokens

    def decode(tokens: list[int], pos: int, logits: bool) -> np.ndarray | None:
        for s in range(0, len(tokens), 512):
            chunk = tokens[s : s + 512]
            batch.n_tokens = len(chunk)
            for i, t in enumerate(chunk):
                batch.token[i], batch.pos[i], batch.n_seq_id[i], batch.logits[i] = t, pos + s + i, 1, logits
                batch.seq_id[i][0] = 0
            assert ll.llama_decode(ctx, batch) == 0
        if logits:
            return np.ctypeslib.as_array(ll.llama_get_logits(ctx), shape=(len(tokens), n_vocab)).copy()
        return None

    t0 = time.perf_counter()
    decode(ids[: args.prefill], 0, False)
    prefill_s = time.perf_counter() - t0
    ll.llama_memory_seq_rm(mem, 0, args.cached, -1)
    costs, diffs = {}, {}
    for n in map(int, args.sizes.split(",")):
        times = []
        for _ in range(args.repeats):
            t = time.perf_counter()
            together = decode(ids[args.cached : args.cached + n], args.cached, True)
            times.append(time.perf_counter() - t)
            ll.llama_memory_seq_rm(mem, 0, args.cached, -1)
        alone = np.concatenate([decode([ids[args.cached + i]], args.cached + i, True) for i in range(n)])
        ll.llama_memory_seq_rm(mem, 0, args.cached, -1)
        costs[n], diffs[n] = statistics.median(times) * 1000, float(np.abs(together - alone).max())
    llamafile = "LLAMAFILE = 1" in ll.llama_print_system_info().decode()
    print(f"{os.path.basename(os.path.dirname(args.gguf)) or args.gguf}: {'exact' if args.exact else 'default'} "
          f"settings, llamafile {'on' if llamafile else 'off'}, {args.threads} threads")
    print(f"  prefill {args.prefill} tokens: {prefill_s:.2f} s")
    print("  n          " + "".join(f"{n:>9}" for n in costs))
    print("  ms/pass    " + "".join(f"{v:>9.1f}" for v in costs.values()))
    print("  x one      " + "".join(f"{v / costs[min(costs)]:>9.2f}" for v in costs.values()))
    print("  max |diff| " + "".join(f"{v:>9.3f}" for v in diffs.values()))


if __name__ == "__main__":
    main()
