# Why plain decoding costs 77 ms a token end to end on the AMX Xeon when a one-token step costs 61-70 ms (run1.sh):
# the engine's time against the model's passes, and glibc's allocator held from returning memory.
. .device/setup.sh  # (the lines it holds were here)
python3 docs/results/2026-11-26-amx-llama-cpp/random_weights.py .device/rq05 /tmp/rq05 2>&1 | grep -v Writing; el weights
R="docs/results/2026-11-26-amx-llama-cpp/replay_on_weights.py replay .device/edit-script.json --model /tmp/rq05 --dtype bf16 --max-new-tokens 300"
echo "## pinned to 2 cores"; env OMP_NUM_THREADS=2 taskset -c 2,3 python3 $R --jobs plain,prediction 2>&1 | grep -v Warn | tee $OUT/replay-300.txt; el a
echo "## pinned, malloc never trims or maps"; env MALLOC_MMAP_THRESHOLD_=4294967296 MALLOC_TRIM_THRESHOLD_=17179869184 MALLOC_TOP_PAD_=268435456 OMP_NUM_THREADS=2 taskset -c 2,3 python3 $R --jobs plain 2>&1 | grep -v Warn | tee $OUT/replay-300-malloc.txt; el b
echo "## not pinned"; env OMP_NUM_THREADS=2 timeout 90 python3 $R --jobs plain 2>&1 | grep -v Warn | tee $OUT/replay-300-unpinned.txt; el c
