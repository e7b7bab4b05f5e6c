set -u
export PYTHONPATH=src PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=""
lscpu | grep -E "^Model name|^Model:|^CPU family"
( timeout 170 python3 -m pytest -q -p no:cacheprovider -m "not real_model" tests/test_runtime.py tests/test_kernels.py tests/test_trees.py -o addopts="" 2>&1 | tail -25 ) > $OUT/tests.txt
timeout 200 python3 .device/amx_steps.py 2 2>&1 | grep -v Warning | tee $OUT/steps.txt
cat $OUT/tests.txt
