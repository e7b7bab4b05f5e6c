#!/usr/bin/env bash
# The held-out edits sitting (refactor, EditEval and apply_edit_eval tasks 4-11), 512 new tokens, one request at a
# time, qwen2.5-coder-0.5b, every tool one after another with nothing else running, on one machine (lscpu.txt); the
# transformers baselines as transformers loads the model (its own Linear layers and attention). From the repository
# root, after `bash scripts/setup.sh --with-vllm --with-llama-cpp` and, for stock llama.cpp as pip builds it:
#   python3 -m venv /tmp/venv-stock && /tmp/venv-stock/bin/pip install llama-cpp-python==0.3.36
set -e
W=refactor,edit_eval,apply_edit_eval
T=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4
PRE="LD_PRELOAD=$T:$PWD/.venv-vllm/lib/libiomp5.so"

# vLLM 0.32 CPU (its documented settings): plain, n-gram, quickdraft's proposer in vLLM (the plugin, prediction and
# prediction+lookup); then quickdraft's own engine in the script's process on tcmalloc (as the CLI runs)
LD_PRELOAD=$T .venv/bin/python scripts/vllm_bench.py --model qwen2.5-coder-0.5b --out bench-out/sit16-vllm --skip 3 \
  --limit 8 --workloads $W --max-new-tokens 512 --clients 1 --servers vllm-plain,vllm-ngram,vllm-quickdraft,quickdraft \
  --quickdraft-methods vllm+qd-prediction,vllm+qd-prediction+lookup --engine-methods qd-prediction,qd-prediction+lookup \
  --vllm-env "VLLM_CPU_NUM_OF_RESERVED_CPU=0 $PRE"

# quickdraft's bench (the CLI restarts itself on tcmalloc): plain decoding (the exactness reference), prediction,
# prediction+lookup, and transformers' plain generate and prompt lookup as transformers loads the model
.venv/bin/quickdraft bench run --model qwen2.5-coder-0.5b --workloads $W --skip 3 --limit 8 --repeats 1 \
  --methods plain,prediction,prediction+lookup,hf-plain,hf-prompt-lookup --max-new-tokens 512 \
  --out bench-out/sit16-bench --no-progress

# stock llama.cpp (llama-cpp-python 0.3.36 as pip builds it), plain and prompt lookup, on the same prompts
.venv/bin/python scripts/llamacpp_stock_baseline.py prompts --model qwen2.5-coder-0.5b --workloads $W --skip 3 \
  --limit 8 --out bench-out/sit16-prompts.json
/tmp/venv-stock/bin/python scripts/llamacpp_stock_baseline.py run --prompts bench-out/sit16-prompts.json \
  --max-new-tokens refactor=512,edit_eval=512,apply_edit_eval=512 --out bench-out/sit16-stock.jsonl
