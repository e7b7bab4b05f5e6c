# The lean pass against the model's forward (docs/runtime.md, "Where a step's time goes"); AMD EPYC, family 25,
# model 17, 2 cores (../2026-11-25-draft-stop/lscpu.txt, the same output); output in ab_lean.txt.
.venv/bin/python docs/results/2026-11-26-lean-pass/ab_lean.py --dtype bf16 --contexts 800,2000,3500 --rounds 4
.venv/bin/python docs/results/2026-11-26-lean-pass/ab_lean.py --dtype fp32 --contexts 800,2000 --rounds 4
.venv/bin/python docs/results/2026-11-26-lean-pass/ab_lean.py --model qwen2.5-coder-1.5b --dtype bf16 --contexts 800,2000 --rounds 4
.venv/bin/python docs/results/2026-11-26-lean-pass/ab_lean.py --draft int8 --contexts 200,800 --verify 8 --rounds 4  # the 0.5B as a draft model
.venv/bin/python docs/results/2026-11-26-lean-pass/e2e.py --rounds 3 --max-new-tokens 1024  # end to end: e2e.txt
