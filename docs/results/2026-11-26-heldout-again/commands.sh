#!/usr/bin/env bash
# Held-out edits (refactor and EditEval tasks 4-11) again, 2026-11-26, at fa0bd6f (the runner of 6d05640: bf16
# prefill in blocks of query rows), every tool in one sitting, one after another, nothing else running, on an AMD EPYC
# [avx2 fma avx512f avx512_vnni avx512_bf16], CPU family 25, model 17, 2 cores, no AMX (../2026-11-25-draft-stop/lscpu.txt, the same output). From the
# repository root. docs/runtime.md, "Held-out edits again, with the prefill in blocks (2026-11-26)".
PRE="LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4:$PWD/.venv-vllm/lib/libiomp5.so"

# vLLM 0.32 CPU on both cores with tcmalloc and Intel OpenMP preloaded (its documented settings): plain, n-gram and
# quickdraft's prediction in vLLM (the plugin); then quickdraft's own engine (bf16 by auto) in the script's process
.venv/bin/python scripts/vllm_bench.py --model qwen2.5-coder-0.5b --out bench-out/heldout-rerun-vllm --skip 3 --limit 8 \
  --workloads refactor,edit_eval --max-new-tokens 512 --clients 1 --servers vllm-plain,vllm-ngram,vllm-quickdraft,quickdraft \
  --quickdraft-methods vllm+qd-prediction --vllm-env "VLLM_CPU_NUM_OF_RESERVED_CPU=0 $PRE"
#   -> vllm/

# stock llama.cpp: llama-cpp-python 0.3.36 as pip builds it (llamafile on), in its own venv, on the prompt ids of
# 2026-11-25 (docs/results/2026-11-25-heldout-edits/commands.sh made them and the venv)
/tmp/venv-stock/bin/python scripts/llamacpp_stock_baseline.py run --prompts bench-out/heldout-prompts.json \
  --max-new-tokens refactor=512,edit_eval=512 --out bench-out/heldout-rerun-stock.jsonl
#   -> stock-llamacpp/stock.jsonl (output token ids dropped)

# quickdraft's own bench, plain and prediction (bf16 by auto), for plain decoding's time and the exactness check
.venv/bin/quickdraft bench run --model qwen2.5-coder-0.5b --workloads refactor,edit_eval --skip 3 --limit 8 --repeats 1 \
  --methods plain,prediction --max-new-tokens 512 --out bench-out/heldout-rerun-bench --no-progress
#   -> quickdraft-bench/

python3 docs/results/2026-11-26-heldout-again/summary.py > docs/results/2026-11-26-heldout-again/summary.txt
