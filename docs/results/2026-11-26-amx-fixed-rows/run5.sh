set -u
export PYTHONPATH=src PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=""
tar xJf .device/site.tar.xz -C /tmp; export PYTHONPATH=src:/tmp/site
timeout 100 python3 .device/diag2.py 2>&1 | grep -v Warn | tee $OUT/diag2.txt
timeout 120 python3 .device/exp.py 24 skip "bf16 current,bf16 blocked 32,bf16 packed (not exact)" 2>&1 | grep -v Warn | tee $OUT/exp32.txt
