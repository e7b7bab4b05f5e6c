# AMD EPYC (CPU family 26) [avx2 fma avx512f avx512_vnni avx512_bf16], 2 cores, no AMX, 2026-11-25.
# Pass costs before/after, both loads in one process (qwen2.5-coder-1.5b fp32 twice did not fit in 24 GiB):
for spec in "qwen2.5-coder-0.5b fp32" "qwen2.5-coder-0.5b bf16" "qwen2.5-coder-1.5b bf16"; do
  set -- $spec
  .venv/bin/python docs/results/2026-11-25-fp32-exact/pass_costs.py --model $1 --dtype $2 >> pass_costs.txt  # the three runs, one after another
done
# Row invariance over cache lengths:
.venv/bin/python docs/results/2026-11-25-fp32-exact/sweep.py --dtype bf16 >> sweep-0.5b.txt  # under a "# sweep.py --dtype bf16" line
.venv/bin/python docs/results/2026-11-25-fp32-exact/sweep.py --dtype fp32 --longest 1200 >> sweep-0.5b.txt  # under its own line
# The README's edit command in both dtypes:
for dt in bf16 fp32; do
  .venv/bin/quickdraft generate --dtype $dt --edit examples/inventory.py \
    "Rename the function parse_line to parse_record and update its caller." --max-new-tokens 1024 --compare
done > edit-command.txt
