"""Prefill of the held-out refactor prompts (tasks 4-11): seconds to answer with one token (max_tokens=1), one request
at a time, the least of ROUNDS rounds; vLLM 0.32 CPU plain with the sitting's settings (bf16, no prefix caching,
tcmalloc and Intel OpenMP preloaded, both cores), or quickdraft's own engine (prefix reuse off).

    LD_PRELOAD=$T .venv/bin/python docs/results/2026-11-29-edits-sitting/ttft.py 3 vllm
    LD_PRELOAD=$T .venv/bin/python docs/results/2026-11-29-edits-sitting/ttft.py 3 quickdraft
"""
import json, sys, time
from pathlib import Path
import openai
from quickdraft import models
from quickdraft.bench import workloads as W
from quickdraft.vllm.serve import cpu_settings, launched, vllm_python, wait_ready
rounds, which = int(sys.argv[1]), sys.argv[2]
LOG = Path("bench-out/ttft-vllm.log")
tasks = list(W.refactor(W.data_dir("../shared/data"), 11))[3:]
out = {}
if which == "vllm":
    folder = str(models.resolve("qwen2.5-coder-0.5b", progress=False))
    T = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"
    env = {"VLLM_CPU_KVCACHE_SPACE": "4", **cpu_settings(), "LD_PRELOAD": f"{T}:{Path('.venv-vllm/lib/libiomp5.so').resolve()}"}
    argv = [vllm_python(), "-m", "vllm.entrypoints.openai.api_server", "--model", folder, "--served-model-name", "m",
            "--port", "8391", "--dtype", "bfloat16", "--max-model-len", "8192", "--max-num-seqs", "16", "--no-enable-prefix-caching"]
    LOG.parent.mkdir(exist_ok=True)
    with launched(argv, LOG, env) as proc:
        url = wait_ready(proc, 8391, LOG, timeout=900)
        c = openai.OpenAI(base_url=url, api_key="x", max_retries=0, timeout=3600)
        c.chat.completions.create(model="m", messages=tasks[0].messages, max_tokens=8, temperature=0)
        for r in range(rounds):
            for t in tasks:
                a = time.perf_counter()
                resp = c.chat.completions.create(model="m", messages=t.messages, max_tokens=1, temperature=0)
                out.setdefault(t.id[:28], []).append(round(time.perf_counter() - a, 3))
else:
    import quickdraft
    gen = quickdraft.load("qwen2.5-coder-0.5b")
    gen.runner.reuse_prefix = False
    gen.generate(tasks[0].messages, max_new_tokens=8)
    for r in range(rounds):
        for t in tasks:
            a = time.perf_counter()
            gen.generate(t.messages, max_new_tokens=1)
            out.setdefault(t.id[:28], []).append(round(time.perf_counter() - a, 3))
mins = {k: min(v) for k, v in out.items()}
print(which, json.dumps(mins), "sum of mins", round(sum(mins.values()), 3))
