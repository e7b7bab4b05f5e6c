#!/usr/bin/env bash
# The runs in this folder (docs/runtime.md, "The model drafters on every Spec-Bench category"), in the order they
# ran, on an AMD EPYC [avx2 fma avx512f avx512_vnni avx512_bf16], CPU family 25, model 17, 2 cores (../2026-11-25-draft-stop/lscpu.txt, the same output), at
# 6d05640. From the repository root; they wrote to bench-out/2026-11-26-floor2/ouro-{bf16,fp32}, copied here.
Q=.venv/bin/quickdraft
O=bench-out/2026-11-26-floor2
for d in bf16 fp32; do
  $Q bench run --model qwen2.5-coder-1.5b --draft-model qwen2.5-coder-0.5b --dtype $d --out $O/ouro-$d \
    --workloads spec_bench --limit 5 --repeats 1 --methods plain,draft-model,ouroboros --max-new-tokens 128 --no-progress
done
# Between the two (nothing else running): the draft model's precision, int8 against bf16 (draft_precision.txt)
.venv/bin/python docs/results/2026-11-26-floor-model-drafters/draft_precision.py
