# Prefix reuse, 2026-11-26: AMD EPYC [avx2 fma avx512f avx512_vnni avx512_bf16], family 25, 2 cores, torch 2.13.0.
# Each writes the table in the file named; docs/runtime.md ("Prefix reuse") has the summary.
.venv/bin/python docs/results/2026-11-26-prefix-reuse/prefix_reuse.py --skip 3 --limit 4 --max-new-tokens 512 > prefix_reuse.txt              # edit, rag
.venv/bin/python docs/results/2026-11-26-prefix-reuse/prefix_reuse.py --scenarios turns --skip 3 --limit 4 --max-new-tokens 512 > turns.txt
.venv/bin/python docs/results/2026-11-26-prefix-reuse/prefix_reuse.py --runner llama.cpp --scenarios edit --skip 3 --limit 4 --max-new-tokens 512 > llamacpp.txt
