# Issue 20 on the device machine's CPU (Intel Xeon with AMX): the lean pass and the README's edit end to end, timed on
# random weights of qwen2.5-coder-0.5b's shapes (docs/results/2026-11-26-amx-llama-cpp/random_weights.py, docs/results/2026-11-26-amx-llama-cpp/replay_on_weights.py).
. .device/setup.sh  # (the lines it holds were here)
lscpu > $OUT/lscpu.txt; grep -E "^Model name|^Model:|^CPU family" $OUT/lscpu.txt; grep -o "amx[a-z_0-9]*\|avx512_bf16" $OUT/lscpu.txt | sort -u | tr '\n' ' '; echo
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
python3 docs/results/2026-11-26-amx-llama-cpp/random_weights.py .device/rq05 /tmp/rq05 2>&1 | grep -v Writing; el weights
P="env OMP_NUM_THREADS=2 python3"; command -v taskset >/dev/null && P="env OMP_NUM_THREADS=2 taskset -c 2,3 python3"; echo "timing with: $P"
$P docs/results/2026-11-26-amx-llama-cpp/replay_on_weights.py replay .device/edit-script.json --model /tmp/rq05 --dtype bf16 --jobs prediction,plain,lookup 2>&1 | grep -v Warn | tee $OUT/replay.txt; el replay
$P docs/results/2026-11-26-lean-pass/ab_lean.py --model /tmp/rq05 --dtype bf16 --contexts 800,2000 --rounds 3 2>&1 | grep -v Warn | tee $OUT/ab_lean.txt; el ab_lean
$P scripts/step_profile.py --model /tmp/rq05 --dtypes bf16 --context 800 --steps 20 --top 14 2>&1 | grep -v Warn | tee $OUT/profile.txt; el profile
LEFT=$(( 470 - ($(date +%s) - T0) )); [ $LEFT -lt 40 ] && { el "no time for the tests"; exit 0; }
OMP_NUM_THREADS=2 timeout -s INT $LEFT python3 -m pytest -q -p no:cacheprovider -m "not real_model" -n 8 -rfE tests/test_lean.py tests/test_runtime.py tests/test_kernels.py tests/test_trees.py tests/test_exactness.py tests/test_prefix_reuse.py tests/test_draft_model.py tests/test_sizing.py tests/test_sampling.py tests/test_accounting.py -k "not server and not take_nothing and not sliding_window" -o addopts="" > $OUT/tests.txt 2>&1
el "tests rc $?"; grep -E "FAILED|ERROR|passed|failed" $OUT/tests.txt | tail -15; grep -c SKIPPED $OUT/tests.txt
