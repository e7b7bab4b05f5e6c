"""Prefill of the held-out refactor prompts (tasks 4-11): seconds to answer with one token (max_tokens=1), one request
at a time, the least of ROUNDS rounds; vLLM 0.32 CPU plain with the sitting's settings (bf16, no prefix caching,
tcmalloc and Intel OpenMP preloaded, both cores), or quickdraft's own engine (prefix reuse off).

    LD_PRELOAD=$T .venv/bin/python docs/results/2026-11-29-edits-sitting/ttft.py 3 vllm
    LD_PRELOAD=$T .venv/bin/python docs/results/2026-11-29-edits-sitting/ttft.py 3 quickdraft
"""
import json
import sys
import time
from contextlib import ExitStack
from pathlib import Path

import openai

from quickdraft import models
from quickdraft.bench import workloads as W
from quickdraft.vllm.serve import cpu_settings, launched, vllm_python, wait_ready

rounds, which = int(sys.argv[1]), sys.argv[2]
LOG = Path("bench-out/ttft-vllm.log")
T = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"
tasks = list(W.refactor(W.data_dir("../shared/data"), 11))[3:]
with ExitStack() as stack:
    if which == "vllm":
        folder = str(models.resolve("qwen2.5-coder-0.5b", progress=False))
        env = {"VLLM_CPU_KVCACHE_SPACE": "4", **cpu_settings(),
               "LD_PRELOAD": f"{T}:{Path('.venv-vllm/lib/libiomp5.so').resolve()}"}
        argv = [vllm_python(), "-m", "vllm.entrypoints.openai.api_server", "--model", folder, "--served-model-name",
                "m", "--port", "8391", "--dtype", "bfloat16", "--max-model-len", "8192", "--max-num-seqs", "16",
                "--no-enable-prefix-caching"]
        LOG.parent.mkdir(exist_ok=True)
        proc = stack.enter_context(launched(argv, LOG, env))
        client = openai.OpenAI(base_url=wait_ready(proc, 8391, LOG, timeout=900), api_key="x", max_retries=0,
                               timeout=3600)

        def answer(messages, n):
            client.chat.completions.create(model="m", messages=messages, max_tokens=n, temperature=0)
    else:
        import quickdraft

        gen = quickdraft.load("qwen2.5-coder-0.5b")
        gen.runner.reuse_prefix = False

        def answer(messages, n):
            gen.generate(messages, max_new_tokens=n)
    answer(tasks[0].messages, 8)  # the first request after loading is slow: not timed
    seconds: dict[str, list[float]] = {}
    for _ in range(rounds):
        for task in tasks:
            t = time.perf_counter()
            answer(task.messages, 1)
            seconds.setdefault(task.id[:28], []).append(round(time.perf_counter() - t, 3))
least = {k: min(v) for k, v in seconds.items()}
print(which, json.dumps(least), "sum of least", round(sum(least.values()), 3))
