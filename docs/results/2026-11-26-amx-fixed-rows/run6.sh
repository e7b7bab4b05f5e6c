set -u
tar xJf .device/site.tar.xz -C /tmp
export PYTHONPATH=src:/tmp/site PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES="" OMP_NUM_THREADS=2
lscpu | grep -E "^Model name|^Model:"
T0=$(date +%s)
timeout -s INT 100 python3 -m pytest -q -p no:cacheprovider -m "not real_model" -n 8 -rfE tests/test_runtime.py tests/test_kernels.py tests/test_trees.py tests/test_exactness.py tests/test_prefix_reuse.py tests/test_draft_model.py tests/test_sizing.py tests/test_sampling.py tests/test_accounting.py tests/test_alignment.py tests/test_ouroboros.py tests/test_mentored.py -k "not server and not take_nothing and not sliding_window" -o addopts="" > $OUT/tests.txt 2>&1
echo "tests rc $? in $(( $(date +%s) - T0 )) s"; grep -E "FAILED|ERROR|passed|failed" $OUT/tests.txt | tail -15
grep -c "SKIPPED" $OUT/tests.txt; grep "SKIPPED" $OUT/tests.txt | cut -c1-150 | sort | uniq -c | head -5
timeout 150 python3 .device/exp.py 24 skip "bf16 new,bf16 current,bf16 packed (not exact)" 2>&1 | grep -v Warn | tee $OUT/exp.txt
echo "total $(( $(date +%s) - T0 )) s"
