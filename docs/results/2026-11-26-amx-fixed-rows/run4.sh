set -u
lscpu | grep -E "^Model name|^Model:|^CPU family|^CPU\(s\)|^L2|^L3"
grep -o -w -E "amx_bf16|amx_tile|amx_int8|avx512_bf16|avx512f|avx512_fp16" /proc/cpuinfo | sort | uniq -c
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
tar xJf .device/site.tar.xz -C /tmp
export PYTHONPATH=src:/tmp/site PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES="" OMP_NUM_THREADS=2
T0=$(date +%s)
timeout -s INT 170 python3 -m pytest -q -p no:cacheprovider -m "not real_model" -n 7 -rfEs --ignore tests/test_clients.py --ignore tests/test_playground.py --ignore tests/test_vllm.py --ignore tests/test_llamacpp.py --ignore tests/test_real_model.py -o addopts="" > $OUT/tests.txt 2>&1
echo "suite rc $? in $(( $(date +%s) - T0 )) s"; tail -30 $OUT/tests.txt
timeout 240 python3 .device/exp.py 2>&1 | grep -v Warning | tee $OUT/exp.txt
echo "total $(( $(date +%s) - T0 )) s"
