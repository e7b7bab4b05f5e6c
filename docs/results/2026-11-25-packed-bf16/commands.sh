#!/usr/bin/env bash
# The runs in this folder (docs/runtime.md, "bf16 weights packed once for oneDNN"), in the order they ran, on an
# AMD EPYC [avx2 fma avx512f avx512_vnni avx512_bf16], 2 cores, no AMX, 2026-11-25. From the repository root.
O=bench-out/2026-11-25-packed-bf16
for m in qwen2.5-coder-0.5b qwen2.5-coder-1.5b; do
  .venv/bin/python scripts/kernel_costs.py --model $m --dtype bf16 --context 800 --sizes 1,2,4,8,16,32,64 --repeats 5
done > $O/kernel_costs.txt
.venv/bin/quickdraft generate --edit examples/inventory.py \
  "Rename the function parse_line to parse_record and update its caller." --max-new-tokens 1024 --compare
.venv/bin/python scripts/vllm_bench.py --model qwen2.5-coder-0.5b --out $O/vllm-1client --clients 1 --mixes all \
  --servers vllm-plain,vllm-ngram,quickdraft --limit 3 --workloads refactor,edit_eval,summarization --max-new-tokens 512 \
  --quickdraft-methods vllm+qd-prediction,vllm+qd-lookup
.venv/bin/quickdraft bench run --model qwen2.5-coder-0.5b --out $O/edits512-bf16 --workloads refactor,edit_eval,summarization \
  --limit 3 --repeats 1 --methods plain,prediction,lookup,prediction+lookup,llamacpp-plain,llamacpp-prompt-lookup \
  --max-new-tokens 512 --no-progress
.venv/bin/python scripts/step_profile.py --model qwen2.5-coder-0.5b --dtypes bf16 --context 800 --top 14 > $O/step_profile.txt
# after SDPA prefill and min_draft 8 (commits 70135d9, 6f57d25), the same one-client run again:
.venv/bin/python scripts/vllm_bench.py --model qwen2.5-coder-0.5b --out bench-out/2026-11-25-prefill/vllm-1client --clients 1 \
  --mixes all --servers vllm-plain,vllm-ngram,quickdraft --limit 3 --workloads refactor,edit_eval,summarization \
  --max-new-tokens 512 --quickdraft-methods vllm+qd-prediction,vllm+qd-lookup   # -> vllm-1client-after-prefill/
