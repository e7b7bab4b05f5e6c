# Padded keys (lean.py KeyBuffers) on the AMX Xeon: attention products at new against repeated key counts, plain
# decoding and the prediction end to end with and without them, and the runner's tests with them.
. .device/setup.sh  # (the lines it holds were here)
python3 docs/results/2026-11-26-amx-llama-cpp/random_weights.py .device/rq05 /tmp/rq05 2>&1 | grep -v Writing; el weights
P="env OMP_NUM_THREADS=2 taskset -c 2,3 python3"
$P .device/keys.py /tmp/rq05 2>&1 | grep -v Warn | tee $OUT/keys.txt; el keys
$P docs/results/2026-11-26-amx-llama-cpp/replay_on_weights.py replay .device/edit-script.json --model /tmp/rq05 --dtype bf16 --max-new-tokens 300 --jobs plain,prediction --paths as-loaded,unpadded 2>&1 | grep -v Warn | tee $OUT/replay-padded.txt; el replay
LEFT=$(( 270 - ($(date +%s) - T0) )); [ $LEFT -lt 30 ] && { el "no time for the tests"; exit 0; }
OMP_NUM_THREADS=2 timeout -s INT $LEFT python3 -m pytest -q -p no:cacheprovider -m "not real_model" -n 8 -rfE tests/test_lean.py tests/test_runtime.py tests/test_trees.py tests/test_exactness.py tests/test_prefix_reuse.py -k "not server and not take_nothing and not sliding_window" -o addopts="" > $OUT/tests.txt 2>&1
el "tests rc $?"; grep -E "FAILED|ERROR|passed|failed" $OUT/tests.txt | tail -12; grep -c SKIPPED $OUT/tests.txt || true
