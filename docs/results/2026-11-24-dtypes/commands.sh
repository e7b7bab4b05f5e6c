#!/usr/bin/env bash
# The runs in this folder (docs/runtime.md, "fp32 against bf16 on real work"), in the order they ran, on an
# AMD EPYC [avx2 fma avx512f avx512_vnni avx512_bf16], 2 cores, 2026-11-24. From the repository root.
Q=.venv/bin/quickdraft
O=bench-out/2026-11-24-dtypes
for d in fp32 bf16; do
  $Q bench run --model qwen2.5-coder-0.5b --dtype $d --out $O/floor-$d --workloads spec_bench --limit 5 --repeats 1 \
    --methods plain,lookup --max-new-tokens 128 --no-progress
done
for d in fp32 bf16; do
  M=plain,prediction,lookup,prediction+lookup
  [ $d = bf16 ] && M=$M,llamacpp-plain,llamacpp-prompt-lookup
  $Q bench run --model qwen2.5-coder-0.5b --dtype $d --out $O/edits512-$d --workloads refactor,edit_eval,summarization \
    --limit 3 --repeats 1 --methods $M --max-new-tokens 512 --no-progress
done
for d in fp32 bf16; do  # bf16 ran after the fix of the padded output layer (RowPadded.out_features)
  $Q bench run --model qwen2.5-coder-1.5b --draft-model qwen2.5-coder-0.5b --dtype $d --out $O/draft15-$d \
    --workloads translation,qa,humaneval --limit 3 --repeats 1 --methods plain,draft-model --max-new-tokens 128 --no-progress
done
.venv/bin/python scripts/vllm_bench.py --model qwen2.5-coder-0.5b --out $O/vllm-1client --clients 1 --mixes all \
  --servers vllm-plain,vllm-ngram,quickdraft --limit 3 --workloads refactor,edit_eval,summarization --max-new-tokens 512 \
  --quickdraft-methods vllm+qd-prediction,vllm+qd-lookup
