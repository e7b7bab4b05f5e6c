#!/usr/bin/env bash
# The runs in this folder (docs/runtime.md, "The floor again, 2026-11-26"), in the order they ran, on an AMD EPYC
# [avx2 fma avx512f avx512_vnni avx512_bf16], CPU family 25, model 17, 2 cores, at 15e4e05 (bf16 prefill in blocks of
# query rows). From the repository root; they wrote to /tmp (the reports' command lines say so), copied here.
Q=.venv/bin/quickdraft
O=bench-out/2026-11-26-floor
for d in bf16 fp32; do
  $Q bench run --model qwen2.5-coder-0.5b --dtype $d --out $O/$d --workloads spec_bench --limit 5 --repeats 1 \
    --methods plain,lookup --max-new-tokens 128
done
$Q bench run --model qwen2.5-coder-1.5b --draft-model qwen2.5-coder-0.5b --dtype bf16 --out $O/draft15-bf16-3tasks \
  --workloads translation,qa --limit 3 --repeats 1 --methods plain,draft-model --max-new-tokens 128
$Q bench run --model qwen2.5-coder-1.5b --draft-model qwen2.5-coder-0.5b --dtype bf16 --out $O/draft15-bf16-10tasks \
  --workloads qa,translation --limit 10 --repeats 1 --methods plain,draft-model --max-new-tokens 128 --no-progress
