export PYTHONPATH=src PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=""
echo "== new code"; timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_runtime.py -k "row_invariant_bit_for_bit or tree_passes" -o addopts="" 2>&1 | tail -4
cp .device/old/invariance.py .device/old/hf.py .device/old/attention.py src/quickdraft/runners/ && cp .device/old/test_runtime.py tests/
echo "== old code (HEAD)"; timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_runtime.py -k "row_invariant_bit_for_bit or tree_passes" -o addopts="" 2>&1 | tail -6
