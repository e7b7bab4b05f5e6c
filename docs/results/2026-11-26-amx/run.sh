set -u
lscpu | grep -E "^Model name|^CPU\(s\)|^Flags" | cut -c1-400
grep -o -w -E "amx_bf16|amx_tile|avx512_bf16|avx512f" /proc/cpuinfo | sort | uniq -c
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
export PYTHONPATH=src PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=""
( timeout 250 python3 -m pytest -q -p no:cacheprovider -m "not real_model" -x tests/test_runtime.py tests/test_kernels.py tests/test_trees.py -o addopts="" 2>&1 | tail -15 ) | tee $OUT/tests.txt
timeout 280 python3 .device/amx_steps.py 2 2>&1 | grep -v Warning | tee $OUT/steps.txt
