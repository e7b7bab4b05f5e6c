# Held-out edits (refactor and EditEval tasks 4-11), 2026-11-25, AMD EPYC CPU family 25 model 17
# [avx2 fma avx512f avx512_vnni avx512_bf16], 2 cores, no AMX. Run one after another, nothing else running.
# These ran before 119f662. Since then vllm_bench gives every vLLM server VLLM_CPU_NUM_OF_RESERVED_CPU=0 on a
# machine of up to 4 CPUs: add --vllm-env VLLM_CPU_NUM_OF_RESERVED_CPU=1 to reproduce the rows made with vLLM's defaults.

# quickdraft (bf16 by auto), with llama.cpp in the same process (quickdraft's llamafile-free build)
.venv/bin/quickdraft bench run --model qwen2.5-coder-0.5b --workloads refactor,edit_eval --skip 3 --limit 8 --repeats 1 \
  --methods plain,prediction,lookup,llamacpp-plain,llamacpp-prompt-lookup --max-new-tokens 512 --out bench-out/heldout-edits
#   -> quickdraft-bench/

# vLLM 0.32 CPU (its defaults), and quickdraft's own engine in the script's process
.venv/bin/python scripts/vllm_bench.py --model qwen2.5-coder-0.5b --out bench-out/vllm-heldout --skip 3 --limit 8 \
  --workloads refactor,edit_eval --max-new-tokens 512 --clients 1 --servers vllm-plain,vllm-ngram,vllm-quickdraft,quickdraft \
  --quickdraft-methods vllm+qd-prediction
#   -> vllm/

# vLLM's own CPU settings, n-gram, 2 + 2 tasks (apt-get install libtcmalloc-minimal4 first)
PRE="LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4:$PWD/.venv-vllm/lib/libiomp5.so"
.venv/bin/python scripts/vllm_bench.py --out bench-out/vcfg-r0 --skip 3 --limit 2 --workloads refactor,edit_eval --clients 1 --servers vllm-ngram --vllm-env "VLLM_CPU_NUM_OF_RESERVED_CPU=0"
.venv/bin/python scripts/vllm_bench.py --out bench-out/vcfg-r0-pre --skip 3 --limit 2 --workloads refactor,edit_eval --clients 1 --servers vllm-ngram --vllm-env "VLLM_CPU_NUM_OF_RESERVED_CPU=0 $PRE"
.venv/bin/python scripts/vllm_bench.py --out bench-out/vcfg-pre --skip 3 --limit 2 --workloads refactor,edit_eval --clients 1 --servers vllm-ngram --vllm-env "$PRE"
#   -> vllm-settings.jsonl, runs r0, r0-pre and pre

# vLLM with its best settings above, the 16 tasks again
.venv/bin/python scripts/vllm_bench.py --model qwen2.5-coder-0.5b --out bench-out/vllm-heldout-tuned --skip 3 --limit 8 \
  --workloads refactor,edit_eval --max-new-tokens 512 --clients 1 --servers vllm-plain,vllm-ngram,vllm-quickdraft \
  --quickdraft-methods vllm+qd-prediction --vllm-env "VLLM_CPU_NUM_OF_RESERVED_CPU=0 $PRE"
#   -> vllm-tuned/

# stock llama.cpp: llama-cpp-python as pip builds it, in its own venv, on the same prompt ids
.venv/bin/python scripts/llamacpp_stock_baseline.py prompts --model qwen2.5-coder-0.5b --workloads refactor,edit_eval --skip 3 --limit 8 --out bench-out/heldout-prompts.json
python3 -m venv /tmp/venv-stock && /tmp/venv-stock/bin/pip install llama-cpp-python==0.3.36
/tmp/venv-stock/bin/python scripts/llamacpp_stock_baseline.py run --prompts bench-out/heldout-prompts.json --max-new-tokens refactor=512,edit_eval=512 --out bench-out/stock-heldout.jsonl
#   -> stock-llamacpp/stock.jsonl (output token ids dropped)

python3 docs/results/2026-11-25-heldout-edits/summary.py > docs/results/2026-11-25-heldout-edits/summary.txt

# n-gram with numba held to one thread (vllm-settings.jsonl, run r0-pre-numba1)
.venv/bin/python scripts/vllm_bench.py --out bench-out/vcfg-r0-pre-numba1 --skip 3 --limit 2 --workloads refactor,edit_eval --clients 1 --servers vllm-ngram --vllm-env "VLLM_CPU_NUM_OF_RESERVED_CPU=0 NUMBA_NUM_THREADS=1 $PRE"

# quickdraft's proposer with each setting alone (vllm-settings.jsonl, runs qd-pre and qd-r0)
.venv/bin/python scripts/vllm_bench.py --out bench-out/vcfg-qd-pre --skip 3 --limit 2 --workloads refactor,edit_eval --clients 1 --servers vllm-quickdraft --quickdraft-methods vllm+qd-prediction --vllm-env "$PRE"
.venv/bin/python scripts/vllm_bench.py --out bench-out/vcfg-qd-r0 --skip 3 --limit 2 --workloads refactor,edit_eval --clients 1 --servers vllm-quickdraft --quickdraft-methods vllm+qd-prediction --vllm-env "VLLM_CPU_NUM_OF_RESERVED_CPU=0"

# 16 concurrent clients, the first 3 refactor + 3 EditEval tasks in turn (vllm-16-clients/), both cores / vLLM's defaults
.venv/bin/python scripts/vllm_bench.py --model qwen2.5-coder-0.5b --out bench-out/vllm-16-r0 --limit 3 --workloads refactor,edit_eval --max-new-tokens 512 --clients 16 --mixes edits --servers vllm-plain,vllm-quickdraft --quickdraft-methods vllm+qd-prediction --vllm-env "VLLM_CPU_NUM_OF_RESERVED_CPU=0"
.venv/bin/python scripts/vllm_bench.py --model qwen2.5-coder-0.5b --out bench-out/vllm-16-default --limit 3 --workloads refactor,edit_eval --max-new-tokens 512 --clients 16 --mixes edits --servers vllm-plain,vllm-quickdraft --quickdraft-methods vllm+qd-prediction
