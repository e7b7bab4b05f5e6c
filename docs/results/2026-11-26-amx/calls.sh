# The device calls' commands, one call per section (each ran as its own command, with .device carried).

## call 1 (1-steps.txt, 1-tests.txt)
set -u
lscpu | grep -E "^Model name|^CPU\(s\)|^Flags" | cut -c1-400
grep -o -w -E "amx_bf16|amx_tile|avx512_bf16|avx512f" /proc/cpuinfo | sort | uniq -c
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
export PYTHONPATH=src PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=""
( timeout 250 python3 -m pytest -q -p no:cacheprovider -m "not real_model" -x tests/test_runtime.py tests/test_kernels.py tests/test_trees.py -o addopts="" 2>&1 | tail -15 ) | tee $OUT/tests.txt
timeout 280 python3 .device/amx_steps.py 2 2>&1 | grep -v Warning | tee $OUT/steps.txt

## call 3 (3-steps.txt, 3-tests.txt)
set -u
export PYTHONPATH=src PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=""
lscpu | grep -E "^Model name|^Model:|^CPU family"
( timeout 170 python3 -m pytest -q -p no:cacheprovider -m "not real_model" tests/test_runtime.py tests/test_kernels.py tests/test_trees.py -o addopts="" 2>&1 | tail -25 ) > $OUT/tests.txt
timeout 200 python3 .device/amx_steps.py 2 2>&1 | grep -v Warning | tee $OUT/steps.txt
cat $OUT/tests.txt

## call 4 (4-tests-before-after.txt)
export PYTHONPATH=src PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=""
echo "== new code"; timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_runtime.py -k "row_invariant_bit_for_bit or tree_passes" -o addopts="" 2>&1 | tail -4
cp .device/old/invariance.py .device/old/hf.py .device/old/attention.py src/quickdraft/runners/ && cp .device/old/test_runtime.py tests/
echo "== old code (HEAD)"; timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_runtime.py -k "row_invariant_bit_for_bit or tree_passes" -o addopts="" 2>&1 | tail -6
